"""The actions for one target, as the dashboard uses them: plan a verb
from the latest snapshot, execute the confirmed plan with the monitor's
GPU readings (relaunch waits for the memory to drop; kill checks the GPU
processes). The dashboard renders the ActionPlan / ActionResult as they are."""

from __future__ import annotations

from gputui.actions.facts import FactsReader
from gputui.actions.plan import ActionPlan, ActionResult, Progress
from gputui.config import Settings
from gputui.model import GpuProcess, Snapshot
from gputui.monitor import RunFeed
from gputui.remote.target import Target
from gputui.verbs import VERB_BY_ID, GpuAfter

SIMULATED_GPUS = "GPU memory: the demo's GPUs are simulated; its run holds none on a real GPU"


class ActionBackend:
    """`plan(verb, snapshot)` (read-only: nothing acts on a process) and
    `execute(plan)` for the target `monitor` watches. `progress`, when set,
    hears each step of a running action."""

    def __init__(
        self,
        target: Target,
        settings: Settings,
        monitor: RunFeed,
        facts: FactsReader | None = None,
    ) -> None:
        self.target = target
        self.settings = settings
        self.monitor = monitor
        self.progress: Progress = None
        # the monitor's question to the agent it keeps in the target
        # (WatchedRun.run_facts): a plan reads the run in one request
        # (actions/facts.py); None: by commands
        self.facts = facts

    async def plan(self, verb: str, snap: Snapshot, options: object | None = None) -> ActionPlan:
        """`options`: the verb's options dataclass (the palette's entry for
        one of its switches); None: its defaults."""
        from gputui import actions

        declared = VERB_BY_ID.get(verb)
        # launch names its session from the config's [run], not the one shown
        shown = declared is None or not declared.session_from_config
        proc = snap.training_proc
        seen = actions.RunSeen(
            session=(snap.session_name or self.settings.session) if shown else None,
            tmux=snap.session.tmux if snap.session is not None and shown else None,
            log=snap.log.path or None,
            pid=proc.pid if proc is not None else None,
            stdout_files=tuple(proc.stdout.files) if proc is not None else (),
            facts=self.facts,
        )
        return await actions.plan(verb, self.target, self.settings, seen, options)

    async def execute(self, plan: ActionPlan) -> ActionResult:
        """Run the confirmed plan. With simulated GPUs (the demo) no GPU
        reading is given to the action: the simulation's memory is not the
        run's, so "freed" or "unchanged" would be made up; the result says so."""
        from gputui import actions

        simulated = self.monitor.snapshot.gpus.source == "simulated"
        result = await actions.execute(
            self.target,
            plan,
            self.progress,
            gpu_memory=None if simulated else self._gpu_memory,
            gpu_processes=None if simulated else self._gpu_processes,
        )
        declared = VERB_BY_ID.get(plan.action)
        if simulated and declared is not None and declared.gpu_after is GpuAfter.FREED:
            result.details.append(SIMULATED_GPUS)
        return result

    async def _gpu_memory(self) -> float | None:
        latest = self.monitor.snapshot.gpus.latest.values()
        used = [s.mem_used_mib for s in latest if s.mem_used_mib is not None]
        return sum(used) if used else None

    async def _gpu_processes(self) -> list[GpuProcess]:
        return list(self.monitor.snapshot.gpus.processes)
