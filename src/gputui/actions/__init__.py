"""One-key actions on a run: relaunch with flushing, kill, py-spy dump,
flush live, launch, attach, follow the real log. Each is `plan_*()`
(read-only inspection, returns an ActionPlan to confirm) then `execute()`
(runs it, audits it).

Each verb is declared once, in `gputui.verbs` (key, label, typed options,
audit words, what it expects of the GPUs); what it does is its `Action`
here — the verb, its planner (given the verb's options dataclass, never a
dict) and its executor — one row of ACTIONS. `plan()` and `execute()` find
the row by the verb's id: the dashboard (through `backend.ActionBackend`)
and the CLI verbs call the same two. A verb that runs somewhere else than on
the target (`Verb.runs`: attach in this terminal, watch_log in the
dashboard's view) has a planner and no executor."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from gputui.actions.attach import attach_argv, plan_attach
from gputui.actions.dump import execute_dump, plan_dump
from gputui.actions.facts import FactsReader
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
from gputui.verbs import VERB_BY_ID, Audit, DumpOptions, FlushOptions, KillOptions, NoOptions, Verb

__all__ = [
    "Action",
    "ActionError",
    "ActionPlan",
    "ActionResult",
    "ActionsDisabled",
    "RunSeen",
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


@dataclass(frozen=True)
class RunSeen:
    """What the caller knows of the run when it asks for a plan: the
    session (None: the config's), and from the dashboard's snapshot the tmux
    command reaching the session's server when it is not the default one,
    the log followed, the run's Python process and the files its stdout
    reaches; and how to ask the agent the monitor keeps in the target for a
    plan's facts in one request (actions/facts.py; None: by commands)."""

    session: str | None = None
    tmux: list[str] | None = None
    log: str | None = None
    pid: int | None = None
    stdout_files: tuple[str, ...] = ()
    facts: FactsReader | None = None


Opts = TypeVar("Opts")
Executor = Callable[
    [Target, ActionPlan, Progress, "GpuMemoryReader | None", "GpuProcessReader | None"],
    Awaitable[ActionResult],
]


@dataclass(frozen=True)
class Action(Generic[Opts]):
    """What a verb does: its planner, given the verb's own options
    dataclass (`Verb.options`), and its executor (None: it runs where
    `Verb.runs` says, not on the target)."""

    verb: Verb
    plan: Callable[[Target, Settings, RunSeen, Opts], Awaitable[ActionPlan]]
    execute: Executor | None = None


async def _plan_attach(t: Target, s: Settings, seen: RunSeen, o: NoOptions) -> ActionPlan:
    # attach-session starts a server when none answers: as the socket's owner
    return plan_attach(t, s, seen.session, tmux=await tmux_as_socket_owner(t, seen.tmux))


async def _plan_watch_log(t: Target, s: Settings, seen: RunSeen, o: NoOptions) -> ActionPlan:
    return plan_watch_log(seen.pid, list(seen.stdout_files), seen.log)


async def _plan_relaunch(t: Target, s: Settings, seen: RunSeen, o: NoOptions) -> ActionPlan:
    """A run in tmux: stop it, start it again in tmux; a run that is its
    container's main process: restart the container (actions/restart.py)."""
    if is_main_process_relaunch(t, s, seen.session):
        return await plan_restart_container(t, s)
    return await plan_relaunch(t, s, seen.session, tmux=seen.tmux, facts=seen.facts, log=seen.log)


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


async def _plan_launch(t: Target, s: Settings, seen: RunSeen, o: NoOptions) -> ActionPlan:
    return await plan_launch(t, s, seen.session, facts=seen.facts)


async def _plan_kill(t: Target, s: Settings, seen: RunSeen, o: KillOptions) -> ActionPlan:
    return await plan_kill(t, s, seen.session, force=o.force, tmux=seen.tmux, facts=seen.facts)


async def _plan_dump(t: Target, s: Settings, seen: RunSeen, o: DumpOptions) -> ActionPlan:
    return await plan_dump(
        t,
        s,
        seen.session,
        pids=list(o.pids) or None,
        native=o.native,
        locals_=o.locals_,
        py_spy=o.py_spy,
        tmux=seen.tmux,
        facts=seen.facts,
    )


async def _plan_flush(t: Target, s: Settings, seen: RunSeen, o: FlushOptions) -> ActionPlan:
    return await plan_flush(
        t,
        s,
        seen.session,
        pids=list(o.pids) or None,
        log=seen.log,
        tmux=seen.tmux,
        facts=seen.facts,
    )


async def _execute_kill(
    t: Target,
    p: ActionPlan,
    progress: Progress,
    mem: GpuMemoryReader | None,
    procs: GpuProcessReader | None,
) -> ActionResult:
    return await execute_kill(t, p, progress, procs)


async def _execute_dump(
    t: Target,
    p: ActionPlan,
    progress: Progress,
    mem: GpuMemoryReader | None,
    procs: GpuProcessReader | None,
) -> ActionResult:
    return await execute_dump(t, p, progress)


async def _execute_flush(
    t: Target,
    p: ActionPlan,
    progress: Progress,
    mem: GpuMemoryReader | None,
    procs: GpuProcessReader | None,
) -> ActionResult:
    return await execute_flush(t, p, progress)


def _verb(id_: str) -> Verb:
    return VERB_BY_ID[id_]


# What each verb of gputui.verbs.VERBS does (tests/test_verbs.py: one row each).
ACTIONS: dict[str, Action[Any]] = {
    a.verb.id: a
    for a in (
        Action(_verb("relaunch"), _plan_relaunch, _execute_relaunch),
        Action(_verb("kill"), _plan_kill, _execute_kill),
        Action(_verb("force_kill"), _plan_kill, _execute_kill),
        Action(_verb("dump"), _plan_dump, _execute_dump),
        Action(_verb("flush"), _plan_flush, _execute_flush),
        Action(_verb("attach"), _plan_attach),
        Action(_verb("launch"), _plan_launch, execute_start),
        Action(_verb("watch_log"), _plan_watch_log),
    )
}


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
        doing = ACTIONS.get(plan.action)
        run = doing.execute if doing is not None else None
        if doing is None or run is None:
            raise ActionError(
                f"action {plan.action!r} is not run by execute()",
                "it runs where its verb says (gputui.verbs.Verb.runs), not on the target",
            )
        if doing.verb.audit is Audit.BEGIN_AND_END:
            audit_begun(target.label, plan, audit_file)
        result = await run(target, plan, progress, gpu_memory, gpu_processes)
    except GputuiError as err:
        result = ActionResult(ok=False, summary=str(err))
    except BaseException as err:
        # cancelled (gputui quit mid-action) or a bug: the end line still, or
        # a recorder takes what follows as this action's doing for 5 minutes
        # — a crash or hang of the next run with no banner (issue 44)
        stopped = ActionResult(ok=False, summary=f"interrupted: {type(err).__name__}")
        with contextlib.suppress(OSError):
            audit(target.label, plan, stopped, audit_file)
        raise
    audit(target.label, plan, result, audit_file)
    return result


async def plan(
    verb: str,
    target: Target,
    settings: Settings,
    seen: RunSeen,
    options: object | None = None,
) -> ActionPlan:
    """Inspect (read-only) and build the plan for `verb`; ActionError when
    there is no such verb. `options`: the verb's options dataclass
    (`Verb.options`), None for its defaults. Nothing acts on a process here."""
    doing = ACTIONS.get(verb)
    if doing is None:
        raise ActionError(f"unknown action {verb!r}", "press ? for the list of keys")
    if options is None or doing.verb.preset is not None:
        options = doing.verb.make_options()
    if not isinstance(options, doing.verb.options):
        raise TypeError(f"{verb} takes {doing.verb.options.__name__}, not {options!r}")
    return await doing.plan(target, settings, seen, options)
