"""Relaunch with flushing, and launch from [run].

relaunch: stop the old run (kill flow), move the old log aside with a
timestamp (never truncate or overwrite it), start a new tmux session with the
same name, cwd and command through the fixed WRAPPER (PYTHONUNBUFFERED=1,
python -u, tee -a -i under pipefail, exit code recorded, remain-on-exit set in
the same tmux call), then verify: session alive, log growing, GPU memory rising.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gputui.actions.facts import FactsReader, Looked, look, look_at_log
from gputui.actions.inspect import RunInfo, find_run, list_panes_argv, server_socket
from gputui.actions.kill import (
    GpuProcessReader,
    gpu_after,
    gpu_host_pids,
    plan_kill_from,
    run_kill,
)
from gputui.actions.plan import (
    ActionError,
    ActionPlan,
    ActionResult,
    Progress,
    check_allowed,
    say,
)
from gputui.actions.runspec import (
    RunSpec,
    abs_log,
    check_env,
    check_session_name,
    env_file_bytes,
    env_file_path,
    new_session_argv,
    pipes_into_tee,
    session_target,
    shown_env,
    spec_from_start_command,
    tmux_argv,
    write_env_argv,
)
from gputui.actions.scripts import MOVE_SCRIPT, VERIFY_SCRIPT
from gputui.actions.server import tmux_as_socket_owner
from gputui.collect import tmux as tmux_parse
from gputui.config import Settings
from gputui.remote import agent as agent_script
from gputui.remote.base import CommandResult
from gputui.remote.identity import as_owner, identity_words
from gputui.remote.target import Target
from gputui.text.words import gib

GpuMemoryReader = Callable[[], Awaitable[float | None]]  # total used MiB, None = unknown

VERIFY_S = 3.0


# A list-panes line whose pane_dead field (collect.tmux's format) is 1.
DEAD_PANE_PATTERN = (
    "^"
    + f"[^{tmux_parse.FIELD_SEP}]*{tmux_parse.FIELD_SEP}"
    * tmux_parse.PANE_FIELDS.index("pane_dead")
    + "1"
)


def verify_argv(log: str, seconds: float, list_panes: list[str]) -> list[str]:
    return [
        "sh",
        "-c",
        VERIFY_SCRIPT,
        "gputui-verify",
        log,
        str(round(seconds * 10)),
        DEAD_PANE_PATTERN,
        *list_panes,
    ]


def parse_verify(text: str) -> tuple[list[tuple[float, int]], list[Any]]:
    """[(seconds, log size; -1 = missing)], panes."""
    from gputui.actions.inspect import parse_panes

    head, _, panes = text.partition("panes\n")
    sizes = []
    for line in head.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "t" and parts[1].isdigit():
            sizes.append((int(parts[1]) / 10.0, int(parts[2])))
    return sizes, parse_panes(panes)


def move_log_argv(log: str) -> list[str]:
    return ["sh", "-c", MOVE_SCRIPT, "gputui-move-log", log]


# $1 = log: "none", "link", or "TYPE|UID|LINKS<TAB>its directory, links
# resolved". The agent's (it runs it for a plan's facts, actions/facts.py).
LOG_CHECK_SCRIPT = agent_script.LOG_CHECK_SCRIPT

# A log is never moved out of these (a start command's `> ../../etc/passwd`).
SYSTEM_DIRS = (
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
    "/dev", "/proc", "/sys", "/run", "/var/lib", "/var/spool", "/root/.ssh",
)  # fmt: skip


def log_refusal(log: str, answer: str, owner: int) -> str | None:
    """Why the old log may not be moved aside (LOG_CHECK_SCRIPT's answer),
    or None: it must be missing, or a regular file of the run's owner
    (`owner`), not a link, and not in a system directory."""
    import posixpath

    line = answer.strip()
    if line == "none":
        return None
    if line == "link":
        return "a symbolic link"
    meta, _, where = line.partition("\t")
    kind, _, rest = meta.partition("|")
    uid = rest.split("|", 1)[0]
    if not kind.startswith("regular") or not where.startswith("/"):
        return f"not a regular file ({kind or 'unreadable'})"
    if uid != str(owner):
        return f"owned by uid {uid}, not by the run's owner (uid {owner})"
    real = posixpath.join(where, posixpath.basename(log))
    if posixpath.dirname(real) == "/" or any(
        real == d or real.startswith(d + "/") for d in SYSTEM_DIRS
    ):
        return f"a system file ({real})"
    return None


async def run_owner(
    target: Target, info: RunInfo, tmux: list[str] | None, seen: Looked | None = None
) -> tuple[int, int]:
    """(uid, gid) the run belongs to: the owner of its tmux server's socket
    when that is another user's (that server is believed about its owner
    only, never about whose process its pane is: issue 34); in root's own
    server its pane's process; else root. `seen`: the agent's answer, which
    read the socket's owner too."""
    sock = server_socket(tmux)
    if sock is not None:
        if seen is not None and seen.socket_ids is not None:
            ids = [str(x) for x in seen.socket_ids]
            ok = True
        else:
            res = await target.run(["stat", "-c", "%u %g", "--", sock])
            ids, ok = res.out.split(), res.ok
        if not ok or len(ids) != 2 or not all(x.isdigit() for x in ids):
            raise ActionError(
                f"cannot tell who owns the tmux server {sock}", "check that it still runs"
            )
        if ids[0] != "0":
            return int(ids[0]), int(ids[1])
    if info.pane is not None and info.pane.pid in info.ids:
        pid = info.ids[info.pane.pid]
        return pid.uid, pid.gid
    return 0, 0


