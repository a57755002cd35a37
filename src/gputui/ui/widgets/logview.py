"""The log tail: a `Log` fed in batches, with a filter, pause and highlighting."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.cache import LRUCache
from textual.color import Color
from textual.containers import Vertical
from textual.filter import ANSIToTruecolor, LineFilter
from textual.geometry import Region, Size
from textual.selection import Selection
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Log
from typing_extensions import Self

from gputui.model import LogState
from gputui.text.untrusted import visible
from gputui.text.words import dur
from gputui.ui.directpaint import RowsUpdate, display, place_of
from gputui.ui.leanstrip import lean_strip
from gputui.ui.logstyle import Restyle, TrainingLogHighlighter, line_segments
from gputui.ui.widgets.pane import Placed
from gputui.ui.widgets.quiet import QuietStatic, set_border_text

MAX_LINES = 5000
# a log silent this long, but not yet past the stale threshold, reads "quiet
# N s" (no colour, no alarm) rather than "growing"
QUIET_AFTER_S = 5.0
PRUNE_STEP = 500  # the log view holds MAX_LINES to MAX_LINES + PRUNE_STEP lines
# A batch bigger than BURST_BATCH (>= 10,000 lines/s at 10 writes/s) is a
# burst: the view gets its last BURST_KEEP lines and a line saying how many
# were skipped (they stay in the file, and in the lines a pause/filter
# redraws). Nobody reads 5,000 lines scrolling past in 100 ms; writing them
# keeps the event loop from answering keys.
BURST_BATCH = 1000
BURST_KEEP = 200


def log_state_text(log: LogState, now: float, stale_s: float, why_none: str | None = None) -> Text:
    """`stale_s`: the stale threshold the rules judge by
    (diagnose.stale_threshold: --stale-after, else adaptive). `why_none`:
    why there is no run to take a log from (the CT is down, no tmux), said
    instead of "select a session" when there is none to select."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not log.path:
        if why_none:
            return Text(f"no log: {why_none} (w: follow a file by its path)", style="dim")
        return Text(
            "no log chosen — select a session, or press w to follow the process's stdout",
            style="dim",
        )
    if log.error:
        t.append(f"✖ {visible(log.error)}", style="bold red")
    elif log.exists is False:
        t.append("✖ missing", style="bold red")
    elif log.exists is None:
        t.append("… checking", style="dim")
    elif log.stuck:  # gputui's own fault, never the run's silence
        t.append(f"✖ gputui's tail stopped — resuming at byte {log.offset:,}", style="bold red")
    elif log.behind_since is not None and now - log.behind_since >= 1.0:
        t.append("⇣ catching up", style="cyan")
    else:
        silent = log.silent_for(now)
        if silent is not None and silent > stale_s:
            t.append(f"◼ stale {dur(silent)}", style="bold yellow")
        elif log.lines_total and silent is not None and silent >= QUIET_AFTER_S:
            t.append(f"◻ quiet {dur(silent)}", style="dim")  # not yet stale: no alarm
        elif log.lines_total:
            t.append("▲ growing", style="green")
        else:
            t.append("◻ empty", style="yellow")
    t.append(f"  {log.lines_total:,} lines", style="dim")
    if log.size is not None:  # delivered vs the file: a gap is gputui's, not the run's
        if log.offset < log.size:
            t.append(f"  {log.offset:,} of {log.size:,} bytes", style="cyan")
        else:
            t.append(f"  {log.size:,} bytes", style="dim")
    if log.resumes:
        t.append(f"  resumed {log.resumes}×", style="yellow")
    if log.rotations or log.truncations:
        t.append(f"  rotated {log.rotations}× truncated {log.truncations}×", style="yellow")
    if log.read_via:  # deleted while the run writes it
        t.append(f"  deleted: read through {visible(log.read_via)}", style="bold yellow")
    return t


