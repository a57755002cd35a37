"""Rows painted straight to the terminal, past Textual's compositor.

The dashboard's live rows (the log's new lines five times a second; once a
second the GPU rows, the run's process and metric rows, the log's state
line, the header) change a few rows of widgets that nothing covers. Textual
repaints such a row through a chain: `refresh` posts a Prompt to the
widget, whose idle handler posts an Update to the screen, whose update
timer runs the compositor, which cuts every widget the rows cross and
renders the cuts (issue 37: about as much again as the rows themselves).

Here the rows are the widget's own (`Widget.render_lines`, as the
compositor asks a widget that is wholly in view) at the widget's place on
the screen, written as `App._display` writes any update (synchronized
output, the cursor put back), in one write (`display`). Only where it is the same as the
compositor's picture (`place_of`): the widget's screen is the one shown,
no layout or repaint is pending, the widget is wholly in view, and no
widget but its own ancestors overlaps it — a toast, a tooltip, a box, a
scrolled-off row: then the compositor draws, as before. Textual's private
parts read here are those of Textual 8.2: if a newer Textual moves them,
`place_of` says None and the compositor draws (a little dearer). A row
painted again is framed as Textual framed it the time before (`_Frames`),
while Textual's styles cache still holds that row as it was.

tests/test_ui_ghosts.py plays the bytes a terminal gets on a character
grid and compares them with a fresh render of the screen.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.control import Control
from rich.segment import Segment
from textual._ansi_sequences import SYNC_END, SYNC_START
from textual._compositor import CompositorUpdate
from textual.color import Color
from textual.filter import LineFilter
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


def place_of(widget: Widget) -> Region | None:
    """The widget's place on the terminal when its rows may be painted
    straight there (see the module docstring), else None."""
    try:
        app = widget.app
        screen = widget.screen
        driver = app._driver
        if (
            screen is not app.screen
            or driver is None
            or driver.is_inline  # (gputui never runs inline: rows move relative there)
            or app._batch_count
            or widget._layout_required
            or screen._layout_required
            or screen._scroll_required
            or screen._repaint_required
        ):
            return None
        shown = screen._compositor.visible_widgets
        place = shown.get(widget)
        if place is None:
            return None
        region, clip = place
        if (
            not region
            or not clip.contains_region(region)
            or region.size != widget.outer_size
            or widget.scrollbar_size_vertical  # scroll bars are widgets of their own
            or widget.scrollbar_size_horizontal
        ):
            return None
        if not _uncovered(widget, shown, region):
            return None
    except Exception:  # not mounted (yet, or any more), or another Textual
        return None
    return region


# widget -> (the compositor's map of what is shown, the widget's region in
# it, whether another widget overlaps it): the map is made afresh whenever
# anything moves, so while it is the same object the answer holds (the walk
# over every widget shown was most of `place_of`, asked ~10 times a second)
_covered: weakref.WeakKeyDictionary[Widget, tuple[object, Region, bool]] = (
    weakref.WeakKeyDictionary()
)


def _uncovered(widget: Widget, shown: dict[Widget, tuple[Region, Region]], region: Region) -> bool:
    """No widget shown but the widget's own ancestors overlaps `region`."""
    known = _covered.get(widget)
    if known is not None and known[0] is shown and known[1] == region:
        return known[2]
    ancestors = set(widget.ancestors_with_self)
    clear = not any(
        other not in ancestors and other_region.intersection(other_clip).overlaps(region)
        for other, (other_region, other_clip) in shown.items()
    )
    _covered[widget] = (shown, region, clear)
    return clear


@lru_cache(maxsize=4096)
def move_to(x: int, y: int) -> str:
    """The escape that puts the cursor at (x, y): Rich builds a Control and
    its Segment for each one (~4 µs), and a frame of the log moves to each
    of its rows, five times a second."""
    return Control.move_to(x, y).segment.text


