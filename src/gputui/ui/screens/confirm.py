"""The confirm box: names the exact target and command; y runs, n/escape cancels.
It renders the actions' own ActionPlan (notes, then each argv quoted once)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gputui.actions.plan import ActionPlan, render_argv
from gputui.text.untrusted import remote_text, safe_text, visible


def plan_heading(p: ActionPlan) -> str:
    """The plan's title as a statement ('Kill run in session 'train''), for
    toasts; the box asks it as a question."""
    return p.title.rstrip("?")


def confirm_text(p: ActionPlan) -> Text:
    t = Text()
    t.append("target  ", style="dim")
    t.append(visible(p.target), style="bold")
    t.append("\n\n")
    t.append("\n".join(visible(note) for note in p.notes))  # a line each, whatever they quote
    t.append("\n\nwill run:\n", style="dim")
    for argv in p.commands:
        t.append(f"  $ {render_argv(argv)}\n", style="bold cyan")
    return safe_text(t, keep="\n")  # the box shows remote values as text, never raw


class ConfirmScreen(ModalScreen[bool]):
    """Returns True only on y / the Run button. The plan is copied in when the
    box opens, so later snapshots cannot change what runs."""

    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "yes, run it"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "cancel"),
    ]

    def __init__(self, plan: ActionPlan) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = remote_text(f"{plan_heading(self.plan)}?")
            with VerticalScroll(id="confirm-body"):
                yield Static(confirm_text(self.plan), id="confirm-text")
            with Horizontal(id="confirm-buttons"):
                yield Button("\\[y] Run", variant="error", id="yes")
                yield Button("\\[n] Cancel", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # Enter must not run anything

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
