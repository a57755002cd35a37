"""One-key actions on a run: relaunch with flushing, kill, py-spy dump,
flush live, launch, attach. Each is `plan_*()` (read-only inspection, returns
an ActionPlan to confirm) then `execute()` (runs it, audits it)."""

from __future__ import annotations

from pathlib import Path

from gputui.actions.attach import attach_argv, plan_attach
from gputui.actions.dump import execute_dump, plan_dump
from gputui.actions.flush import execute_flush, plan_flush
from gputui.actions.kill import GpuProcessReader, execute_kill, plan_kill
from gputui.actions.plan import (
    ActionError,
    ActionPlan,
    ActionResult,
    ActionsDisabled,
    Progress,
    audit,
    audit_path,
    render_argv,
    state_dir,
)
from gputui.actions.relaunch import GpuMemoryReader, execute_start, plan_launch, plan_relaunch
from gputui.errors import GputuiError
from gputui.remote.target import Target

__all__ = [
    "ActionError",
    "ActionPlan",
    "ActionResult",
    "ActionsDisabled",
    "attach_argv",
    "audit_path",
    "execute",
    "plan_attach",
    "plan_dump",
    "plan_flush",
    "plan_kill",
    "plan_launch",
    "plan_relaunch",
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
        if plan.action == "kill":
            result = await execute_kill(target, plan, progress, gpu_processes)
        elif plan.action in ("relaunch", "launch"):
            result = await execute_start(target, plan, progress, gpu_memory, gpu_processes)
        elif plan.action == "dump":
            result = await execute_dump(target, plan, progress)
        elif plan.action == "flush":
            result = await execute_flush(target, plan, progress)
        else:
            raise ActionError(
                f"action {plan.action!r} is not run by execute()",
                "attach is run by the UI with the argv from attach_argv()",
            )
    except GputuiError as err:
        result = ActionResult(ok=False, summary=str(err))
    audit(target.label, plan, result, audit_file)
    return result
