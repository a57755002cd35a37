"""`line_segments` draws a log line exactly as Textual's `Log` would through a
Rich `Text` and the highlighter (the same segments, styles included)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import MONOKAI
from rich.text import Text
from textual.color import Color
from textual.filter import ANSIToTruecolor

from gputui.ui.logstyle import HIGHLIGHTS, Restyle, TrainingLogHighlighter, line_segments
from gputui.ui.widgets.logview import TailLog

CONSOLE = Console()
BASE = Style(color="#e0e0e0", bgcolor="#1e1e1e")
WORDS = [
    *(w for _pattern, _style, words in HIGHLIGHTS for w in words),
    "ValueError",
    "UserWarning",
    '  File "/x.py", line 3, in f',
    " ",
    "  ",
    "_",
    "x",
    "1.5",
    ":",
    "|",
    "é",
    "日本",
]


def rich_segments(line: str, base: Style | None) -> list[Segment]:
    text = Text(line, no_wrap=True)
    if base is not None:
        text.stylize(base)
    text = TrainingLogHighlighter()(text)
    return list(text.render(CONSOLE))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), max_size=14).map("".join),
    st.sampled_from([BASE, None, Style.null(), Style(bold=True)]),
)
@example("step 1 loss nan tok/s 5 WARNING ValueError", BASE)
@example("", BASE)
@example("xloss loss_ _step step1 éstep tok/step samples/s/step it/s:loss", BASE)
@example("loss loss-loss steploss samples/samples/s", None)
@example('  File "/x.py", line 3, in f', None)
@example("Traceback (most recent call last):", BASE)
def test_line_segments_equal_richs(line: str, base: Style | None) -> None:
    line = TailLog._process_line(line)  # what the log draws: controls made visible
    assert line_segments(line, base) == rich_segments(line, base)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=6)), max_size=14).map("".join),
    st.sampled_from([BASE, None, Style(bold=True), Style(color="red", dim=True)]),
)
@example("rank 0: RuntimeError step 3 loss nan WARNING", BASE)
def test_a_restyle_while_drawing_is_the_line_filter_after(line: str, base: Style | None) -> None:
    """The log view's rows take Textual's ANSIToTruecolor filter (the
    terminal's sixteen colours made the theme's) while their segments are
    made: the same segments as the filter's pass over them after."""
    line = TailLog._process_line(line)
    truecolor = ANSIToTruecolor(MONOKAI)
    background = Color.parse("#1e1e1e")
    after = truecolor.apply(line_segments(line, base), background)
    restyle = Restyle(lambda s: truecolor.truecolor_style(s, background.rich_color))
    assert line_segments(line, base, restyle) == after


def test_a_metrics_line_is_drawn_with_bold_names_only() -> None:
    segs = line_segments("step 12 loss 2.5 tok/s 1000", BASE)
    bold = [s.text for s in segs if s.style is not None and s.style.bold]
    assert bold == ["step", "loss", "tok/s"]
    assert "".join(s.text for s in segs) == "step 12 loss 2.5 tok/s 1000"


def test_an_error_line_is_red_from_the_error_on() -> None:
    segs = line_segments("rank 3: RuntimeError: CUDA out of memory", BASE)
    red = "".join(
        s.text
        for s in segs
        if s.style is not None and s.style.color is not None and s.style.color.name == "red"
    )
    assert red == "RuntimeError: CUDA out of memory"
