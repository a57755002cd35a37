"""The verbs: one declaration each, read by the banner, help, footer,
palette, the CLI subcommands, the recorder and the actions — id, default
key, label, whether it changes something, where it runs, why it does not
apply now, its typed options (each its CLI flag, and its palette entry when
it has one), its audit words and what it expects of the GPUs afterwards.

Pure: no Textual, no I/O. What a verb does — its planner and executor —
is its `gputui.actions.Action` (`Action(verb, plan, execute)`, beside the
verb's own code in actions/): those need a Target and Settings, floors above
this one, while config ([keys]) and the recorder (audit words) read the
declaration from below them. Findings name verbs by id and the UI shows the
key the user bound.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputui.containers import CtStatus, Host
from gputui.model import ConnectionState, Proc, Snapshot

WhyNot = Callable[[Snapshot, bool], "str | None"]  # (snapshot, can_launch) -> reason or None


# ---------------------------------------------------------------- options
# A verb's options are a frozen dataclass whose fields are declared with
# switch() / numbers() / text(): each field is its `gputui VERB` flag (cli/
# actions.py adds them from here), and each switch is also an entry of the
# command palette, the verb with that switch on (ui/commands.py), unless it
# says palette=False (kill --force: force_kill has a key of its own).


class OptionKind(enum.Enum):
    SWITCH = "switch"  # --native: off unless given
    NUMBERS = "numbers"  # --pid N, repeatable: a tuple of whole numbers
    TEXT = "text"  # --py-spy PATH: None unless given


@dataclass(frozen=True)
class Option:
    name: str  # the options dataclass's field
    flag: str  # the CLI flag: "--native"
    kind: OptionKind
    help: str
    metavar: str = ""
    palette: bool = False  # an entry of the palette: the verb with this switch on


_OPTION = "gputui.option"


def _option(kind: OptionKind, flag: str, help_: str, default: Any, **more: Any) -> Any:
    # the field's name is filled in by options_of(), which reads the dataclass
    return field(default=default, metadata={_OPTION: Option("", flag, kind, help_, **more)})


def switch(flag: str, help_: str, *, palette: bool = True) -> Any:
    """A yes/no option, off by default."""
    return _option(OptionKind.SWITCH, flag, help_, False, palette=palette)


def numbers(flag: str, help_: str, *, metavar: str) -> Any:
    """A repeatable whole-number option: a tuple, empty when not given."""
    return _option(OptionKind.NUMBERS, flag, help_, (), metavar=metavar)


def text(flag: str, help_: str, *, metavar: str) -> Any:
    """A text option: None when not given."""
    return _option(OptionKind.TEXT, flag, help_, None, metavar=metavar)


def options_of(cls: type) -> tuple[Option, ...]:
    """The options a verb's options dataclass declares, in field order."""
    return tuple(
        dataclasses.replace(f.metadata[_OPTION], name=f.name)
        for f in dataclasses.fields(cls)
        if _OPTION in f.metadata
    )


@dataclass(frozen=True)
class NoOptions:
    """A verb with no options of its own."""


@dataclass(frozen=True)
class KillOptions:
    force: bool = switch("--force", "skip SIGINT: SIGTERM, then SIGKILL after 1 s", palette=False)


@dataclass(frozen=True)
class FlushOptions:
    pids: tuple[int, ...] = numbers("--pid", "only this process (repeatable)", metavar="PID")


@dataclass(frozen=True)
class DumpOptions:
    pids: tuple[int, ...] = numbers("--pid", "only this process (repeatable)", metavar="PID")
    native: bool = switch("--native", "include native (C/C++) frames")
    locals_: bool = switch("--locals", "include local variables")
    py_spy: str | None = text("--py-spy", "path of py-spy inside the container", metavar="PY_SPY")


class Audit(enum.Enum):
    """The verb's lines in the audit log (actions/plan.py)."""

    END = "end"  # one line when it has run
    # a line when it begins too, and what it causes (the old run gone, the log
    # quiet) is the user's doing, not news: the recorder expects it (record/)
    BEGIN_AND_END = "begin and end"


class GpuAfter(enum.Enum):
    """What the verb expects of the GPUs afterwards."""

    UNCHANGED = "unchanged"  # it touches no GPU process
    # the run's processes leave the GPUs: its result says what their memory
    # did, read from the monitor's GPU samples (none with simulated GPUs)
    FREED = "freed"


