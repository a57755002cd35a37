"""The dashboard app: one screen fed by a monitor, verbs behind a confirm box.

Live data never recomposes: a monitor callback marks the kinds of news
that came (`GpusRead`, `SessionsChanged`, ...) dirty, one coalesced apply
updates the widgets in place, each pane only when a kind it names came
(`LAYOUT`, ui/widgets/pane.py). The once-a-second redraw (GPU
rows, ages, metrics, banner) rides on the GPU samples' arrival, so one frame
carries them all; a 1 Hz timer covers a feed that went quiet. Log lines move
in as soon as the monitor says they arrived: under a stream the target's
batcher sends them ~5 times a second, and the view draws each batch as it
comes (`WritePacer` holds a faster trickle to ~5 writes a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding, BindingsMap
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input
from textual.worker import Worker, WorkerState

from gputui.actions.backend import ActionBackend
from gputui.actions.plan import ActionPlan, ActionResult
from gputui.config import Settings
from gputui.diagnose import (
    DEFAULT_THRESHOLDS,
    Diagnose,
    SharedDiagnosis,
    Thresholds,
    diagnose_with,
    diagnosis_failed,
    stale_threshold,
)
from gputui.errors import ConfigError, GputuiError
from gputui.model import ConnectionState, Finding, Snapshot
from gputui.monitor import (
    PENDING_LINES_MAX,
    UPDATES,
    ConnectionChanged,
    CtChanged,
    GpusRead,
    LogChanged,
    LogLines,
    News,
    RunFeed,
    Update,
    kinds_of,
    new_lines,
)
from gputui.text.untrusted import visible
from gputui.ui.commands import ActionCommands
from gputui.ui.compositor import LeanScreen
from gputui.ui.directpaint import RowPainter
from gputui.ui.format import nothing_to_watch
from gputui.ui.heap import set_aside_startup
from gputui.ui.pacing import WritePacer
from gputui.ui.quietinput import quiet_driver
from gputui.ui.screens.confirm import ConfirmScreen, plan_heading
from gputui.ui.screens.help import HelpScreen, help_markdown
from gputui.ui.screens.result import ResultScreen, result_details
from gputui.ui.screens.zoom import GpuGraphsScreen
from gputui.ui.scrollbars import use_whole_cell_scroll_bars
from gputui.ui.widgets.banner import Banner
from gputui.ui.widgets.gpus import GpuTable
from gputui.ui.widgets.logview import LogPanel
from gputui.ui.widgets.pane import PANE_UPDATES, Frame, Pane, Placed, Row, Tick
from gputui.ui.widgets.runinfo import RunLine, RunPanel
from gputui.ui.widgets.sessions import SessionList, session_name
from gputui.ui.widgets.status import StatusLine
from gputui.verbs import FIXED_KEYS, SCREEN_KEYS, VERB_BY_ID, VERBS, keyed, why_not

if TYPE_CHECKING:
    from gputui.record.recorder import RunRecorder

BACK = -1  # exit code of a run view opened from the host view: go back to it
TICK_INTERVAL = 1.0  # s; GPU rows, ages, metrics and the banner
_LOG_NEWS = frozenset({LogChanged, LogLines})  # the log panel's: its state, its lines
# new GPU samples (about once a second) or a connection change: drawn at once
_DRAWN_AT_ONCE = frozenset({GpusRead, ConnectionChanged, CtChanged})
TINY_HEIGHT = 30  # rows: below, GPUs two a line, the run in one line, no sessions list
SHORT_HEIGHT = 34  # rows: below, one-line banner evidence, no s/step row
TALL_HEIGHT = 50  # rows: at or above, a taller sessions/run panel


class GputuiApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "gputui"
    COMMANDS = App.COMMANDS | {ActionCommands}
    BINDINGS = [  # noqa: RUF012
        # q and p are handled by the app before the focused widget sees them
        # (priority): under a log flood each hop of a bubbling key waits a turn
        # of the event loop. `check_action` passes them on to the filter box
        # and to boxes on top of the dashboard.
        Binding(SCREEN_KEYS["quit"], "quit", "quit", id="quit", priority=True),
        Binding(SCREEN_KEYS["help"], "help", "help", key_display="?", id="help"),
        Binding(SCREEN_KEYS["filter"], "filter", "filter", key_display="/", id="filter"),
        Binding(SCREEN_KEYS["pause"], "pause", "pause", id="pause", priority=True),
        Binding(FIXED_KEYS["back"], "back", "host view", key_display="esc", id="back"),
        Binding(SCREEN_KEYS["history"], "history", "whole run", id="history", show=False),
        *[
            Binding(
                v.key,
                f"verb('{v.id}')",
                v.label,
                id=v.id,
                show=v.footer,
            )
            for v in VERBS
        ],
        Binding(FIXED_KEYS["graphs"], "graphs", "GPU graphs", id="graphs", show=False),
        Binding(FIXED_KEYS["notices"], "notices", "notifications", id="notices", show=False),
    ]

    # The dashboard, top to bottom, one line a pane; a Row is panes side by
    # side. Each Pane (ui/widgets/pane.py) names the kinds of news it draws
    # on (DRAWN_ON) and is drawn by `_draw_panes` only when one came; the banner
    # (findings) and the log panel (its own pacing) are drawn by the app.
    LAYOUT: ClassVar[tuple[type[Placed] | Row, ...]] = (
        StatusLine,
        Banner,
        GpuTable,
        RunLine,  # shown below TINY_HEIGHT rows instead of the middle row
        Row("middle", (SessionList, RunPanel)),
        LogPanel,
    )

    def get_driver_class(self) -> type[Driver]:
        # its input thread sleeps until a key comes (ui/quietinput.py)
        return quiet_driver(super().get_driver_class())

    def __init__(
        self,
        monitor: RunFeed,
        *,
        actions: ActionBackend | None = None,
        read_only: bool = False,
        can_launch: bool = False,
        thresholds: Thresholds | None = None,
        diagnose: Diagnose | None = None,
        clock: Callable[[], float] = time.time,
        live: bool = True,
        on_exit: Callable[[], Any] | None = None,
        start: Callable[[], Awaitable[None]] | None = None,
        keys: dict[str, str] | None = None,
        recorder: RunRecorder | None = None,
        terminal_alerts: bool = True,
        back: bool = False,
    ) -> None:
        super().__init__()
        use_whole_cell_scroll_bars()  # no ▇▂▋ thumb ends beside the sparklines
        self.back = back  # opened from the host view: Esc goes back to it (exit code BACK)
        self.keys = dict(keys or {})  # [keys] in the config: binding id -> key
        self.monitor = monitor
        self.actions = actions
        self.read_only = read_only
        if read_only:  # the footer says what a verb is here (attach -r)
            self._bindings = BindingsMap(
                [
                    dataclasses.replace(b, description=VERB_BY_ID[b.id].label_in(True))
                    if b.id in VERB_BY_ID
                    else b
                    for _, b in self._bindings
                ]
            )
        self.can_launch = can_launch
        # [diagnosis] and --stale-after: the log pane's "stale" and the findings' silence
        # come from one threshold (diagnose.stale_threshold), set or adaptive
        self.thresholds = thresholds or DEFAULT_THRESHOLDS
        self.diagnose = diagnose or diagnose_with(self.thresholds)
        self.clock = clock
        self.live = live  # False in snapshot tests: no timers, one apply
        self.on_exit_hook = on_exit
        self.start_hook = start or monitor.start  # e.g. connect the transport first
        self.findings: list[Finding] = []
        self._dirty: set[type[Update]] = set()
        self._apply_pending = False
        self._log_path: str | None = None
        self._last_log_write = -1e9  # time.monotonic() of the last write to the log view
        self._log_pacer = WritePacer()
        self._log_flush_pending = False
        # the log's lines as they came (LogLines), until the pacer lets them be written
        self._new_lines: deque[str] = deque(maxlen=PENDING_LINES_MAX)
        self._dropped = 0  # lines let go since this log's view began (a burst outran it)
        self._availability: tuple[str | None, ...] = ()
        self._stopped = False
        self._last_tick = -1e9  # time.monotonic() of the last full redraw
        self._timer_ticks = True  # the 1 Hz timer draws (no GPU samples are coming)
        self._timer_on = False  # live: the 1 Hz timer runs (`_every_second`)
        self._tick_timer: asyncio.TimerHandle | None = None
        self._tick_due = 0.0  # when the 1 Hz timer fires next (the event loop's clock)
        self.executed: list[ActionPlan] = []  # every action that really ran
        self.recorder = recorder  # history + alerts
        self.row_painter = RowPainter(self)  # the tick's rows, past the compositor
        self.terminal_alerts = terminal_alerts
        self.crashed_with: Exception | None = None  # run_app raises it (gputui.cli.crash)

    def _handle_exception(self, error: Exception) -> None:
        """An unhandled error: Textual exits with status 1; its own report
        (a traceback with locals, which may hold secrets) is dropped, and
        run_app raises it again for the CLI to write a crash file and print
        one line instead (gputui.cli.crash)."""
        self.crashed_with = self.crashed_with or error
        super()._handle_exception(error)
        self._exit_renderables.clear()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Toasts quote session names, paths and remote errors: plain text
        made visible, never markup (`markup` is ignored)."""
        super().notify(
            visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False
        )

    def _refresh_notifications(self) -> None:
        """A notification lives at the header's right end
        (StatusLine.show_notice) and in the list behind n, never as a toast
        over the banner, the log, or a box over the dashboard (a confirm,
        help or result box leaves the header in view): after `y`, an
        action's progress toasts piled up over its result box. Textual's
        toasts stay on the full-screen views (g), which hide the header. A
        toast rack shows itself when given notifications (its `display` is
        set, whatever the CSS says), so it is given none. Textual's own
        timeouts still end them."""
        if not hasattr(self, "_main"):
            super()._refresh_notifications()
            return
        if not self._header_in_view():
            super()._refresh_notifications()
        try:
            status = self._q(StatusLine)
        except NoMatches:  # the app is closing: its widgets are gone
            return
        live = {f"toast:{n.identity}": n for n in self._notifications}
        for key in [k for k in status.notices if k.startswith("toast:") and k not in live]:
            status.clear_notice(key)
        for key, n in live.items():
            if key not in status.notices:
                text = f"{n.title}: {n.message}" if n.title else n.message
                status.show_notice(key, text, n.severity)

    def _header_in_view(self) -> bool:
        """The dashboard is on top, or a box over it (a modal screen)."""
        try:
            top = self.screen
        except ScreenStackError:  # closing
            return False
        return top is self._main or isinstance(top, ModalScreen)

    def action_notices(self) -> None:
        from gputui.ui.screens.notices import NoticesScreen

        self.push_screen(NoticesScreen(list(self._q(StatusLine).notices.values())))

    # ------------------------------------------------------------ layout

    def get_default_screen(self) -> LeanScreen:
        return LeanScreen(id="_default")  # a log write paints the log, not the whole screen

    def compose(self) -> ComposeResult:
        self._panes: list[Pane] = []  # LAYOUT's panes, in its order
        self._found: dict[tuple[Any, Any], Any] = {}  # _q's widgets
        for slot in self.LAYOUT:
            if isinstance(slot, Row):
                with Horizontal(id=slot.id):
                    yield from (self._place(c) for c in slot.panes)
            else:
                yield self._place(slot)
        yield Footer()

    def _place(self, cls: type[Placed]) -> Widget:
        widget = cls(id=cls.ID)  # type: ignore[call-arg]  # every Placed is a Widget
        assert isinstance(widget, Widget)
        if isinstance(widget, Pane):
            self._panes.append(widget)
        return widget

    def _q(self, selector: Any, expect_type: Any = None) -> Any:
        """Query the dashboard screen (not whichever modal is on top). The
        dashboard's widgets stay for its life: each is looked up once (the
        tick and every frame of lines asked again, ~25 µs a query), and
        again only once it left the DOM."""
        key = (selector, expect_type)
        widget = self._found.get(key)
        if widget is None or widget.parent is None:
            if expect_type is None:
                widget = self._main.query_one(selector)
            else:
                widget = self._main.query_one(selector, expect_type)
            self._found[key] = widget
        return widget

    def on_mount(self) -> None:
        self._main = self.screen
        if self.keys:  # bindings carry the verb ids, so Textual's keymap rebinds them
            self.set_keymap(self.keys)
        self._q(Banner).keys = self.keys
        self._q(Banner).read_only = self.read_only
        self._q(Banner).can_launch = self.can_launch
        self._set_size_classes(self.size.width, self.size.height, force=True)
        self.monitor.subscribe(self._on_monitor)
        if self.recorder is not None:
            self.recorder.toast_sinks.append(self._alert)
        self._apply(set(UPDATES))
        self._tick()
        self._drain_log()
        self._q(SessionList).focus()
        if self.live:
            self._every_second()
            self._start_monitor()

    @work(group="monitor", exit_on_error=False)
    async def _start_monitor(self) -> None:
        await self.start_hook()

    # ------------------------------------------------------------ live data

    def _on_monitor(self, snap: Snapshot, news: News) -> None:
        """Monitor callback; may come from another thread. Coalesces updates:
        the lines are held until the pacer writes them, the kinds of news
        that came until the next frame."""
        if self._thread_id != threading.get_ident():
            self.call_from_thread(self._on_monitor, snap, news)
            return
        kinds = kinds_of(news)
        batch = new_lines(news)
        if batch is not None:
            self._hold_lines(batch)
        if kinds & _LOG_NEWS:
            self._log_arrived()
        self._dirty |= kinds & PANE_UPDATES  # MetricsChanged: with the next redraw
        # new GPU samples (about once a second) or a connection change: redraw
        # now, everything in one frame; sessions and processes wait for it
        if kinds & _DRAWN_AT_ONCE and not self._apply_pending:
            self._apply_pending = True
            self._soon(0.05, self._apply_dirty)

    def _soon(self, delay: float, callback: Callable[[], None]) -> None:
        """`callback` in `delay` seconds, on a bare timer of the event loop.
        Textual's `set_timer` makes a Timer, an asyncio task and a new
        `partial` for each one-shot, whose signature `invoke` reads afresh
        every time (~40 µs): the pacer's held frames and the GPU samples'
        redraw come several times a second. An error goes where Textual's
        would (`_handle_exception`)."""

        def run() -> None:
            try:
                callback()
            except Exception as error:
                self._handle_exception(error)

        asyncio.get_running_loop().call_later(delay, run)

    def _apply_dirty(self) -> None:
        self._apply_pending = False
        self._timer_ticks = False  # the GPU samples bring the tick
        self._tick()

    def _apply(self, kinds: set[type[Update]]) -> None:
        frame = self._frame()
        self._draw_panes(frame, kinds)
        # metrics change with nearly every log batch: the 1 Hz tick shows them
        self._refresh_availability(frame.snap)

    def _frame(self) -> Frame:
        return Frame(
            self.monitor.snapshot,
            self.clock(),
            read_only=self.read_only,
            tiny=self.has_class("-tiny"),
        )

    def _draw_panes(self, frame: Frame, changed: set[type[Update]]) -> None:
        """Draw each pane one of whose kinds of news came, and no other."""
        for pane in self._panes:
            if pane.DRAWN_ON & changed:
                pane.draw(frame, changed)

    def on_resize(self, event: Any) -> None:
        self._set_size_classes(event.size.width, event.size.height)

    def _set_size_classes(self, width: int, height: int, *, force: bool = False) -> None:
        """-tiny (< 30 rows, e.g. 80×24): GPUs two a line, the run in one line,
        no sessions list, so the banner, the GPUs and 8+ log rows fit.
        -short (< 34): one-line banner evidence, no s/step row. -tall (≥ 50):
        a taller sessions/run panel."""
        classes = {
            "-tiny": height < TINY_HEIGHT,
            "-short": height < SHORT_HEIGHT,
            "-tall": height >= TALL_HEIGHT,
        }
        if not force and all(self.has_class(c) == want for c, want in classes.items()):
            return
        for c, want in classes.items():
            self.set_class(want, c)
        if hasattr(self, "_main"):
            self._q(GpuTable).compact = classes["-tiny"]
            self._q(Banner).compact = classes["-short"]
            self._q(Banner).show(self.findings, self._banner_hints(), force=True)
            frame = self._frame()
            self._q(GpuTable).draw(frame, {GpusRead})  # two GPUs a line, or one
            self._q(RunLine).draw(frame, RunLine.DRAWN_ON - {Tick})  # drawn only while tiny

    def _every_second(self) -> None:
        """Tick once a second on a bare timer of the event loop (as `_soon`):
        a Textual interval runs each tick as a task through its `invoke`
        (~0.1 ms). The timer is armed for one tick at a time
        (`_arm_timer`), and every tick the GPU samples bring pushes it back
        (`_tick`): while they come about once a second it never fires —
        before, it woke the event loop every second to find the second
        drawn. Ends with the dashboard."""
        self._timer_on = True
        self._arm_timer(asyncio.get_running_loop().time() + TICK_INTERVAL)

    def _arm_timer(self, due: float) -> None:
        """The 1 Hz timer's next firing, at `due` (the event loop's clock)."""
        if self._tick_timer is not None:
            self._tick_timer.cancel()  # (a cancelled timer wakes nothing)
        self._tick_due = due
        self._tick_timer = asyncio.get_running_loop().call_at(due, self._timer_fired)

    def _timer_fired(self) -> None:
        """The 1 Hz timer: no GPU sample brought the tick in time. While the
        timer draws, its ticks keep to whole seconds from its first (no
        drift, no burst after a stall), and one it finds drawn under 0.9 s
        ago (another cause drew it) is left out."""
        self._tick_timer = None
        if self._stopped or self._closing or self._closed:
            return
        try:
            if not self._timer_ticks or time.monotonic() - self._last_tick >= 0.9 * TICK_INTERVAL:
                self._timer_ticks = True
                self._tick()
        except Exception as error:
            self._handle_exception(error)
        if self._tick_timer is None:  # (the tick did not arm it)
            loop = asyncio.get_running_loop()
            due, now = self._tick_due + TICK_INTERVAL, loop.time()
            if due <= now:  # a stall: the next whole second from now on
                due += TICK_INTERVAL * (int((now - due) / TICK_INTERVAL) + 1)
            self._arm_timer(due)

    @property
    def _going(self) -> bool:
        """The dashboard is going: quit (the monitor stopped), or Textual's
        teardown began, which removes the screens before the unmount that
        stops the monitor — a batch of lines or a tick in between found no
        log panel (a loaded CI run: NoMatches at the end of a test)."""
        return self._stopped or not self._running

    def _tick(self) -> None:
        """Once a second: GPU rows, ages, log state, metrics, banner, in one frame."""
        if self._going:
            return
        self._last_tick = time.monotonic()
        if self._timer_on and not self._timer_ticks:
            # the GPU samples bring the tick: the timer waits for a late one a
            # little (on a busy machine the timer's tick came a few ms before
            # the samples' own, and the second was drawn twice)
            self._arm_timer(asyncio.get_running_loop().time() + 1.3 * TICK_INTERVAL)
        if not self._log_flush_pending:  # a monitor that never says "log" still shows lines
            self._drain_log()
        kinds, self._dirty = self._dirty, set()
        frame = self._frame()
        snap, now = frame.snap, frame.now
        # the rows the panes change are painted at the end, in one write
        # past the compositor, where nothing covers them (ui/directpaint.py)
        with self.row_painter.batch():
            self._draw_panes(frame, kinds | {Tick})
            self._show_log_state()  # counts, and a quiet log's age, move once a second
            if isinstance(self.screen, GpuGraphsScreen):
                self.screen.show(snap.gpus, now)
            self.findings = self._diagnosis(snap, now)
            self._q(Banner).show(self.findings, self._banner_hints())
        self._refresh_availability(snap)
        if self.recorder is not None:  # its tick in this wake, with this diagnosis
            self.recorder.kick()

    def _diagnosis(self, snap: Snapshot, now: float) -> list[Finding]:
        """What the banner shows: the findings (each rule isolated: diagnose
        never raises), less what the user's own relaunch or kill caused. A
        bug in that filter keeps every finding — never an empty banner."""
        try:
            if self.recorder is not None:  # the user's own k: 'stopped by you', not 'died'
                self.recorder.mark_your_kill(snap)
            found = list(self.diagnose(snap, now))
        except Exception as e:  # an injected diagnose of a test, a bug: said, not dark
            self.log.error(f"diagnose failed: {e!r}")
            return [diagnosis_failed(e)]
        if self.recorder is None:
            return found
        try:  # the user's own relaunch/kill is no news
            return [f for f in found if self.recorder.is_news(f, now)]
        except Exception as e:
            self.log.error(f"is_news failed: {e!r}")
            return found

    def _banner_hints(self) -> list[str]:
        hints = []
        top = self._q(Banner).finding
        for v in sorted((v for v in VERBS if v.hint), key=lambda v: v.hint):
            if (top is None or top.action != v.id) and self.why_not(v.id) is None:
                hints.append(keyed(v.id, v.label, self.keys))
        return hints

    def _dropped_lines(self) -> int:
        """Lines of the followed log let go (a burst outran the view)."""
        return self._dropped

    def _hold_lines(self, batch: LogLines) -> None:
        """Keep a batch's lines for the next write (at most PENDING_LINES_MAX:
        the older ones of a burst are counted, then let go)."""
        lines, held = batch.lines, self._new_lines
        self._dropped += batch.dropped + max(0, len(held) + len(lines) - PENDING_LINES_MAX)
        held.extend(lines if len(lines) <= PENDING_LINES_MAX else lines[-PENDING_LINES_MAX:])

    def _log_arrived(self) -> None:
        """Lines arrived: write them now, or in the batch the pacer allows next
        (no waiting after a quiet spell, ~4 writes a second under a stream,
        ~2 under a flood that replaces the whole view each time). News of
        the log's state alone (its stat, each poll) draws nothing here — the
        tick shows the state — and arms no timer: a stat right after a
        write woke the event loop ~0.2 s later for an empty drain, about
        once a second while a log streams."""
        if self._log_flush_pending:
            return
        if not self._new_lines and self.monitor.snapshot.log.path == self._log_path:
            return
        wait = self._log_pacer.wait()
        if wait <= 0:
            self._drain_log()
        else:
            self._log_flush_pending = True
            self._soon(wait, self._drain_log)

    def _drain_log(self) -> None:
        """Move new log lines into the view in one batch."""
        self._log_flush_pending = False
        if self._going:
            return
        snap = self.monitor.snapshot
        panel = self._q(LogPanel)
        if snap.log.path != self._log_path:
            if self._log_path:
                panel.restart(f"── now following {snap.log.path or '(nothing)'} ──")
                self._dropped = 0
            self._log_path = snap.log.path
        lines = list(self._new_lines)
        self._new_lines.clear()
        if lines:
            now = time.monotonic()
            quiet_before = now - self._last_log_write > TICK_INTERVAL
            self._last_log_write = now
            self._log_pacer.spend(len(lines), panel.log.size.height)
            panel.add_lines(lines)
            # the state line's word changes with the first line after a quiet
            # spell: at once; under a stream only its counts move, and the
            # once-a-second tick shows them (a frame of lines need not
            # restyle the state row, ~0.25 ms, five times a second)
            if quiet_before:  # its row painted past the compositor, as the tick's are
                with self.row_painter.batch():
                    self._show_log_state()

    def _show_log_state(self) -> None:
        snap = self.monitor.snapshot
        self._q(LogPanel).show_state(
            snap.log,
            self.clock(),
            stale_threshold(snap, self.thresholds),
            self._dropped_lines(),
            nothing_to_watch(snap),
        )

    # ------------------------------------------------------------ verbs

    def why_not(self, verb: str) -> str | None:
        why = why_not(
            verb, self.monitor.snapshot, read_only=self.read_only, can_launch=self.can_launch
        )
        if why is None and self.actions is None:
            return "actions are not available in this build"
        return why

    def _dashboard_has_keys(self) -> bool:
        """The dashboard is on top and no text box is being typed in."""
        if not hasattr(self, "_main") or self.screen is not self._main:
            return False
        return not isinstance(self.focused, Input)

    def _refresh_availability(self, snap: Snapshot) -> None:
        state = tuple(self.why_not(v.id) for v in VERBS)
        if state != self._availability:
            self._availability = state
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back" and not self.back:
            return False
        if action in ("quit", "pause", "back") and not self._dashboard_has_keys():
            return False  # the priority key goes on to the input or box that has focus
        if action == "verb" and parameters:
            return True if self.why_not(str(parameters[0])) is None else None  # None: greyed
        return True

    def action_verb(self, verb: str, switch: str = "") -> None:
        """Run `verb`; `switch`: one of its switches on (the palette's entry
        for it, gputui.verbs.Option.palette)."""
        why = self.why_not(verb)
        label = VERB_BY_ID[verb].label if verb in VERB_BY_ID else verb
        if why is not None:
            self.notify(f"{label}: {why}", severity="warning")
            return
        options = VERB_BY_ID[verb].make_options({switch: True}) if switch else None
        asks = verb not in VERB_BY_ID or VERB_BY_ID[verb].confirm
        # the box goes on the screen stack now, in the key's own handler: a y
        # queued behind this key already reaches the box, never the dashboard
        self._plan_confirm_run(verb, options, self._open_confirm(verb) if asks else None)

    async def _plan(self, verb: str, options: object | None = None) -> ActionPlan:
        assert self.actions is not None
        return await self.actions.plan(verb, self.monitor.snapshot, options)

    @work(group="action", exclusive=True, exit_on_error=False)
    async def _plan_confirm_run(
        self, verb: str, options: object | None, box: ConfirmScreen | None
    ) -> None:
        """Plan (read-only), confirm with the plan fixed, then run it. A verb
        that only reads (py-spy dump) runs at once; its result says what ran.
        The confirm box opened on the key and the plan fills it in when it
        arrives (issue 37: `k` read the processes' identity first, 1.8 s on
        a Proxmox host, before anything showed); y runs only what the box
        has shown (ui/screens/confirm.py)."""
        if box is not None:
            await self._painted(box)
        try:
            plan = await self._plan(verb, options)
        except GputuiError as e:
            if box is not None:
                box.show_failure(str(e))  # Escape closes it
            self.notify(str(e), title=VERB_BY_ID[verb].label, severity="error", timeout=8)
            return
        title = plan_heading(plan)
        if box is not None:
            if not box.answered.done():
                box.show_plan(plan)
            if not await box.answered:
                self.notify(f"{title}: cancelled, nothing was run")
                return
        self.executed.append(plan)
        self.notify(f"{title}: running…", timeout=3)
        result = await self._execute(plan)
        self.notify(result.summary, title=title, severity="information" if result.ok else "error")
        if result_details(result) or result.saved_path or not result.ok:
            self.push_screen(ResultScreen(title, result))
        await self.monitor.refresh()

    def _open_confirm(self, verb: str) -> ConfirmScreen:
        """The confirm box, on the screen stack now, before the plan: what
        was asked and where."""
        snap = self.monitor.snapshot
        label = VERB_BY_ID[verb].label if verb in VERB_BY_ID else verb
        session = f" session {snap.session_name!r}" if snap.session_name else ""
        box = ConfirmScreen(
            None,
            heading=f"{label[:1].upper()}{label[1:]}{session}",
            target=f"{snap.target}{' ·' + session if session else ''}",
        )
        self.push_screen(box, callback=box.answer_with)
        return box

    async def _painted(self, box: ConfirmScreen) -> None:
        """The box's first frame painted before the plan's reads start, so
        it does not wait behind them."""
        painted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def paint_done() -> None:
            if not painted.done():
                painted.set_result(None)

        box.call_after_refresh(paint_done)
        with contextlib.suppress(asyncio.TimeoutError):  # a box never painted: plan anyway
            await asyncio.wait_for(painted, 0.5)

    async def _execute(self, plan: ActionPlan) -> ActionResult:
        """Run the confirmed plan where its verb runs (gputui.verbs.Verb.runs)."""
        runs = VERB_BY_ID[plan.action].runs if plan.action in VERB_BY_ID else "target"
        if runs == "view":
            self.monitor.watch_log(plan.params["log"])
            return ActionResult(True, f"following {plan.params['log']}")
        if runs == "terminal":
            from gputui.actions.attach import run_attach

            with self.suspend():  # another user's session: through a pty of gputui's
                return run_attach(plan)
        assert self.actions is not None
        if self.recorder is not None:  # its consequences are no news, from now
            self.recorder.note_begun(plan.action, plan.created, plan.pids)
        return await self.actions.execute(plan)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """An action that raised: say what failed in a box, never a traceback."""
        if event.state != WorkerState.ERROR or event.worker.group not in ("action", "monitor"):
            return
        err = event.worker.error
        text = str(err) if isinstance(err, GputuiError) else f"{type(err).__name__}: {err}"
        if event.worker.group == "monitor":
            self.notify(text, title="monitor", severity="error", timeout=10)
            return
        self.push_screen(ResultScreen("action failed", ActionResult(False, text)))

    # ------------------------------------------------------------ other keys

    @on(DataTable.RowSelected, "#sessions")
    def _watch_session(self, event: DataTable.RowSelected) -> None:
        name = session_name(str(event.row_key.value))
        self.monitor.watch_session(name)
        self.notify(f"watching session {name}", timeout=2)

    def action_help(self) -> None:
        why = {v.id: self.why_not(v.id) for v in VERBS}
        self.push_screen(HelpScreen(help_markdown(why, self.findings, self.keys, self.read_only)))

    async def action_graphs(self) -> None:
        screen = GpuGraphsScreen()
        await self.push_screen(screen)
        screen.show(self.monitor.snapshot.gpus, self.clock())

    def action_filter(self) -> None:
        box = self._q("#log-filter", Input)
        box.add_class("-shown")
        box.focus()

    @on(Input.Submitted, "#log-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        err = self._q(LogPanel).set_filter(event.value)
        if err:
            self.notify(err, severity="error")
            return
        if not event.value:
            event.input.remove_class("-shown")
        self._q(LogPanel).log.focus()
        self._show_log_state()

    def on_key(self, event: Any) -> None:
        box = self._q("#log-filter", Input)
        if event.key == "escape" and box.has_focus:
            box.value = ""
            self._q(LogPanel).set_filter("")
            box.remove_class("-shown")
            self._q(LogPanel).log.focus()
            self._show_log_state()
            event.stop()
            return
        self._say_why_not(event)

    def _say_why_not(self, event: Any) -> None:
        """A verb's key pressed while it does not apply: Textual runs nothing
        for a greyed binding and said nothing either (r after k, the session
        gone with its run: the key looked dead); now the reason, as the
        palette's entry says it."""
        active = self.screen.active_bindings.get(event.key)
        if active is None or active.enabled or active.binding.id not in VERB_BY_ID:
            return
        if not self._dashboard_has_keys():
            return
        why = self.why_not(active.binding.id)
        if why is not None:
            self.notify(f"{VERB_BY_ID[active.binding.id].label}: {why}", severity="warning")
            event.stop()

    def action_history(self) -> None:
        if self.recorder is None or self.recorder.writer is None:
            self.notify("the history is off ([history] enabled = false)", severity="warning")
            return
        from gputui.ui.screens.wholerun import WholeRunScreen, rows_from_metrics

        self.push_screen(
            WholeRunScreen(
                self.recorder.writer.path,
                self.recorder.name,
                read_log_soon=self.recorder.read_log_soon,
                recent=lambda: rows_from_metrics(self.monitor.snapshot.metrics),
                vs_last=lambda: self.monitor.snapshot.vs_last,
            )
        )

    def _alert(self, alert: Any) -> None:
        """An incident opened, got worse, resolved or went quiet
        (gputui.record.alerts.toast_for): its one notification in the header is
        replaced or removed, and when on, a bell and a desktop notification
        (OSC 9 / 777, texts stripped of controls)."""
        from gputui.record.alerts import terminal_notification, toast_for

        toast = toast_for(alert)
        status = self._q(StatusLine)
        key = f"incident:{toast.key}"
        if not toast.message:
            status.clear_notice(key)
        else:
            status.show_notice(key, visible(toast.message), toast.severity)
            if toast.severity == "information":  # "resolved": seen, then gone
                text = status.notices[key].text
                self.set_timer(toast.timeout, lambda: self._clear_notice(key, text))
        driver = getattr(self, "_driver", None)
        if toast.ring and self.terminal_alerts and driver is not None and not self.is_headless:
            driver.write(terminal_notification(alert))

    def _clear_notice(self, key: str, text: str) -> None:
        status = self._q(StatusLine)
        if key in status.notices and status.notices[key].text == text:
            status.clear_notice(key)

    def action_pause(self) -> None:
        paused = self._q(LogPanel).toggle_pause()
        self.notify("log paused" if paused else "log resumed", timeout=2)
        self._show_log_state()

    async def action_back(self) -> None:
        await self._stop_monitor()
        self.exit(BACK)

    async def action_quit(self) -> None:
        await self._stop_monitor()
        self.exit(0)

    def quit_on_signal(self, signum: int) -> None:
        """SIGTERM, or SIGHUP (the terminal went away): quit as `q` does, so
        the log tail, agent and GPU stream stop; exit 128+N, as a shell says."""
        if signum == signal.SIGHUP:
            terminal_gone(self)
        exit_at_the_latest(128 + signum)
        self.run_worker(self._quit_with(128 + signum), group="quit", exit_on_error=False)

    async def _quit_with(self, code: int) -> None:
        await self._stop_monitor()
        self.exit(code)

    async def _on_exit_app(self) -> None:
        """Textual's end: `q` (after the quit above), or a web page's "quit"
        when `gputui serve`'s tab went. Under serve a quit that comes while
        the page's first resize is still being taken in left two screens
        resizing each other for ever (Textual 8.2: the driver's start-up
        Resize, 142×34 from the URL, queued behind the page's 142×42), the
        process at 100 % of a core until serve's SIGKILL, its monitor never
        stopped. So the monitor stops first, as for `q`, and the process ends
        at the latest WEB_EXIT_S later."""
        if self.is_web and self.return_value != BACK:  # BACK: the host view goes on
            await self._stop_monitor()
            exit_at_the_latest(self.return_code or 0, after=WEB_EXIT_S)
        await super()._on_exit_app()

    async def _stop_monitor(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            await asyncio.wait_for(self.monitor.stop(), timeout=10)
        except Exception as e:  # quitting must always work
            self.log.error(f"monitor.stop failed: {e!r}")
        if self.on_exit_hook is not None:
            res = self.on_exit_hook()
            if asyncio.iscoroutine(res):
                await res

    async def on_unmount(self) -> None:
        await self._stop_monitor()


QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # end the dashboard as `q` does


QUIT_GRACE_S = 15.0  # the monitor's stop has 10 s; then the process ends regardless
WEB_EXIT_S = 2.0  # under serve, after the monitor stopped: Textual's teardown, then the end


def exit_at_the_latest(code: int, after: float = QUIT_GRACE_S) -> None:
    """A signal asked the dashboard to quit: if it has not ended `after`
    seconds from now, end the process with `code` (a daemon thread, beside
    the event loop). The last resort only: the 10 min spin after SIGHUP that
    it was added for was Textual's input thread reading /dev/null in a loop
    (`terminal_gone` stops it now); a quit stuck for another reason still
    ends. What it started remotely ends with its connection (each command's
    watchdog)."""
    timer = threading.Timer(after, os._exit, args=(code,))
    timer.daemon = True
    timer.start()


def terminal_gone(app: App[Any]) -> None:
    """SIGHUP: nothing written now reaches anyone, and a write to the closed
    terminal kills Textual's output thread (EIO): its queue then fills and
    the next write blocks for good. So stdio goes to /dev/null and the app
    stops drawing."""
    driver = app._driver  # Textual has no public "the terminal is gone"
    # Its input thread first: it reads stdin in a loop that, once a read
    # returns nothing (/dev/null, a hung-up tty), selects and reads again at
    # once — 100 % of a core, the GIL with it, until the process ends. That
    # was the dashboard seen spinning for 10 min after SIGHUP under load, its
    # quit starved. Its own stop sets this event too (then joins the thread).
    stop_reading = getattr(driver, "exit_event", None)
    if isinstance(stop_reading, threading.Event):
        stop_reading.set()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    if driver is not None:
        setattr(driver, "write", lambda _data: None)  # noqa: B010


def run_app(settings: Settings) -> int:
    """Build the monitor for `settings` and run the dashboard; the exit code."""
    from gputui.ui.wiring import build

    parts = build(settings)
    first_failure: list[str] = []

    async def start() -> None:
        """A target that cannot be reached at all (unknown host, refused,
        bad key) ends the dashboard with the same one line as `doctor`,
        exit 2; once connected, a lost link is shown live instead."""
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            loop.add_signal_handler(sig, app.quit_on_signal, sig)
        if parts.history_error:  # the dashboard runs on without history
            app.notify(parts.history_error, severity="warning", timeout=10, markup=False)
        try:
            await parts.start()
            set_aside_startup()  # connected, the first screen drawn
        except GputuiError as err:
            if parts.monitor.snapshot.connection == ConnectionState.FAILED or isinstance(
                err, ConfigError
            ):  # unreachable, or a bad flag only the target can check (--log a directory)
                first_failure.append(str(err))
                app.exit(2)
                return
            raise

    # the banner's diagnosis is the recorder's too (both read the same
    # snapshot once a second, with the same settings)
    shared = SharedDiagnosis(diagnose_with(parts.settings.diagnosis))
    if parts.recorder is not None:
        parts.recorder.diagnose = shared.recent
    app = GputuiApp(
        parts.monitor,
        diagnose=shared,
        actions=parts.actions,
        read_only=parts.settings.read_only,
        can_launch=parts.can_launch,
        thresholds=parts.settings.diagnosis,
        on_exit=parts.on_exit,
        start=start,
        keys=parts.settings.keys,
        recorder=parts.recorder,
        terminal_alerts=parts.settings.alert_terminal,
    )

    parts.actions.progress = lambda text: app.notify(text, timeout=4)
    set_aside_startup()  # imports and the dashboard: kept until exit
    rc = app.run()
    if app.crashed_with is not None:  # the CLI's entry reports it (gputui.cli.crash)
        raise app.crashed_with
    if first_failure:
        print(f"gputui: {visible(first_failure[0])}", file=sys.stderr)
        return 2
    return int(rc or 0)


__all__ = ["QUIT_SIGNALS", "GputuiApp", "run_app", "terminal_gone"]