async def plan_move_log(
    target: Target,
    log: str,
    info: RunInfo,
    tmux: list[str] | None,
    action: str,
    seen: Looked | None = None,
    facts: FactsReader | None = None,
) -> tuple[list[str], str]:
    """The argv that moves the old log aside, with the run owner's identity
    (root's only for root's own run), and whose identity that is; ActionError,
    worded for the user, when the path is not the run's own log file.
    `seen`: the agent's answer, which looked at the logs it was asked about
    with the hands it took for the owner's (used when they are these); a log
    it was not asked about (found from the run: the CLI's relaunch) is
    looked at in one more request through `facts`."""
    uid, gid = await run_owner(target, info, tmux, seen)
    # a path the run supplied: looked at with its owner's hands, as it is moved
    answer = seen.log_checks.get((log, uid, gid)) if seen is not None else None
    if answer is None and seen is not None:
        answer = await look_at_log(facts, log, uid, gid)
    if answer is None:
        res = await target.run(
            as_owner(uid, gid, ["sh", "-c", LOG_CHECK_SCRIPT, "gputui-log-check", log])
        )
        answer = res.out
    why = log_refusal(log, answer, uid)
    if why is not None:
        raise ActionError(
            f"{action} refused: the old log {log} is {why}; gputui moves aside only the "
            "run's own log file, and nothing was stopped",
            "set log = PATH in the config's [run] section (a file of the run's owner), "
            "or move that file yourself",
        )
    return as_owner(uid, gid, move_log_argv(log)), identity_words(uid)


def spec_from_settings(settings: Settings, session: str | None) -> RunSpec | None:
    run = settings.run
    if not run.command:
        return None
    name = session or run.session or settings.session
    if not name:
        raise ActionError("[run] has a command but no session name", "set session in [run]")
    cwd = run.cwd or "/root"
    log = run.log or settings.log
    if not log:
        raise ActionError("[run] has a command but no log file", "set log in [run]")
    return RunSpec(name, cwd, run.command, abs_log(log, cwd), dict(run.env), "config [run]")


