"""Sparklines you can read: time buckets on a fixed grid, a stable scale and
a trend word (pure, no Textual).

A bucket covers `span` seconds and is aligned to the clock (bucket k holds
times in [k·span, (k+1)·span)), so a line only changes at its right end as
time passes: no shimmer from re-binning. The scale is fixed (0–100 %,
0–memory total) or starts at 0 and reaches a robust top (the 95th
percentile, with head-room), so a ±5 % wobble stays a wobble.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Generic, Protocol, TypeVar
from weakref import WeakKeyDictionary

BLOCKS = "▁▂▃▄▅▆▇█"
NO_DATA = " "
# bucket widths, smallest first; the first whose cells cover MIN_WINDOW wins
SPANS = (1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0)
MIN_WINDOW = 300.0  # s: a row of any width shows at least the last 5 minutes


def pick_span(cells: int, min_window: float = MIN_WINDOW) -> float:
    """The narrowest bucket that lets `cells` buckets cover `min_window` seconds."""
    for span in SPANS:
        if span * max(1, cells) >= min_window:
            return span
    return SPANS[-1]


def window_label(cells: int, span: float) -> str:
    """'last 7 m' for 28 cells of 15 s."""
    total = cells * span
    if total < 120:
        return f"last {total:.0f} s"
    if total < 7200:
        return f"last {total / 60:.0f} m"
    return f"last {total / 3600:.0f} h"


def time_buckets(
    points: Iterable[tuple[float, float | None]], now: float, span: float, cells: int
) -> list[float | None]:
    """Mean of the known values in each of the `cells` buckets ending at `now`
    (oldest first); None where a bucket holds no known value (a gap, or [N/A])."""
    if cells <= 0:
        return []
    last = math.floor(now / span)
    first = last - cells + 1
    sums = [0.0] * cells
    counts = [0] * cells
    for t, v in points:
        if v is None:
            continue
        k = math.floor(t / span) - first
        if 0 <= k < cells:
            sums[k] += v
            counts[k] += 1
        elif k >= cells:  # a sample stamped slightly ahead of `now`: count it as now
            sums[-1] += v
            counts[-1] += 1
    return [s / c if c else None for s, c in zip(sums, counts, strict=True)]


class TimeSeries(Protocol):
    def newest(self, t0: float) -> list[tuple[float, float | None]]: ...


# Means of finished buckets per series, so a redraw only averages the newest
# bucket or two. A bucket counts as finished one bucket after it ends (a
# sample stamped a little late still lands in it).
_finished: WeakKeyDictionary[TimeSeries, tuple[float, dict[int, float | None]]] = (
    WeakKeyDictionary()
)


def series_buckets(series: TimeSeries, now: float, span: float, cells: int) -> list[float | None]:
    """`time_buckets` of a ring's newest points, reusing finished buckets."""
    if cells <= 0:
        return []
    last = math.floor(now / span)
    first = last - cells + 1
    memo_span, memo = _finished.get(series, (None, {}))
    if memo_span != span:
        memo = {}
        _finished[series] = (span, memo)
    final = last - 1  # buckets before this one are finished
    start = next((k for k in range(first, final) if k not in memo), final)
    fresh = time_buckets(series.newest(start * span), now, span, last - start + 1)
    for k, v in zip(range(start, final), fresh, strict=False):
        memo[k] = v
    for k in [k for k in memo if k < first]:
        del memo[k]
    return [memo.get(k) for k in range(first, start)] + fresh


class TimeRing(TimeSeries, Protocol):
    def newest_point(self) -> tuple[float, float | None] | None: ...

    def after(
        self, point: tuple[float, float | None]
    ) -> list[tuple[float, float | None]] | None: ...


D = TypeVar("D", str, list[float | None])


class _Sparked(Generic[D]):
    """A series' spark (or bucket values) within one bucket: the finished
    buckets' blocks (values), and the newest two buckets' sums and counts up
    to the newest point seen."""

    __slots__ = ("counts", "done", "grid", "seen", "sums")

    def __init__(self, grid: tuple[float, int, float, float], done: D) -> None:
        self.grid = grid  # (span, first bucket, top, bottom)
        self.done: D = done
        self.seen: tuple[float, float | None] | None = None
        self.sums = [0.0] * FRESH
        self.counts = [0] * FRESH

    def after_seen(self, series: TimeRing) -> list[tuple[float, float | None]] | None:
        """The series' points since the newest one counted; None: count afresh."""
        return series.after(self.seen) if self.seen is not None else None

    def add(self, points: Iterable[tuple[float, float | None]], last: int, span: float) -> None:
        """Count `points` into the newest two buckets, as time_buckets does."""
        for t, v in points:
            if v is None:
                continue
            k = min(FRESH - 1, math.floor(t / span) - (last - FRESH + 1))
            if k >= 0:  # (one stamped late into a finished bucket: that bucket is kept)
                self.sums[k] += v
                self.counts[k] += 1


