"""GPU × time heatmaps for the zoom view (`g`), pure (Rich text, no Textual).

One row per GPU, labelled; one column per time bucket (oldest left, now at
the right edge); a cell's colour is the bucket's mean on a scale shared by
every GPU (0–100 %, 0–the largest memory total, 0–the largest power limit).
Utilization, memory and power side by side, each with the latest value at
its row's end, under one time axis in clock time. A cell is a colour and a
shade (░▒▓█), so the levels read without colour too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rich.text import Text

from gputui.ui.trend import time_buckets

# viridis in 8 steps: perceptually even, colour-blind safe, low = dark
PALETTE = ("#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d", "#a0da39", "#fde725")
SHADES = "░░▒▒▓▓██"
LABEL_W = 7  # "GPU 12 "
MIN_WINDOW = 60.0  # s: a young history still gets a minute-wide axis

Points = Sequence[tuple[float, float | None]]


@dataclass
class Panel:
    """One metric: its title, every GPU's points, the shared top and how the
    latest value is written (`fmt(value)`, fixed width)."""

    title: str
    series: Mapping[int, Points]
    top: float
    fmt: Callable[[float | None], str]


def pick_span(window: float, cells: int) -> float:
    """Seconds a column, so that `cells` columns just cover `window` s (at
    least one second a column)."""
    return max(1.0, window / max(1, cells))


def cell(value: float | None, top: float) -> tuple[str, str]:
    """(character, style) of one bucket; a gap is a dim dot."""
    if value is None or not math.isfinite(value):
        return "·", "dim"
    frac = 0.0 if top <= 0 else min(1.0, max(0.0, value / top))
    k = min(len(PALETTE) - 1, int(frac * len(PALETTE)))
    return SHADES[k], PALETTE[k]


def span_words(span: float) -> str:
    """'10 s', '2 min', '1.5 h'."""
    if span < 60:
        return f"{span:.0f} s"
    return f"{span / 60:.0f} min" if span < 5400 else f"{span / 3600:.1f} h"


def clock(t: float, seconds: bool) -> str:
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", time.localtime(t))


def axis(first: float, span: float, cells: int) -> str:
    """Clock times under a panel `cells` wide whose first bucket starts at
    `first`: the left edge's time and "now" at the right, the middle's between
    where it fits."""
    if cells <= 0:
        return ""
    short = span * cells < 600  # under 10 minutes: to the second
    left, right = clock(first, short), "now"
    line = [" "] * cells
    mid = clock(first + span * cells / 2, short)
    for at, text in ((0, left), (cells - len(right), right), ((cells - len(mid)) // 2, mid)):
        if at < 0 or any(c != " " for c in line[max(0, at - 1) : at + len(text) + 1]):
            continue  # no room: the label is left out, never overlapped
        line[at : at + len(text)] = text
    return "".join(line)[:cells]


def window_of(panels: Sequence[Panel], now: float) -> float:
    """Seconds from the oldest point of any GPU to now (at least MIN_WINDOW)."""
    oldest = min((pts[0][0] for p in panels for pts in p.series.values() if pts), default=now)
    return max(MIN_WINDOW, now - oldest)


def mark_row(marks: Sequence[tuple[float, str]], first: float, span: float, cells: int) -> Text:
    """A ▲ under the column of each (time, style) mark; the later wins a column."""
    row: list[tuple[str, str]] = [(" ", "")] * cells
    for t, style in marks:
        k = math.floor((t - first) / span)
        if 0 <= k < cells:
            row[k] = ("▲", style)
    out = Text()
    for ch, style in row:
        out.append(ch, style=style)
    return out


def heatmap(
    panels: Sequence[Panel],
    now: float,
    width: int,
    *,
    window: float | None = None,
    marks: Sequence[tuple[float, str]] = (),
) -> Text:
    """The whole view `width` cells wide: a header, a row per GPU, an axis.
    `window`: seconds the axis covers (default: from the oldest point);
    `marks`: (time, style) of events, a ▲ above the axis."""
    gpus = sorted({i for p in panels for i in p.series})
    vals = [len(p.fmt(None)) for p in panels]
    cells = max(4, (width - LABEL_W - sum(vals) - 3 * len(panels)) // max(1, len(panels)))
    span = pick_span(max(MIN_WINDOW, window or window_of(panels, now)), cells)
    newest = max((pts[-1][0] for p in panels for pts in p.series.values() if pts), default=now)
    if now - span < newest < now:  # the last column is the newest reading's, not an empty one
        now = newest
    last = math.floor(now / span)
    first = (last - cells + 1) * span
    out = Text(no_wrap=True, overflow="crop")
    out.append(" " * LABEL_W)
    for p, w in zip(panels, vals, strict=True):
        out.append(f"{p.title[: cells + w]:<{cells + w}}   ", style="bold")
    out.append("\n")
    for i in gpus:
        out.append(f"GPU {i:<{LABEL_W - 4}}", style="bold")
        for p in panels:
            pts = p.series.get(i, [])
            for v in time_buckets(pts, now, span, cells):
                ch, style = cell(v, p.top)
                out.append(ch, style=style)
            latest = next((v for _, v in reversed(pts) if v is not None), None)
            out.append(f" {p.fmt(latest)}  ")
        out.append("\n")
    if marks:
        out.append(" " * LABEL_W)
        for _p, w in zip(panels, vals, strict=True):
            out.append_text(mark_row(marks, first, span, cells))
            out.append(" " * (w + 3))
        out.append("\n")
    out.append(" " * LABEL_W)
    for _p, w in zip(panels, vals, strict=True):
        out.append(axis(first, span, cells) + " " * (w + 3), style="dim")
    out.append("\n")
    out.append(" " * LABEL_W)
    out.append(f"a column: {span_words(span)} · low ", style="dim")
    for k, colour in enumerate(PALETTE):
        out.append(SHADES[k], style=colour)
    out.append(" high, one scale for all · · none", style="dim")
    return out
