"""One look at the kernel log when the watched run's process vanished with
no word in its output (issue 47): the OOM killer's "Killed process …" line
is the only trace such a kill leaves (collect/oomkills.py reads and parses
it, diagnose/oomkill.py names it).

Read where gputui's transport lands: the host, for a run in a container
(its kernel is the container's); the run's machine otherwise — inside an
unprivileged container that read is refused, and the refusal is kept and
said. Once per vanishing (keyed by the Python PIDs last seen alive), one
short command; nothing while the run runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gputui.collect.oomkills import READ_TIMEOUT_S, oom_read_argv, parse_oom_read
from gputui.diagnose.context import Context
from gputui.diagnose.oomkill import vanished_quietly
from gputui.diagnose.thresholds import DEFAULT_THRESHOLDS
from gputui.model import KernelOomRead, Snapshot
from gputui.remote.target import Target


class OomLook:
    """See the module docstring. `after_poll(snapshot)` once a poll: True
    when it set `snapshot.kernel_oom` anew."""

    def __init__(self, target: Target, clock: Callable[[], float] = time.time) -> None:
        self.target = target
        self.clock = clock
        self.looks = 0
        self.reading = False  # a read is under way
        self._alive: frozenset[int] = frozenset()  # the run's Python PIDs last seen
        self._looked: frozenset[int] | None = None  # the vanishing already looked at
        self._judged: object = None  # the state last judged not a quiet vanishing

    def _where(self) -> str:
        return "the host" if self.target.in_container else "the run's machine"

    async def after_poll(self, snap: Snapshot) -> bool:
        pys = frozenset(p.pid for p in snap.procs if p.is_python)
        if pys:
            self._alive, self._looked = pys, None
            if snap.kernel_oom is not None:
                snap.kernel_oom = None  # a run again: the last one's read is not its
                return True
            return False
        if self._looked == self._alive:
            return False
        # what vanished_quietly reads, cheaply: unchanged, its answer is too
        key = (
            self._alive,
            snap.log.lines_total,
            snap.log.mtime,
            tuple(snap.pane_tail[-1:]),
            snap.session_gone,
            tuple((s.name, tuple(p.dead for p in s.panes)) for s in snap.sessions),
            tuple(p.pid for p in snap.procs),
        )
        if key == self._judged:
            return False
        self._judged = key
        ctx = Context(snap, self.clock(), 0.0, DEFAULT_THRESHOLDS)
        if not vanished_quietly(ctx, seen_alive=bool(self._alive)):
            return False
        self._looked = self._alive
        self.reading = True
        try:
            snap.kernel_oom = await self.read()
        finally:
            self.reading = False
        snap.kernel_oom.run_pids = self._alive
        return True

    async def read(self) -> KernelOomRead:
        """The kernel log's OOM kills now, or what refused the read."""
        self.looks += 1
        at = self.clock()
        try:
            res = await self.target.run_host(oom_read_argv(), timeout=READ_TIMEOUT_S)
        except Exception as err:  # a read that failed is said, never "no kill"
            return KernelOomRead(self._where(), at, refused=[f"{type(err).__name__}: {err}"])
        read = parse_oom_read(res.out, self._where(), at)
        if not read.via and not read.refused:
            why = (res.err or "").strip().splitlines()[:1] or [f"exit {res.exit_status}"]
            read.refused.append(f"the read gave nothing: {why[0][:160]}")
        return read
