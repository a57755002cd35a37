"""`g`: big GPU graphs — utilization and memory of every GPU over the kept
history, one plotext chart per metric, a coloured line and a legend entry
per GPU. Only drawn while open, at most once a second (a plotext render
costs 10–40 ms), so the main screen pays nothing for it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer
from textual_plotext import PlotextPlot

from gputui.model import GpuState

# distinct plotext colours, one per GPU (wraps past 8)
COLOURS = ("green", "cyan", "magenta", "yellow", "blue", "red", "white", "orange")


def minutes_ago(points: list[tuple[float, float | None]], now: float) -> list[tuple[float, float]]:
    """(minutes before now, value) for the known readings; gaps stay gaps."""
    return [(-(now - t) / 60.0, v) for t, v in points if v is not None]


class GpuChart(PlotextPlot):
    """One metric, a line per GPU, fixed y range."""

    def __init__(self, title: str, unit: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._title = title
        self._unit = unit
        self._lines: dict[int, list[tuple[float, float]]] = {}
        self._ymax = 100.0

    def show(self, lines: dict[int, list[tuple[float, float]]], ymax: float) -> None:
        if lines == self._lines and ymax == self._ymax:
            return
        self._lines = lines
        self._ymax = ymax if ymax > 0 else 100.0
        self.refresh()

    def render(self):  # type: ignore[no-untyped-def]
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self._title)
        plt.xlabel("minutes ago")
        plt.ylim(0, self._ymax)
        plt.yticks(
            [0, self._ymax / 2, self._ymax],
            [
                f"0 {self._unit}",
                f"{self._ymax / 2:.0f} {self._unit}",
                f"{self._ymax:.0f} {self._unit}",
            ],
        )
        for i, pts in sorted(self._lines.items()):
            if pts:
                plt.plot(
                    [x for x, _ in pts],
                    [y for _, y in pts],
                    marker="braille",
                    color=COLOURS[i % len(COLOURS)],
                    label=f"GPU {i}",
                )
        return super().render()


class GpuGraphsScreen(Screen[None]):
    BINDINGS = [  # noqa: RUF012
        Binding("escape,g,q", "dismiss", "back", key_display="esc"),
    ]

    def compose(self) -> ComposeResult:
        with Vertical(id="zoom"):
            yield GpuChart("utilization, every GPU", "%", id="zoom-util")
            yield GpuChart("memory used, every GPU", "GiB", id="zoom-mem")
        yield Footer()

    def show(self, gpus: GpuState, now: float) -> None:
        util = {i: minutes_ago(r.points(), now) for i, r in gpus.util_history.items()}
        mem = {
            i: [(x, v / 1024) for x, v in minutes_ago(r.points(), now)]
            for i, r in gpus.mem_history.items()
        }
        totals = [s.mem_total_mib for s in gpus.latest.values() if s.mem_total_mib]
        self.query_one("#zoom-util", GpuChart).show(util, 100.0)
        self.query_one("#zoom-mem", GpuChart).show(mem, max(totals) / 1024 if totals else 0.0)