@dataclass(frozen=True)
class Verb:
    id: str
    key: str  # the default key; a user's [keys] table may bind another
    label: str
    help: str
    why_not: WhyNot  # None when it applies to this snapshot, else why not
    options: type = NoOptions  # a dataclass of switch/numbers/text fields
    preset: Any = None  # options fixed for this verb (force_kill: KillOptions(force=True))
    changes: bool = True  # acts on the run: off in --read-only
    confirm: bool = True  # the dashboard asks first; False: it only reads, runs at once
    cli_help: str = ""  # non-empty: also a `gputui VERB` subcommand
    # where the confirmed plan runs: "target" (actions.execute, audited),
    # "terminal" (its argv in this terminal, the dashboard suspended: attach),
    # "view" (the dashboard follows the plan's log: watch_log)
    runs: str = "target"
    footer: bool = True  # shown in the footer (all are in help and the palette)
    # offered under the banner's finding when it applies, in this order (0: never):
    # a fix for a silent log (flush) before a look inside (dump)
    hint: int = 0
    audit: Audit = Audit.END
    gpu_after: GpuAfter = GpuAfter.UNCHANGED
    # its session is the config's [run] one, not the one the dashboard shows
    session_from_config: bool = False
    # what it is in --read-only when it stays on there, but works otherwise (attach -r)
    read_only_label: str = ""
    read_only_help: str = ""

    def label_in(self, read_only: bool) -> str:
        """The label the footer, palette and help show."""
        return self.read_only_label if read_only and self.read_only_label else self.label

    def help_in(self, read_only: bool) -> str:
        return self.read_only_help if read_only and self.read_only_help else self.help

    def option_list(self) -> tuple[Option, ...]:
        """Its options (each a CLI flag); none when its options are preset."""
        return () if self.preset is not None else options_of(self.options)

    def make_options(self, given: dict[str, Any] | None = None) -> Any:
        """Its options dataclass from {field: value} (the CLI's flags, the
        palette's switch); the preset, when it has one."""
        if self.preset is not None:
            return self.preset
        return self.options(**(given or {}))

    @property
    def expected(self) -> bool:
        """What it causes is the user's doing: the recorder takes it for no news."""
        return self.audit is Audit.BEGIN_AND_END


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
    why = container.why_no_restart()  # '': docker/podman restart
    if why == "no session selected" and snap.session_name:  # k, and it closed with its run
        return (
            f"session {snap.session_name} is gone, and its command with it — start it "
            "again in the container, or put it in the config's [run] command for l to launch"
        )
    return why or None


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
        _relaunch,
        cli_help="restart the run unbuffered (PYTHONUNBUFFERED=1, tee -a -i)",
        audit=Audit.BEGIN_AND_END,
        gpu_after=GpuAfter.FREED,
    ),
    Verb(
        "kill",
        "k",
        "kill",
        "SIGINT the run's process group, then SIGTERM, then SIGKILL",
        _kill,
        options=KillOptions,
        cli_help="stop the run (SIGINT, then SIGTERM, then SIGKILL)",
        audit=Audit.BEGIN_AND_END,
        gpu_after=GpuAfter.FREED,
    ),
    Verb(
        "force_kill",
        "K",
        "force kill",
        "SIGTERM the run's process group, then SIGKILL after 1 s (no SIGINT)",
        _kill,
        options=KillOptions,
        preset=KillOptions(force=True),
        footer=False,
        audit=Audit.BEGIN_AND_END,  # its plan is kill's, forced
        gpu_after=GpuAfter.FREED,
    ),
    Verb(
        "dump",
        "d",
        "py-spy dump",
        "Show every Python thread's stack (py-spy dump; runs at once, it only reads)",
        _dump,
        options=DumpOptions,
        cli_help="py-spy dump of the run's Python processes",
        confirm=False,  # each process pauses for milliseconds; nothing is changed
        hint=2,
    ),
    Verb(
        "flush",
        "f",
        "flush live",
        "Make the running process flush stdout and go line-buffered",
        _flush,
        options=FlushOptions,
        cli_help="flush a live process's stdout through gdb",
        hint=1,
    ),
    Verb(
        "attach",
        "a",
        "attach",
        "Open the tmux session in this terminal; detach to come back",
        _attach,
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
        _launch,
        cli_help="start the [run] command from the config in tmux",
        footer=False,
        audit=Audit.BEGIN_AND_END,
        session_from_config=True,
    ),
    Verb(
        "watch_log",
        "w",
        "real log",
        "Follow the file the process really writes",
        _watch_log,
        changes=False,  # following another file changes nothing
        runs="view",
    ),
)
VERB_BY_ID = {v.id: v for v in VERBS}
CLI_VERBS = tuple(v.id for v in VERBS if v.cli_help)


def why_not(verb: str, snap: Snapshot, *, read_only: bool, can_launch: bool = False) -> str | None:
    """None when `verb` applies now, else the reason in a few words."""
    v = VERB_BY_ID.get(verb)
    if v is None:
        return f"unknown action {verb}"
    if read_only and v.changes:
        return "read-only mode (--read-only)"
    if snap.connection != ConnectionState.CONNECTED:
        return f"not connected ({snap.connection.value})"
    down = _container_down(snap)
    if down and not (v.id == "relaunch" and _restart_starts_it(snap)):
        return down
    return v.why_not(snap, can_launch)


def _restart_starts_it(snap: Snapshot) -> bool:
    """The run is its container's main process, which a restart starts
    (docker, podman): no tmux session — a stopped Proxmox CT has none
    either, its sessions ended with it (monitor/runread.py)."""
    container = snap.container if snap.container is not None else Host()
    return snap.session is None and not container.why_no_restart()


def _container_down(snap: Snapshot) -> str | None:
    """The run's container is stopped or gone: no verb reaches into it (the
    sessions and processes shown are the last ones seen before it stopped)."""
    if snap.ct_status not in (CtStatus.STOPPED, CtStatus.MISSING):
        return None
    c = snap.container
    where = c.words if c is not None and (c.id is None and c.kind) else f"CT {snap.ct_id}"
    return f"{where} is {snap.ct_status.value}"


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
