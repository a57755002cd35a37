"""The tmux sessions list: a DataTable updated in place."""

from __future__ import annotations

from collections.abc import Set

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

from gputui.model import Session
from gputui.monitor import ProcsChanged, SessionsChanged, Update
from gputui.text.untrusted import remote_text
from gputui.text.words import dur
from gputui.ui.widgets.pane import Frame, Pane, Tick
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


def session_row(
    s: Session, now: float, watched: str | None, unread: bool = False
) -> tuple[Text | str, ...]:
    """A session's cells; `unread`: as last read, not now (its state is "?")."""
    pane = s.main_pane
    name = remote_text(
        ("▶ " if s.name == watched else "  ") + s.name, style="bold" if s.name == watched else ""
    )
    if s.owner is not None:  # another user's tmux server (or a `tmux -L` one)
        name.append_text(remote_text(f" ({s.owner})", style="dim"))
    state = Text("alive", style="green") if s.alive else Text("dead", style="bold red")
    if unread:
        state = Text("?", style="dim")
    exit_ = "–"
    if pane is not None and pane.dead:
        if pane.dead_signal:
            exit_ = f"sig {pane.dead_signal}"
        elif pane.dead_status is not None:
            exit_ = str(pane.dead_status)
    command = remote_text((pane.start_command or pane.current_command) if pane else "")
    age = session_age(now - s.created) if s.created else "?"
    return name, state, exit_, command, age  # every str cell is gputui's own text


MIN_COMMAND = 8  # cells the command keeps in a narrow pane before the names give way
MIN_NAME = 8


def fit_cell(cell: Text | str, width: int) -> Text | str:
    """`cell`, drawn cut to `width` cells with an ellipsis when longer (a
    copy; its text stays whole: the table's data, the palette, tests)."""
    if cell_len(str(cell)) <= width:
        return cell
    text = cell.copy() if isinstance(cell, Text) else Text(cell)
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def column_widths(rows: list[tuple[Text | str, ...]], width: int, pad: int) -> dict[str, int]:
    """The columns shown and their widths in a table `width` cells wide
    (cells padded by `pad` each side): every column as wide as its widest
    cell and the command the rest, so a long command ends in "…" inside the
    pane; a horizontal scroll bar never appears. In a narrow pane the
    command keeps MIN_COMMAND cells, then the age goes (the least read),
    then the session names give way (cut with "…" too), then the command
    again."""
    widest = {
        label: max([cell_len(label), *(cell_len(str(r[i])) for r in rows)])
        for i, label in enumerate(COLUMNS)
    }
    if _over(widest, width, pad, {"command": MIN_COMMAND}) > 0:
        del widest["age"]
    over = _over(widest, width, pad, {})
    for column, least in (("command", MIN_COMMAND), ("session", MIN_NAME), ("command", 2)):
        if over > 0:
            cut = min(over, max(0, widest[column] - least))
            widest[column] -= cut
            over -= cut
    return widest


def _over(widths: dict[str, int], width: int, pad: int, cut_to: dict[str, int]) -> int:
    """Cells past `width` with these columns (those in `cut_to` at most that wide)."""
    return sum(min(w, cut_to.get(c, w)) + 2 * pad for c, w in widths.items()) - width


def _cell_key(cell: Text | str) -> object:
    """A cell as drawn: its text, and a Text's spans and style."""
    return cell if isinstance(cell, str) else (cell.plain, tuple(cell.spans), str(cell.style))


class SessionList(Pane, DataTable[Text | str]):
    """Enter or a click on a row watches that session."""

    ID = "sessions"
    BORDER_TITLE = "sessions"
    DRAWN_ON = frozenset({SessionsChanged, ProcsChanged, Tick})  # Tick: the ages

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = False
        self._names: list[str] = []
        self._rows: dict[str, tuple[Text | str, ...]] = {}
        self._widths: dict[str, int] = {}
        self._shown: tuple[list[Session], float, str | None, str] | None = None
        self._key: tuple[object, ...] | None = None

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        snap = frame.snap
        self.show(snap.sessions, frame.now, snap.session_name, snap.run_unread)

    def on_resize(self) -> None:
        if self._shown is not None:
            self._key = None
            self.show(*self._shown)

    def _room(self, rows: int) -> int:
        """The cells a row may take: the pane's inside, less the scroll bar
        when the rows overflow it (the header row is one)."""
        inside = self.content_region
        bar = self.styles.scrollbar_size_vertical if rows + 1 > inside.height else 0
        return max(0, inside.width - bar)

    def show(
        self, sessions: list[Session], now: float, watched: str | None, unread: str = ""
    ) -> None:
        """`unread`: why the sessions are as last read, not now ("": current)."""
        self._shown = (sessions, now, watched, unread)
        names = [row_key(s) for s in sessions]
        rows = {row_key(s): session_row(s, now, watched, bool(unread)) for s in sessions}
        room = self._room(len(rows))
        # what the table shows, cell by cell: the same as last time (most
        # seconds: the ages are minutes), nothing to fit or compare again
        key = (room, tuple((n, tuple(_cell_key(c) for c in r)) for n, r in rows.items()))
        if key == self._key:
            return
        self._key = key
        widths = column_widths(list(rows.values()), room, self.cell_padding)
        fitted = {
            n: tuple(fit_cell(c, widths[k]) for c, k in zip(r, COLUMNS, strict=True) if k in widths)
            for n, r in rows.items()
        }
        if names != self._names or widths != self._widths:
            cursor_name = (
                self._names[self.cursor_row] if 0 <= self.cursor_row < len(self._names) else watched
            )
            self.clear(columns=widths != self._widths)
            if not self.columns:
                for c, w in widths.items():
                    self.add_column(fit_cell(c, w), key=c, width=w)
            for n in names:
                self.add_row(*fitted[n], key=n)
            self._names = names
            self._widths = widths
            if cursor_name in names:
                self.move_cursor(row=names.index(cursor_name), animate=False)
        else:
            for n in names:
                old = self._rows.get(n, ())
                for col, a, b in zip(widths, old, fitted[n], strict=False):
                    if str(a) != str(b) or getattr(a, "style", None) != getattr(b, "style", None):
                        self.update_cell(n, col, b)
        self._rows = fitted
        if unread:
            # "CT 200 is stopped", "gputui's agent in CT 200 is not answering"
            set_border_text(self, subtitle="not read now: " + unread.split(";")[0].split(":")[0])
        else:
            set_border_text(self, subtitle="" if sessions else "no tmux sessions")
