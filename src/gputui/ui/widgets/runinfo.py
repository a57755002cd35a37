"""The watched run: its training process (pid, state, CPU, RSS, stdout route,
buffering verdict) and its metrics as sparklines on a stable scale with the
current value, the trend and the median."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence, Set
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from gputui.diagnose.compare import headline, pct_words
from gputui.model import Metrics, Proc, Ring, Snapshot, Versus, VsLast
from gputui.monitor import GpusRead, ProcsChanged, SessionsChanged, Update
from gputui.text.untrusted import visible
from gputui.ui.format import (
    buffering_verdict,
    human_bytes,
    median,
    nothing_to_watch,
    number,
    stdout_route,
)
from gputui.ui.trend import (
    TimeRing,
    pick_span,
    robust_top,
    series_values,
    spark,
    time_buckets,
    trend_pct,
    trend_word,
)
from gputui.ui.widgets.lines import TextLines
from gputui.ui.widgets.pane import Frame, Pane, Tick
from gputui.ui.widgets.quiet import QuietStatic, set_border_text

if TYPE_CHECKING:
    from gputui.diagnose import Holder

SPARK_POINTS = 120


def run_gpu_words(snap: Snapshot, holders: Sequence[Holder]) -> str:
    """The run's GPU memory and who shares its GPUs: 'GPU 0 12.1G, shared
    with session eval'; '' when it holds none."""
    index = {s.uuid: i for i, s in snap.gpus.latest.items() if s.uuid}
    mine: dict[str, float] = {}
    for h in holders:
        if h.kind == "run":
            mine[h.gp.gpu_uuid] = mine.get(h.gp.gpu_uuid, 0.0) + (h.gp.used_mib or 0.0)
    if not mine:
        return ""
    if len(mine) > 2:
        words = f"{len(mine)} GPUs {sum(mine.values()) / 1024:.0f}G"
    else:
        order = sorted(mine, key=lambda u: index.get(u, 99))
        words = " ".join(f"GPU {index.get(u, '?')} {mine[u] / 1024:.1f}G" for u in order)
    others = sorted({h.owner for h in holders if h.kind != "run" and h.gp.gpu_uuid in mine})
    return words + (", shared with " + ", ".join(others) if others else "")


def unread_text(snap: Snapshot, p: Proc | None) -> Text:
    """The run as last read, greyed, never as live: 'pid 4242 python3
    train.py — not read since 10:02:11' and why (the agent lost)."""
    t = Text(no_wrap=True, overflow="ellipsis", style="dim")
    if p is not None:
        t.append(f"pid {p.pid} ")
        t.append(visible(" ".join(p.cmdline) or "?"))
        t.append(" — ")
    since = time.strftime("%H:%M:%S", time.localtime(snap.run_read_at or 0.0))
    t.append(f"not read since {since}", style="bold yellow")
    t.append(f"\n{visible(snap.run_unread)}")
    return t


def proc_text(snap: Snapshot, holders: Sequence[Holder] = ()) -> Text:
    p: Proc | None = snap.training_proc
    if snap.run_unread and snap.run_read_at is not None and nothing_to_watch(snap) is None:
        return unread_text(snap, p)  # as last read: no state, no CPU, nothing live
    t = Text(no_wrap=True, overflow="ellipsis")
    if p is None:
        why = nothing_to_watch(snap)
        if why is not None:  # there is no list to pick from: say why
            t.append(why, style="dim")
        elif snap.session is None:
            t.append("no session watched — pick one in the sessions list", style="dim")
        elif not snap.session.alive:
            t.append(f"session {visible(snap.session.name)} is dead: no process", style="bold red")
        else:
            t.append(f"no Python process under session {visible(snap.session.name)}", style="dim")
        return t
    state_style = "bold red" if p.state in ("Z", "T", "D") else ""
    t.append(f"pid {p.pid}", style="bold")
    t.append("  ")
    t.append(visible(p.state or "?"), style=state_style)
    t.append(f"  CPU {number(p.cpu_pct)}%  RSS {human_bytes(p.rss_bytes)}  ")
    gpu = run_gpu_words(snap, holders)
    if gpu:
        t.append(visible(gpu), style="yellow" if "shared" in gpu else "")
        t.append("  ")
    t.append(visible(" ".join(p.cmdline) or "?"), style="dim")  # one line, whatever it holds
    t.append(f"\nstdout → {visible(stdout_route(p))}")
    style, verdict = buffering_verdict(p, snap.log, snap.time)
    t.append("\n")
    t.append(verdict, style=style)
    return t


