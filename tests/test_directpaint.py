"""Rows painted past the compositor reach the terminal in one write
(ui/directpaint.py, issue 48): Textual's `App._display` hands its writer
thread three (the synchronized output's start, the rows, its end), each
waking that thread; `display` writes the same bytes at once."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from textual.strip import Strip

from gputui.ui.directpaint import RowsUpdate, display
from test_ui_snapshots import SIZE, scene_app


class Terminal:
    """A driver's writing end that keeps what it is given, write by write."""

    is_headless = False
    is_inline = False

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> None:
        self.writes.append(text)

    def flush(self) -> None:
        pass


async def test_painted_rows_are_one_write_of_what_textual_would_write() -> None:
    app = scene_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        rows = [(2, 5, Strip([Segment("GPU 0  91%", None)])), (2, 6, Strip([Segment("x", None)]))]
        driver: Any = app._driver
        sync = app._sync_available
        textual, ours = Terminal(), Terminal()
        try:
            app._sync_available = True  # a terminal that keeps a frame whole
            app._driver = textual
            app._display(app.screen, RowsUpdate(rows))
            app._driver = ours
            display(app, app.screen, RowsUpdate(rows))
        finally:
            app._driver, app._sync_available = driver, sync
        assert len(textual.writes) == 3  # (Textual's own: start, rows, end)
        assert ours.writes == ["".join(textual.writes)]
        assert "GPU 0  91%" in ours.writes[0]
