"""What a terminal shows: Textual's real output bytes played on a character grid.

A snapshot (`export_screenshot`) renders the screen afresh from the widget
tree, so it cannot see a cell that a partial update left behind or painted
where it should not: the ghosts a user sees. `Terminal` records every update
the app sends (full and partial, exactly the bytes a terminal would get) and
plays them on a grid of characters, as a terminal would; `text()` is then
what the user's terminal shows.

It understands what Textual writes: cursor moves (CSI row;col H), newlines,
carriage returns and text; every other escape sequence (colours, sync
output, modes) changes no character and is skipped.
"""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len

# CSI: ESC [ params intermediates final; OSC: ESC ] ... BEL/ST; a lone ESC x
ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


class Terminal:
    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        self.grid = [[" "] * width for _ in range(height)]
        self.x = 0
        self.y = 0
        self.writes = 0

    def feed(self, data: str) -> None:
        self.writes += 1
        pos = 0
        for m in ESCAPE.finditer(data):
            self._text(data[pos : m.start()])
            self._escape(m.group())
            pos = m.end()
        self._text(data[pos:])

    def _escape(self, seq: str) -> None:
        if seq.startswith("\x1b[") and seq.endswith("H"):
            params = seq[2:-1].split(";") if seq[2:-1] else []
            row = int(params[0]) if params and params[0] else 1
            col = int(params[1]) if len(params) > 1 and params[1] else 1
            self.y, self.x = row - 1, col - 1

    def _text(self, text: str) -> None:
        for ch in text:
            if ch == "\n":
                self.y += 1
                self.x = 0
            elif ch == "\r":
                self.x = 0
            elif ch >= " ":
                self._put(ch)

    def _put(self, ch: str) -> None:
        width = cell_len(ch)
        if width == 0:
            return
        if 0 <= self.y < self.height and 0 <= self.x < self.width:
            self.grid[self.y][self.x] = ch
            if width == 2 and self.x + 1 < self.width:
                self.grid[self.y][self.x + 1] = ""
        self.x += width

    def text(self) -> str:
        return "\n".join("".join(row).rstrip() for row in self.grid)

    def rows(self) -> list[str]:
        return ["".join(row) for row in self.grid]


def attach(app: Any) -> Terminal:
    """Play everything `app` draws from now on (call it in `run_test`, before
    the first frame you need) on a Terminal of the app's size. The headless
    driver writes nothing, so the updates are rendered here exactly as
    `App._display` renders them for a real terminal."""
    from textual._compositor import CompositorUpdate

    term = Terminal(app.size.width, app.size.height)
    original = app._display

    def display(screen: Any, renderable: Any) -> None:
        if renderable is not None and not app._batch_count:
            if isinstance(renderable, CompositorUpdate):
                term.feed(renderable.render_segments(app.console))
            else:
                segments = app.console.render(renderable)
                term.feed(app.console._render_buffer(segments))
        original(screen, renderable)

    app._display = display
    app.screen.refresh()  # a full frame first: the grid starts as the screen is
    return term


def drawn_afresh(app: Any) -> str:
    """The current screen rendered from scratch (every widget, the screens
    below a box included), as `Terminal.text()` lays it out: what the
    terminal should show."""
    from textual._context import visible_screen_stack

    visible_screen_stack.set(app._background_screens)
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in strips)


def inside(term: Terminal, region: Any) -> list[str]:
    """The terminal's rows within `region` (a widget's `.region`), cut to its columns."""
    rows = term.grid[region.y : region.bottom]
    return ["".join(row[region.x : region.right]) for row in rows]