class MetricLine:
    """'tok/s  ▅▆▆▇▇▇  127,151 ↑2%  med 126,900': a sparkline on a stable
    scale (0 to a robust top) over the last minutes, then the current value
    and the trend."""

    NAME_W = 7
    VALUE_W = 30

    def __init__(
        self,
        name: str,
        points: TimeRing | list[tuple[float, float | None]],
        now: float,
        value: Text,
    ) -> None:
        self.name = name
        self.points = points
        self.now = now
        self.value = value

    def line(self, width: int) -> Text:
        cells = max(4, width - self.NAME_W - self.VALUE_W - 2)
        span = pick_span(cells)
        if isinstance(self.points, list):
            buckets = time_buckets(self.points, self.now, span, cells)
        else:
            buckets = series_values(self.points, self.now, span, cells)
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(self.name[: self.NAME_W - 1].ljust(self.NAME_W), style="dim")
        t.append(spark(buckets, robust_top(buckets)), style="cyan")
        t.append("  ")
        t.append_text(self.value)
        return t


def this_run(ring: Ring, restarted_at: float | None) -> list[float | None]:
    """The ring's values since the step counter last went back (a relaunch):
    the points before are the old run's, and a trend across them compared a
    fresh run's high loss with the old run's low one ('loss 4.514 ↑10%'
    while the log's loss fell, issue 46)."""
    if restarted_at is None:
        return ring.values()
    return [v for _, v in ring.newest(restarted_at)]


def metric_value(
    ring: Ring,
    digits: int = 0,
    unit: str = "",
    vs: Versus | None = None,
    restarted_at: float | None = None,
) -> Text:
    """Current value, trend over the shown window of this run (since
    `restarted_at`), median (dim); with a last run to compare with, the
    change against it at the same step instead of the median."""
    vals = this_run(ring, restarted_at)
    cur, med = ring.last(), median(vals[-SPARK_POINTS:])
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(number(cur, digits) + unit, style="bold")
    word = trend_word(trend_pct(vals[-SPARK_POINTS:]))
    if word:
        t.append(f" {word}")
    if vs is not None and vs.percent is not None:
        t.append(f"  {pct_words(vs)} vs last", style="dim")
    elif med is not None:
        t.append(f"  med {number(med, digits)}", style="dim")
    return t


VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "same": "bold"}


def vs_last_text(vs: VsLast | None) -> Text:
    """The run panel's bottom border: 'faster · 47.5k tok/s +12 % vs last
    (42.4k) at step 400'; '' without a last run."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if vs is None:
        return t
    if vs.verdict:
        t.append(vs.verdict, style=VERDICT_STYLE.get(vs.verdict, ""))
        if vs.loss_out:
            t.append(" · loss above last", style="bold red")
        t.append(" · ")
    else:
        t.append("vs last run: ", style="dim")
    t.append(headline(vs))
    return t


def step_points(m: Metrics) -> list[tuple[float, float | None]]:
    """(time, seconds since the previous step) for each advance of the counter."""
    times = list(m.advance_times)
    return [(b, b - a) for a, b in itertools.pairwise(times)]


def changes_title(vs: VsLast) -> str:
    """'training process · vs run 12: --bs 32 → 64; train.py modified (5 min later)'."""
    what = "; ".join(vs.changes) or "no change gputui can see"
    return f"{RunPanel.BORDER_TITLE} · vs run {vs.last_run}: {what}"


def step_value(m: Metrics, vs: Versus | None = None) -> Text:
    """'0.12 s/step  step 1,234': the row is labelled for what it plots
    (and its change against the last run at the same step, when known)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    med = m.median_step_interval
    if med:  # None, or 0 when every step so far arrived in one write
        t.append(f"{med:.2f} s/step", style="bold")
        t.append(" (med)", style="dim")
    else:
        t.append("– s/step", style="dim")
    t.append(f"  step {number(m.last_step)}", style="dim")
    if vs is not None and vs.percent is not None:
        t.append(f"  {pct_words(vs)} vs last", style="dim")
    return t


class MetricRow(TextLines):
    """One row high, fixed (app.tcss): a repaint, never a reflow."""

    _key: tuple[object, ...] | None = None
    _line: MetricLine | None = None

    def on_resize(self) -> None:
        if self._line is not None:
            self.set_lines([self._line.line(self.content_size.width)])

    def show_line(self, key: tuple[object, ...], line: Callable[[], MetricLine]) -> None:
        """`line` makes the row's line: only when `key` changed."""
        if key == self._key:
            return
        self._key = key
        self._line = made = line()
        self.set_lines([made.line(self.content_size.width or 60)])


