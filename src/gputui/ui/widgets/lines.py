"""A few lines of Rich `Text` drawn through Textual's line API.

`Static.update` turns a renderable into Textual `Content`, lays it out and
renders it through a console each time: ~1 ms a line for the GPU rows. A
live row that is already a `Text` needs none of that: each line becomes a
`Strip` once, cropped to the width, and is kept until the text changes.
The widget's size comes from CSS (fixed heights), never from its text.
"""

from __future__ import annotations

from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gputui.text.untrusted import safe_text


def row_strip(
    text: Text, width: int, style: Style, console: Console, pad: Style | None = None
) -> Strip:
    """One row of a line-API widget: `text` over the widget's `style`, cut at
    `width` (with an ellipsis when its `overflow` asks for one) and padded to
    it with `pad` (default: `style`)."""
    text = text.copy()
    if text.cell_len > width:
        text.truncate(width, overflow=text.overflow or "crop")
    text.stylize_before(style)
    strip = Strip(list(text.render(console)), text.cell_len)
    return strip.crop_extend(0, width, style if pad is None else pad)


def _same_row(a: Text, b: Text) -> bool:
    """Two rows draw the same cells (text, spans, base style, overflow)."""
    return (
        a.plain == b.plain
        and a.spans == b.spans
        and a.style == b.style
        and a.overflow == b.overflow
        and a.end == b.end
    )


class KeptStyle(Widget):
    """A widget whose `rich_style` is kept until its styles change: Textual
    computes it from every ancestor's styles on each call, and a line-API
    widget asks for it once a row."""

    _style: Style | None = None

    @property
    def rich_style(self) -> Style:
        if self._style is None:
            self._style = super().rich_style
        return self._style

    def notify_style_update(self) -> None:
        self._style = None
        self.styles_changed()
        super().notify_style_update()

    def styles_changed(self) -> None:
        """Drop what was drawn with the old styles."""


class TextLines(KeptStyle):
    """Shows `set_lines(lines)`; each `Text` is one row (longer ones are cut
    at the width, with an ellipsis when its `overflow` asks for one)."""

    DEFAULT_CSS = "TextLines { height: 1; }"

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._lines: list[Text] = []
        self._strips: dict[int, Strip] = {}

    @property
    def lines(self) -> list[Text]:
        return self._lines

    def set_lines(self, lines: list[Text]) -> None:
        """Show `lines`. Only the rows whose text changed are drawn again
        (issue 24: the GPU rows and the run panel's rows were all restyled
        each second, though most of them read the same)."""
        new = [safe_text(t) for t in lines]  # rows quote GPU names and errors
        old, self._lines = self._lines, new
        width = self.content_size.width
        if len(old) != len(new) or not self.is_mounted or width <= 0:
            self._strips.clear()
            self.refresh()
            return
        changed = [y for y, (a, b) in enumerate(zip(old, new, strict=True)) if not _same_row(a, b)]
        for y in changed:
            self._strips.pop(y, None)
        # during the dashboard's tick the rows are painted at its end, in
        # one write past the compositor (gputui.ui.directpaint)
        painter = getattr(self.app, "row_painter", None)
        if changed and (painter is None or not painter.changed(self, changed)):
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def render(self) -> Text:
        """The whole text (what tests and screen readers see)."""
        return Text("\n").join(self._lines)

    def styles_changed(self) -> None:
        self._strips.clear()

    def on_resize(self) -> None:
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        style = self.rich_style
        if y >= len(self._lines) or width <= 0:
            return Strip.blank(width, style)
        strip = self._strips.get(y)
        if strip is None:
            strip = self._strips[y] = row_strip(self._lines[y], width, style, self.app.console)
        return strip
