"""What an action did: summary, details (e.g. py-spy stacks), the saved file."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from gputui.actions.plan import ActionResult
from gputui.text.untrusted import remote_text, safe_text, visible


def result_details(r: ActionResult) -> str:
    """The box's body: the result's detail lines, then its output (py-spy stacks)."""
    details = "\n".join(r.details)
    if r.output:
        return f"{details}\n\n{r.output}" if details else r.output
    return details


class ResultScreen(ModalScreen[None]):
    BINDINGS = [  # noqa: RUF012
        Binding("escape", "close", "close"),
        Binding("q", "close", "close", show=False),
        Binding("enter", "close", "close", show=False),
    ]

    def __init__(self, title: str, result: ActionResult) -> None:
        super().__init__()
        self.title_text = title
        self.result = result

    def compose(self) -> ComposeResult:
        o = self.result
        with Vertical(id="result-box", classes="-ok" if o.ok else "-failed") as box:
            box.border_title = remote_text(self.title_text)
            box.border_subtitle = "esc closes"
            head = Text()
            head.append("✔ " if o.ok else "✖ ", style="bold green" if o.ok else "bold red")
            head.append(o.summary, style="bold")
            if o.saved_path:
                head.append(f"\nsaved to {o.saved_path}", style="dim")
            yield Static(safe_text(head, keep="\n"), id="result-summary")
            details = visible(result_details(o) or "(no output)", keep="\n\t")  # e.g. remote stacks
            area = TextArea(details, read_only=True, id="result-details")
            area.cursor_blink = False
            area.show_line_numbers = False
            yield area

    def action_close(self) -> None:
        self.dismiss(None)