class RunPanel(Pane, Vertical):
    """The training process (when sessions or processes change) and its
    metrics (once a second: they change with nearly every log batch)."""

    ID = "run"
    BORDER_TITLE = "training process"
    # GpusRead: who holds the run's GPUs comes with the GPU samples (the text
    # is rebuilt each second, repainted only when it changed)
    DRAWN_ON = frozenset({SessionsChanged, ProcsChanged, GpusRead, Tick})

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        if changed & {SessionsChanged, ProcsChanged, GpusRead}:
            self.show_proc(frame.snap, frame.holders)
        if Tick in changed:
            self.show_metrics(frame.snap.metrics, frame.now, frame.snap.vs_last)

    def compose(self) -> ComposeResult:
        self._proc = QuietStatic(id="proc")  # (a query each second found it again)
        yield self._proc
        self._rows = {f"#{id}": MetricRow(id=id) for id in ("m-throughput", "m-loss", "m-step")}
        yield from self._rows.values()

    def show_proc(self, snap: Snapshot, holders: Sequence[Holder] = ()) -> None:
        # three rows high (app.tcss): repaint only, and only on change
        self._proc.show_text(proc_text(snap, holders))

    def show_metrics(self, m: Metrics, now: float, vs: VsLast | None = None) -> None:
        bucket = int(now // 5)  # the narrowest bucket a metric line uses at these widths
        throughput = m.throughput_unit or "tok/s"
        rate = (
            vs.rate
            if vs is not None and vs.rate is not None and vs.rate.name != "steps/s"
            else None
        )
        loss = vs.loss if vs is not None else None
        st = vs.step_time if vs is not None else None
        key = (throughput, len(m.throughput), m.throughput.last(), bucket, m.restarts, rate)
        self._rows["#m-throughput"].show_line(
            key,
            lambda: MetricLine(
                throughput,
                m.throughput,
                now,
                metric_value(m.throughput, vs=rate, restarted_at=m.restarted_at),
            ),
        )
        key = ("loss", len(m.loss), m.loss.last(), bucket, m.restarts, loss)
        self._rows["#m-loss"].show_line(
            key,
            lambda: MetricLine(
                "loss", m.loss, now, metric_value(m.loss, 3, vs=loss, restarted_at=m.restarted_at)
            ),
        )
        key = ("s/step", len(m.advance_times), m.last_step, bucket, m.restarts, st)
        self._rows["#m-step"].show_line(
            key, lambda: MetricLine("s/step", step_points(m), now, step_value(m, st))
        )
        # the bottom border: the run against its last one (issue 49), else the parser
        if vs is not None:  # the title: what changed since the last run
            set_border_text(self, title=changes_title(vs), subtitle=vs_last_text(vs))
        else:
            set_border_text(
                self, title=self.BORDER_TITLE, subtitle=f"parser: {m.preset}" if m.preset else ""
            )


class RunLine(Pane, QuietStatic):
    """The run in one line (`run_line_text`), shown only below TINY_HEIGHT
    rows (the app's -tiny class), where the run panel is hidden: there it
    carries the metrics too, so it follows the tick."""

    ID = "runline"
    DRAWN_ON = frozenset({SessionsChanged, ProcsChanged, Tick})

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        # hidden unless tiny: not written at all (the processes change with
        # every poll); the dashboard draws it when the terminal turns tiny
        if frame.tiny and changed & {SessionsChanged, ProcsChanged, Tick}:
            self.show_text(run_line_text(frame.snap))


def run_line_text(snap: Snapshot) -> Text:
    """The run in one line, for short terminals where the run panel is hidden:
    'pid 4242 R · BLOCK-BUFFERED · 127,151 tok/s ↑2% · loss 2.310 · 0.12 s/step · step 1,234'."""
    p: Proc | None = snap.training_proc
    t = Text(no_wrap=True, overflow="ellipsis")
    if p is None or snap.run_unread:
        return proc_text(snap)
    t.append(f"pid {p.pid}", style="bold")
    t.append(f" {visible(p.state or '?')}", style="bold red" if p.state in ("Z", "T", "D") else "")
    style, verdict = buffering_verdict(p, snap.log, snap.time)
    t.append(" · ")
    t.append(verdict.split(" (")[0].split(":")[0], style=style)
    m = snap.metrics
    if m.throughput.last() is not None:
        word = trend_word(trend_pct(this_run(m.throughput, m.restarted_at)[-SPARK_POINTS:]))
        t.append(
            f" · {number(m.throughput.last())} {visible(m.throughput_unit or 'tok/s')} {word}".rstrip()
        )
    if m.loss.last() is not None:
        t.append(f" · loss {number(m.loss.last(), 3)}")
    t.append(" · ")
    t.append_text(step_value(m))
    return t
