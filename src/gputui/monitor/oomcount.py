"""The run's cgroup OOM-kill count: the agent's `oom` op in a poll's batch,
`Snapshot.oom` and a `ProcsChanged` when it moved.

The count matters once the run is gone (a rise since it was last seen alive
is its kill): read each poll while no Python process of the run is seen,
every READ_EVERY_S while it runs (the baseline)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gputui.model import Snapshot
from gputui.monitor.door import ProcsChanged, Update
from gputui.monitor.feed import NowAndThen, Poll

READ_EVERY_S = 5.0


class OomCount(NowAndThen):
    """The `oom` call of a poll, and its answer into the snapshot."""

    op = "oom"
    every_s = READ_EVERY_S
    owns = "oom"
    emits = ProcsChanged

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self._files: list[str] = []  # the run's memory cgroup files (the agent's `oom` op)

    def call(self, snap: Snapshot, poll: Poll) -> dict[str, Any] | None:
        """The agent's `oom` op for this poll, or None: each poll while no
        Python process of the run is seen, every READ_EVERY_S while it runs."""
        run_seen = any(p.is_python for p in snap.procs)
        if run_seen and self.fresh():
            return None
        args: dict[str, Any] = {"files": self._files}
        if poll.pane_pid:
            args["pid"] = poll.pane_pid
        return self.asking(args)

    def apply(self, answer: Any, snap: Snapshot, poll: Poll) -> type[Update] | None:
        """The OOM-kill count of the run's cgroups (the agent's `oom` op) ->
        snapshot.oom: (count while the run was last seen alive, count now,
        when it rose). A rise after the run was last seen alive (a Python
        process of it in this poll's snap.procs) is its kill."""
        run_alive = any(p.is_python for p in snap.procs)
        count = answer.get("oom_kill") if isinstance(answer, dict) else None
        files = answer.get("files") if isinstance(answer, dict) else None
        if run_alive and isinstance(files, list) and files:
            self._files = [str(f) for f in files]  # asked for again once the run is gone
        if not isinstance(count, int):
            return None
        old = snap.oom
        new: tuple[int, int, float | None]
        if old is None or run_alive:
            new = (count, count, None)
        elif count > old[1]:
            new = (old[0], count, poll.now)
        else:
            new = old
        if new != old:
            snap.oom = new
            return self.emits
        return None
