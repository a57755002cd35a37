"""The confirm box: names the exact target and command; y runs, n/escape cancels.
It renders the actions' own ActionPlan (notes, then each argv quoted once)."""

from __future__ import annotations

import asyncio
import contextlib

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
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


def pending_text(target: str, reading: str) -> Text:
    t = Text()
    t.append("target  ", style="dim")
    t.append(visible(target), style="bold")
    t.append("\n\n")
    t.append(visible(reading), style="dim italic")
    return safe_text(t, keep="\n")


class ConfirmScreen(ModalScreen[bool]):
    """Returns True only on y / the Run button, and only once the plan is in
    the box. The box opens at once, on the key (`plan=None`: what it would
    act on is being read, `heading` and `target` say what was asked); the
    plan fills it in when it arrives (`show_plan`), once: later snapshots
    cannot change what runs. Until then y and Run do nothing; n and Escape
    cancel."""

    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "yes, run it"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "cancel"),
    ]

    def __init__(
        self,
        plan: ActionPlan | None,
        *,
        heading: str = "",
        target: str = "",
        reading: str = "reading what it would act on…",
    ) -> None:
        super().__init__()
        self.plan = plan
        self.heading = heading
        self.target = target
        self.reading = reading
        self.answered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def answer_with(self, yes: bool | None) -> None:
        """The push_screen callback: the answer, for whoever waits on `answered`."""
        if not self.answered.done():
            self.answered.set_result(bool(yes))

    def compose(self) -> ComposeResult:
        plan = self.plan
        with Vertical(id="confirm-box") as box:
            box.border_title = remote_text(f"{plan_heading(plan) if plan else self.heading}?")
            with VerticalScroll(id="confirm-body"):
                body = confirm_text(plan) if plan else pending_text(self.target, self.reading)
                yield Static(body, id="confirm-text")
            with Horizontal(id="confirm-buttons"):
                yield Button("\\[y] Run", variant="error", id="yes", disabled=plan is None)
                yield Button("\\[n] Cancel", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # Enter must not run anything

    def show_plan(self, plan: ActionPlan) -> None:
        """The plan arrived: the box shows it, and y may run it (once set, it
        stays). Before the box is composed, compose draws it."""
        if self.plan is not None:
            return
        self.plan = plan
        try:
            box = self.query_one("#confirm-box")
            text = self.query_one("#confirm-text", Static)
            run = self.query_one("#yes", Button)
        except NoMatches:
            return
        box.border_title = remote_text(f"{plan_heading(plan)}?")
        text.update(confirm_text(plan))
        run.disabled = False

    def show_failure(self, why: str) -> None:
        """The plan could not be made: the box says why; nothing can run, Escape closes."""
        if self.plan is not None:
            return
        self.reading = f"nothing to run: {why}"
        with contextlib.suppress(NoMatches):  # not composed yet: compose draws it
            self.query_one("#confirm-text", Static).update(pending_text(self.target, self.reading))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        if yes and self.plan is None:
            return  # nothing to run yet: the box still reads what it would act on
        self.dismiss(yes)
