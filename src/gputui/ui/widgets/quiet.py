"""A Static that repaints only when its text really changed.

`Static.update` asks for a full-screen layout pass by default; a live
dashboard calling it every second with the same text spends most of its CPU
in Textual's compositor. Widgets whose size never depends on their text (a
fixed-height line, a fixed box) pass `layout=False`: a repaint of that widget
only.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from gputui.untrusted import safe_text


def same_text(a: object, b: object) -> bool:
    """Rich `Text` equality ignores the base style and overflow; compare them too."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a == b and a.style == b.style and a.overflow == b.overflow
    return a is b or (isinstance(a, str) and a == b)


class QuietStatic(Static):
    """`show(content)` is `update(content)` that skips unchanged text."""

    _shown: object = None

    def show_text(self, content: Text | str, *, layout: bool = False) -> bool:
        """Returns True when the widget was updated."""
        if self._shown is not None and same_text(self._shown, content):
            return False
        self._shown = content
        # a str is plain text, never markup; no control reaches the terminal
        self.update(safe_text(content, keep="\n"), layout=layout)
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
