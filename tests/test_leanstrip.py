"""`LeanStrip` (ui/leanstrip.py): a Strip that makes its caches when first
asked, the same strip in every method the screen and the log view use."""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import MONOKAI
from textual.color import Color
from textual.filter import ANSIToTruecolor
from textual.strip import Strip

from gputui.ui import leanstrip
from gputui.ui.leanstrip import LeanStrip, lean_strip

RED = Style(color="red", bold=True)
BASE = Style(color="#e0e0e0", bgcolor="#1e1e1e")


def segments() -> list[Segment]:
    return [Segment("step ", BASE), Segment("loss", RED), Segment(" 2.5 训练", BASE)]


def test_every_slot_of_textual_s_strip_is_known() -> None:
    """Each cache of Textual's Strip is made on first use at Textual's size;
    a slot the probe cannot place would make lean_strip fall back."""
    assert leanstrip._SLOTS is not None
    caches, others = leanstrip._SLOTS
    assert {"_crop_cache", "_render_cache"} <= set(caches) | set(others)
    strip = lean_strip(segments(), 16)
    assert isinstance(strip, LeanStrip)
    probe = Strip([], 0)
    for name, size in caches.items():
        assert getattr(strip, name)._maxsize == getattr(probe, name)._maxsize == size


def test_a_lean_strip_is_the_same_strip() -> None:
    console = Console()
    lean, plain = lean_strip(segments(), 16), Strip(segments(), 16)
    truecolor = ANSIToTruecolor(MONOKAI)
    background = Color.parse("#1e1e1e")
    for got, want in (
        (lean, plain),
        (lean.crop(2, 9), plain.crop(2, 9)),
        (lean.crop(2, 9), plain.crop(2, 9)),  # (from the cache the first made)
        (lean.crop_extend(0, 20, BASE), plain.crop_extend(0, 20, BASE)),
        (lean.apply_style(RED), plain.apply_style(RED)),
        (lean.apply_filter(truecolor, background), plain.apply_filter(truecolor, background)),
        (lean.adjust_cell_length(20, BASE), plain.adjust_cell_length(20, BASE)),
        (lean.simplify(), plain.simplify()),
    ):
        assert list(got) == list(want) and got.cell_length == want.cell_length
    assert [list(s) for s in lean.divide([4, 9])] == [list(s) for s in plain.divide([4, 9])]
    assert lean.render(console) == plain.render(console)
    assert lean.text == plain.text and lean.link_ids == plain.link_ids
    assert lean == plain
