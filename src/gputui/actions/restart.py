"""Relaunch a run that is its container's main process (no tmux): `docker
restart` (podman restart) on the host. The main process gets SIGTERM and,
after RESTART_GRACE_S, SIGKILL; every other process in the container ends
with it; the container starts again with the same command, and its log
(`docker logs`) keeps the old run's lines, the new run's following them.
A pod's main process starts over only in a new pod (`kubectl delete pod`,
its controller making another, this one's log gone with it): refused in one
line that says so.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gputui.actions.plan import ActionError, ActionPlan, ActionResult, Progress, check_allowed, say
from gputui.config import Settings
from gputui.containers import RESTART_GRACE_S
from gputui.errors import GputuiError
from gputui.remote.mainproc import (
    has_logs,
    logs_words,
    restart_argv,
    started_argv,
)
from gputui.remote.target import Target
from gputui.text.untrusted import visible

START_WAIT_S = 30.0  # how long the restarted container may take to say it runs
SETTLE_S = 3.0  # the new main process must still run this long after the restart


def is_main_process_relaunch(target: Target, settings: Settings, session: str | None) -> bool:
    """Relaunch means restarting the container: a Docker/Podman container or
    a pod, no tmux session named (here, --session, [run] session) and no
    [run] command to start one with."""
    named = session or settings.session or settings.run.session or settings.run.command
    return has_logs(target.container) and not named


async def _started(target: Target) -> tuple[str, str]:
    """(state, started-at) of the container as the host's tool says them."""
    argv = started_argv(target.container)
    if argv is None:
        return ("", "")
    res = await target.run_host(argv, timeout=15.0)
    words = res.out.split(None, 1) if res.ok else []
    return (words[0], words[1].strip()) if len(words) == 2 else ("", "")


async def _main_command(target: Target) -> str:
    """PID 1's command line inside the container ('' when unreadable)."""
    try:
        res = await target.run(["cat", "/proc/1/cmdline"], timeout=15.0)
    except GputuiError:
        return ""
    return visible(" ".join(res.out.split("\0")).strip()) if res.ok else ""


async def plan_restart_container(target: Target, settings: Settings) -> ActionPlan:
    """The confirm box for `docker restart NAME`; ActionError for a pod."""
    check_allowed(settings)
    c = target.container
    argv = restart_argv(c)
    if argv is None:
        raise ActionError(*c.restart_refused())
    state, started = await _started(target)
    command = await _main_command(target) if state == "running" else ""
    main = f"`{command}`" if command else "the container's command"
    notes = [
        f"1. on the host: {' '.join(argv)} — SIGTERM to its main "
        f"process (PID 1: {main}), SIGKILL after {RESTART_GRACE_S} s if it has not ended; "
        "every other process in the container ends with it"
        + ("" if state == "running" else f" (it is {state or 'not running'} now)"),
        "2. the container starts again with the same command, environment and mounts: "
        "the run starts over from its beginning (from a checkpoint only if its command "
        "resumes one)",
        f"3. its log is kept: `{logs_words(c)}` still holds the old run's lines and the new "
        "run's follow them (nothing is deleted)",
    ]
    params: dict[str, Any] = {
        "container_restart": True,
        "argv": argv,
        "started": started,
        "settle_s": SETTLE_S,
    }
    return ActionPlan(
        action="relaunch",
        title=f"Restart {c.words} (the run is its main process)?",
        target=f"{target.label} · main process" + (f" {main}" if command else ""),
        commands=[argv],
        notes=notes,
        params=params,
    )


async def execute_restart(
    target: Target, plan: ActionPlan, progress: Progress = None
) -> ActionResult:
    """Run the restart, then check that the container runs again (started
    after the plan's reading) and is still running SETTLE_S later."""
    c = target.container
    t0 = time.monotonic()
    argv = [str(a) for a in plan.params["argv"]]
    tool, name = argv[0], argv[-1]
    say(progress, f"{tool} restart {c.words} (up to {RESTART_GRACE_S} s for it to stop)…")
    res = await target.run_host(argv, timeout=RESTART_GRACE_S + 60.0)
    if not res.ok:
        said = (res.err or res.out).strip().splitlines()
        why = visible(said[-1]) if said else f"exit {res.exit_status}"
        return ActionResult(False, f"{tool} restart {name} failed: {why}")
    before = str(plan.params.get("started") or "")
    state, started = await _started(target)
    deadline = time.monotonic() + START_WAIT_S
    while (state != "running" or started == before) and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        state, started = await _started(target)
    if state != "running" or started == before:
        return ActionResult(
            False,
            f"{c.words} did not start again ({state or 'state unknown'}): "
            f"see `{logs_words(c)}` on the host",
            elapsed_s=time.monotonic() - t0,
        )
    say(progress, f"{c.words} runs again; checking it stays up for {SETTLE_S:.0f} s…")
    await asyncio.sleep(float(plan.params.get("settle_s", SETTLE_S)))
    state_after, started_after = await _started(target)
    if state_after != "running" or started_after != started:
        return ActionResult(
            False,
            f"the new run in {c.words} ended at once ({state_after or 'state unknown'}): "
            f"see `{logs_words(c)}` on the host",
            elapsed_s=time.monotonic() - t0,
        )
    return ActionResult(
        True,
        f"restarted {c.words}: its main process started again ({started}); "
        f"the log is kept (`{logs_words(c)}`)",
        details=[f"$ {' '.join(argv)}"],
        elapsed_s=time.monotonic() - t0,
        data={"started": started},
    )
