"""GPU rows: each GPU's utilization and memory as a sparkline over the last
minutes (fixed scales: 0–100 %, 0–its memory), the current values, and its
temperature and power: plain `Text` lines drawn through the line API.

Colour means trouble: a GPU whose readings stopped (lost, or behind the
others) is red; a hot one is yellow; a busy one is not painted at all.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from typing import TYPE_CHECKING

from rich.text import Text

from gputui.diagnose.hardware import gpu_marks
from gputui.model import GpuSample, GpuState, Ring
from gputui.monitor import GpusRead, Update
from gputui.text.untrusted import remote_text, visible
from gputui.ui.trend import pick_span, series_spark, spark, window_label
from gputui.ui.widgets.lines import TextLines
from gputui.ui.widgets.pane import Frame, Pane, Tick
from gputui.ui.widgets.quiet import set_border_text

if TYPE_CHECKING:
    from gputui.diagnose import Holder

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


RowFacts = tuple[object, ...]  # what a GPU row shows, each part as drawn: equal facts, equal rows


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
    mark: tuple[str, bool] | None = None,
) -> Text:
    """One GPU: index, util sparkline + %, memory sparkline + used/total,
    then (full rows) temperature and power; then the hardware's mark
    (diagnose/hardware.py: "thermal", "ECC", "x8" — red only when broken)."""
    facts = row_facts(
        idx,
        s,
        util,
        mem,
        now=now,
        cells=cells,
        span=span,
        held=held,
        lost_for=lost_for,
        short=short,
        mark=mark,
    )
    return draw_row(facts)


def row_facts(
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
    mark: tuple[str, bool] | None = None,
) -> RowFacts:
    """The texts a GPU row is drawn from (draw_row): cheap to make and to
    compare, so a second whose row reads the same draws nothing."""
    head = f"{idx}{'*' if held else ' '} ".rjust(3)
    if lost_for is not None:
        return (head, f"✖ no reading for {lost_for:.0f} s — GPU lost or nvidia-smi stuck")
    u = series_spark(util, now, span, cells, 100.0) if util else spark([None] * cells, 100.0)
    total = s.mem_total_mib or 0.0
    if not total:
        m = " " * cells
    else:
        m = series_spark(mem, now, span, cells, total) if mem else spark([None] * cells, total)
    util_text = f" {s.util_pct:3.0f}%" if s.util_pct is not None else "   ?%"
    if short:
        return (head, u, util_text, m, _mem_text(s, short), None, None, mark)
    if s.temp_c is None:
        temp: tuple[str, str] = ("    ? ", "dim")
    else:
        temp = (f" {s.temp_c:3.0f}°C", "bold yellow" if s.temp_c >= HOT_C else "")
    if s.power_w is None:
        power: tuple[str, str] = ("     ?", "dim")
    elif s.power_limit_w:
        power = (f" {s.power_w:.0f}/{s.power_limit_w:.0f} W".rjust(11), "")
    else:
        power = (f" {s.power_w:.0f} W".rjust(11), "")
    return (head, u, util_text, m, _mem_text(s, short), temp, power, mark)


def draw_row(facts: RowFacts) -> Text:
    """A GPU row from its row_facts."""
    t = Text(no_wrap=True, overflow="crop")
    t.append(str(facts[0]), style="bold")
    if len(facts) == 2:  # lost
        t.append(str(facts[1]), "bold red")
        return t
    _head, u, util_text, m, mem_text, temp, power, mark = facts
    t.append(str(u), style=UTIL_STYLE)
    t.append(str(util_text), style="bold")
    t.append(" ")
    t.append(str(m), style=MEM_STYLE)
    t.append(str(mem_text), style="bold")
    for part in (temp, power):
        if isinstance(part, tuple):
            t.append(*part)
    return _with_mark(t, mark if isinstance(mark, tuple) else None)


def _with_mark(t: Text, mark: tuple[str, bool] | None) -> Text:
    if mark is not None:
        words, broken = mark
        t.append(f" ✖ {words}" if broken else f" ⚠ {words}", "bold red" if broken else "yellow")
    return t


def lost_for(gpus: GpuState, s: GpuSample, newest: float, now: float) -> float | None:
    """Seconds a GPU's readings trail the others, when that means lost."""
    if newest - s.time > LOST_AFTER:
        return newest - s.time
    if gpus.lost and now - s.time > LOST_AFTER:
        return now - s.time
    return None


def gpu_rows(gpus: GpuState, width: int, now: float, compact: bool = False) -> list[Text]:
    return draw_rows(gpu_facts(gpus, width, now, compact), width)


def gpu_facts(gpus: GpuState, width: int, now: float, compact: bool = False) -> tuple[object, ...]:
    """What the GPU rows show (draw_rows draws it): equal facts, equal rows.
    ("error", text), ("waiting",), or ("rows", two a line, each GPU's row_facts)."""
    if gpus.error and not gpus.latest:
        return ("error", gpus.error)
    if not gpus.latest:
        return ("waiting",)
    halves = two_per_line(len(gpus.latest), compact)
    cells = spark_cells(width, halves)
    span = pick_span(cells)
    held_by = {p.gpu_uuid for p in gpus.processes}
    newest = max(s.time for s in gpus.latest.values())
    marks = gpu_marks(gpus, now)
    rows = tuple(
        row_facts(
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
            mark=marks.get(i),
        )
        for i, s in sorted(gpus.latest.items())
    )
    return ("rows", halves, rows)


