"""GPU rows (one Static rendered with a Rich table) and two history graphs."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text
from textual.widgets import Static
from textual_plotext import PlotextPlot

from gputui.model import GpuState
from gputui.ui.format import bar

HISTORY_POINTS = 120  # the graphs show the last two minutes at 1 Hz


def _level_style(frac: float | None) -> str:
    if frac is None:
        return "dim"
    return "red" if frac > 0.9 else "yellow" if frac > 0.6 else "green"


def bar_text(frac: float | None, width: int) -> Text:
    """Filled part coloured by level, the rest a dim track."""
    filled = bar(frac, width).rstrip() if frac is not None else ""
    t = Text(filled, style=_level_style(frac))
    t.append("░" * (width - len(filled)), style="dim")
    return t


def gpu_table(gpus: GpuState, width: int) -> Table | Text:
    if gpus.error and not gpus.latest:
        return Text(f"GPUs: {gpus.error}", style="bold red")
    if not gpus.latest:
        return Text("waiting for the first GPU sample…", style="dim")
    # the fixed columns take ~44 cells (#, "90.0/140G", util, temp, power, padding)
    bar_w = max(6, min(30, width - 44))
    table = Table(box=None, pad_edge=False, expand=False, show_edge=False, padding=(0, 1))
    table.add_column("#", justify="right", style="bold", no_wrap=True)
    table.add_column("memory", no_wrap=True)
    table.add_column("util", no_wrap=True, justify="right")
    table.add_column("temp", justify="right", no_wrap=True)
    table.add_column("power", justify="right", no_wrap=True)
    held_by = {p.gpu_uuid for p in gpus.processes}
    for idx in sorted(gpus.latest):
        s = gpus.latest[idx]
        mf = s.mem_frac
        mem = bar_text(mf, bar_w)
        if s.mem_used_mib is not None and s.mem_total_mib:
            mem.append(f" {s.mem_used_mib / 1024:5.1f}/{s.mem_total_mib / 1024:.0f}G")
        else:
            mem.append("  ? G", style="dim")
        uf = None if s.util_pct is None else s.util_pct / 100
        util = bar_text(uf, 5)
        util.append(f" {s.util_pct:3.0f}%" if s.util_pct is not None else "   ?%")
        temp = f"{s.temp_c:.0f}°C" if s.temp_c is not None else "?"
        if s.power_w is None:
            power = "?"
        elif s.power_limit_w:
            power = f"{s.power_w:.0f}/{s.power_limit_w:.0f} W"
        else:
            power = f"{s.power_w:.0f} W"
        mark = "*" if s.uuid and s.uuid in held_by else " "
        table.add_row(f"{idx}{mark}", mem, util, temp, power)
    return table


class GpuRows:
    """Renders `gpu_table` at whatever width the widget has (resizes for free)."""

    def __init__(self, gpus: GpuState) -> None:
        self.gpus = gpus

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield gpu_table(self.gpus, options.max_width)


def gpu_title(gpus: GpuState) -> str:
    names = sorted({s.name.replace("NVIDIA ", "") for s in gpus.latest.values() if s.name})
    n = len(gpus.latest)
    if not n:
        return "GPUs"
    return f"GPUs · {n}× {' / '.join(names)}" if names else f"GPUs · {n}"


def gpu_rows_key(gpus: GpuState) -> tuple[object, ...]:
    """Everything `gpu_table` shows: equal keys, equal tables."""
    held_by = {p.gpu_uuid for p in gpus.processes}
    rows = tuple(
        (
            i,
            s.mem_used_mib,
            s.mem_total_mib,
            s.util_pct,
            s.temp_c,
            s.power_w,
            s.power_limit_w,
            bool(s.uuid and s.uuid in held_by),
        )
        for i, s in sorted(gpus.latest.items())
    )
    return (gpus.error, rows)


class GpuTable(Static):
    _key: tuple[object, ...] | None = None

    def show(self, gpus: GpuState) -> None:
        key = gpu_rows_key(gpus)
        if key != self._key:
            self._key = key
            # the box has a fixed height (#top in app.tcss): repaint, no reflow
            self.update(GpuRows(gpus), layout=False)
        self.border_title = gpu_title(gpus)
        events = [e.text for e in list(gpus.events)[-1:]]
        self.border_subtitle = events[0][:60] if events else ""


class HistoryPlot(PlotextPlot):
    """One graph: a line per GPU, fixed y range, redrawn at most once a second."""

    def __init__(self, title: str, unit: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._title = title
        self._unit = unit
        self._series: dict[int, list[float | None]] = {}
        self._ymax = 100.0

    def show(self, series: dict[int, list[float | None]], ymax: float) -> None:
        # unknown readings ([N/A]) stay gaps in the line, never a drop to 0
        new = {i: list(vals[-HISTORY_POINTS:]) for i, vals in series.items()}
        ymax = ymax if ymax > 0 else 100.0
        if new == self._series and ymax == self._ymax:
            return  # a plotext render costs 5-10 ms: only when the data moved
        self._series = new
        self._ymax = ymax
        self.refresh()

    def render(self):  # type: ignore[no-untyped-def]
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self._title)
        plt.frame(False)
        plt.ylim(0, self._ymax)
        plt.xlim(0, HISTORY_POINTS)
        plt.xticks([])
        plt.yticks(
            [0, self._ymax / 2, self._ymax],
            ["0", f"{self._ymax / 2:.0f}", f"{self._ymax:.0f}{self._unit}"],
        )
        for _i, vals in sorted(self._series.items()):
            offset = HISTORY_POINTS - len(vals)
            known = [(offset + k, v) for k, v in enumerate(vals) if v is not None]
            if known:
                plt.plot([x for x, _ in known], [y for _, y in known], marker="braille")
        return super().render()


def util_series(gpus: GpuState) -> dict[int, list[float | None]]:
    return {i: r.values() for i, r in gpus.util_history.items()}


def mem_series_gib(gpus: GpuState) -> tuple[dict[int, list[float | None]], float]:
    totals = [s.mem_total_mib for s in gpus.latest.values() if s.mem_total_mib]
    ymax = max(totals) / 1024 if totals else 0.0
    series = {
        i: [None if v is None else v / 1024 for v in r.values()]
        for i, r in gpus.mem_history.items()
    }
    return series, ymax