# Per series: within one bucket only the newest two cells can change, and
# each second adds a point or two to them: a row's second costs those
# points, not a window of buckets (a sample stamped a little late still
# lands in the newest two, as series_buckets counts them).
_sparked: WeakKeyDictionary[TimeRing, _Sparked[str]] = WeakKeyDictionary()
_valued: WeakKeyDictionary[TimeRing, _Sparked[list[float | None]]] = WeakKeyDictionary()
FRESH = 2  # the cells series_buckets counts afresh: the newest bucket and the one before


def series_spark(
    series: TimeRing, now: float, span: float, cells: int, top: float, bottom: float = 0.0
) -> str:
    """`spark(series_buckets(series, now, span, cells), top, bottom)`, kept
    and brought up to date point by point within a bucket."""
    if cells <= FRESH:
        return spark(series_buckets(series, now, span, cells), top, bottom)
    last = math.floor(now / span)
    grid = (span, last - cells + 1, top, bottom)
    kept = _sparked.get(series)
    new = kept.after_seen(series) if kept is not None and kept.grid == grid else None
    if kept is None or new is None:
        values = series_buckets(series, now, span, cells)
        kept = _sparked[series] = _Sparked(grid, spark(values[:-FRESH], top, bottom))
        new = series.newest((last - FRESH + 1) * span)
    kept.add(new, last, span)
    if new or kept.seen is None:
        kept.seen = series.newest_point()
    fresh = [s / c if c else None for s, c in zip(kept.sums, kept.counts, strict=True)]
    return kept.done + spark(fresh, top, bottom)


def series_values(series: TimeRing, now: float, span: float, cells: int) -> list[float | None]:
    """`series_buckets(series, now, span, cells)`, kept and brought up to
    date point by point within a bucket as `series_spark` is (issue 48: a
    metric row at 40 lines a second recounted its newest two buckets, ~400
    points, each second)."""
    if cells <= FRESH:
        return series_buckets(series, now, span, cells)
    last = math.floor(now / span)
    grid = (span, last - cells + 1, 0.0, 0.0)
    kept = _valued.get(series)
    new = kept.after_seen(series) if kept is not None and kept.grid == grid else None
    if kept is None or new is None:
        values = series_buckets(series, now, span, cells)
        kept = _valued[series] = _Sparked(grid, values[:-FRESH])
        new = series.newest((last - FRESH + 1) * span)
    kept.add(new, last, span)
    if new or kept.seen is None:
        kept.seen = series.newest_point()
    return kept.done + [s / c if c else None for s, c in zip(kept.sums, kept.counts, strict=True)]


def recent(
    points: Sequence[tuple[float, float | None]], since: float
) -> list[tuple[float, float | None]]:
    """The tail of time-ordered `points` at or after `since` (walks back from the end)."""
    i = len(points)
    while i > 0 and points[i - 1][0] >= since:
        i -= 1
    return list(points[i:])


def spark(values: Sequence[float | None], top: float, bottom: float = 0.0) -> str:
    """One block per value on a fixed scale [bottom, top]; a gap is a space.
    A value at the bottom still draws the lowest block, so 'idle' and 'no
    reading' look different."""
    if top <= bottom:
        top = bottom + 1.0
    n = len(BLOCKS)
    out = []
    for v in values:
        if v is None:
            out.append(NO_DATA)
            continue
        frac = (v - bottom) / (top - bottom)
        out.append(BLOCKS[min(n - 1, max(0, int(frac * n)))] if frac < 1 else BLOCKS[-1])
    return "".join(out)


def robust_top(values: Iterable[float | None], headroom: float = 1.25) -> float:
    """A scale top that a single spike cannot set: the 95th percentile of the
    known values plus head-room (the spike just draws a full block)."""
    xs = sorted(v for v in values if v is not None and math.isfinite(v))
    if not xs:
        return 1.0
    p95 = xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)]
    top = (xs[-1] if len(xs) < 5 else p95) * headroom
    return top if top > 0 else 1.0


def trend_pct(values: Sequence[float | None]) -> float | None:
    """Change of the last quarter's mean against the first quarter's, in %
    of the first; None without enough known values at both ends."""
    xs = [v for v in values if v is not None]
    if len(xs) < 4:
        return None
    q = max(1, len(xs) // 4)
    head = sum(xs[:q]) / q
    tail = sum(xs[-q:]) / q
    if head == 0:
        return None
    return 100.0 * (tail - head) / abs(head)


def trend_word(change: float | None, flat_below: float = 3.0) -> str:
    """'↑12%', '↓4%' or '→' (within ±flat_below %), '' when unknown."""
    if change is None:
        return ""
    if abs(change) < flat_below:
        return "→"
    return f"{'↑' if change > 0 else '↓'}{abs(change):.0f}%"
