"""How a log line looks: errors and tracebacks red, warnings yellow, metric
names bold — and the segments that draw it, without a Rich `Text` per line.

Textual's `Log` draws a line by building a Rich `Text`, copying it for the
highlighter, running each pattern over it and rendering it through the
console: ~120 µs a line, most of the log view's cost when lines stream. A
line's look is a few regex spans over a base style, so `line_segments`
computes the same segments directly (the same algorithm as
`rich.text.Text.render`; `tests/test_logstyle.py` checks they are equal for
any text), and skips a pattern when the words it needs are absent — the
error pattern alone (`\\b\\w*(Error|Exception)\\b`) took ~20 µs on a
plain metrics line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise
from operator import itemgetter

from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

# (pattern, style, words): a pattern can only match a line holding one of its words
HIGHLIGHTS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"^\s+File \".*\", line \d+.*"), "red", ('File "',)),
    (
        re.compile(
            r"(Traceback \(most recent call last\)|\b\w*(Error|Exception)\b|CUDA out of memory"
            r"|\bKilled\b|\bFAILED\b|NCCL (error|WARN)|Segmentation fault|\bnan\b).*"
        ),
        "bold red",
        (
            "Traceback (most recent call last)",
            "Error",
            "Exception",
            "CUDA out of memory",
            "Killed",
            "FAILED",
            "NCCL error",
            "NCCL WARN",
            "Segmentation fault",
            "nan",
        ),
    ),
    (re.compile(r"\b(WARNING|Warning|UserWarning)\b.*"), "yellow", ("WARNING", "Warning")),
    (
        re.compile(r"\b(step|loss|tok/s|it/s|samples/s)\b"),
        "bold",
        ("step", "loss", "tok/s", "it/s", "samples/s"),
    ),
)
_STYLES = tuple(Style.parse(style) for _p, style, _w in HIGHLIGHTS)
_NULL = Style.null()
_combined: dict[tuple[Style, ...], Style] = {}
_by_offset = itemgetter(0, 1)
_Segment = Segment


class TrainingLogHighlighter(Highlighter):
    """The same look for a Rich `Text` (what `Log` would do with it)."""

    def highlight(self, text: Text) -> None:
        for pattern, style, _words in HIGHLIGHTS:
            text.highlight_regex(pattern, style)


# Each pattern's words as one alternation: whether a line holds any of them
# is one search in C, not a generator over the words (~2.5 µs a line)
_GATES = tuple(re.compile("|".join(map(re.escape, words))) for _p, _s, words in HIGHLIGHTS)
# The last pattern matches whole words only (`\b(step|loss|…)\b`): its
# spans are found with `str.find` and a look at the characters either side.
# At each place at most one of the words can match (no two share a start)
# and two matches never overlap, so these are the regex's matches, in a
# third of its time (~8 µs on an HF Trainer dict line: the regex tries the
# five words at every character).
_BOLD_WORDS = HIGHLIGHTS[-1][2]


def _is_word(c: str) -> bool:
    """What `\b` takes for a word character in a `str` pattern."""
    return c.isalnum() or c == "_"


def _word_spans(line: str, style: Style, spans: list[tuple[int, int, Style]]) -> None:
    """Append the whole-word matches of `_BOLD_WORDS` in `line`, in order."""
    found: list[tuple[int, int, Style]] = []
    n = len(line)
    for word in _BOLD_WORDS:
        start = line.find(word)
        while start >= 0:
            end = start + len(word)
            if (start == 0 or not _is_word(line[start - 1])) and (
                end == n or not _is_word(line[end])
            ):
                found.append((start, end, style))
            start = line.find(word, start + 1)
    if len(found) > 1:
        found.sort(key=_by_offset)
    spans.extend(found)


def line_spans(line: str, base: Style | None = None) -> list[tuple[int, int, Style]]:
    """The styled spans of `line`: the base style over all of it, then each
    pattern's matches in order (Rich's order: later spans are added on top)."""
    spans: list[tuple[int, int, Style]] = []
    if base and line:
        spans.append((0, len(line), base))
    last = len(HIGHLIGHTS) - 1
    for i, ((pattern, _style, _words), style, gate) in enumerate(
        zip(HIGHLIGHTS, _STYLES, _GATES, strict=True)
    ):
        if i == last:
            _word_spans(line, style, spans)
            break
        if gate.search(line) is None:
            continue
        for m in pattern.finditer(line):
            start, end = m.span()
            if end > start:
                spans.append((start, end, style))
    return spans


class Restyle(dict[Style, Style]):
    """A style → the style a line filter makes of it, kept: `restyle[style]`.

    Textual's line filters (`ANSIToTruecolor`: a theme's colours for the
    terminal's sixteen) go over each row's segments once more, making each
    segment again; a filter that changes each segment's style by the style
    alone (`ANSIToTruecolor.truecolor_style(style, background)`) is applied
    here while the segments are made, to the few styles the log's lines use."""

    def __init__(self, restyle: Callable[[Style], Style]) -> None:
        super().__init__()
        self._restyle = restyle

    def __missing__(self, style: Style) -> Style:
        if len(self) > 512:  # a handful in practice; never unbounded
            self.clear()
        self[style] = made = self._restyle(style)
        return made