class TailLog(Log):
    """A `Log` whose writes repaint only itself.

    Textual's `Log.write_lines` assigns `virtual_size` (a layout reactive), so
    every batch reflows the whole screen, and starts a thread to measure the
    new lines' width, which assigns it again. This log never changes size with
    its content (`height: 1fr`, scrollbars always on), so here the virtual
    size is set without a layout and the width is measured inline.
    """

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        """`ScrollView` moves its vertical scrollbar on every scroll, even one
        drawn 0 cells wide (this log's): refreshing a widget that is not on
        screen makes the compositor re-arrange the whole screen, once per
        log write. Move it only when it is drawn."""
        if self.show_vertical_scrollbar and self.styles.scrollbar_size_vertical:
            self.vertical_scrollbar.position = new_value
        if round(old_value) != round(new_value):
            self._scroll_rows(round(new_value) - round(old_value))
        self._following = self.is_vertical_scroll_end

    def _scroll_rows(self, d: int) -> None:
        """The view moved `d` rows down the log: every row on screen is
        repainted, but a row that still shows a line it showed keeps that
        line's finished strip (Textual would restyle all ~20 rows, ~0.5 ms
        each, on every one-line write). Exact: a row's strip depends on its
        line, its place in `_lines` (unchanged by a scroll), the width and
        the styles, and a change of the last two clears the cache anyway."""
        cache = self._styles_cache
        height = self.size.height
        carried: dict[int, Strip] = {}
        if 0 < abs(d) < height and not any(self.styles.gutter):
            dirty = cache._dirty_lines
            for y in range(max(0, -d), min(height, height - d)):
                strip = cache._cache.get(y + d)
                if strip is not None and y + d not in dirty:
                    carried[y] = strip
        self.refresh(self.size.region)  # every row is repainted on screen…
        if carried:  # …from its carried strip where it has one
            cache._cache.clear()
            cache._cache.update(carried)
            cache._dirty_lines.difference_update(carried)

    _following = True  # at the end when last scrolled: new lines stay in view

    def on_resize(self) -> None:
        """A log that shrinks while at its end (the banner grew, the terminal
        got shorter) keeps the same top line, so it was no longer at the end
        and stopped following: new lines went on below the view. Keep it at
        the end; a view the user scrolled up stays where it is."""
        if self._following and not self.is_vertical_scroll_end:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    # Rendered lines are kept by their number since the log began, not by
    # their place in `_lines`: Textual re-keys its whole cache on every prune
    # past max_lines (each write, once a stream has filled the view).
    _dropped = 0  # lines pruned from the top so far

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._rows: LRUCache[int, Strip] = LRUCache(1024)  # line number -> its strip
        self._drawn: LRUCache[int, Strip] = LRUCache(1024)  # line number -> its row on screen
        super().__init__(*args, **kwargs)

    def _prune_max_lines(self) -> None:
        """Past max_lines every line moves up while the scroll position stays
        the same: Textual repaints only the new rows (without the layout the
        `virtual_size` assignment used to bring, the rows above kept showing
        the lines they showed), so the whole view is repainted."""
        if self.max_lines is None:
            return
        remove = len(self._lines) - self.max_lines
        # in steps of PRUNE_STEP lines: a prune moves every line's place (so
        # no row keeps its strip), and one per write at 4 lines/s costs more
        # than the few hundred lines kept for a while
        if remove > 0 and (remove >= PRUNE_STEP or self.max_lines < PRUNE_STEP * 4):
            del self._lines[:remove]
            self._dropped += remove
            self._render_line_cache.clear()  # keyed by place (a selection's rows)
            self.refresh(self.size.region)

    def clear(self) -> Self:
        self._rows.clear()
        self._drawn.clear()
        return super().clear()

    _style: Style | None = None

    @property
    def rich_style(self) -> Style:
        """Kept until the styles change, as `KeptStyle` does (a `Log` cannot
        take that mixin: its default CSS would override the `Log`'s)."""
        if self._style is None:
            self._style = super().rich_style
        return self._style

    # The rows' colours (`background_colors`, a walk up the DOM, and the
    # inner background made of them) and whether the styles add anything
    # to a row (`_plain`): kept, as `rich_style` is, until the styles
    # change — a new theme or class restyles every widget below it
    # (Textual's own style caches are kept the same way). ~50 µs a frame.
    _colors: tuple[Color, Color, Style] | None = None
    _plain_styles: bool | None = None

    def _row_colors(self) -> tuple[Color, Color, Style]:
        """(base background, background, the inner background's style)."""
        if self._colors is None:
            base_background, background = self.background_colors
            inner = self._styles_cache.get_inner_outer(base_background, background)[0]
            self._colors = (base_background, background, inner.rich_style)
        return self._colors

    def notify_style_update(self) -> None:
        self._style = None
        self._colors = None
        self._plain_styles = None
        self._rows.clear()
        self._drawn.clear()
        super().notify_style_update()

    def selection_updated(self, selection: Selection | None) -> None:
        self._rows.clear()
        self._drawn.clear()
        super().selection_updated(selection)

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        """Textual 8.2's `Log` keeps a rendered line only while text is
        selected (the test is the wrong way round), so every scroll re-styles
        and re-highlights every visible line. Keep them when nothing is
        selected, and draw them with `line_segments` (no Rich `Text`); a
        selection renders through Textual, as before."""
        if (
            self.text_selection is not None
            or not self.highlight
            or not isinstance(self.highlighter, TrainingLogHighlighter)
        ):
            return super()._render_line_strip(y, rich_style)
        key = y + self._dropped
        strip = self._rows.get(key)
        if strip is None:
            line = self._process_line(self._lines[y])
            strip = lean_strip(line_segments(line, rich_style), cell_len(line))
            self._rows.set(key, strip)
        return strip

    # True while the screen asks for rows (`render_lines`): those rows are
    # drawn, never read for a mouse position, so they go without the
    # per-cell offsets a text selection reads. Textual's `Log` gives every
    # drawn row a new Style per segment for them (~15 µs a line, and the
    # row's colours are then rendered to escape codes afresh, each new
    # Style its own cache); a selection asks `render_line` itself
    # (`get_widget_and_offset_at`), which still gets them.
    _for_screen = False

    def render_lines(self, crop: Region) -> list[Strip]:
        self._for_screen = True
        try:
            if self._plain():
                return self._screen_rows(crop)
            return super().render_lines(crop)
        finally:
            self._for_screen = False

    def _plain(self) -> bool:
        """Nothing Textual's styles cache would add to a row but the
        background: no border, padding, outline, tint, opacity, hatch,
        title, link hover and no selection (the dashboard's log)."""
        if self._plain_styles is None:
            styles = self.styles
            self._plain_styles = (
                not any(styles.gutter)
                and not any(edge for edge, _ in styles.outline)
                and not styles.tint.a
                and self.opacity == 1.0
                and styles.text_opacity == 1.0
                and not styles.has_rule("hatch")
            )
        return (
            self._plain_styles
            and self.text_selection is None
            and self._border_title is None
            and self._border_subtitle is None
            # a link under the mouse restyles the rows (no log line has one)
            and not (self.auto_links and self.hover_style._link_id)
        )

    # Rows as the screen gets them (styled, filtered, the view's width), by
    # line number since the log began: a new line is styled once, in one
    # pass, and a scroll moves finished rows (Textual's styles cache keys
    # them by place on screen, and restyles each row in ~4 steps, each a
    # new Strip with seven caches of its own).
    _drawn_key: tuple[object, ...] = ()

    def _row_segments(
        self, n: int, scroll_x: int, width: int, style: Style, restyle: Restyle | None = None
    ) -> list[Segment] | None:
        """Line `n` as `render_line` makes it (`style`: the widget's
        `rich_style`), padded to `width`, in one step — for the usual line
        (no horizontal scroll, not wider than the view, not empty; else
        None: Textual's steps). `restyle`: the line filters' work, done
        in the same step (`_restyle`)."""
        if scroll_x or self.highlight is False:
            return None
        line = self._process_line(self._lines[n])
        cells = cell_len(line)
        if not 0 < cells <= width or not isinstance(self.highlighter, TrainingLogHighlighter):
            return None
        segments = line_segments(line, style, restyle)
        if cells < width:
            segments.append(
                Segment(" " * (width - cells), style if restyle is None else restyle[style])
            )
        return segments

    _restyled: Restyle | None = None

    def _restyle(self, filters: Sequence[LineFilter], background: Color) -> Restyle | None:
        """The line filters as a `Restyle`, when each is Textual's
        `ANSIToTruecolor` (a style's new colours depend on the style and
        the background alone); else None: they go over the rows after.
        Kept while the drawn rows' key (filters and background in it) holds."""
        if not filters or any(type(f) is not ANSIToTruecolor for f in filters):
            return None
        if self._restyled is None:
            steps = [
                partial(f.truecolor_style, background=background.rich_color)
                for f in filters
                if isinstance(f, ANSIToTruecolor)
            ]

            def restyle(style: Style) -> Style:
                for step in steps:
                    style = step(style)
                return style

            self._restyled = Restyle(restyle)
        return self._restyled

    def _screen_rows(self, crop: Region) -> list[Strip]:
        """What `StylesCache.render_widget` gives for a plain widget
        (`_plain`), from `_drawn`: tests/test_ui_perf.py compares the two."""
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        base_background, background, inner = self._row_colors()
        filters = self.get_line_filters()
        # (a walk up the DOM: once a frame, not twice a new line)
        style = self.rich_style
        key = (width, scroll_x, base_background, background, style, *filters)
        if key != self._drawn_key:
            self._drawn.clear()
            self._drawn_key = key
            self._restyled = None
        restyle = self._restyle(filters, background)
        drawn = self._drawn
        count = len(self._lines)
        rows = []
        for y in crop.line_range:
            n = scroll_y + y
            row_key = n + self._dropped if n < count else -1  # -1: a blank row
            strip = drawn.get(row_key)
            if strip is None:
                segments = (
                    self._row_segments(n, scroll_x, width, style, restyle) if n < count else None
                )
                if segments is None:  # Textual's steps, a Strip each
                    segments = list(self.render_line(y).adjust_cell_length(width, inner))
                    for line_filter in filters:
                        segments = line_filter.apply(segments, background)
                elif restyle is None:
                    for line_filter in filters:
                        segments = line_filter.apply(segments, background)
                strip = lean_strip(segments, width)
                drawn.set(row_key, strip)
            rows.append(strip)
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            rows = [strip.crop(x1, x2) for strip in rows]
        return rows

    def _render_line(self, y: int, scroll_x: int, width: int) -> Strip:
        if not self._for_screen or self.text_selection is not None:
            return super()._render_line(y, scroll_x, width)
        rich_style = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, rich_style)
        return self._render_line_strip(y, rich_style).crop_extend(
            scroll_x, scroll_x + width, rich_style
        )

    @classmethod
    def _process_line(cls, line: str) -> str:
        # Textual's own filter replaces only U+0000–U+0014: whatever reaches
        # the log view, no control is written raw (only drawn lines pay this)
        return visible(line.expandtabs())

    def _line_width(self, line: str) -> int:
        # printable ASCII (nearly every training log line) is one cell a character
        if line.isascii() and line.isprintable():
            return len(line)
        return cell_len(self._process_line(line))

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> Self:
        at_end = self.is_vertical_scroll_end
        auto_scroll = self.auto_scroll if scroll_end is None else scroll_end
        new_lines: list[str] = []
        for line in lines:
            new_lines.extend(line.splitlines())
        if not new_lines:
            return self
        start = len(self._lines)
        self._lines.extend(new_lines)
        if self.max_lines is not None and len(self._lines) > self.max_lines:
            dropped = self._dropped
            self._prune_max_lines()
            start -= self._dropped - dropped
        width = max(self._width, max(map(self._line_width, new_lines)))
        widened, self._width = width != self._width, width
        size = Size(self._width, self.line_count)
        self.set_reactive(Log.virtual_size, size)
        following = auto_scroll and at_end and not self.is_vertical_scrollbar_grabbed
        place = self._blit_place() if following else None
        # the scroll bars' shown state can change: the first lines that
        # overflow the view, a wider line (then the place is asked again)
        settle = widened or not self.show_vertical_scrollbar
        if place is not None and self._follow(size, settle):
            place = self._blit_place() if settle else place
            if place is not None:
                self._blit(place)
            else:
                self.refresh()
            return self
        self._scroll_update(size)
        self.refresh_lines(max(0, start), len(new_lines))
        if following:
            # `scroll_end` without its on-complete callback (a message and a
            # screen update a write, for a callback that does nothing here)
            self._scroll_to(None, self.max_scroll_y, animate=False, release_anchor=False)
        else:
            self.refresh()
        return self

    def _follow(self, size: Size, settle: bool) -> bool:
        """Move the view to the log's end as `write_lines` does through
        Textual (`_scroll_update`, `refresh_lines`, `_scroll_to`), for a
        frame `_blit` draws: only the scroll state, no repaint asked of the
        compositor. Those steps were two thirds of a frame's cost beside the
        rows themselves (issue 37): reactive watchers, an animator stop, a
        refresh of the whole view and the Prompt message it posts, and the
        scroll bars' sizes — drawn 0 cells wide here (app.tcss). Their
        shown/hidden state still moves when `settle` (it says whether the
        view may scroll at all). False (nothing done): a scroll is
        animating."""
        try:
            if self.app.animator.is_being_animated(self, "scroll_y"):
                return False
        except Exception:
            return False
        if settle:
            self._scroll_update(size)
        y = self.max_scroll_y
        if round(self.scroll_y) != y:
            self.set_reactive(Widget.scroll_target_y, float(y))
            self.set_reactive(Widget.scroll_y, float(y))
        self._following = True
        # rows Textual cached by their place on screen moved: a selection
        # (Textual's own path) renders them afresh
        self._styles_cache.clear()
        return True

    def _blit_place(self) -> Region | None:
        """The log's place on the terminal when `_blit` may draw there
        (`directpaint.place_of`, and its rows not selected), else None:
        the compositor draws."""
        if self.text_selection is not None:
            return None
        return place_of(self)

    def _blit(self, region: Region) -> None:
        """Draw the view's rows straight to the terminal at `region` (from
        `_blit_place`), as the compositor would.

        A frame of new lines changes this widget's rows and nothing else
        on screen, yet Textual's way to it (an Update message, the screen's
        update timer, the compositor's cuts over every widget the rows
        cross — the panel and the screen beneath) cost ~1 ms a frame more
        than the rows themselves (issue 37: the log is drawn ~5 times a
        second under a stream). Here the rows are the compositor's own
        (`render_lines` over the whole widget, which is how it asks a
        widget that is wholly in view) at the widget's place, written as
        `App._display` writes any update (synchronized output, the cursor
        put back), in one write (`directpaint.display`)."""
        strips = self.render_lines(Region(0, 0, region.width, region.height))
        x, top = region.x, region.y
        rows = [(x, top + y, strip) for y, strip in enumerate(strips)]
        display(self.app, self.screen, RowsUpdate(rows))
        self._repaint_required = False
        self._dirty_regions.clear()
        self._repaint_regions.clear()


