"""The watched run: its training process (pid, state, CPU, RSS, stdout route,
buffering verdict) and its metrics as sparklines with current value and median."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Sparkline

from gputui.model import Metrics, Proc, Ring, Snapshot
from gputui.ui.format import buffering_verdict, human_bytes, median, number, stdout_route
from gputui.ui.widgets.quiet import QuietStatic

SPARK_POINTS = 120


def proc_text(snap: Snapshot) -> Text:
    p: Proc | None = snap.training_proc
    t = Text(no_wrap=True, overflow="ellipsis")
    if p is None:
        if snap.session is None:
            t.append("no session watched — pick one in the sessions list", style="dim")
        elif not snap.session.alive:
            t.append(f"session {snap.session.name} is dead: no process", style="bold red")
        else:
            t.append(f"no Python process under session {snap.session.name}", style="dim")
        return t
    state_style = "bold red" if p.state in ("Z", "T", "D") else ""
    t.append(f"pid {p.pid}", style="bold")
    t.append("  ")
    t.append(p.state or "?", style=state_style)
    t.append(f"  CPU {number(p.cpu_pct)}%  RSS {human_bytes(p.rss_bytes)}  ")
    t.append(" ".join(p.cmdline) or "?", style="dim")
    t.append(f"\nstdout → {stdout_route(p)}")
    style, verdict = buffering_verdict(p)
    t.append("\n")
    t.append(verdict, style=style)
    return t


def _values(ring: Ring) -> list[float]:
    return [v for v in ring.values()[-SPARK_POINTS:] if v is not None]


def metric_text(ring: Ring, digits: int = 0) -> Text:
    vals = ring.values()
    cur, med = ring.last(), median(vals[-SPARK_POINTS:])
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(number(cur, digits), style="bold")
    if med is not None:
        t.append(f"  med {number(med, digits)}", style="dim")
    return t


class MetricRow(Horizontal):
    def __init__(self, name: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._metric = name
        self._last: list[float] = []

    def compose(self) -> ComposeResult:
        yield QuietStatic(self._metric, classes="metric-name")
        yield Sparkline([], summary_function=max)
        yield QuietStatic(classes="metric-value")

    def show(self, values: list[float], text: Text, name: str | None = None) -> None:
        if values != self._last:
            self._last = values
            self.query_one(Sparkline).data = values  # a new list repaints it
        # one row high, fixed widths (app.tcss): repaint only, and only on change
        self.query_one(".metric-value", QuietStatic).show_text(text)
        if name is not None:
            self.query_one(".metric-name", QuietStatic).show_text(name)


class RunPanel(Vertical):
    def compose(self) -> ComposeResult:
        yield QuietStatic(id="proc")
        yield MetricRow("tok/s", id="m-throughput")
        yield MetricRow("loss", id="m-loss")
        yield MetricRow("step", id="m-step")

    def show_proc(self, snap: Snapshot) -> None:
        # three rows high (app.tcss): repaint only, and only on change
        self.query_one("#proc", QuietStatic).show_text(proc_text(snap))

    def show_metrics(self, m: Metrics) -> None:
        row = self.query_one("#m-throughput", MetricRow)
        row.show(_values(m.throughput), metric_text(m.throughput), m.throughput_unit or "tok/s")
        self.query_one("#m-loss", MetricRow).show(_values(m.loss), metric_text(m.loss, digits=3))
        intervals = list(m.step_intervals)[-SPARK_POINTS:]
        step = Text(no_wrap=True, overflow="ellipsis")
        step.append(number(m.last_step), style="bold")
        med = m.median_step_interval
        if med:  # None, or 0 when every step so far arrived in one write
            step.append(f"  {med:.2f} s/step (median)", style="dim")
        self.query_one("#m-step", MetricRow).show(intervals, step)
        self.border_subtitle = f"parser: {m.preset}" if m.preset else ""
