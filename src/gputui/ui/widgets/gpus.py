"""GPU rows: each GPU's utilization and memory as a sparkline over the last
minutes (fixed scales: 0–100 %, 0–its memory), the current values, and its
temperature and power: plain `Text` lines drawn through the line API.

Colour means trouble: a GPU whose readings stopped (lost, or behind the
others) is red; a hot one is yellow; a busy one is not painted at all.
"""

from __future__ import annotations

from rich.text import Text

from gputui.model import GpuSample, GpuState, Ring
from gputui.text.untrusted import remote_text, visible
from gputui.ui.trend import pick_span, series_buckets, spark, window_label
from gputui.ui.widgets.lines import TextLines
from gputui.ui.widgets.quiet import set_border_text

UTIL_STYLE = "green"
MEM_STYLE = "cyan"
HOT_C = 85.0  # °C: worth a look (H200s throttle near 90)
LOST_AFTER = 5.0  # s a GPU's readings may trail the newest before it counts as lost
# fixed columns of a full row: "0* " util " 100%" " " mem " 45.1/140G" " 56°C" " 690/700 W"
FULL_FIXED = 3 + 5 + 1 + 11 + 6 + 11
# a half row (two GPUs a line on short terminals): "0* " util " 100%" " " mem " 45/140G"
HALF_FIXED = 3 + 5 + 1 + 9
HALF_GAP = 3
MAX_SPARK = 150


def two_per_line(n_gpus: int, compact: bool) -> bool:
    return compact and n_gpus > 4


def gpu_lines(n_gpus: int, compact: bool) -> int:
    return (n_gpus + 1) // 2 if two_per_line(n_gpus, compact) else max(1, n_gpus)


