"""When the log view may be written next: a frame budget (pure, no Textual).

Each write to the log is a screen frame: the new rows, the state line, the
compositor's chops and the terminal's bytes (~1–2 ms here). A line after a
quiet spell is written at once. While lines keep coming, writes are spaced
so the log's frames take at most `share` of a core: the gap after a write
is its measured cost divided by `share` (an average over the last writes),
never under `min_gap` (at most ~7 frames a second) nor over `max_gap` (at
least 2). Lines that arrive within the gap go in the next write together.

Issue 37: a fixed 2–4 writes a second held a line up to half a second (p50
375 ms at 4 lines/s on a Proxmox-like host) to save frames that cost ~1 ms
each. With a budget, a dear frame (a slow machine, a flood restyling every
row) spaces writes out by itself, and a cheap one lets each line show as it
comes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LOG_SHARE = 0.015  # of a core the log's frames may take while lines keep coming
MIN_GAP_S = 0.15  # at most ~7 log frames a second
MAX_GAP_S = 0.5  # at least 2, however dear a frame
FIRST_COST_S = 0.002  # a frame's cost before one was measured
EMA = 0.2  # weight of the newest cost in the average


class FramePacer:
    def __init__(
        self,
        share: float = LOG_SHARE,
        min_gap: float = MIN_GAP_S,
        max_gap: float = MAX_GAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share = share
        self.min_gap = min_gap
        self.max_gap = max_gap
        self.clock = clock
        self.cost = FIRST_COST_S  # seconds a log frame costs, averaged
        self._last = -1e9  # clock() of the last write

    def gap(self) -> float:
        """Seconds from one write to the next under a stream."""
        return min(self.max_gap, max(self.min_gap, self.cost / self.share))

    def wait(self) -> float:
        """Seconds until the next write may go out (0: now)."""
        return max(0.0, self._last + self.gap() - self.clock())

    def spend(self) -> None:
        """A write went out now."""
        self._last = self.clock()

    def measured(self, cost: float) -> None:
        """A write's frame cost `cost` seconds of CPU (drawing and compositing)."""
        self.cost += EMA * (max(0.0, cost) - self.cost)
