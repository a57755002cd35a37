"""Scroll bars drawn in whole cells, so they cannot pass for a chart.

Textual draws a scroll bar's thumb with a partial block at each end
(`▁▂▃▄▅▆▇` up and down, `▏▎▍▌▋▊▉` across) for a smoother position. On the
dashboard those are the GPU sparklines' own glyphs: a help or confirm box
taller than the screen showed `▂▂`/`▇▇` in its right margin, read as GPU
sparkline cells showing through the box (issue 36), and the sessions
list's horizontal bar a stray `▋`. Here the thumb is whole reverse-video
cells only (Textual's public `ScrollBar.renderer` hook): it moves a cell at
a time and is plainly a bar, in colour or not (NO_COLOR keeps reverse).
"""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender


class WholeCellScrollBarRender(ScrollBarRender):
    """No partial blocks at the thumb's ends (a blank end is left out by
    Textual's renderer, so the thumb is its whole cells)."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


def use_whole_cell_scroll_bars() -> None:
    """Every scroll bar of this process from now on (the dashboards' boxes, lists, logs)."""
    ScrollBar.renderer = WholeCellScrollBarRender