def spec_from_run(info: RunInfo, settings: Settings) -> RunSpec:
    """Recover how the run was started: pane start command, else the process
    command line; log from the command, the settings, or where output goes."""
    from shlex import join

    pane = info.pane
    assert pane is not None
    main = info.main_python
    # tmux shows a control character in a path as '?' (collect.tmux): /proc has it exactly
    shown = pane.current_path if "?" not in pane.current_path else ""
    proc_cwd = info.cwds.get(main.pid, "") if main else ""
    # a dead pane (the run died, remain-on-exit) has no current path and no
    # process: where it started, as tmux keeps it — not the ssh login's /root
    started = pane.start_path if "?" not in pane.start_path else ""
    cwd = shown or proc_cwd or info.cwds.get(pane.pid or -1, "") or started or "/root"
    env: dict[str, str] = {}
    command, log, source = "", None, ""
    if pane.start_command_raw:
        # the start command runs again where tmux started it, not where the
        # run went since (a `cd` in the command, hydra's chdir to outputs/…)
        base = started or cwd
        command, log, env, source = spec_from_start_command(
            pane.start_command_raw, info.session, base
        )
        cwd = base if command else cwd
        found = info.log_files()
        if log and found and log not in found:  # `cd sub && … | tee ../x.log`: where it went
            log = found[0]
        own = bool(command) and log is None and bool(found)  # `bash start.sh` tees itself
    else:
        own = False
    if not command and main is not None:
        argv = info.argvs.get(main.pid)
        if not argv:  # `ps` args are lossy (spaces joined, controls as '?'): never run them
            raise ActionError(
                f"cannot read the exact command line of pid {main.pid} in session {info.session!r}",
                "put command, cwd and log in the config's [run] section",
            )
        command = join(argv)
        source = "process command line (the shell's environment variables are not carried over)"
        cwd = info.cwds.get(main.pid, cwd)
    if not command:
        raise ActionError(
            f"cannot tell how the run in session {info.session!r} was started",
            "put command, cwd and log in the config's [run] section",
        )
    if pipes_into_tee(command):
        raise ActionError(
            f"cannot tell which log the run in session {info.session!r} tees into "
            f"(start command: {command[:100]!r})",
            "put command (without the `| tee`), cwd and log in the config's [run] section",
        )
    found = info.log_files()
    log = log or settings.log or (found[0] if found else None)
    if not log:
        log = f"{cwd.rstrip('/')}/gputui-{info.session.replace('/', '_')}.log"
    log = abs_log(log, cwd)
    own = own and log in found and source != "process command line"
    return RunSpec(info.session, cwd, command, log, env, source, writes_own_log=own)


async def plan_relaunch(
    target: Target,
    settings: Settings,
    session: str | None = None,
    *,
    tmux: list[str] | None = None,
    facts: FactsReader | None = None,
    log: str | None = None,
) -> ActionPlan:
    """`facts`: the run, and the old log, read in one agent request
    (actions/facts.py); `log`: the log the dashboard follows, the likely
    old log to look at in that request."""
    check_allowed(settings)
    name = session or settings.session or settings.run.session
    if not name:
        raise ActionError(
            "no tmux session given", "pass --session NAME or set session in the config"
        )
    tmux = await tmux_as_socket_owner(target, tmux)  # never a server of root's on a user's socket
    spec = spec_from_settings(settings, name)
    logs = [spec.log if spec is not None else "", log or "", settings.log or ""]
    seen = await look(facts, name, tmux, logs=logs)  # one request, else commands
    info = seen.info if seen is not None else await find_run(target, name, tmux)
    if spec is None:
        if not info.exists:
            raise ActionError(
                f"no tmux session named {name!r} and no [run] command in the config",
                "add command, cwd and log to the config's [run] section, then launch",
            )
        spec = spec_from_run(info, settings)
    move = await plan_move_log(target, spec.log, info, tmux, "relaunch", seen, facts)
    return _plan_start(target, spec, info, "relaunch", tmux, move)


async def plan_launch(
    target: Target,
    settings: Settings,
    session: str | None = None,
    *,
    tmux: list[str] | None = None,
    facts: FactsReader | None = None,
) -> ActionPlan:
    check_allowed(settings)
    spec = spec_from_settings(settings, session)
    if spec is None:
        raise ActionError(
            "nothing to launch: the config has no [run] command",
            "add command, cwd, session and log to the config's [run] section",
        )
    tmux = await tmux_as_socket_owner(target, tmux)  # never a server of root's on a user's socket
    seen = await look(facts, spec.session, tmux, logs=[spec.log])
    info = seen.info if seen is not None else await find_run(target, spec.session, tmux)
    if info.alive:
        raise ActionError(
            f"session {spec.session!r} is already running",
            "use relaunch (r) to restart it, or kill (k) it first",
        )
    move = await plan_move_log(target, spec.log, info, tmux, "launch", seen)
    return _plan_start(target, spec, info, "launch", tmux, move)


