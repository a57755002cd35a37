"""A Static that repaints only when its text really changed.

`Static.update` asks for a full-screen layout pass by default; a live
dashboard calling it every second with the same text spends most of its CPU
in Textual's compositor. Widgets whose size never depends on their text (a
fixed-height line, a fixed box) pass `layout=False`: a repaint of that widget
only.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


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
        self.update(content, layout=layout)
        return True
