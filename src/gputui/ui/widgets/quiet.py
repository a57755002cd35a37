"""A line of text that repaints only when its text really changed.

`Static.update` asks for a full-screen layout pass by default, and even with
`layout=False` it turns the text into Textual `Content` and renders it
through a console on every change. The lines here have fixed sizes (CSS),
so they are drawn through the line API (`TextLines`) and only when the text
differs from what is shown.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from gputui.text.untrusted import safe_text
from gputui.ui.widgets.lines import TextLines


def same_text(a: object, b: object) -> bool:
    """Rich `Text` equality ignores the base style and overflow; compare them too."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a == b and a.style == b.style and a.overflow == b.overflow
    return a is b or (isinstance(a, str) and a == b)


class QuietStatic(TextLines):
    """`show_text(content)` shows a `Text` (one row a line) unless it is already shown."""

    _shown: object = None

    def __init__(self, content: Text | str = "", **kw: object) -> None:
        super().__init__(**kw)
        if content:
            self.show_text(content)

    def show_text(self, content: Text | str, *, layout: bool = False) -> bool:
        """Returns True when the widget was updated. (`layout` is ignored:
        the size comes from CSS, never from the text.)"""
        if self._shown is not None and same_text(self._shown, content):
            return False
        self._shown = content
        # a str is plain text, never markup; no control reaches the terminal
        text = safe_text(content, keep="\n")
        self.set_lines(list(text.split("\n")) if "\n" in text.plain else [text])
        return True


def set_border_text(
    widget: Widget, *, title: Text | str | None = None, subtitle: Text | str | None = None
) -> None:
    """Set a border title/subtitle only when it changed. Textual repaints the
    whole widget on every assignment, same text or not, and parses a `str`
    as markup: the text given here is always plain (a `Text`)."""
    for attr, value in (("border_title", title), ("border_subtitle", subtitle)):
        if value is None:
            continue
        text = safe_text(value)  # plain and visible: titles quote paths and GPU names
        key = f"_shown_{attr}"
        if same_text(getattr(widget, key, None), text):
            continue
        setattr(widget, key, text)
        setattr(widget, attr, text)
