"""One-key actions on a run: relaunch with flushing, kill, py-spy dump,
flush live, launch, attach, follow the real log. Each is `plan_*()`
(read-only inspection, returns an ActionPlan to confirm) then `execute()`
(runs it, audits it).

`plan()` and `execute()` find the verb's functions in PLANNERS / EXECUTORS,
keyed by the ids of `gputui.verbs.VERBS`: the dashboard (through
`backend.ActionBackend`) and the CLI verbs call the same two. A verb that
runs somewhere else than on the target (`Verb.runs`: attach in this
terminal, watch_log in the dashboard's view) has a planner and no executor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from gputui.actions.attach import attach_argv, plan_attach
from gputui.actions.dump import execute_dump, plan_dump
from gputui.actions.flush import execute_flush, plan_flush
from gputui.actions.follow import plan_watch_log
from gputui.actions.kill import GpuProcessReader, execute_kill, plan_kill
from gputui.actions.plan import (
    ActionError,
    ActionPlan,
    ActionResult,
    ActionsDisabled,
    Progress,
    audit,
    audit_begun,
    render_argv,
)
from gputui.actions.relaunch import GpuMemoryReader, execute_start, plan_launch, plan_relaunch
from gputui.actions.restart import (
    execute_restart,
    is_main_process_relaunch,
    plan_restart_container,
)
from gputui.actions.server import tmux_as_socket_owner
from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.remote.target import Target
from gputui.statefiles import audit_path, state_dir

# Actions whose consequences (the old run gone, the log quiet) a recording
# gputui must not take for news: a line in the audit log when they begin.
BEGUN_AUDITED = frozenset({"relaunch", "kill", "launch"})

__all__ = [
    "ActionError",
    "ActionPlan",
    "ActionResult",
    "ActionsDisabled",
    "attach_argv",
    "audit_path",
    "execute",
    "plan",
    "plan_attach",
    "plan_dump",
    "plan_flush",
    "plan_kill",
    "plan_launch",
    "plan_relaunch",
    "plan_watch_log",
    "render_argv",
    "state_dir",
]


async def execute(
    target: Target,
    plan: ActionPlan,
    progress: Progress = None,
    *,
    gpu_memory: GpuMemoryReader | None = None,
    gpu_processes: GpuProcessReader | None = None,
    audit_file: Path | None = None,
) -> ActionResult:
    """Run a confirmed plan and append it to the audit log. Errors a person
    can fix come back as a failed ActionResult (and are audited too)."""
    try:
        run = EXECUTORS.get(plan.action)
        if run is None:
            raise ActionError(
                f"action {plan.action!r} is not run by execute()",
                "it runs where its verb says (gputui.verbs.Verb.runs), not on the target",
            )
        if plan.action in BEGUN_AUDITED:
            audit_begun(target.label, plan, audit_file)
        result = await run(target, plan, progress, gpu_memory, gpu_processes)
    except GputuiError as err:
        result = ActionResult(ok=False, summary=str(err))
    audit(target.label, plan, result, audit_file)
    return result


# (target, settings, session, options) -> the plan; options are the verb's own
# flags (log, pids, native, locals_, py_spy) and, from the dashboard, what the
# snapshot knows (pid, stdout_files, and tmux: the command reaching the
# session's server when it is not the default one); absent when not given.
Planner = Callable[[Target, Settings, "str | None", dict[str, Any]], Awaitable[ActionPlan]]
Executor = Callable[
    [Target, ActionPlan, Progress, "GpuMemoryReader | None", "GpuProcessReader | None"],
    Awaitable[ActionResult],
]


async def _plan_attach(
    t: Target, s: Settings, session: str | None, o: dict[str, Any]
) -> ActionPlan:
    # attach-session starts a server when none answers: as the socket's owner
    return plan_attach(t, s, session, tmux=await tmux_as_socket_owner(t, o.get("tmux")))


async def _plan_watch_log(
    t: Target, s: Settings, session: str | None, o: dict[str, Any]
) -> ActionPlan:
    return plan_watch_log(o.get("pid"), list(o.get("stdout_files") or []), o.get("log"))


async def _plan_relaunch(
    t: Target, s: Settings, session: str | None, o: dict[str, Any]
) -> ActionPlan:
    """A run in tmux: stop it, start it again in tmux; a run that is its
    container's main process: restart the container (actions/restart.py)."""
    if is_main_process_relaunch(t, s, session):
        return await plan_restart_container(t, s)
    return await plan_relaunch(t, s, session, tmux=o.get("tmux"))


async def _execute_relaunch(
    t: Target,
    p: ActionPlan,
    progress: Progress,
    mem: GpuMemoryReader | None,
    procs: GpuProcessReader | None,
) -> ActionResult:
    if p.params.get("container_restart"):
        return await execute_restart(t, p, progress)
    return await execute_start(t, p, progress, mem, procs)


PLANNERS: dict[str, Planner] = {
    "relaunch": _plan_relaunch,
    "launch": lambda t, s, session, o: plan_launch(t, s, session),
    "kill": lambda t, s, session, o: plan_kill(
        t, s, session, force=bool(o.get("force")), tmux=o.get("tmux")
    ),
    "force_kill": lambda t, s, session, o: plan_kill(t, s, session, force=True, tmux=o.get("tmux")),
    "dump": lambda t, s, session, o: plan_dump(
        t,
        s,
        session,
        pids=o.get("pids"),
        native=bool(o.get("native")),
        locals_=bool(o.get("locals_")),
        py_spy=o.get("py_spy"),
        tmux=o.get("tmux"),
    ),
    "flush": lambda t, s, session, o: plan_flush(
        t, s, session, pids=o.get("pids"), log=o.get("log"), tmux=o.get("tmux")
    ),
    "attach": _plan_attach,
    "watch_log": _plan_watch_log,
}

EXECUTORS: dict[str, Executor] = {
    "kill": lambda t, p, progress, mem, procs: execute_kill(t, p, progress, procs),
    "relaunch": _execute_relaunch,
    "launch": execute_start,
    "dump": lambda t, p, progress, mem, procs: execute_dump(t, p, progress),
    "flush": lambda t, p, progress, mem, procs: execute_flush(t, p, progress),
}


async def plan(
    verb: str, target: Target, settings: Settings, session: str | None, **options: Any
) -> ActionPlan:
    """Inspect (read-only) and build the plan for `verb`; ActionError when
    there is no such verb. Nothing acts on a process here."""
    planner = PLANNERS.get(verb)
    if planner is None:
        raise ActionError(f"unknown action {verb!r}", "press ? for the list of keys")
    return await planner(target, settings, session, options)