class RowsUpdate(CompositorUpdate):
    """Rows at their places on the terminal: (x, y, strip), each a whole row
    of a widget."""

    def __init__(self, rows: list[tuple[int, int, Strip]]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for x, y, strip in self.rows:  # (a renderable, as Textual's own updates are)
            yield Control.move_to(x, y).segment
            yield from strip

    def render_segments(self, console: Console) -> str:
        return "".join(move_to(x, y) + strip.render(console) for x, y, strip in self.rows)


def display(app: Any, screen: Any, update: RowsUpdate) -> None:
    """Write `update` to the terminal as `App._display` does (synchronized
    output, the cursor put back), in one write: `_display` hands the writer
    thread three (the sync's start, the rows, its end), and each wakes that
    thread and asks the main thread for the GIL back — most of a tick's
    painting on a busy machine. The same bytes; where `_display` would do
    anything else (headless, inline, a batch, not running) it is asked."""
    driver = app._driver
    if (
        driver is None
        or app.is_headless
        or driver.is_inline
        or app._batch_count
        or not app._running
        or app._closed
        or sys.platform == "win32"  # (Textual writes in chunks there)
    ):
        app._display(screen, update)
        return
    try:
        cursor = app.screen.outer_size.clamp_offset(app.cursor_position)
        text = update.render_segments(app.console) + move_to(*cursor)
    except Exception as error:
        app._handle_exception(error)
        return
    app._previous_cursor_position = cursor
    if app._sync_available:
        text = SYNC_START + text + SYNC_END
    driver.write(text)
    driver.flush()
    app.post_display_hook()


def paint(widget: Widget, place: Region, rows: list[int]) -> list[tuple[int, int, Strip]]:
    """The widget's rows `rows` (its own rows, border and padding included),
    rendered as the compositor would, for a `RowsUpdate`. A content row
    painted before comes from its kept frame (`_Frames`) where it still
    holds; the others through Textual's styles cache."""
    width = place.width
    ys = sorted({y for y in rows if 0 <= y < place.height})
    if not ys:
        return []
    frames = _frames.get(widget)
    if frames is None:
        frames = _frames[widget] = _Frames()
    out: dict[int, Strip] = {}
    slow = []
    for y in ys:
        try:
            strip = frames.row(widget, y, width)
        except Exception:  # another Textual's styles cache: rendered, as before
            strip = None
        if strip is None:
            slow.append(y)
        else:
            out[y] = strip
    if slow:
        cache = widget._styles_cache
        for y in slow:
            cache.set_dirty(Region(0, y, width, 1))
        # one call for the widget's rows (the rows between come from the
        # styles cache as the compositor's would): each call walks the
        # widget's ancestors for its colours and opacity, and a second's GPU
        # rows are 8
        top = slow[0]
        strips = widget.render_lines(Region(0, top, width, slow[-1] - top + 1))
        for y in slow:
            out[y] = strips[y - top]
            with suppress(Exception):  # (another Textual: nothing learnt)
                frames.learn(widget, y, out[y])
    return [(place.x, place.y + y, out[y]) for y in ys]


class _Frames:
    """A line-API widget's content rows as Textual's styles cache frames them:
    the segments it puts before and after the widget's own line (a border,
    the padding), learnt from a row it rendered, and the line filters it
    ran the row through (the ANSI colours made true colours). While the row
    it rendered is still the one its cache holds (a restyle, a resize, a
    repaint clear or replace it), the row's next line is framed and
    filtered the same — without the styles cache's walk over the widget's
    ancestors for its colours, opacity and size (~0.1 ms a widget on a
    loaded machine: the run's rows, the log's state line, the banner, once
    a second). A row whose rendering is not the widget's line between kept
    segments (a tint, an opacity, a link's hover style) is not learnt: it
    is rendered each time."""

    def __init__(self) -> None:
        # row -> (segments before the line, after it, the line's cells, the cache's row)
        self._rows: dict[int, tuple[tuple[Segment, ...], tuple[Segment, ...], int, Strip]] = {}
        self._filters: tuple[LineFilter, ...] = ()
        self._background: Color | None = None

    def row(self, widget: Widget, y: int, width: int) -> Strip | None:
        """Row `y` framed and filtered as learnt, or None where it must be rendered."""
        kept = self._rows.get(y)
        if kept is None:
            return None
        before, after, cells, cached = kept
        cache = widget._styles_cache
        line = None
        if cache._width == width and cache._cache.get(y) is cached and not cache.is_dirty(y):
            line = widget.render_line(y - widget.styles.gutter.top)
        if line is None or line.cell_length != cells or self._filters != _filters_of(widget):
            del self._rows[y]
            return None
        strip = cache._cache[y] = Strip([*before, *line, *after], width)  # as a render leaves it
        self._rows[y] = (before, after, cells, strip)
        for f in self._filters:
            strip = strip.apply_filter(f, self._background)  # type: ignore[arg-type]
        return strip

    def learn(self, widget: Widget, y: int, shown: Strip) -> None:
        """How row `y`, just rendered as `shown`, frames the widget's line."""
        self._rows.pop(y, None)
        styles = widget.styles
        gutter = styles.gutter
        cached = widget._styles_cache._cache.get(y)
        if (
            cached is None
            or type(widget).render_line is Widget.render_line  # (not the line API)
            or not gutter.top <= y < widget.outer_size.height - gutter.bottom  # a border row
            or styles.text_opacity != 1.0  # the line's own colours changed: not kept
            or styles.tint.a
            or widget.opacity != 1.0
            or (styles.has_rule("hatch") and styles.hatch != "none")
        ):
            return
        filters, background = _filters_of(widget), widget.background_colors[1]
        filtered = cached
        for f in filters:
            filtered = filtered.apply_filter(f, background)  # (Textual's own, kept by the strip)
        if filtered is not shown:
            return  # more than the filters (a link's hover style)
        line = widget.render_line(y - gutter.top)
        own, segments = list(line), list(cached)
        for i in range(len(segments) - len(own) + 1):
            if segments[i : i + len(own)] == own:
                after = tuple(segments[i + len(own) :])
                self._rows[y] = (tuple(segments[:i]), after, line.cell_length, cached)
                self._filters, self._background = filters, background
                return


def _filters_of(widget: Widget) -> tuple[LineFilter, ...]:
    return tuple(widget.get_line_filters())


_frames: weakref.WeakKeyDictionary[Widget, _Frames] = weakref.WeakKeyDictionary()


class RowPainter:
    """Rows of text widgets changed during `batch()` (the dashboard's tick)
    are painted straight to the terminal at its end, all in one write;
    each widget that cannot be (`place_of`) is refreshed as Textual would.
    Outside a batch, `changed` says False and the widget refreshes itself."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._open = False
        self._pending: dict[Widget, set[int]] = {}

    def changed(self, widget: Widget, content_rows: list[int]) -> bool:
        """Take `content_rows` (rows of the widget's content) of `widget` for
        this batch; False when no batch is open (the caller refreshes)."""
        if not self._open:
            return False
        self._pending.setdefault(widget, set()).update(content_rows)
        return True

    @contextmanager
    def batch(self) -> Iterator[None]:
        if self._open:  # nested: the outer batch paints
            yield
            return
        self._open = True
        try:
            yield
        finally:
            self._open = False
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, {}
        rows: list[tuple[int, int, Strip]] = []
        screen = None
        for widget, ys in pending.items():
            place = place_of(widget)
            if place is None:
                width = widget.content_size.width
                widget.refresh(*(Region(0, y, width, 1) for y in sorted(ys)))
                continue
            screen = widget.screen
            top = widget.styles.gutter.top  # the content's first row in the widget's own
            rows.extend(paint(widget, place, [y + top for y in ys]))
        if rows and screen is not None:
            display(self.app, screen, RowsUpdate(rows))


__all__ = ["RowPainter", "RowsUpdate", "display", "move_to", "paint", "place_of"]