def draw_rows(facts: tuple[object, ...], width: int) -> list[Text]:
    """The GPU rows from gpu_facts."""
    if facts[0] == "error":
        return [remote_text(f"GPUs: {facts[1]}", style="bold red")]
    if facts[0] == "waiting":
        return [Text("waiting for the first GPU sample…", style="dim")]
    _, halves, each = facts
    rows = [draw_row(f) for f in each]  # type: ignore[attr-defined]
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


def _gib(mib: float | None, short: bool = False) -> str:
    unit = "G" if short else " GiB"
    return f"?{unit}" if mib is None else f"{mib / 1024:.1f}{unit}"


OTHER_USER_STYLE = "bold magenta"  # a holder of another uid than the run's (issue 45)

Part = list[tuple[str, str]]  # a holder's words, each piece with its style


def _user_part(h: Holder, style: str) -> Part:
    """' alice' after the PID, as nvitop's USER column: another user's than
    the run's marked apart; nothing when the owner is not known."""
    who = h.user_words
    if not who:
        return []
    return [(" ", style), (visible(who), OTHER_USER_STYLE if h.other_user else style)]


def _holder_part(h: Holder, short: bool) -> Part:
    """One holder of a GPU in words: 'session eval (PID 491 alice, 5.1 GiB)'."""
    size = _gib(h.gp.used_mib, short)
    if h.kind == "orphan":
        what = "zombie" if h.gp.state == "Z" else "no live owner"
        style = "bold red" if h.leftover else "yellow"
        return [(f"PID {h.pid}", style), *_user_part(h, style), (f" ({size}, {what})", style)]
    style = "yellow" if h.live_other else ""
    head = f"{visible(h.owner)} (PID {h.pid}"
    return [(head, style), *_user_part(h, style), (f", {size})", style)]


def holders_text(idx: int, mine: Sequence[Holder], short: bool = False) -> Text:
    """'0 held by this run (12.1 GiB) · session eval (PID 491 alice, 5.1 GiB)';
    short (two GPUs a line): '0 also session eval (PID 491 alice, 5.1G)'."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{idx} ", style="bold")
    parts: list[Part] = []
    run = [h for h in mine if h.kind == "run"]
    t.append("also " if run and short else "held by ", style="dim")
    if run and not short:
        parts.append([(f"this run ({_gib(sum(h.gp.used_mib or 0.0 for h in run))})", "")])
    parts += [_holder_part(h, short) for h in mine if h.kind != "run"]
    for k, part in enumerate(parts):
        if k:
            t.append(" · ", style="dim")
        for words, style in part:
            t.append(words, style=style)
    return t


def holder_lines(gpus: GpuState, holders: Sequence[Holder], compact: bool) -> list[Text]:
    """A line for each GPU held by anything but the watched run (it is shared,
    or someone else's): who holds what. Compact (two GPUs a line): all of
    them in one line, the run's own share left to the GPU row."""
    lines = []
    for i, s in sorted(gpus.latest.items()):
        mine = [h for h in holders if s.uuid and h.gp.gpu_uuid == s.uuid]
        if any(h.kind != "run" for h in mine):
            lines.append(holders_text(i, mine, short=two_per_line(len(gpus.latest), compact)))
    if len(lines) < 2 or not two_per_line(len(gpus.latest), compact):
        return lines
    one = Text(no_wrap=True, overflow="ellipsis")
    for k, line in enumerate(lines):
        if k:
            one.append(" │ ", style="dim")
        one.append_text(line)
    return [one]


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


class GpuTable(Pane, TextLines):
    """Fixed height (set in `draw` from the number of GPUs): updates repaint, never reflow."""

    ID = "gpus"
    BORDER_TITLE = "GPUs"
    DRAWN_ON = frozenset({GpusRead, Tick})  # Tick: the time buckets; a GPU whose readings stopped

    _key: tuple[object, ...] | None = None
    _shown: tuple[GpuState, float, Sequence[Holder]] | None = None
    compact = False  # two GPUs a line (short terminals)
    line_count = 1  # rows drawn: the GPUs' lines and who holds a shared GPU

    def on_resize(self) -> None:
        if self._shown is not None:  # rows, bucket width and window label follow the width
            self._key = None
            self.show(*self._shown)

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        gpus = frame.snap.gpus
        self.show(gpus, frame.now, frame.holders)
        # the table's height: its rows (GPUs, then who holds a shared one),
        # set only when it changes, so a redraw repaints and never reflows
        height = max(gpu_lines(len(gpus.latest), self.compact), self.line_count) + 2
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height

    def show(self, gpus: GpuState, now: float, holders: Sequence[Holder] = ()) -> None:
        self._shown = (gpus, now, holders)
        width = self.content_size.width or max(20, self.app.size.width - 4)
        cells = spark_cells(width, two_per_line(len(gpus.latest), self.compact))
        span = pick_span(cells)
        held = holder_lines(gpus, holders, self.compact)
        facts = gpu_facts(gpus, width, now, self.compact)
        events = [e.text for e in list(gpus.events)[-1:]]
        names = tuple(sorted({s.name for s in gpus.latest.values() if s.name}))
        key = (facts, width, tuple(h.markup for h in held), names, tuple(events), cells, span)
        if key == self._key:
            return  # every row reads as it does: nothing to draw (a new sample, the same texts)
        self._key = key
        rows = draw_rows(facts, width) + held
        self.line_count = len(rows)
        self.set_lines(rows)
        set_border_text(
            self,
            title=gpu_title(gpus, window_label(cells, span)),
            subtitle=Text(events[0][:60], style="bold red") if events else "",
        )
