"""The verbs: one record each, read by the banner, help, footer, palette and
the CLI subcommands — id, default key, label, whether it changes something,
where it runs, and why it does not apply now.

Pure: no Textual, no I/O. How a verb is planned and run is the actions
package's (`gputui.actions.PLANNERS` / `EXECUTORS`, keyed by the same ids);
findings name verbs by id and the UI shows the key the user bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gputui.containers import Host
from gputui.model import ConnectionState, Proc, Snapshot

WhyNot = Callable[[Snapshot, bool], "str | None"]  # (snapshot, can_launch) -> reason or None


@dataclass(frozen=True)
class Verb:
    id: str
    key: str  # the default key; a user's [keys] table may bind another
    label: str
    help: str
    changes: bool = True  # acts on the run: off in --read-only
    confirm: bool = True  # the dashboard asks first; False: it only reads, runs at once
    cli_help: str = ""  # non-empty: also a `gputui VERB` subcommand
    # where the confirmed plan runs: "target" (actions.execute, audited),
    # "terminal" (its argv in this terminal, the dashboard suspended: attach),
    # "view" (the dashboard follows the plan's log: watch_log)
    runs: str = "target"
    footer: bool = True  # shown in the footer (all are in help and the palette)
    # what it is in --read-only when it stays on there, but works otherwise (attach -r)
    read_only_label: str = ""
    read_only_help: str = ""

    def label_in(self, read_only: bool) -> str:
        """The label the footer, palette and help show."""
        return self.read_only_label if read_only and self.read_only_label else self.label

    def help_in(self, read_only: bool) -> str:
        return self.read_only_help if read_only and self.read_only_help else self.help


def _session_needed(snap: Snapshot) -> str | None:
    return None if snap.session is not None else "no session selected"


def _launch(snap: Snapshot, can_launch: bool) -> str | None:
    if not can_launch:
        return "no [run] command in the config"
    session = snap.session
    if session is not None and session.alive:
        return f"session {session.name} is already running"
    return None


def _relaunch(snap: Snapshot, can_launch: bool) -> str | None:
    if snap.session is not None or can_launch:
        return None
    # No tmux session: the run is its container's main process (actions/restart.py)
    container = snap.container if snap.container is not None else Host()
    return container.why_no_restart() or None  # '': docker/podman restart


def _attach(snap: Snapshot, can_launch: bool) -> str | None:
    return _session_needed(snap)


def _kill(snap: Snapshot, can_launch: bool) -> str | None:
    session = snap.session
    if session is None:
        return "no session selected"
    return None if session.alive else f"session {session.name} is not running"


def _python_needed(snap: Snapshot) -> tuple[str | None, Proc | None]:
    """(why not, the run's Python process)."""
    if snap.session is None:
        return "no session selected", None
    proc = snap.training_proc
    return (None, proc) if proc is not None else ("no Python process in the session", None)


def _dump(snap: Snapshot, can_launch: bool) -> str | None:
    return _python_needed(snap)[0]


def _flush(snap: Snapshot, can_launch: bool) -> str | None:
    why, proc = _python_needed(snap)
    if proc is None:
        return why
    return None if proc.block_buffered is not False else "stdout is already line-buffered"


def _watch_log(snap: Snapshot, can_launch: bool) -> str | None:
    why, proc = _python_needed(snap)
    if proc is None:
        return why
    files = proc.stdout.files
    if not files:
        return "the process's stdout reaches no file"
    if snap.log.path in files:
        return "already following it"
    return None


VERBS: tuple[Verb, ...] = (
    Verb(
        "relaunch",
        "r",
        "relaunch",
        "Stop the run and start it again unbuffered (old log kept)",
        cli_help="restart the run unbuffered (PYTHONUNBUFFERED=1, tee -a -i)",
    ),
    Verb(
        "kill",
        "k",
        "kill",
        "SIGINT the run's process group, then SIGTERM, then SIGKILL",
        cli_help="stop the run (SIGINT, then SIGTERM, then SIGKILL)",
    ),
    Verb(
        "force_kill",
        "K",
        "force kill",
        "SIGTERM the run's process group, then SIGKILL after 1 s (no SIGINT)",
        footer=False,
    ),
    Verb(
        "dump",
        "d",
        "py-spy dump",
        "Show every Python thread's stack (py-spy dump; runs at once, it only reads)",
        cli_help="py-spy dump of the run's Python processes",
        confirm=False,  # each process pauses for milliseconds; nothing is changed
    ),
    Verb(
        "flush",
        "f",
        "flush live",
        "Make the running process flush stdout and go line-buffered",
        cli_help="flush a live process's stdout through gdb",
    ),
    Verb(
        "attach",
        "a",
        "attach",
        "Open the tmux session in this terminal; detach to come back",
        runs="terminal",
        changes=False,  # in --read-only tmux's read-only client: keys do not reach the run
        read_only_label="attach -r",
        read_only_help="Open the tmux session read-only (`tmux attach -r`: you watch, "
        "your keys do not reach the run); Ctrl-b d comes back",
    ),
    Verb(
        "launch",
        "l",
        "launch",
        "Start the run from the config's [run] section",
        cli_help="start the [run] command from the config in tmux",
        footer=False,
    ),
    Verb(
        "watch_log",
        "w",
        "real log",
        "Follow the file the process really writes",
        changes=False,  # following another file changes nothing
        runs="view",
    ),
)
VERB_BY_ID = {v.id: v for v in VERBS}
CLI_VERBS = tuple(v.id for v in VERBS if v.cli_help)

RULES: dict[str, WhyNot] = {
    "relaunch": _relaunch,
    "kill": _kill,
    "force_kill": _kill,
    "dump": _dump,
    "flush": _flush,
    "attach": _attach,
    "launch": _launch,
    "watch_log": _watch_log,
}


def why_not(verb: str, snap: Snapshot, *, read_only: bool, can_launch: bool = False) -> str | None:
    """None when `verb` applies now, else the reason in a few words."""
    v = VERB_BY_ID.get(verb)
    if v is None:
        return f"unknown action {verb}"
    if read_only and v.changes:
        return "read-only mode (--read-only)"
    if snap.connection != ConnectionState.CONNECTED:
        return f"not connected ({snap.connection.value})"
    return RULES[verb](snap, can_launch)


# The dashboard's other keys, by binding id (ui/app.py binds them from here):
# SCREEN_KEYS may be rebound in [keys], FIXED_KEYS may not.
SCREEN_KEYS = {
    "quit": "q",
    "help": "question_mark",
    "filter": "slash",
    "pause": "p",
    "history": "h",
}
FIXED_KEYS = {"back": "escape", "graphs": "g", "notices": "n", "palette": "ctrl+p"}
_SAME_KEY = {"?": "question_mark", "/": "slash", "esc": "escape"}  # as a user may write it


def key_clash(keys: dict[str, str]) -> tuple[str, str, str] | None:
    """(binding id, key, the id that has it already) when [keys] gives one
    key to two bindings — kill = "q" would leave no key to quit — else None."""
    bound = {**{v.id: v.key for v in VERBS}, **SCREEN_KEYS, **keys}
    owner: dict[str, str] = {_SAME_KEY.get(k, k): i for i, k in FIXED_KEYS.items()}
    for name in sorted(bound, key=lambda n: (n in keys, n)):  # the defaults first
        for given in bound[name].split(","):  # "k,x": several keys
            key = _SAME_KEY.get(given.strip(), given.strip())
            if owner.get(key, name) != name:
                return name, given.strip(), owner[key]
            owner[key] = name
    return None


def key_of(verb: str, keys: dict[str, str] | None = None) -> str:
    """The key that runs `verb`: the user's ([keys] in the config), else the default."""
    bound = (keys or {}).get(verb)
    if bound:
        return bound
    v = VERB_BY_ID.get(verb)
    return v.key if v is not None else ""


def keyed(verb: str, label: str, keys: dict[str, str] | None = None) -> str:
    """A finding's verb as the user presses it: '[r] relaunch unbuffered'."""
    if not label:
        return ""
    key = key_of(verb, keys)
    return f"[{key}] {label}" if key else label
