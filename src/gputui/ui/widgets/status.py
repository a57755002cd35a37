"""The header line: target, connection state, CT status."""

from __future__ import annotations

from rich.text import Text

from gputui.model import ConnectionState, CtStatus, Snapshot
from gputui.ui.widgets.quiet import QuietStatic
from gputui.untrusted import safe_text


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
    if snap.ct is not None:
        style = {
            CtStatus.RUNNING: "green",
            CtStatus.STOPPED: "bold red",
            CtStatus.MISSING: "bold red",
        }.get(snap.ct_status, "yellow")
        t.append("  │  ", style="dim")
        t.append(f"CT {snap.ct} {snap.ct_status.value}", style=style)
    if snap.gpus.source:
        t.append("  │  ", style="dim")
        t.append(f"GPUs: {snap.gpus.source}", style="dim")
    if read_only:
        t.append("  │  ", style="dim")
        t.append("READ-ONLY", style="bold yellow")
    return safe_text(t)  # target and connection errors may carry remote text


class StatusLine(QuietStatic):
    def show(self, snap: Snapshot, *, read_only: bool) -> None:
        # one row high (app.tcss): a changed text repaints, never reflows
        self.show_text(status_text(snap, read_only=read_only))
