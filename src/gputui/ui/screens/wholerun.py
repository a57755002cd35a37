"""The whole-run view (key h): the history database drawn.

Loss and throughput over the whole current run (the log read from its start
into the history, point by point), GPU utilization and memory per GPU over
the last hour, day or the whole run (keys 1 / 2 / 3), findings and actions
marked on the GPU time axis and listed below. The data is read in a thread
(a reader connection of its own) every RELOAD_S; plotext draws four figures
at most once per load.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from gputui.diagnose.compare import summary
from gputui.errors import GputuiError
from gputui.model import Metrics, VsLast
from gputui.record.history import find_last_run
from gputui.record.query import EventOut, HistoryReader, MetricRow
from gputui.text.untrusted import visible
from gputui.ui.heatmap import Panel, heatmap

RANGES: dict[str, float | None] = {"1 h": 3600.0, "24 h": 86400.0, "run": None}
RELOAD_S = 10.0
EVENT_LINES = 6
GPU_POINTS = 360  # per GPU over the chosen range
RUN_LEAD_S = 180.0  # the "run" range's events start this long before its first point


@dataclass
class WholeRun:
    """What one load read from the database."""

    now: float
    since: float
    metrics: list[MetricRow] = field(default_factory=list)
    unit: str = ""
    util: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    mem_gib: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    mem_max_gib: float = 0.0
    events: list[EventOut] = field(default_factory=list)
    error: str = ""
    # the last run of the same program (issue 49): its points, overlaid
    last_id: int | None = None
    last: list[MetricRow] = field(default_factory=list)


def gpu_bucket_s(span: float) -> int:
    """Seconds per GPU point: 1 s up to an hour, else whole minutes giving
    about GPU_POINTS points (a chart is a few hundred braille dots wide)."""
    if span <= 3600:
        return 1
    return max(60, -(-int(span) // GPU_POINTS) // 60 * 60)


def load(path: Path, target: str, span: float | None, now: float) -> WholeRun:
    """Read the charts' data (runs in a worker thread)."""
    try:
        r = HistoryReader(path)
    except GputuiError as err:
        return WholeRun(now, now, error=str(err))
    try:
        try:
            run_id = r.latest_run(target)
        except GputuiError as err:
            return WholeRun(now, now, error=str(err))
        metrics = r.run_chart(run_id) if run_id is not None else []
        run_start = min((m.t for m in metrics), default=run_first_seen(r, run_id, now))
        since = now - span if span is not None else run_start
        step_s = gpu_bucket_s(now - since)
        out = WholeRun(now, since, metrics, r.throughput_unit(target))
        if run_id is not None:
            out.last_id = find_last_run(r.conn, run_id)[0]
            out.last = r.run_chart(out.last_id) if out.last_id is not None else []
        for p in r.gpu(target, since, now + 1, step_s=step_s):
            if p.util is not None:
                out.util.setdefault(p.gpu, []).append((p.t, p.util))
            if p.mem_used is not None:
                out.mem_gib.setdefault(p.gpu, []).append((p.t, p.mem_used / 1024))
            if p.mem_total:
                out.mem_max_gib = max(out.mem_max_gib, p.mem_total / 1024)
        # "run": what began it too — the relaunch and the old run's exit come
        # seconds before its first line ('no findings, actions or exits in this
        # range' a minute after a relaunch, issue 46)
        first = since - RUN_LEAD_S if span is None else since
        out.events = [e for e in r.events(target, first, now + 1) if e.kind != "connection"]
        return out
    finally:
        r.close()


def run_first_seen(r: HistoryReader, run_id: int | None, now: float) -> float:
    """When the run was first seen (the axis starts there: a 1-minute run
    gets a 1-minute axis); an hour back when there is no run yet."""
    first = r.run_first_seen(run_id) if run_id is not None else None
    return first if first is not None else now - 3600.0