class LogPanel(Placed, Vertical):
    """Lines arrive via `add_lines` (already batched by the app's 10 Hz timer).
    Placed by the dashboard's LAYOUT, drawn by the app itself (its own drain
    and pacing, `GputuiApp._drain_log`)."""

    ID = "logpanel"

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._lines: deque[str] = deque(maxlen=MAX_LINES)
        self._pattern: re.Pattern[str] | None = None
        self.paused = False
        self._held = 0  # lines that arrived while paused
        self.skipped = 0  # lines of bursts the view never showed

    def compose(self) -> ComposeResult:
        log = TailLog(max_lines=MAX_LINES, highlight=True, id="log")
        log.highlighter = TrainingLogHighlighter()
        self._log = log
        self._state = QuietStatic(id="log-state")
        yield self._state
        yield Input(placeholder="filter (regex; empty clears; esc closes)", id="log-filter")
        yield log

    @property
    def log(self) -> TailLog:  # type: ignore[override]  # the view's Log, not Textual's logger
        """(Kept from compose: every frame of lines asked the DOM for it.)"""
        return self._log

    def show_state(
        self,
        log: LogState,
        now: float,
        stale_s: float,
        dropped: int = 0,
        why_none: str | None = None,
    ) -> None:
        """`dropped`: lines the monitor let go before the view asked for them;
        `why_none`: why there is no run to take a log from."""
        t = log_state_text(log, now, stale_s, why_none)
        if self.skipped + dropped:
            t.append(f"  ⋯ {self.skipped + dropped:,} lines skipped during burst", style="yellow")
        if self.paused:
            t.append(f"  ⏸ paused ({self._held} new)", style="bold yellow")
        below = self.log.line_count - int(self.log.scroll_y) - self.log.size.height
        if below > 0 and not self.log.is_vertical_scroll_end:
            t.append(f"  ↑ scrolled: {below:,} lines below (end: follow)", style="bold cyan")
        if self._pattern is not None:
            t.append(f"  filter /{self._pattern.pattern}/", style="bold cyan")
        self._state.show_text(t)  # one row: repaint only
        deleted = " (deleted)" if log.read_via else ""
        set_border_text(self, title=f"log {log.path}{deleted}" if log.path else "log")

    def add_lines(self, lines: list[str]) -> None:
        if not lines:
            return
        self._lines.extend(lines)
        if self.paused:
            self._held += len(lines)
            return
        if self._pattern is not None:
            lines = [x for x in lines if self._pattern.search(x)]
        if len(lines) > BURST_BATCH:
            n = len(lines) - BURST_KEEP
            self.skipped += n
            lines = [
                f"⋯ {n:,} lines skipped (burst; still in the log file) ⋯",
                *lines[-BURST_KEEP:],
            ]
        if lines:
            self.log.write_lines(lines)

    def restart(self, note: str) -> None:
        """A new log is followed: start the view afresh."""
        self.skipped = 0
        self._lines.clear()
        self.log.clear()
        self.log.write_line(visible(note))

    def set_filter(self, text: str) -> str | None:
        """Apply a regex filter; returns an error message for a bad regex."""
        if not text:
            self._pattern = None
        else:
            try:
                self._pattern = re.compile(text, re.IGNORECASE)
            except re.error as e:
                return f"bad regex: {e}"
        self._rerender()
        return None

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        if not self.paused:
            self._held = 0
            self._rerender()
        return self.paused

    def _rerender(self) -> None:
        lines = list(self._lines)
        if self._pattern is not None:
            lines = [x for x in lines if self._pattern.search(x)]
        self.log.clear()
        self.log.write_lines(lines)
