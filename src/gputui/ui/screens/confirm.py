"""The confirm box: names the exact target and command; y runs, n/escape cancels.
It renders the actions' own ActionPlan (notes, then each argv quoted once).

One state machine (issue 46), each state drawn as what it is:

- ``reading``: the box opened on the key, before the plan (what it would act
  on is being read). No live Run button: it reads "reading…", disabled. A y
  now runs nothing, and is never dropped silently: the box says under the
  text that it was seen and why nothing ran.
- ``shown``: the plan has been painted in the box (not merely received): the
  Run button is live and y runs exactly that plan. A y from the reading state
  is not carried over — nothing runs on a plan the user had not seen — and
  the box keeps saying so, asking for y again now that the plan is in view.
- ``failed``: no plan could be made; the box says why, and only n / Escape
  do anything (a y says there is nothing to run).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from gputui.actions.plan import ActionPlan, render_argv
from gputui.text.untrusted import remote_text, safe_text, visible

State = Literal["reading", "shown", "failed"]

RUN_LABEL = "\\[y] Run"
READING_LABEL = "reading…"
# what the box says about a y that came before the plan was on screen
EARLY_Y = "y pressed before the plan was shown: nothing runs until you see it"
EARLY_Y_SHOWN = "y came before you saw this plan: nothing ran — y now runs it"
EARLY_Y_FAILED = "y was pressed, but there is nothing to run"
BODY_MAX = 20  # rows of plan text at most; longer scrolls
BOX_FRAME = 8  # the box's border (2), padding (2), the buttons (3) and their margin (1)


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
    """Returns True only on y / the Run button, and only once the plan has
    been shown in the box. The box opens at once, on the key (`plan=None`:
    what it would act on is being read, `heading` and `target` say what was
    asked); the plan fills it in when it arrives (`show_plan`), once: later
    snapshots cannot change what runs. `plan` is set once the plan is on
    screen (the frame that draws it painted), `state` says where the box is."""

    BINDINGS = [  # noqa: RUF012
        Binding("y", "answer(True)", "yes, run it"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "cancel"),
        # a plan longer than the box (80×24) scrolls under the buttons
        Binding("down,j", "scroll(1)", "scroll", show=False),
        Binding("up", "scroll(-1)", "scroll", show=False),
        Binding("pagedown", "scroll(5)", "scroll", show=False),
        Binding("pageup", "scroll(-5)", "scroll", show=False),
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
        self.arrived = plan  # the plan handed in; `plan` once it has been painted
        self.plan: ActionPlan | None = None
        self.state: State = "reading"
        self.early_y = 0  # y presses before the plan was shown: said in the box, never run
        self.heading = heading
        self.target = target
        self.reading = reading
        self.answered: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def answer_with(self, yes: bool | None) -> None:
        """The push_screen callback: the answer, for whoever waits on `answered`."""
        if not self.answered.done():
            self.answered.set_result(bool(yes))

    def compose(self) -> ComposeResult:
        plan = self.arrived
        with Vertical(id="confirm-box") as box:
            box.border_title = remote_text(f"{plan_heading(plan) if plan else self.heading}?")
            with VerticalScroll(id="confirm-body"):
                body = confirm_text(plan) if plan else pending_text(self.target, self.reading)
                yield Static(body, id="confirm-text")
            yield Static("", id="confirm-early")
            with Horizontal(id="confirm-buttons"):
                yield Button(READING_LABEL, variant="error", id="yes", disabled=True)
                yield Button("\\[n] Cancel", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()  # Enter must not run anything
        self._say_early()
        self.fit()

    def on_resize(self) -> None:
        self.fit()

    def fit(self) -> None:
        """The plan's text scrolls within what the screen leaves once the box's
        frame, the early-y line and the buttons are counted: at 80×24 a long
        plan keeps [y] Run and [n] Cancel in view."""
        with contextlib.suppress(NoMatches):
            early = self.query_one("#confirm-early", Static)
            said = 3 if early.has_class("-said") else 0  # its line(s) and margin
            room = int(self.size.height * 0.9) - BOX_FRAME - said
            self.query_one("#confirm-body").styles.max_height = max(3, min(BODY_MAX, room))
        if self.arrived is not None:
            self.call_after_refresh(self._shown)

    def show_plan(self, plan: ActionPlan) -> None:
        """The plan arrived: the box draws it; once that frame is painted, y
        may run it (once set, it stays). Before the box is composed, compose
        draws it."""
        if self.arrived is not None or self.state != "reading":
            return
        self.arrived = plan
        try:
            box = self.query_one("#confirm-box")
            text = self.query_one("#confirm-text", Static)
        except NoMatches:
            return
        box.border_title = remote_text(f"{plan_heading(plan)}?")
        text.update(confirm_text(plan))
        self.call_after_refresh(self._shown)

    def _shown(self) -> None:
        """The frame with the plan was painted: y and Run run it now."""
        if self.state != "reading" or self.arrived is None:
            return
        self.plan = self.arrived
        self.state = "shown"
        with contextlib.suppress(NoMatches):
            run = self.query_one("#yes", Button)
            run.label = RUN_LABEL
            run.disabled = False
        self._say_early()

    def show_failure(self, why: str) -> None:
        """The plan could not be made: the box says why; nothing can run, Escape closes."""
        if self.state != "reading" or self.arrived is not None:
            return
        self.state = "failed"
        self.reading = f"nothing to run: {why}"
        with contextlib.suppress(NoMatches):  # not composed yet: compose draws it
            self.query_one("#confirm-text", Static).update(pending_text(self.target, self.reading))
            self.query_one("#yes", Button).label = "nothing to run"
        self._say_early()

    def _say_early(self) -> None:
        """The line under the text about a y that came too early, if one did."""
        if not self.early_y:
            return
        words = {"reading": EARLY_Y, "shown": EARLY_Y_SHOWN, "failed": EARLY_Y_FAILED}
        with contextlib.suppress(NoMatches):
            line = self.query_one("#confirm-early", Static)
            line.update(Text(words[self.state], style="bold"))
            if not line.has_class("-said"):
                line.add_class("-said")
                self.fit()

    def action_scroll(self, rows: int) -> None:
        self.query_one("#confirm-body", VerticalScroll).scroll_relative(y=rows, animate=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        if yes and self.state != "shown":
            self.early_y += 1  # nothing to run yet, or ever: the box says so
            self._say_early()
            return
        self.dismiss(yes)
