"""Rows painted past the compositor reach the terminal in one write
(ui/directpaint.py, issue 48): Textual's `App._display` hands its writer
thread three (the synchronized output's start, the rows, its end), each
waking that thread; `display` writes the same bytes at once."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip

from gputui.ui import directpaint
from gputui.ui.directpaint import RowsUpdate, display, paint, place_of
from gputui.ui.widgets.banner import Banner
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


async def test_rows_painted_from_their_kept_frames_are_what_textual_renders(
    monkeypatch: Any,
) -> None:
    """A content row painted a second time is framed as its first render was
    (directpaint._Frames: the border's and padding's segments kept, the
    widget's own line between them, the same line filters), not rendered
    through the styles cache: its segments and styles are those a fresh
    render gives — the GPU rows inside their border, a run row, the
    banner's rows — and a row restyled since is rendered again."""
    written: list[list[tuple[int, int, Strip]]] = []
    monkeypatch.setattr(directpaint, "display", lambda _a, _s, update: written.append(update.rows))
    app = scene_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        gpus, banner = app.query_one("#gpus"), app.query_one(Banner)
        metric = app.query_one("#m-loss")
        for widget, lines in (
            (gpus, lambda i: [Text(f"GPU {i} {y}", "bold") for y in range(len(gpus.lines))]),
            (metric, lambda i: [Text(f"loss {i}.5", "red")]),
            (banner, None),
        ):
            place = place_of(widget)
            assert place is not None, widget
            top = widget.styles.gutter.top
            count = len(widget._rows) if widget is banner else len(widget.lines)
            rows = list(range(top, top + count))
            paint(widget, place, rows)  # rendered: the frames are learnt
            renders: list[Region] = []
            orig = widget.render_lines
            widget.render_lines = lambda crop, orig=orig, renders=renders: (
                renders.append(crop) or orig(crop)
            )
            for i in range(3):
                if lines is None:  # the same rows painted again
                    got = [strip for _, _, strip in paint(widget, place, rows)]
                else:
                    with app.row_painter.batch():  # as the tick changes them
                        widget.set_lines(lines(i))
                    got = [strip for _, _, strip in written[-1]]
                assert not renders, widget  # framed, not rendered
                widget._styles_cache.clear()
                fresh = orig(Region(0, rows[0], place.width, len(rows)))
                assert [list(s) for s in got] == [list(s) for s in fresh], (widget, i)
                paint(widget, place, rows)  # (the fresh render replaced the rows kept)
                renders.clear()
            widget.styles.background = "darkred"  # restyled: rendered again
            await pilot.pause()
            got = [strip for _, _, strip in paint(widget, place_of(widget) or place, rows)]
            assert renders
            widget._styles_cache.clear()
            fresh = orig(Region(0, rows[0], place.width, len(rows)))
            assert [list(s) for s in got] == [list(s) for s in fresh]
            del widget.render_lines
