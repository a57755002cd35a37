"""The header line: target, connection state, CT status."""

from __future__ import annotations

import time
from collections.abc import Set
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from gputui.model import ConnectionState, CtStatus, Snapshot
from gputui.monitor import ConnectionChanged, CtChanged, Update
from gputui.text.untrusted import one_line, safe_text
from gputui.ui.widgets.pane import Frame, Pane, Tick
from gputui.ui.widgets.quiet import QuietStatic


def rtt_text(ms: float) -> str:
    """Two significant digits (12, 45, 120, 1200): a jitter of a millisecond
    or two does not redraw the header every second."""
    if ms < 10:
        return f"{ms:.0f}"
    digits = len(str(int(ms))) - 2
    return str(int(round(ms, -digits)))


def status_text(snap: Snapshot, *, read_only: bool = False) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(" gputui ", style="bold reverse")
    t.append(f" {snap.target} ", style="bold")
    c = snap.connection
    if c == ConnectionState.CONNECTED:
        t.append(" ● connected", style="green")
        if snap.rtt_ms is not None:
            t.append(f" {rtt_text(snap.rtt_ms)} ms", style="green")
    elif c in (ConnectionState.CONNECTING, ConnectionState.RECONNECTING):
        t.append(f" ◌ {c.value}…", style="yellow")
        if snap.connection_error:
            t.append(f" ({snap.connection_error})", style="yellow")
    elif c == ConnectionState.FAILED:
        t.append(" ✖ failed", style="bold red")
        if snap.connection_error:
            t.append(f": {snap.connection_error}", style="red")
    else:
        t.append(f" {c.value}", style="dim")
    if snap.container is not None and snap.container.kind:  # a CT, docker, podman, pod
        style = {
            CtStatus.RUNNING: "green",
            CtStatus.STOPPED: "bold red",
            CtStatus.MISSING: "bold red",
        }.get(snap.ct_status, "yellow")
        t.append("  │  ", style="dim")
        t.append(f"{snap.container.words} {snap.ct_status.value}", style=style)
    if snap.gpus.source:
        t.append("  │  ", style="dim")
        t.append(f"GPUs: {snap.gpus.source}", style="dim")
    if read_only:
        t.append("  │  ", style="dim")
        t.append("READ-ONLY", style="bold yellow")
    return safe_text(t)  # target and connection errors may carry remote text


def head_key(snap: Snapshot, read_only: bool) -> tuple[object, ...]:
    """What status_text reads: equal keys, equal header."""
    container = snap.container
    return (
        snap.target,
        snap.connection,
        None if snap.rtt_ms is None else rtt_text(snap.rtt_ms),
        snap.connection_error,
        (container.kind, container.words) if container is not None else None,
        snap.ct_status,
        snap.gpus.source,
        read_only,
    )


SEVERITY_RANK = {"error": 0, "warning": 1, "information": 2}
SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "information": "cyan"}
SEVERITY_MARK = {"error": "✖", "warning": "⚠", "information": "•"}
NOTICE_MIN = 24  # cells the newest notice keeps at the right of the header, at least


@dataclass
class Notice:
    """One notification: what it says, how bad, and when it was shown."""

    id: str
    text: str
    severity: str = "information"  # "error" | "warning" | "information"
    since: float = 0.0


def top_notice(notices: dict[str, Notice]) -> Notice | None:
    """The one the header shows: the worst, and of those the newest."""
    return min(
        notices.values(), key=lambda n: (SEVERITY_RANK.get(n.severity, 3), -n.since), default=None
    )


def notice_text(notices: dict[str, Notice], width: int, key: str = "n") -> Text:
    """The header's right end: the top notice in at most `width` cells, and
    how many more there are behind `key`."""
    top = top_notice(notices)
    if top is None:
        return Text()
    more = f" (+{len(notices) - 1}, {key}: all)" if len(notices) > 1 else f" ({key})"
    room = max(4, width - len(more) - 2)
    body = one_line(top.text)
    if len(body) > room:
        body = body[: room - 1] + "…"
    t = Text(no_wrap=True)
    t.append(
        f"{SEVERITY_MARK.get(top.severity, '•')} {body}", style=SEVERITY_STYLE.get(top.severity, "")
    )
    t.append(more, style="dim")
    return t


class StatusLine(Pane, QuietStatic):
    """The header row; notifications live at its right end (never over the
    banner or the log), all of them in `notices` for the list behind a key
    (gputui.ui.screens.notices.NoticesScreen)."""

    ID = "status"
    DRAWN_ON = frozenset(
        {ConnectionChanged, CtChanged, Tick}
    )  # Tick: the round trip, measured each poll

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.notices: dict[str, Notice] = {}
        self._head = Text()
        self._head_key: tuple[object, ...] | None = None

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        self.show(frame.snap, read_only=frame.read_only)

    def show(self, snap: Snapshot, *, read_only: bool) -> None:
        # one row high (app.tcss): a changed text repaints, never reflows;
        # the same words as a second ago (nearly always): nothing to do
        key = head_key(snap, read_only)
        if key == self._head_key:
            return
        self._head_key = key
        self._head = status_text(snap, read_only=read_only)
        self._redraw()

    def show_notice(
        self, id: str, text: str, severity: str = "information", now: float | None = None
    ) -> None:
        """Show (or replace) notification `id`: the header's right end shows
        the worst and newest; the rest wait in the list."""
        self.notices[id] = Notice(id, text, severity, time.time() if now is None else now)
        self._redraw()

    def clear_notice(self, id: str) -> None:
        if self.notices.pop(id, None) is not None:
            self._redraw()

    def on_resize(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        width = self.size.width or 80
        right = notice_text(self.notices, max(NOTICE_MIN, width // 2))
        if not right:
            self.show_text(self._head)
            return
        left = self._head.copy()
        left.truncate(max(0, width - right.cell_len - 1), overflow="ellipsis", pad=True)
        self.show_text(Text.assemble(left, " ", right, no_wrap=True, overflow="ellipsis"))