def _plan_start(
    target: Target,
    spec: RunSpec,
    info: RunInfo,
    action: str,
    tmux: list[str] | None,
    move: tuple[list[str], str],
) -> ActionPlan:
    check_session_name(spec.session)
    check_env(spec.env)
    commands: list[list[str]] = []
    notes: list[str] = []
    params: dict[str, Any] = {"spec": spec.__dict__.copy(), "verify_s": VERIFY_S}
    kill_plan = None
    if info.exists and info.run_pgids:
        kill_plan = plan_kill_from(target, info, tmux=tmux)
        commands += kill_plan.commands
        notes.append("1. stop the old run: " + kill_plan.notes[0])
        params["kill"] = kill_plan.params
    pids = kill_plan.pids if kill_plan else []
    kill_session = tmux_argv(tmux, "kill-session", "-t", session_target(spec.session))
    if info.exists:
        commands.append(kill_session)
        notes.append(f"2. remove the old tmux session {spec.session!r}")
    commands.append(move[0])
    notes.append(
        f"3. move {spec.log} aside to {spec.log}.<YYYYmmdd-HHMMSS> (nothing is deleted), "
        f"as {move[1]}"
    )
    params["move_log"] = move[0]
    env_file = env_file_path(spec)
    if env_file and tmux and tmux != ["tmux"]:
        # Another server's panes run as its owner, who may not read root's 0600 file.
        raise ActionError(
            f"session {spec.session!r} is in another tmux server ({' '.join(tmux)}): "
            "[run] env values cannot be handed to it",
            "relaunch it as the user who owns that server, or drop [run] env",
        )
    if env_file:  # the values go on stdin, into a 0600 file the wrapper reads and deletes
        commands.append(write_env_argv(env_file))
    start = new_session_argv(spec, tmux, env_file)
    commands.append(start)
    output = (
        f"{spec.log} written by the command itself as before"
        if spec.writes_own_log
        else f"output | tee -a -i {spec.log}, exit code recorded"
    )
    notes.append(
        f"4. start session {spec.session!r} in {spec.cwd}: {spec.effective_command}"
        f"  (PYTHONUNBUFFERED=1, {output}, remain-on-exit on)"
    )
    if spec.env:
        notes.append(
            f"   env: {shown_env(spec.env)} (values sent on stdin to {env_file}, 0600, "
            "which the run reads and deletes; never in a command line)"
        )
    notes.append(f"   how the command was found: {spec.source}")
    params["env_file"] = env_file
    params["kill_session"] = kill_session
    params["list_panes"] = list_panes_argv(spec.session, tmux)
    params["tmux"] = list(tmux or ["tmux"])
    params["pane_pid"] = info.pane.pid if info.pane is not None else None
    params["session_existed"] = info.exists
    verb = "Relaunch" if action == "relaunch" else "Launch"
    return ActionPlan(
        action=action,
        title=f"{verb} session {spec.session!r}"
        + (f" in {target.container.words}" if target.in_container else "")
        + "?",
        target=f"{target.label} · session {spec.session!r}"
        + (f" · pids {' '.join(map(str, pids))}" if pids else ""),
        session=spec.session,
        ct=target.ct_id,
        pids=pids,
        commands=commands,
        notes=notes,
        params=params,
    )


async def execute_start(
    target: Target,
    plan: ActionPlan,
    progress: Progress = None,
    gpu_memory: GpuMemoryReader | None = None,
    gpu_processes: GpuProcessReader | None = None,
) -> ActionResult:
    spec = RunSpec(**plan.params["spec"])
    if "move_log" not in plan.params:
        raise ActionError(
            "this plan does not say whose identity moves the old log",
            "plan the action again (press its key again)",
        )
    details: list[str] = []
    t0 = time.monotonic()
    phases: dict[str, float] = {}

    def mark(name: str) -> None:
        phases[name] = round(time.monotonic() - t0 - sum(phases.values()), 3)

    mem0 = mem_before = await _mem(gpu_memory)  # before the kill: what the old run held
    freed_words = ""
    if "kill" in plan.params:  # 1. stop
        left = await _stop_old_run(target, plan, progress, gpu_processes, details)
        if left is not None:
            return ActionResult(
                ok=False,
                summary=f"old run in {spec.session!r} survived SIGKILL; nothing relaunched",
                details=left,
                elapsed_s=time.monotonic() - t0,
            )
        mem0 = await _mem(gpu_memory)
        freed_words = _freed_words(mem_before, mem0)
        if freed_words:
            details.append(freed_words)
    mark("stop")
    await _remove_old_session(target, plan, spec, details)  # 2. old session
    mark("remove session")
    res = await target.run(plan.params["move_log"])  # 3. move the log aside
    if not res.ok:
        return ActionResult(
            ok=False,
            summary=f"could not move {spec.log} aside: {res.err.strip()}",
            details=details,
            elapsed_s=time.monotonic() - t0,
        )
    moved = _moved_to(res.out, spec.log, details)
    mark("move log")
    say(progress, f"starting session {spec.session!r}…")  # 4. start
    not_started = await _start_session(target, plan, spec)
    if not_started is not None:  # the old run is stopped and its log moved, but nothing runs
        what, res = not_started
        return ActionResult(
            ok=False,
            summary=f"{what}: {(res.err or res.out).strip()}",
            details=details,
            elapsed_s=time.monotonic() - t0,
            data={"moved_log": moved},
        )
    mark("start")
    new_run = await _verify_new_run(target, plan, spec, progress)  # 5. verify
    mark("verify")
    mem1 = await _mem(gpu_memory)
    log_words = _new_log_words(spec.log, new_run)
    details += _new_run_details(new_run, spec.log, log_words, mem0, mem1)
    return ActionResult(
        ok=new_run.alive,
        summary=_start_summary(plan.action, spec.session, new_run, log_words, mem0, mem1)
        + (f"; {freed_words}" if freed_words else ""),
        details=details,
        elapsed_s=time.monotonic() - t0,
        data={
            "moved_log": moved,
            "phases": phases,
            "alive": new_run.alive,
            "log_grew": new_run.grew,
            "first_growth_s": new_run.first_growth,
            "log": spec.log,
        },
    )


