"""The list behind the notice key: every notification open now, worst
first, each with when it was shown (the header shows only the top one)."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputui.text.untrusted import one_line
from gputui.ui.widgets.status import SEVERITY_MARK, SEVERITY_RANK, SEVERITY_STYLE, Notice


def notices_text(notices: list[Notice]) -> Text:
    out = Text()
    if not notices:
        out.append("no notifications", style="dim")
        return out
    for n in sorted(notices, key=lambda n: (SEVERITY_RANK.get(n.severity, 3), -n.since)):
        out.append(time.strftime("%H:%M:%S ", time.localtime(n.since)), style="dim")
        out.append(
            f"{SEVERITY_MARK.get(n.severity, '•')} ", style=SEVERITY_STYLE.get(n.severity, "")
        )
        out.append(one_line(n.text, 1000) + "\n")
    return out


class NoticesScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    NoticesScreen { align: center middle; }
    NoticesScreen #notices-box { width: 90%; height: auto; max-height: 80%;
        border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [  # noqa: RUF012
        Binding("escape,n,q", "close", "close", key_display="esc"),
    ]

    def __init__(self, notices: list[Notice]) -> None:
        super().__init__()
        self.notices = notices

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notices-box") as box:
            box.border_title = f"notifications ({len(self.notices)})"
            box.border_subtitle = "esc closes"
            yield Static(notices_text(self.notices))

    def action_close(self) -> None:
        self.dismiss(None)