def spark_cells(width: int, halves: bool) -> int:
    if halves:
        return max(4, min(MAX_SPARK, ((width - HALF_GAP) // 2 - HALF_FIXED) // 2))
    return max(6, min(MAX_SPARK, (width - FULL_FIXED) // 2))


def _mem_text(s: GpuSample, short: bool) -> str:
    if s.mem_used_mib is None or not s.mem_total_mib:
        return " ?G".rjust(9 if short else 11)
    used, total = s.mem_used_mib / 1024, s.mem_total_mib / 1024
    if short:
        return f" {used:.0f}/{total:.0f}G".ljust(9)
    return f" {used:5.1f}/{total:.0f}G".ljust(11)


def gpu_row(
    idx: int,
    s: GpuSample,
    util: Ring | None,
    mem: Ring | None,
    *,
    now: float,
    cells: int,
    span: float,
    held: bool,
    lost_for: float | None,
    short: bool = False,
) -> Text:
    """One GPU: index, util sparkline + %, memory sparkline + used/total,
    then (full rows) temperature and power."""
    t = Text(no_wrap=True, overflow="crop")
    t.append(f"{idx}{'*' if held else ' '} ".rjust(3), style="bold")
    if lost_for is not None:
        t.append(f"✖ no reading for {lost_for:.0f} s — GPU lost or nvidia-smi stuck", "bold red")
        return t
    u = series_buckets(util, now, span, cells) if util else [None] * cells
    t.append(spark(u, 100.0), style=UTIL_STYLE)
    t.append(f" {s.util_pct:3.0f}%" if s.util_pct is not None else "   ?%", style="bold")
    t.append(" ")
    total = s.mem_total_mib or 0.0
    m = series_buckets(mem, now, span, cells) if mem else [None] * cells
    t.append(spark(m, total) if total else " " * cells, style=MEM_STYLE)
    t.append(_mem_text(s, short), style="bold")
    if short:
        return t
    if s.temp_c is None:
        t.append("    ? ", style="dim")
    else:
        t.append(f" {s.temp_c:3.0f}°C", style="bold yellow" if s.temp_c >= HOT_C else "")
    if s.power_w is None:
        t.append("     ?", style="dim")
    elif s.power_limit_w:
        t.append(f" {s.power_w:.0f}/{s.power_limit_w:.0f} W".rjust(11))
    else:
        t.append(f" {s.power_w:.0f} W".rjust(11))
    return t


def lost_for(gpus: GpuState, s: GpuSample, newest: float, now: float) -> float | None:
    """Seconds a GPU's readings trail the others, when that means lost."""
    if newest - s.time > LOST_AFTER:
        return newest - s.time
    if gpus.lost and now - s.time > LOST_AFTER:
        return now - s.time
    return None


def gpu_rows(gpus: GpuState, width: int, now: float, compact: bool = False) -> list[Text]:
    if gpus.error and not gpus.latest:
        return [remote_text(f"GPUs: {gpus.error}", style="bold red")]
    if not gpus.latest:
        return [Text("waiting for the first GPU sample…", style="dim")]
    halves = two_per_line(len(gpus.latest), compact)
    cells = spark_cells(width, halves)
    span = pick_span(cells)
    held_by = {p.gpu_uuid for p in gpus.processes}
    newest = max(s.time for s in gpus.latest.values())
    rows = [
        gpu_row(
            i,
            s,
            gpus.util_history.get(i),
            gpus.mem_history.get(i),
            now=now,
            cells=cells,
            span=span,
            held=bool(s.uuid and s.uuid in held_by),
            lost_for=lost_for(gpus, s, newest, now),
            short=halves,
        )
        for i, s in sorted(gpus.latest.items())
    ]
    if not halves:
        return rows
    col = (width - HALF_GAP) // 2
    out = []
    for k in range(0, len(rows), 2):
        line = rows[k]
        if k + 1 < len(rows):
            line = line.copy()
            line.truncate(col, pad=True)
            line.append(" " * HALF_GAP)
            line.append_text(rows[k + 1])
        out.append(line)
    return out


def gpu_title(gpus: GpuState, window: str = "") -> Text:
    """'GPUs · 8× H200 · util % │ memory · last 7 m' (names are remote text: a `Text`)."""
    names = sorted({s.name.replace("NVIDIA ", "") for s in gpus.latest.values() if s.name})
    n = len(gpus.latest)
    t = Text("GPUs")
    if n:
        t.append(f" · {n}× {visible(' / '.join(names))}" if names else f" · {n}")
    if n and window:
        t.append(f" · util % │ memory · {window}")
    return t


def gpu_rows_key(gpus: GpuState, now: float, span: float) -> tuple[object, ...]:
    """What `gpu_rows` depends on: equal keys, equal rows."""
    held_by = {p.gpu_uuid for p in gpus.processes}
    rows = tuple(
        (i, s.time, s.mem_total_mib, bool(s.uuid and s.uuid in held_by))
        for i, s in sorted(gpus.latest.items())
    )
    return (gpus.error, gpus.lost, rows, int(now // span), len(gpus.events))


class GpuTable(TextLines):
    """Fixed height (set by the app from the number of GPUs): updates repaint, never reflow."""

    _key: tuple[object, ...] | None = None
    _shown: tuple[GpuState, float] | None = None
    compact = False  # two GPUs a line (short terminals)

    def on_resize(self) -> None:
        if self._shown is not None:  # rows, bucket width and window label follow the width
            self._key = None
            self.show(*self._shown)

    def show(self, gpus: GpuState, now: float) -> None:
        self._shown = (gpus, now)
        width = self.content_size.width or max(20, self.app.size.width - 4)
        cells = spark_cells(width, two_per_line(len(gpus.latest), self.compact))
        span = pick_span(cells)
        key = (*gpu_rows_key(gpus, now, span), self.compact, width)
        if key == self._key:
            return  # same samples, same bucket: nothing to draw
        self._key = key
        self.set_lines(gpu_rows(gpus, width, now, self.compact))
        events = [e.text for e in list(gpus.events)[-1:]]
        set_border_text(
            self,
            title=gpu_title(gpus, window_label(cells, span)),
            subtitle=Text(events[0][:60], style="bold red") if events else "",
        )
