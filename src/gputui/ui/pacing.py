"""How often the log view may be written (pure, no Textual).

Each write to the log is a screen frame (~3–5 ms of Textual's time). A line
after a quiet spell is written at once; under a stream, writes are spaced so
there are at most `rate` a second on average (a token bucket holding `burst`
writes), and the lines that arrive in between go in the next batch. A write
that replaced every row of the view with `FLOOD_LINES` lines or more (a
flood: nobody reads lines scrolling by at hundreds a second) costs
`FLOOD_COST` writes, so a flood is drawn ~2 times
a second: each such write restyles the whole view (~0.5 ms a row).

Lines that keep coming (a write first held back by the bucket
`stream_after` seconds ago, and the bucket not full since) are drawn at
`stream_rate` writes a second instead (the same 5 in the dashboard since
issue 37: what a frame costs went down instead; round 4 drew 2 a second
and a line waited ~0.4 s for the screen). The first line after a quiet
spell still goes at once.
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
# writes a second once lines have kept coming for STREAM_AFTER_S: the same
# rate (issue 37: a line on screen ≤ 150 ms after its write, p50). The
# target's batcher already sends a stream ~5 times a second
# (logfollow.BATCH_PY), so each batch is drawn as it comes; 2 a second here
# (round 4) kept every other batch waiting up to 0.5 s
STREAM_RATE = WRITES_PER_S
STREAM_AFTER_S = 2.0


class WritePacer:
    def __init__(
        self,
        rate: float = WRITES_PER_S,
        burst: float = BURST,
        clock: Callable[[], float] = time.monotonic,
        stream_rate: float | None = None,
        stream_after: float = STREAM_AFTER_S,
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.stream_rate = rate if stream_rate is None else stream_rate
        self.stream_after = stream_after
        self._tokens = burst
        self._at = clock()
        self._held_since: float | None = None  # the stream's first held-back write

    def _rate(self) -> float:
        held = self._held_since
        streaming = held is not None and self._at - held >= self.stream_after
        return self.stream_rate if streaming else self.rate

    def _refill(self) -> None:
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self._rate())
        self._at = now
        if self._tokens >= self.burst:  # the bucket filled up: the stream paused
            self._held_since = None

    def wait(self) -> float:
        """Seconds until the next write may go out (0: now)."""
        self._refill()
        if self._tokens >= 1:
            return 0.0
        if self._held_since is None:
            self._held_since = self._at
        return (1 - self._tokens) / self._rate()

    def spend(self, lines: int = 1, rows: int | None = None) -> None:
        """A write of `lines` lines went out to a view `rows` high."""
        self._refill()
        flood = rows is not None and lines >= max(rows, FLOOD_LINES) and rows > 0
        cost = FLOOD_COST if flood else 1.0
        self._tokens = max(1.0 - cost, self._tokens - cost)  # owing up to cost - 1
