"""`g`: every GPU over the kept history, as GPU × time heatmaps —
utilization, memory and power side by side, a labelled row per GPU on a
scale shared by all, a clock-time axis (gputui.ui.heatmap). Only drawn while
open, at most once a second, as one text block (no plotting library)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from gputui.diagnose.hardware import gpu_issues, health_summary
from gputui.model import GpuState
from gputui.text.untrusted import visible
from gputui.ui.heatmap import Panel, heatmap


def _pct(v: float | None) -> str:
    return "   –" if v is None else f"{v:3.0f}%"


def _gib(v: float | None) -> str:
    return "    –" if v is None else f"{v:5.1f}"


def _watts(v: float | None) -> str:
    return "    –" if v is None else f"{v:4.0f}W"


def panels(gpus: GpuState) -> list[Panel]:
    """Utilization, memory (GiB) and power (W) of every GPU, shared scales."""
    mem_top = max((s.mem_total_mib or 0.0 for s in gpus.latest.values()), default=0.0) / 1024
    power_top = max((s.power_limit_w or 0.0 for s in gpus.latest.values()), default=0.0)
    power = {i: r.points() for i, r in getattr(gpus, "power_history", {}).items()}
    if not power_top:  # no limit read: the largest draw seen
        power_top = max((v or 0.0 for pts in power.values() for _, v in pts), default=0.0)
    return [
        Panel("utilization %", {i: r.points() for i, r in gpus.util_history.items()}, 100.0, _pct),
        Panel(
            f"memory GiB (of {mem_top:.0f})" if mem_top else "memory GiB",
            {
                i: [(t, None if v is None else v / 1024) for t, v in r.points()]
                for i, r in gpus.mem_history.items()
            },
            mem_top,
            _gib,
        ),
        Panel(
            f"power W (of {power_top:.0f})" if power_top else "power W", power, power_top, _watts
        ),
    ]


def health_text(gpus: GpuState, now: float) -> Text:
    """The hardware's own words under the heatmaps: each GPU's health fields
    as read, then what is wrong (red: broken, yellow: worth a look)."""
    t = Text()
    read = gpus.health or any(s.event_reasons is not None for s in gpus.latest.values())
    if not read and not gpus.kernel_log:
        return t  # nothing read (simulated GPUs, an old driver): no block of dashes
    t.append("\nhealth (clocks and their reasons, PCIe link, ECC, row remap)\n", style="bold")
    for i in sorted(gpus.latest):
        t.append(health_summary(gpus, i) + "\n")
    for x in gpu_issues(gpus, now):
        t.append(("✖ " if x.broken else "⚠ ") + x.line + "\n", "bold red" if x.broken else "yellow")
    if gpus.kernel_log:
        t.append(visible(gpus.kernel_log) + "\n", style="dim")  # it may quote the host's text
    return t


class GpuHeatmap(Widget):
    """The heatmaps, redrawn at the widget's width."""

    DEFAULT_CSS = "GpuHeatmap { height: auto; padding: 0 1; }"

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._panels: list[Panel] = []
        self._now = 0.0
        self._health = Text()

    def show(self, gpus: GpuState, now: float) -> None:
        self._panels, self._now = panels(gpus), now
        self._health = health_text(gpus, now)
        self.refresh(layout=True)

    def render(self) -> Text:
        if not any(p.series for p in self._panels):
            return Text("no GPU readings yet", style="dim")
        out = heatmap(self._panels, self._now, self.content_region.width or 80)
        return Text("\n").join([out, self._health]) if self._health else out


class GpuGraphsScreen(Screen[None]):
    BINDINGS = [  # noqa: RUF012
        Binding("escape,g,q", "dismiss", "back", key_display="esc"),
    ]
    DEFAULT_CSS = "GpuGraphsScreen #zoom-head { height: 1; background: $boost; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        yield Static(
            Text("GPUs over the kept history · a row per GPU, now at the right", style="bold"),
            id="zoom-head",
        )
        yield GpuHeatmap(id="zoom")
        yield Footer()

    def show(self, gpus: GpuState, now: float) -> None:
        self.query_one(GpuHeatmap).show(gpus, now)
