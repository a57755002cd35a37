"""The tmux sessions list: a DataTable updated in place."""

from __future__ import annotations

from collections.abc import Set

from rich.text import Text
from textual.widgets import DataTable

from gputui.model import Session
from gputui.text.untrusted import remote_text
from gputui.text.words import dur
from gputui.ui.widgets.pane import TICK, Frame, Pane
from gputui.ui.widgets.quiet import set_border_text

COLUMNS = ("session", "state", "exit", "command", "age")


def session_age(seconds: float) -> str:
    """A session's age for the table: "<1 m" then minutes, never a count of
    seconds that changes (and redraws the whole table, ~15 ms) every second."""
    if seconds < 60:
        return "<1 m"
    if seconds < 90:
        return "1 m"
    return dur(seconds, short=True)


def row_key(s: Session) -> str:
    """A row's key: the session's name, and another server's socket (two
    servers may each have a session of the same name)."""
    return s.name if s.socket is None else f"{s.name}\x00{s.socket}"


def session_name(key: str) -> str:
    """The session name a row key stands for."""
    return key.split("\x00", 1)[0]


def session_row(s: Session, now: float, watched: str | None) -> tuple[Text | str, ...]:
    pane = s.main_pane
    name = remote_text(
        ("▶ " if s.name == watched else "  ") + s.name, style="bold" if s.name == watched else ""
    )
    if s.owner is not None:  # another user's tmux server (or a `tmux -L` one)
        name.append_text(remote_text(f" ({s.owner})", style="dim"))
    state = Text("alive", style="green") if s.alive else Text("dead", style="bold red")
    exit_ = "–"
    if pane is not None and pane.dead:
        if pane.dead_signal:
            exit_ = f"sig {pane.dead_signal}"
        elif pane.dead_status is not None:
            exit_ = str(pane.dead_status)
    command = remote_text((pane.start_command or pane.current_command) if pane else "")
    age = session_age(now - s.created) if s.created else "?"
    return name, state, exit_, command, age  # every str cell is gputui's own text


class SessionList(Pane, DataTable[Text | str]):
    """Enter or a click on a row watches that session."""

    ID = "sessions"
    BORDER_TITLE = "sessions"
    PARTS = frozenset({"sessions", "procs", TICK})  # TICK: the ages

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = False
        for c in COLUMNS:
            self.add_column(c, key=c)
        self._names: list[str] = []
        self._rows: dict[str, tuple[Text | str, ...]] = {}

    def draw(self, frame: Frame, changed: Set[str]) -> None:
        self.show(frame.snap.sessions, frame.now, frame.snap.session_name)

    def show(self, sessions: list[Session], now: float, watched: str | None) -> None:
        names = [row_key(s) for s in sessions]
        rows = {row_key(s): session_row(s, now, watched) for s in sessions}
        if names != self._names:
            cursor_name = (
                self._names[self.cursor_row] if 0 <= self.cursor_row < len(self._names) else watched
            )
            self.clear()
            for n in names:
                self.add_row(*rows[n], key=n)
            self._names = names
            if cursor_name in names:
                self.move_cursor(row=names.index(cursor_name), animate=False)
        else:
            for n in names:
                old = self._rows.get(n, ())
                for col, a, b in zip(COLUMNS, old, rows[n], strict=False):
                    if str(a) != str(b) or getattr(a, "style", None) != getattr(b, "style", None):
                        self.update_cell(n, col, b)
        self._rows = rows
        set_border_text(self, subtitle="" if sessions else "no tmux sessions")