def _combine(key: tuple[Style, ...]) -> Style:
    style = _combined.get(key)
    if style is None:
        if len(_combined) > 512:  # a handful in practice; never unbounded
            _combined.clear()
        style = _combined[key] = Style.combine(key)
    return style


def _marked_segments(
    line: str,
    plain: tuple[Style, ...],
    marks: list[tuple[int, int, Style]],
    restyle: Restyle | None = None,
) -> list[Segment] | None:
    """The usual line (one pattern's matches over the base, none
    overlapping another): its segments without sorting span events; None
    when marks overlap (the general way then)."""
    out: list[Segment] = []
    pos = 0
    plain_style = _combine(plain)
    if restyle is not None:
        plain_style = restyle[plain_style]
    if len(marks) > 1:
        marks = sorted(marks, key=_by_offset)
    for start, end, style in marks:
        if start < pos:
            return None
        if start > pos:
            out.append(_Segment(line[pos:start], plain_style))
        marked = _combine((*plain, style))
        out.append(_Segment(line[start:end], marked if restyle is None else restyle[marked]))
        pos = end
    if pos < len(line):
        out.append(_Segment(line[pos:], plain_style))
    return out


def line_segments(
    line: str, base: Style | None = None, restyle: Restyle | None = None
) -> list[Segment]:
    """What `Text(line).stylize(base)`, highlighted, renders to; with
    `restyle`, each segment's style is then `restyle[style]` (a line
    filter's work, done in the same pass: see `Restyle`)."""
    spans = line_spans(line, base)
    if not spans:
        return [_Segment(line)]
    if base and line:
        fast = _marked_segments(line, (_NULL, base), spans[1:], restyle)
    else:
        fast = _marked_segments(line, (_NULL,), spans, restyle)
    if fast is not None:
        return fast
    styles = [_NULL, *(style for _s, _e, style in spans)]
    events = [
        (0, False, 0),
        *((start, False, i) for i, (start, _e, _st) in enumerate(spans, 1)),
        *((end, True, i) for i, (_s, end, _st) in enumerate(spans, 1)),
        (len(line), True, 0),
    ]
    events.sort(key=_by_offset)
    stack: list[int] = []
    out: list[Segment] = []
    for (offset, leaving, sid), (next_offset, _l, _i) in pairwise(events):
        if leaving:
            stack.remove(sid)
        else:
            stack.append(sid)
        if next_offset > offset:
            style = _combine(tuple(styles[i] for i in sorted(stack)))
            if restyle is not None:
                style = restyle[style]
            out.append(_Segment(line[offset:next_offset], style))
    return out
