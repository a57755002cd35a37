"""Stop a run: SIGINT (Python flushes, DDP workers go too), then SIGTERM,
then SIGKILL, each after a timeout; report which signal ended it and
whether its GPU memory was freed.

The escalation runs inside the target as ONE fixed sh script (values only
as positional arguments), printing a line per step so progress streams back
over a single channel instead of one container exec per poll.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from gputui.actions.facts import FactsReader, look
from gputui.actions.inspect import RunInfo, check_owned, find_run
from gputui.actions.plan import ActionError, ActionPlan, ActionResult, Progress, check_allowed, say
from gputui.actions.runspec import tmux_argv
from gputui.actions.scripts import KILL_SCRIPT
from gputui.actions.server import tmux_as_socket_owner
from gputui.config import Settings
from gputui.model import GpuProcess
from gputui.remote.target import Target
from gputui.text.untrusted import visible

GpuProcessReader = Callable[[], Awaitable[list[GpuProcess]]]

INT_WAIT_S = 10.0
TERM_WAIT_S = 5.0
FORCE_TERM_WAIT_S = 1.0
KILL_WAIT_S = 5.0


def _ds(seconds: float) -> str:
    return str(max(0, round(seconds * 10)))


def kill_argv(
    pgids: list[int],
    int_pids: list[int],
    *,
    int_wait: float,
    term_wait: float,
    kill_wait: float = KILL_WAIT_S,
) -> list[str]:
    return [
        "sh",
        "-c",
        KILL_SCRIPT,
        "gputui-kill",
        _ds(int_wait),
        _ds(term_wait),
        _ds(kill_wait),
        *[str(int(g)) for g in pgids],
        "--",
        *[str(int(p)) for p in int_pids],
    ]


def describe_procs(info: RunInfo) -> list[str]:
    return [f"  pid {p.pid} (pgid {p.pgid}): {p.args[:120]}" for p in info.group_procs]


KEEP_PANE_NOTE = (
    "the pane is kept (remain-on-exit) so r can start it again "
    "(tmux 3.0 or later; an older tmux closes the session with the run)"
)


def pane_closes_with(info: RunInfo) -> bool:
    """The session's pane is the run itself (its command, no interactive
    shell left to return to): tmux closes it, and the session with its last
    pane, when the run ends — unless remain-on-exit is on, as gputui's own
    launch wrapper sets it."""
    pane = info.pane
    if pane is None or pane.pid is None or pane.dead or pane.launched_command:
        return False
    return pane.pid in {p.pid for p in info.group_procs}


def keep_pane_argv(info: RunInfo, tmux: list[str] | None) -> list[str]:
    """`tmux set-option -p -t =SESSION:W.P remain-on-exit on`: the run's pane
    stays, dead with its output, once the run ends (tmux >= 3.0)."""
    assert info.pane is not None
    pane = f"={info.session}:{info.pane.window_index}.{info.pane.pane_index}"
    return tmux_argv(tmux, "set-option", "-p", "-t", pane, "remain-on-exit", "on")


def plan_kill_from(
    target: Target,
    info: RunInfo,
    *,
    force: bool = False,
    action: str | None = None,
    int_wait: float | None = None,
    term_wait: float | None = None,
    tmux: list[str] | None = None,
    keep_pane: bool = False,
) -> ActionPlan:
    """`keep_pane`: where the pane would close with the run, set its
    remain-on-exit first (the kill verb: r then starts the run again in it)."""
    pgids = info.run_pgids
    if not info.exists:
        raise ActionError(
            f"no tmux session named {info.session!r} on {target.label}",
            "check the session name (`tmux ls` inside the container) or pass --session",
        )
    if not pgids:
        raise ActionError(
            f"nothing is running in session {info.session!r} (the pane is dead or empty)",
            "there is no run to stop; use relaunch or launch to start one",
        )
    check_owned(info, target.label, [p.pid for p in info.group_procs])
    int_wait = 0.0 if force else (INT_WAIT_S if int_wait is None else int_wait)
    if term_wait is None:
        term_wait = FORCE_TERM_WAIT_S if force else TERM_WAIT_S
    argv = kill_argv(pgids, info.interrupt_pids, int_wait=int_wait, term_wait=term_wait)
    steps = (
        f"SIGTERM to process group(s) {', '.join(map(str, pgids))}, SIGKILL after {term_wait:g} s"
        if force
        else f"SIGINT to pids {' '.join(map(str, info.interrupt_pids))} (Python flushes), "
        f"SIGTERM to process group(s) {', '.join(map(str, pgids))} after {int_wait:g} s, "
        f"SIGKILL after {term_wait:g} s more"
    )
    pids = [p.pid for p in info.group_procs]
    keep = keep_pane_argv(info, tmux) if keep_pane and pane_closes_with(info) else None
    return ActionPlan(
        action=action or "kill",
        title=f"{'Force-kill' if force else 'Stop'} the run in session {info.session!r}"
        + (f" ({target.container.words})" if target.in_container else "")
        + "?",
        target=f"{target.label} · session {info.session!r} · pgid {', '.join(map(str, pgids))}",
        session=info.session,
        ct=target.ct_id,
        pids=pids,
        commands=[keep, argv] if keep else [argv],
        notes=[steps, *([KEEP_PANE_NOTE] if keep else []), "Processes:", *describe_procs(info)],
        params={
            "keep_pane": keep,
            "force": force,
            "pgids": pgids,
            "int_wait": int_wait,
            "term_wait": term_wait,
            "leader": info.main_python.pid if info.main_python else pids[0],
            "leader_args": (info.main_python.args if info.main_python else ""),
            **pin_run(info, pids, tmux),
        },
    )


def pin_run(info: RunInfo, pids: list[int], tmux: list[str] | None) -> dict[str, Any]:
    """What identifies the run when the box opens: each process by PID and
    start time (and owner), and the session's pane by its PID."""
    from gputui.actions.procid import pinned

    pane_pid = info.pane.pid if info.pane is not None else None
    keep = set(pids) | ({pane_pid} if pane_pid is not None else set())
    return {
        "procs": pinned({p: i for p, i in info.ids.items() if p in keep}),
        "pane_pid": pane_pid,
        "tmux": list(tmux or ["tmux"]),
    }


