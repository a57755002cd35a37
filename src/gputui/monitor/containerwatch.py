"""The container a run is in: its status (its kind's status
command, asked of the host only after the agent failed, read from an
error's words when they say), the tools in it (the agent's hello, or one
plain probe without python3) and the host's other containers by name —
`Snapshot.ct_status`, `tools`, `container_names` and the `CtChanged` they
emit (the neighbours' names: `GpusRead`, they name GPU processes)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from gputui.errors import GputuiError
from gputui.model import CtStatus, Snapshot
from gputui.monitor.door import CtChanged, GpusRead, Update
from gputui.monitor.feed import Changed
from gputui.monitor.tools import probe_tools
from gputui.remote.agent_client import AgentClient
from gputui.remote.target import Target

CHECK_MIN_S = 15.0  # `pct status` runs only after agent errors, not more often


def _unheard(*kinds: type[Update]) -> None:
    """No monitor listens (a watch made on its own, in tests)."""


class ContainerWatch:
    """See the module docstring. `changed(*kinds)`: the monitor's, told of
    the kinds of update that came; `neighbours_read`: the names are known already (a
    host view's monitor: its owner keeps them)."""

    emits: ClassVar[type[Update]] = CtChanged

    def __init__(
        self,
        target: Target,
        snapshot: Snapshot,
        clock: Callable[[], float] = time.time,
        changed: Changed | None = None,
        *,
        neighbours_read: bool = False,
    ) -> None:
        self.target = target
        self.snapshot = snapshot
        self.clock = clock
        self.changed: Changed = changed if changed is not None else _unheard
        self._checked_at: float | None = None
        self.neighbours_read = neighbours_read

    def agent_up(self, agent: AgentClient) -> None:
        """An agent started: it proves the container runs, and says its tools."""
        snap = self.snapshot
        gpu_tools = (snap.tools.nvidia_smi_host,)
        snap.tools = agent.tools()
        snap.tools.nvidia_smi_host = gpu_tools[0]
        if self.target.in_container and snap.ct_status != CtStatus.RUNNING:
            if snap.ct_status == CtStatus.STOPPED:  # its run ended with it
                snap.ct_restarted_at = self.clock()
            snap.ct_status = CtStatus.RUNNING
            self.changed(CtChanged)
        self.changed(CtChanged)

    async def check(self, error_text: str = "") -> None:
        """The CT's state: read from an error's text when it says (`CT 200 not
        running`, `... does not exist`), else asked of the host (the
        container's status command) — at start and after errors, at most once
        per CHECK_MIN_S."""
        container = self.target.container
        status_argv = container.status_argv()
        if status_argv is None:
            return
        status = container.read_status(error_text) if error_text else None
        if status is None:
            now = self.clock()
            if self._checked_at is not None and now - self._checked_at < CHECK_MIN_S:
                return
            self._checked_at = now
            try:
                res = await self.target.run_host(status_argv, timeout=15.0)
            except GputuiError:
                return
            status = container.read_status(res.out + res.err) or CtStatus.UNKNOWN
        if status != self.snapshot.ct_status:
            self.snapshot.ct_status = status
            self.changed(CtChanged)

    async def read_neighbours(self) -> None:
        """The host's containers by name, read once: a GPU process in another
        one is named 'CT 201 (eval-box)'; nothing when the host cannot say."""
        self.neighbours_read = True
        container = self.target.container
        argv = container.neighbours_argv()
        if argv is None:
            return
        try:
            res = await self.target.run_host(argv, timeout=15.0)
        except GputuiError:
            return
        if res.ok:
            self.snapshot.container_names.update(container.read_neighbours(res.out))
            self.changed(GpusRead)

    async def probe_tools(self) -> None:
        """No agent to say which tools the CT has: ask once with a plain
        command, so a missing tmux is named (not "nothing wrong")."""
        if self.snapshot.tools.probed:
            return
        try:
            tools = await probe_tools(self.target)
        except GputuiError:
            return
        tools.nvidia_smi_host = self.snapshot.tools.nvidia_smi_host  # the GPU feed knows best
        self.snapshot.tools = tools
        self.changed(CtChanged)
