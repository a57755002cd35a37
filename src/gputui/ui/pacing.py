"""How often the log view may be written (pure, no Textual).

Each write to the log is a screen frame (~3–5 ms of Textual's time). A line
after a quiet spell is written at once; under a stream, writes are spaced so
there are at most `rate` a second on average (a token bucket holding `burst`
writes), and the lines that arrive in between go in the next batch. A write
that replaced every row of the view (a flood: nobody reads lines scrolling by
at hundreds a second) costs `FLOOD_COST` writes, so a flood is drawn ~2 times
a second: each such write restyles the whole view (~0.5 ms a row).
"""

from __future__ import annotations

import time
from collections.abc import Callable

WRITES_PER_S = 4.0
BURST = 2.0
FLOOD_COST = 2.0


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
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.rate

    def spend(self, lines: int = 1, rows: int | None = None) -> None:
        """A write of `lines` lines went out to a view `rows` high."""
        self._refill()
        cost = FLOOD_COST if rows is not None and lines >= rows > 0 else 1.0
        self._tokens = max(1.0 - cost, self._tokens - cost)  # owing up to cost - 1