async def plan_kill(
    target: Target,
    settings: Settings,
    session: str | None = None,
    *,
    force: bool = False,
    int_wait: float | None = None,
    term_wait: float | None = None,
    tmux: list[str] | None = None,
    facts: FactsReader | None = None,
) -> ActionPlan:
    """SIGINT (skipped with force), SIGTERM, SIGKILL; waits default to
    10 s / 5 s (force: SIGTERM then SIGKILL after 1 s). `facts`: asks the
    agent in the target, to read the run in one request (actions/facts.py);
    without it, commands."""
    check_allowed(settings)
    name = session or settings.session
    if not name:
        raise ActionError(
            "no tmux session given", "pass --session NAME or set session in the config"
        )
    tmux = await tmux_as_socket_owner(target, tmux)  # never root's hands on a user's server
    seen = await look(facts, name, tmux)
    info = seen.info if seen is not None else await find_run(target, name, tmux)
    return plan_kill_from(
        target,
        info,
        force=force,
        int_wait=int_wait,
        term_wait=term_wait,
        tmux=tmux,
        keep_pane=True,
    )


async def run_kill(
    target: Target, plan: ActionPlan, progress: Progress = None
) -> tuple[str | None, list[str], float]:
    """Run the escalation; (which signal ended it or None, log lines, seconds)."""
    argv = plan.commands[-1]  # after the pane's remain-on-exit, where the plan sets it
    budget = plan.params["int_wait"] + plan.params["term_wait"] + KILL_WAIT_S + 30.0
    t0 = time.monotonic()
    lines: list[str] = []
    ended: str | None = None
    proc = await target.open(argv)
    try:
        while True:
            raw = await _readline(proc, t0 + budget)
            if not raw:
                break
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if line.startswith("sent "):
                say(progress, f"{line[5:]} sent ({time.monotonic() - t0:.1f} s)")
            elif line.startswith("gone "):
                sig = line[5:]
                ended = "already gone" if sig == "none" else sig
        await proc.wait()
    finally:
        await proc.close()
    return ended, lines, time.monotonic() - t0


async def _readline(proc: Any, deadline: float) -> bytes:
    import asyncio

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return b""
    try:
        return await asyncio.wait_for(proc.readline(), remaining)
    except asyncio.TimeoutError:
        return b""


CHANGED_FIX = (
    "the run changed since the box opened; nothing was done — plan the action again "
    "(press its key again) to see the run as it is now"
)


async def check_pane(
    target: Target, session: str | None, tmux: list[str] | None, pane_pid: int | None
) -> None:
    """Refuse when the session's pane is another one than the box showed."""
    from gputui.actions.inspect import list_panes_argv, parse_panes

    if pane_pid is None or not session:
        return
    res = await target.run(list_panes_argv(session, tmux))
    panes = parse_panes(res.out, session) if res.ok else []
    if panes and panes[0].pid != pane_pid:
        raise ActionError(
            f"session {session!r} has another pane now (pid {panes[0].pid}, was {pane_pid})",
            CHANGED_FIX,
        )


async def check_unchanged(target: Target, plan: ActionPlan) -> None:
    """Refuse when what the person confirmed is no longer there: a pid that
    is another process now (its start time or owner changed), a process
    group that holds none of the confirmed processes, the session's pane
    replaced, or the leader running another command line."""
    from gputui.actions.inspect import list_procs
    from gputui.actions.procid import changed, read_proc_ids

    want: dict[str, list[int]] = plan.params.get("procs") or {}
    await check_pane(target, plan.session, plan.params.get("tmux"), plan.params.get("pane_pid"))
    now = await read_proc_ids(target, [int(p) for p in want])
    lines = changed(want, now)
    if lines:
        raise ActionError(lines[0], CHANGED_FIX)
    rows = await list_procs(target)
    alive = {p for p in now if str(p) in want}
    for g in plan.params.get("pgids") or []:
        members = [r.pid for r in rows if r.pgid == g and not r.zombie]
        if want and members and not alive.intersection(members):
            raise ActionError(f"process group {g} holds other processes now", CHANGED_FIX)
    leader = plan.params.get("leader")
    wanted_args = plan.params.get("leader_args", "")
    row = next((r for r in rows if leader is not None and r.pid == int(leader)), None)
    if row is None or row.zombie:
        return  # gone already: the script will report "gone none"
    if wanted_args and row.args != wanted_args:
        raise ActionError(
            f"pid {leader} is now {row.args[:80]!r}, not the confirmed run", CHANGED_FIX
        )


