"""The one-key verbs: which apply now (and why not), and what a confirm box shows.

Pure: no Textual, no I/O. The backend that plans and runs them (the actions
module, or a fake in tests) implements `ActionBackend`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gputui.model import ConnectionState, Snapshot


@dataclass(frozen=True)
class Verb:
    id: str
    key: str
    label: str
    help: str


VERBS: tuple[Verb, ...] = (
    Verb("relaunch", "r", "relaunch", "Stop the run and start it again unbuffered (old log kept)"),
    Verb("kill", "k", "kill", "SIGINT the run's process group, then SIGTERM, then SIGKILL"),
    Verb("force_kill", "K", "force kill", "SIGKILL the run's process group at once"),
    Verb("dump", "d", "py-spy dump", "Show every Python thread's stack (py-spy dump)"),
    Verb("flush", "f", "flush live", "Make the running process flush stdout and go line-buffered"),
    Verb("attach", "a", "attach", "Open the tmux session in this terminal; detach to come back"),
    Verb("launch", "l", "launch", "Start the run from the config's [run] section"),
    Verb("watch_log", "w", "real log", "Follow the file the process really writes"),
)
VERB_BY_ID = {v.id: v for v in VERBS}


@dataclass
class PlannedAction:
    """What the confirm box shows; fixed when the box opens."""

    verb: str
    title: str
    target: str
    description: str
    commands: list[str]
    warning: str = ""
    plan: Any = None  # the backend's own plan object, handed back to execute()
    interactive_argv: list[str] | None = None  # attach: run in the terminal


@dataclass
class ActionOutcome:
    ok: bool
    summary: str
    details: str = ""
    saved_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ActionBackend(Protocol):
    async def plan(self, verb: str, snap: Snapshot) -> PlannedAction:
        """Inspect (read-only) and build the plan; raise GputuiError when it
        cannot be done. Nothing may act on a process here."""
        ...

    async def execute(self, planned: PlannedAction) -> ActionOutcome: ...


def why_not(verb: str, snap: Snapshot, *, read_only: bool, can_launch: bool = False) -> str | None:
    """None when `verb` applies now, else the reason in a few words."""
    if read_only and verb != "watch_log":  # following another file changes nothing
        return "read-only mode (--read-only)"
    if snap.connection != ConnectionState.CONNECTED:
        return f"not connected ({snap.connection.value})"
    session = snap.session
    proc = snap.training_proc
    if verb == "launch":
        if not can_launch:
            return "no [run] command in the config"
        if session is not None and session.alive:
            return f"session {session.name} is already running"
        return None
    if verb == "relaunch":
        if session is None and not can_launch:
            return "no session selected"
        return None
    if session is None:
        return "no session selected"
    if verb == "attach":
        return None
    if verb in ("kill", "force_kill"):
        return None if session.alive else f"session {session.name} is not running"
    if proc is None:
        return "no Python process in the session"
    if verb == "dump":
        return None
    if verb == "flush":
        return None if proc.block_buffered is not False else "stdout is already line-buffered"
    if verb == "watch_log":
        files = proc.stdout.files
        if not files:
            return "the process's stdout reaches no file"
        if snap.log.path in files:
            return "already following it"
        return None
    return f"unknown action {verb}"
