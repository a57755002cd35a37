"""How often the log view may be written (pure, no Textual).

Each write to the log is a screen frame (~1 ms since issue 37). A line
after a quiet spell is written at once; under a stream, writes are spaced so
there are at most `rate` a second on average (a token bucket holding `burst`
writes), and the lines that arrive in between go in the next batch. A write
that replaced every row of the view with `FLOOD_LINES` lines or more (a
flood: nobody reads lines scrolling by at hundreds a second) costs
`FLOOD_COST` writes, so a flood is drawn ~2 times
a second: each such write restyles the whole view (~0.5 ms a row).

A stream is drawn at the same `rate` however long it lasts (issue 37:
what a frame costs went down instead; round 4 slowed a stream to 2 writes
a second and a line waited ~0.4 s for the screen). The target's batcher
sends a stream ~5 times a second (logfollow.BATCH_PY), so each batch is
drawn as it comes. The first line after a quiet spell goes at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

WRITES_PER_S = 5.0
BURST = 2.0
FLOOD_COST = 2.0
# ... and only a write of this many lines or more is a flood: 40 lines/s
# come in batches of 8, which fill a short view (80×24: ~9 rows) without
# being one; 50 a write is ≥ 250 lines/s (issue 37)
FLOOD_LINES = 50


class WritePacer:
    def __init__(
        self,
        rate: float = WRITES_PER_S,
        burst: float = BURST,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._tokens = burst
        self._at = clock()

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def wait(self) -> float:
        """Seconds until the next write may go out (0: now)."""
        self._refill()
        if self._tokens >= 1:
            return 0.0
        return (1 - self._tokens) / self.rate

    def spend(self, lines: int = 1, rows: int | None = None) -> None:
        """A write of `lines` lines went out to a view `rows` high."""
        self._refill()
        flood = rows is not None and lines >= max(rows, FLOOD_LINES) and rows > 0
        cost = FLOOD_COST if flood else 1.0
        self._tokens = max(1.0 - cost, self._tokens - cost)  # owing up to cost - 1