def int_ticks(lo: float, hi: float, n: int = 5) -> list[int]:
    """About n whole-number ticks from lo to hi on a 1-2-5 grid (steps are
    whole: no 5123.8)."""
    lo_i, hi_i = math.floor(lo), math.ceil(hi)
    if hi_i <= lo_i:
        return [lo_i]
    raw = (hi_i - lo_i) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), 10 * mag)
    step = max(1, int(step))
    first = -(-lo_i // step) * step
    return list(range(first, hi_i + 1, step)) or [lo_i]


def rows_from_metrics(metrics: Metrics) -> list[MetricRow]:
    """The monitor's parsed points (loss, throughput and step rings, joined
    by their time) as history rows, oldest first."""
    steps = dict(metrics.step.points())
    thr = dict(metrics.throughput.points())
    loss = dict(metrics.loss.points())
    out = []
    for t in sorted(set(loss) | set(thr)):
        step = steps.get(t)
        out.append(
            MetricRow(t, 0, 0, None if step is None else int(step), loss.get(t), thr.get(t), None)
        )
    return out


def merge_recent(stored: list[MetricRow], recent: list[MetricRow]) -> list[MetricRow]:
    """The stored points, then the live ones newer than the last stored (the
    history reads the log once a minute: a young run has none stored yet).
    Newer by step where both have one (the two stamp a line at different
    moments), else by time."""
    if not stored:
        return list(recent)
    last = stored[-1]
    if last.step is not None:
        return stored + [m for m in recent if m.step is not None and m.step > last.step]
    return stored + [m for m in recent if m.t > max(m.t for m in stored)]


class Chart(PlotextPlot):
    """One plotext figure drawn from the last load."""

    def __init__(self, title: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.title = title
        self.data: WholeRun | None = None

    def show(self, data: WholeRun) -> None:
        self.data = data
        self.refresh()

    def render(self):  # type: ignore[no-untyped-def]
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.frame(False)
        plt.title(self.title)
        if self.data is not None:
            self.draw(self.data)
        return super().render()

    def draw(self, data: WholeRun) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class MetricChart(Chart):
    """Loss or throughput against the step (or the line's order when the
    step counter restarted inside the run)."""

    def __init__(self, title: str, which: str, **kw: object) -> None:
        super().__init__(title, **kw)
        self.which = which

    def render(self):  # type: ignore[no-untyped-def]
        """No point yet: say so in words, not an empty frame that reads as a
        chart of nothing."""
        if self.data is not None and not self.rows(self.data):
            return Text.assemble(
                (self.heading(self.data), "bold"),
                "\n\n",
                (f"no data yet: no {self.title} value read from the log so far", "dim"),
                justify="center",
            )
        return super().render()

    def rows(self, data: WholeRun) -> list[MetricRow]:
        return [m for m in data.metrics if getattr(m, self.which) is not None]

    def heading(self, data: WholeRun) -> str:
        return (
            f"{self.title} ({data.unit})"
            if self.which == "throughput" and data.unit
            else self.title
        )

    def draw(self, data: WholeRun) -> None:
        plt = self.plt
        rows = self.rows(data)
        plt.title(self.heading(data))
        steps = [m.step for m in rows]
        known = [s for s in steps if s is not None]
        by_step = len(known) == len(steps) and all(a <= b for a, b in pairwise(known))
        xs = [float(s) for s in known] if by_step else [float(i) for i in range(len(rows))]
        ys = [float(getattr(m, self.which)) for m in rows]
        last = overlay(data, self.which, max(xs)) if by_step else ([], [])
        if last[0]:  # the last run's curve under this one's, at the same steps
            plt.plot(*last, marker="braille", color="gray", label=f"last run {data.last_id}")
            xs_all = xs + last[0]
        else:
            xs_all = xs
        marker = "braille" if len(xs) > 1 else "●"
        if last[0]:
            plt.plot(xs, ys, marker=marker, label="this run")
        else:
            plt.plot(xs, ys, marker=marker)
        ticks = int_ticks(min(xs_all), max(xs_all))
        plt.xticks([float(t) for t in ticks], [f"{t:,}" for t in ticks])
        if len(set(xs_all)) == 1:
            plt.xlim(xs[0] - 1, xs[0] + 1)
        plt.xlabel("step" if by_step else "point")


def overlay(data: WholeRun, which: str, top: float) -> tuple[list[float], list[float]]:
    """The last run's points of `which` by step, up to 1.5 × this run's last
    step (so this run's curve keeps most of the width)."""
    xs, ys = [], []
    for m in data.last:
        v = getattr(m, which)
        if m.step is not None and v is not None and m.step <= max(top * 1.5, top + 10):
            xs.append(float(m.step))
            ys.append(float(v))
    if any(b < a for a, b in pairwise(xs)):  # its counter restarted: no steps to match
        return [], []
    return xs, ys


def _pct(v: float | None) -> str:
    return "   –" if v is None else f"{v:3.0f}%"


def _gib(v: float | None) -> str:
    return "    –" if v is None else f"{v:5.1f}"


def gpu_text(data: WholeRun, width: int) -> Text:
    """Utilization and memory of every GPU over the range: a labelled row
    per GPU, a clock-time axis that fits the range, events as ▲ marks."""
    if not data.util and not data.mem_gib:
        return Text("no GPU readings stored in this range", style="dim")
    top = data.mem_max_gib
    panels = [
        Panel("GPU utilization %", data.util, 100.0, _pct),
        Panel(
            f"GPU memory GiB (of {top:.0f})" if top else "GPU memory GiB", data.mem_gib, top, _gib
        ),
    ]
    marks = [(e.t, "red" if is_trouble(e) else "blue") for e in data.events]
    return heatmap(panels, data.now, width, window=data.now - data.since, marks=marks)


class GpuHeat(Static):
    """The GPU heatmaps from the last load, drawn at the widget's width."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.data: WholeRun | None = None

    def show(self, data: WholeRun) -> None:
        self.data = data
        self.refresh(layout=True)

    def render(self) -> Text:
        if self.data is None:
            return Text("")
        return gpu_text(self.data, self.content_region.width or 80)


def is_trouble(e: EventOut) -> bool:
    """An incident opening or getting worse (or, in older files, a finding appearing)."""
    return (e.kind, e.state) in (("incident", "open"), ("incident", "worse"), ("finding", "appear"))


def event_lines(events: list[EventOut], n: int = EVENT_LINES) -> Text:
    """The newest events, as plain text (remote strings are data, never markup)."""
    out = Text()
    for e in events[-n:]:
        stamp = time.strftime("%H:%M:%S", time.localtime(e.t))
        style = "red" if is_trouble(e) else "blue"
        out.append(f"{stamp} ", style="dim")
        out.append(visible(f"{e.kind} {e.name} {e.state}")[:60], style=style)
        out.append(f"  {visible(e.title)[:120]}\n")
    if not events:
        out.append("no findings, actions or exits recorded in this range", style="dim")
    return out


class WholeRunScreen(Screen[None]):
    """See the module docstring. esc goes back to the dashboard."""

    DEFAULT_CSS = """
    WholeRunScreen { layout: vertical; }
    WholeRunScreen #wr-head { height: 1; background: $boost; padding: 0 1; }
    WholeRunScreen #wr-vs { height: auto; max-height: 2; padding: 0 1; display: none; }
    WholeRunScreen #wr-vs.-shown { display: block; }
    WholeRunScreen Grid { grid-size: 2 1; height: 1fr; min-height: 6; }
    WholeRunScreen Chart { height: 100%; }
    WholeRunScreen GpuHeat { height: auto; padding: 0 1; }
    WholeRunScreen #wr-events { height: auto; max-height: 4; padding: 0 1; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("escape", "close", "back", id="history_back"),
        Binding("h", "close", "back", show=False),
        Binding("1", "range('1 h')", "1 h", id="history_1h"),
        Binding("2", "range('24 h')", "24 h", id="history_24h"),
        Binding("3", "range('run')", "run", id="history_run"),
    ]

    def __init__(
        self,
        path: Path,
        target: str,
        *,
        live: bool = True,
        clock: Callable[[], float] = time.time,
        read_log_soon: Callable[[], None] | None = None,
        recent: Callable[[], list[MetricRow]] | None = None,
        vs_last: Callable[[], VsLast | None] | None = None,
    ) -> None:
        """`read_log_soon`: asks the recorder to read the log's new lines into
        the history at its next tick (it otherwise reads once a minute), so
        the view is at most one reload behind the log."""
        super().__init__()
        self.recent = recent  # the monitor's parsed points: drawn before the history has them
        self.vs_last = vs_last  # the run against its last one (the recorder's), in words
        self.path = path
        self.read_log_soon = read_log_soon
        self.target = target
        self.clock = clock
        self.range = "run"
        self.live = live
        self.loads = 0

    def compose(self) -> ComposeResult:
        yield Static(id="wr-head")
        yield Static(id="wr-vs")
        with Grid():
            yield MetricChart("loss", "loss", id="wr-loss")
            yield MetricChart("throughput", "throughput", id="wr-thr")
        yield GpuHeat(id="wr-gpus")
        with Vertical(id="wr-events"):
            yield Static(id="wr-event-list")
        yield Footer()

    def on_mount(self) -> None:
        self._head("loading…")
        self.reload()
        if self.live:
            self.set_interval(RELOAD_S, self.reload)

    def _head(self, note: str) -> None:
        t = Text()
        t.append("whole run · ", style="bold")
        t.append(visible(self.target)[:80])
        t.append(f" · GPUs over {self.range} · {note}", style="dim")
        self.query_one("#wr-head", Static).update(t)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_range(self, name: str) -> None:
        self.range = name
        self.reload()

    @work(thread=True, exclusive=True, group="whole-run", exit_on_error=False)
    def reload(self) -> None:
        if self.read_log_soon is not None:
            self.read_log_soon()  # for the next reload: this one draws what is stored
        data = load(self.path, self.target, RANGES[self.range], self.clock())
        if self.recent is not None:
            data.metrics = merge_recent(data.metrics, self.app.call_from_thread(self.recent))
        self.app.call_from_thread(self.show, data)

    def show(self, data: WholeRun) -> None:
        self.loads += 1
        if data.error:
            self._head(data.error)
        else:
            n = len(data.metrics)
            self._head(f"{n} metric point{'s' if n != 1 else ''} drawn · 1/2/3 range · esc back")
        for chart in self.query(Chart):
            chart.show(data)
        self.query_one(GpuHeat).show(data)
        self.query_one("#wr-event-list", Static).update(event_lines(data.events))
        vs = self.vs_last() if self.vs_last is not None else None
        line = self.query_one("#wr-vs", Static)
        line.set_class(vs is not None, "-shown")
        if vs is not None:
            line.update(Text(visible(summary(vs)), style="bold" if vs.verdict else "dim"))