KEPT = "the pane is kept (remain-on-exit): r starts the run again in it"


async def keep_pane(target: Target, plan: ActionPlan) -> str | None:
    """Set the pane's remain-on-exit where the plan says to (its pane would
    close with the run); a word on it for the result, None when not asked.
    A tmux that refuses (older than 3.0: no `set-option -p`) does not stop
    the kill the person confirmed: the result says the session closes."""
    argv = plan.params.get("keep_pane")
    if not argv:
        return None
    res = await target.run(argv)
    if res.ok:
        return KEPT
    why = (res.err or res.out).strip().splitlines()
    said = visible(why[0][:100]) if why else f"exit {res.exit_status}"
    return (
        f"tmux did not keep the pane ({said}): "
        "the session closes with the run (tmux 3.0 or later keeps it)"
    )


GPU_SETTLE_S = 2.0  # the driver may take a moment to release a dead process's memory


async def gpu_host_pids(reader: GpuProcessReader | None, pids: list[int]) -> dict[int, int]:
    """Host PIDs of the run's processes on the GPUs, read BEFORE stopping it
    (a dead process can no longer be mapped from host PID to CT PID)."""
    if reader is None:
        return {}
    try:
        procs = await reader()
    except Exception:
        return {}
    mine = set(pids)
    return {p.host_pid: p.ct_pid for p in procs if p.ct_pid is not None and p.ct_pid in mine}


async def gpu_after(
    reader: GpuProcessReader | None,
    pids: list[int],
    settle_s: float = GPU_SETTLE_S,
    host_pids: dict[int, int] | None = None,
) -> tuple[bool | None, list[str]]:
    """(freed?, lines) — freed is None without a GPU reader. Re-reads for up
    to `settle_s` while a killed process still shows on a GPU."""
    import asyncio

    if reader is None:
        return None, []
    mine = set(pids)
    deadline = time.monotonic() + settle_s
    while True:
        try:
            procs = await reader()
        except Exception as err:  # a GPU reading problem must not hide the kill result
            return None, [f"GPU check failed: {err}"]
        holding = [
            p
            for p in procs
            if p.ct_pid in mine
            or p.host_pid in (host_pids or ())
            or (p.ct_pid is None and p.in_container is None and p.host_pid in mine)
        ]
        if not holding or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.5)
    known = host_pids or {}
    lines = []
    for p in procs:
        ct_pid = p.ct_pid if p.ct_pid is not None else known.get(p.host_pid)
        who = (
            f"pid {ct_pid} (host pid {p.host_pid})"
            if ct_pid is not None
            else f"host pid {p.host_pid}"
        )
        mem = "" if p.used_mib is None else f" {p.used_mib:.0f} MiB"
        what = " ".join(w for w in (who, p.name) if w) + mem
        if p in holding:
            lines.append(f"still on GPU {p.gpu_uuid[:12]}: {what} (this run)")
        else:  # a neighbour's (another CT, another user): not what the stop left
            lines.append(f"GPU {p.gpu_uuid[:12]} also holds {what}: not one of the run's")
    return (not holding), lines


async def execute_kill(
    target: Target,
    plan: ActionPlan,
    progress: Progress = None,
    gpu_processes: GpuProcessReader | None = None,
) -> ActionResult:
    await check_unchanged(target, plan)
    kept = await keep_pane(target, plan)
    on_gpu = await gpu_host_pids(gpu_processes, plan.pids)
    ended, lines, secs = await run_kill(target, plan, progress)
    freed, gpu_lines = await gpu_after(gpu_processes, plan.pids, host_pids=on_gpu)
    details = [f"{secs:.1f} s", *[ln for ln in lines if ln.startswith("left ")], *gpu_lines]
    if kept is not None:
        details.append(kept)
    if ended is None:
        summary = f"run in {plan.session!r} still alive after SIGKILL ({secs:.1f} s)"
        ok = False
    elif ended == "already gone":
        summary = f"run in {plan.session!r} had already ended"
        ok = True
    else:
        summary = f"run in {plan.session!r} ended by {ended} after {secs:.1f} s"
        ok = True
    if kept == KEPT and ended is not None:
        summary += "; pane kept, r starts it again"
    if freed is True:
        summary += "; GPU memory freed"
    elif freed is False:
        summary += "; GPU memory still held"
        ok = False
    return ActionResult(
        ok=ok,
        summary=summary,
        details=details,
        ended_by=ended,
        elapsed_s=secs,
        data={"freed": freed},
    )
