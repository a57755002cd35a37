"""The actions for one target, as the dashboard uses them: plan a verb
from the latest snapshot, execute the confirmed plan with the monitor's
GPU readings (relaunch waits for the memory to drop; kill checks the GPU
processes). The dashboard renders the ActionPlan / ActionResult as they are."""

from __future__ import annotations

from gputui.actions.plan import ActionPlan, ActionResult, Progress
from gputui.config import Settings
from gputui.model import GpuProcess, Snapshot
from gputui.monitor.door import RunFeed
from gputui.remote.target import Target


class ActionBackend:
    """`plan(verb, snapshot)` (read-only: nothing acts on a process) and
    `execute(plan)` for the target `monitor` watches. `progress`, when set,
    hears each step of a running action."""

    def __init__(self, target: Target, settings: Settings, monitor: RunFeed) -> None:
        self.target = target
        self.settings = settings
        self.monitor = monitor
        self.progress: Progress = None

    async def plan(self, verb: str, snap: Snapshot) -> ActionPlan:
        from gputui import actions

        session = snap.session_name or self.settings.session
        if verb == "launch":
            session = None  # launch names its session from the config's [run]
        proc = snap.training_proc
        return await actions.plan(
            verb,
            self.target,
            self.settings,
            session,
            log=snap.log.path or None,
            pid=proc.pid if proc is not None else None,
            stdout_files=list(proc.stdout.files) if proc is not None else [],
            tmux=snap.session.tmux if snap.session is not None and verb != "launch" else None,
        )

    async def execute(self, plan: ActionPlan) -> ActionResult:
        from gputui import actions

        return await actions.execute(
            self.target,
            plan,
            self.progress,
            gpu_memory=self._gpu_memory,
            gpu_processes=self._gpu_processes,
        )

    async def _gpu_memory(self) -> float | None:
        latest = self.monitor.snapshot.gpus.latest.values()
        used = [s.mem_used_mib for s in latest if s.mem_used_mib is not None]
        return sum(used) if used else None

    async def _gpu_processes(self) -> list[GpuProcess]:
        return list(self.monitor.snapshot.gpus.processes)