async def _stop_old_run(
    target: Target,
    plan: ActionPlan,
    progress: Progress,
    gpu_processes: GpuProcessReader | None,
    details: list[str],
) -> list[str] | None:
    """Step 1: stop the old run as the kill box would (after checking it is
    the one the box showed). None once it has ended; the 'left ...' lines when
    it survived SIGKILL."""
    from gputui.actions.kill import check_unchanged

    kill_plan = ActionPlan(
        action="kill",
        title="",
        target=plan.target,
        session=plan.session,
        ct=plan.ct,
        pids=plan.pids,
        commands=[plan.commands[0]],
        params=plan.params["kill"],
    )
    await check_unchanged(target, kill_plan)
    say(progress, "stopping the old run…")
    on_gpu = await gpu_host_pids(gpu_processes, plan.pids)
    ended, lines, secs = await run_kill(target, kill_plan, progress)
    if ended is None:
        return [ln for ln in lines if ln.startswith("left ")]
    details.append(f"old run ended by {ended} after {secs:.1f} s")
    _freed, gpu_lines = await gpu_after(gpu_processes, plan.pids, host_pids=on_gpu)
    details += gpu_lines
    return None


async def _remove_old_session(
    target: Target, plan: ActionPlan, spec: RunSpec, details: list[str]
) -> None:
    """Step 2: remove the old tmux session, the one the box showed."""
    if "kill" not in plan.params:  # no run was stopped: the session is the one the box showed?
        from gputui.actions.kill import check_pane

        await check_pane(target, spec.session, plan.params["tmux"], plan.params.get("pane_pid"))
    if plan.params.get("session_existed", True):  # else one made since is not ours to remove
        res = await target.run(plan.params["kill_session"])
        if res.ok:
            details.append(f"removed old tmux session {spec.session!r}")


def _moved_to(out: str, log: str, details: list[str]) -> str | None:
    """Step 3's answer: where the old log went, None when there was none."""
    if out.startswith("moved "):
        moved = out.strip()[6:]
        details.append(f"old log moved to {moved}")
        return moved
    details.append(f"no old log at {log}")
    return None


async def _start_session(
    target: Target, plan: ActionPlan, spec: RunSpec
) -> tuple[str, CommandResult] | None:
    """Step 4: write the env file (values on stdin) and start the session.
    None when it started; else what failed and the command's result."""
    env_file = plan.params.get("env_file") or ""
    if env_file:
        res = await target.run(write_env_argv(env_file), input=env_file_bytes(spec.env))
        if not res.ok:
            return f"could not write the env file {env_file}", res
    res = await target.run(plan.commands[-1])
    if not res.ok:
        return f"tmux could not start session {spec.session!r}", res
    return None


@dataclass(frozen=True)
class _NewRun:
    """What step 5's poll saw of the new run: its panes and its log's size."""

    panes: list[Any]
    size0: int | None  # the log's size when the poll began (-1 = missing)
    size1: int | None  # and when it ended
    first_growth: float | None  # seconds until the log first grew
    waited: float
    refused: str = ""  # why the log was not read at all (HANDS_SH: "unsafe DIR", "nosetpriv UID")

    @property
    def alive(self) -> bool:
        return bool(self.panes) and not self.panes[0].dead

    @property
    def grew(self) -> bool:
        return self.size1 is not None and self.size1 > (self.size0 or 0)


async def _verify_new_run(
    target: Target, plan: ActionPlan, spec: RunSpec, progress: Progress
) -> _NewRun:
    """Step 5: one call polls inside the target (each entry into a container costs ~0.3 s)."""
    verify_s = float(plan.params.get("verify_s", VERIFY_S))
    say(progress, f"verifying for {verify_s:g} s…")
    res = await target.run(
        verify_argv(spec.log, verify_s, plan.params["list_panes"]), timeout=verify_s + 30.0
    )
    sizes, pane_list = parse_verify(res.out)
    size0 = sizes[0][1] if sizes else None
    head = res.out.partition("panes\n")[0].splitlines()
    return _NewRun(
        panes=pane_list,
        size0=size0,
        size1=sizes[-1][1] if sizes else None,
        first_growth=next((t for t, n in sizes if size0 is not None and n > size0), None),
        waited=sizes[-1][0] if sizes else 0.0,
        refused=next((x[8:] for x in head if x.startswith("refused ")), ""),
    )


def _new_run_details(
    new_run: _NewRun, log: str, log_words: str, mem0: float | None, mem1: float | None
) -> list[str]:
    panes = new_run.panes
    lines = [
        f"after {new_run.waited:.1f} s: session "
        + ("alive" if new_run.alive else "DEAD" if panes else "GONE")
        + f"; {log_words}"
    ]
    if panes and panes[0].dead:
        lines.append(f"pane exit status {panes[0].dead_status}; see the log {log}")
    if mem0 is not None and mem1 is not None and mem1 > mem0:
        lines.append(f"new run's GPU memory: {gib(mem1 - mem0)} so far")
    return lines


def _start_summary(
    action: str,
    session: str,
    new_run: _NewRun,
    log_words: str,
    mem0: float | None,
    mem1: float | None,
) -> str:
    """'relaunched 'train': running; new log 84 bytes after 3 s; GPU memory rising (+812 MiB)'."""
    return (
        f"{action}ed {session!r}: "
        + ("running" if new_run.alive else "exited")
        + f"; {log_words}"
        + (
            f"; GPU memory rising (+{mem1 - mem0:.0f} MiB)"
            if mem0 is not None and mem1 is not None and mem1 > mem0
            else ""
        )
    )


FREED_MIN_MIB = 64.0  # less than this freed is "unchanged" (readings jitter)


def _freed_words(before: float | None, after: float | None) -> str:
    """'old run freed 28.2 GiB', measured against the reading BEFORE the kill."""
    if before is None or after is None:
        return ""
    if before - after >= FREED_MIN_MIB:
        return f"old run freed {gib(before - after)} of GPU memory"
    return f"GPU memory unchanged by the stop ({gib(after)} in use)"


def _refused_words(log: str, refused: str) -> str:
    """Why the new log was not read as root (HANDS_SH's answer)."""
    kind, _, what = refused.partition(" ")
    if kind == "nosetpriv":
        return f"log {log} not read: it is uid {what}'s and setpriv is missing to read it as them"
    return (
        f"log {log} not read: directory {what} on its way may be changed by other users "
        "(keep the log in a directory only its owner can write)"
    )


def _new_log_words(log: str, new_run: _NewRun) -> str:
    """'new log 84 bytes after 3 s (first line at 0.4 s)' / 'no new log yet' /
    why it was not read at all (there or not: gputui would not look)."""
    if new_run.refused:
        return _refused_words(log, new_run.refused)
    size, waited, first = new_run.size1, new_run.waited, new_run.first_growth
    if size is None or size < 0:
        return f"no log at {log} yet after {waited:.0f} s"
    if size == 0:
        return f"new log still empty after {waited:.0f} s"
    at = f" (first bytes at {first:.1f} s)" if first is not None else ""
    return f"new log {size} bytes after {waited:.0f} s{at}"


async def _mem(reader: GpuMemoryReader | None) -> float | None:
    if reader is None:
        return None
    try:
        return await reader()
    except Exception:
        return None
