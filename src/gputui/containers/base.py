"""What every kind of container is: the `Container` base class, its
`CtStatus`, a host's listing of its containers and the owner a cgroup path
names. Each kind lives in its own module beside this one and is registered
in `gputui.containers.KINDS`.

A kind says how to run argv inside it (`wrap`), how to run it with a
terminal (`attach`), how to ask the host whether it runs (`status_argv`,
`read_status`), how to phrase, for a person, a command to run in it
(`phrase`), which spec text names it (`SPEC_PREFIXES`, `from_spec`),
which cgroup paths are its (`CGROUP_RE`, `read_cgroup`, `owns`), how the
host lists its containers (`list_argv`, `read_list`, `place`) and what its
main process is (`logs_argv`, `restart_argv`): nothing outside this package
asks which kind a container is. `Host` is none: a plain GPU server, or this
machine with --local.

Pure: argv building and text reading only; remote/target.py runs them.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from gputui.errors import ContainerError

# `docker exec` and `kubectl exec` start from the image's environment, often
# with no LANG: tmux then takes its client for a non-UTF-8 terminal and
# prints the control characters of gputui's -F formats as '_'. pct passes
# the caller's locale; these kinds get one that says UTF-8.
UTF8 = "LC_CTYPE=C.UTF-8"
# `docker restart -t`: SIGTERM to the main process, SIGKILL after this.
RESTART_GRACE_S = 10

# The PATH interpreters and tools gputui starts in a target are looked up
# on first: system directories, not the container's or the image's own (a
# venv's bin or ~/.local/bin first on it ran a planted `python3` or `tmux`
# as root: issue 34).
FIXED_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# What every command gputui runs in a Docker/Podman container or a pod goes
# through: from `/`, with the system directories first on PATH (a tool the
# NVIDIA toolkit or the image adds elsewhere is still found after them).
# Interpreters and tools root runs are checked for root's ownership besides
# (remote.identity.PYTHON_SCRIPT, the agent's tmux).
IN_CONTAINER = [
    "/bin/sh",
    "-c",
    f'PATH={FIXED_PATH}${{PATH:+:$PATH}}; export PATH; cd / && exec "$@"',
    "gputui-exec",
]


class CtStatus(str, Enum):
    """State of the container the run lives in, or NONE when gputui watches
    a plain host."""

    RUNNING = "running"
    STOPPED = "stopped"
    MISSING = "missing"
    NONE = "none"
    UNKNOWN = "unknown"


@dataclass
class ContainerListing:
    """One container as the host lists it: number (a Docker/Podman ID), state, name, lock."""

    id: int | str
    status: str  # "running", "stopped", ... as the host tool prints it
    name: str = ""
    lock: str = ""


@dataclass(frozen=True)
class CgroupOwner:
    """Which container a host process's cgroup v2 path puts it in."""

    kind: str  # the kind's `kind`: "lxc", "docker", "podman", "pod"
    ident: str  # CT number, or the container ID (lower-case hex)
    pod_uid: str = ""  # kubepods: the pod's UID
    # a numbered container's number (a Proxmox CT's), read from `ident`
    number: int | None = field(default=None, compare=False)


class Container(abc.ABC):
    """A place on the host that commands enter through a host tool."""

    id: int | None = None  # a Proxmox CT's number; None for the host and other kinds
    kind: str = ""  # "lxc", "docker", "podman", "pod"; "" for the host itself
    TOOL: ClassVar[str] = ""  # the host tool that enters it ("pct", "docker"); "" for the host
    # How `parse_container` knows the kind: the words before ':' in its spec
    # ("docker" for docker:NAME), and the spec's grammar for the error line.
    SPEC_PREFIXES: ClassVar[tuple[str, ...]] = ()
    GRAMMAR: ClassVar[str] = ""
    # The config key and flag (--SETTING) that name a container of this
    # kind: "ct" for --ct N, "docker" for --docker NAME; FIELD: the Settings
    # field that holds it, SETTING's own name unless the kind says another
    # ("ct_id": a CT's number).
    SETTING: ClassVar[str] = ""
    FIELD: ClassVar[str] = ""

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if "SETTING" in cls.__dict__ and "FIELD" not in cls.__dict__:
            cls.FIELD = cls.SETTING

    # The flag's words in `gputui --help` and its value's type (also the
    # config key's): cli/main.py and config.py make both from KINDS.
    FLAG_HELP: ClassVar[str] = ""
    FLAG_METAVAR: ClassVar[str] = "NAME"
    SETTING_TYPE: ClassVar[type] = str
    # Which cgroup v2 paths are this kind's: group 1 is the ident (CT number,
    # container ID). `cgroup_owner` asks the kinds by CGROUP_ORDER, lowest
    # first; the first that answers wins (a Docker container nested in a CT
    # is the CT's). A path holding CGROUP_TREE is this kind's or no one's.
    CGROUP_RE: ClassVar[re.Pattern[str] | None] = None
    CGROUP_ORDER: ClassVar[int] = 100
    CGROUP_TREE: ClassVar[str] = ""
    # The host view lists the host's containers with the kinds that have a
    # LIST_ORDER, lowest first: the first whose tool answers is the host's
    # kind. TOOL_DECIDES_HOST: a host with this kind's tool is this kind's
    # even while the tool fails (a Proxmox host); else the next kind is asked.
    # HOST_RUNS_TOO: the host's own processes may be a run too (its row first).
    LIST_ORDER: ClassVar[int | None] = None
    TOOL_DECIDES_HOST: ClassVar[bool] = False
    HOST_RUNS_TOO: ClassVar[bool] = False
    # The host keeps the output of its main process (`docker logs`): the run
    # may be that process, with no tmux session (remote/mainproc.py).
    KEEPS_LOGS: ClassVar[bool] = False

    @classmethod
    def from_spec(cls, spec: str, context: str = "") -> Container | None:
        """The container a spec text names when it is this kind's
        ("docker:NAME"), else None. ValueError: one line (a bad name)."""
        prefix, colon, rest = spec.partition(":")
        if colon and rest and prefix in cls.SPEC_PREFIXES:
            return cls.from_name(rest, context)
        return None

    @classmethod
    def read_setting(cls, text: str) -> object:
        """The flag's text -> its Settings value (a name as given; the
        name is checked where the container is made). ValueError: one line."""
        return text

    @classmethod
    def from_setting(cls, value: object, context: str = "") -> Container:
        """The container its SETTING's value names (--docker NAME: NAME).
        ValueError: one line."""
        spec = f"{cls.SPEC_PREFIXES[0]}:{value}"
        found = cls.from_spec(spec, context)
        if found is None:  # an empty name
            raise ValueError(f"{spec!r} is not {cls.GRAMMAR}")
        return found

    def settings_fields(self) -> dict[str, object]:
        """The Settings fields that name this container ({FIELD: NAME});
        none for the host. `from_setting` reads them back."""
        return {}

    @classmethod
    def from_name(cls, name: str, context: str = "") -> Container:
        """The container of this kind that `name` (the spec after ':') names."""
        raise ValueError(f"{name!r}: no {cls.kind or 'container'} is named by a spec")

    @classmethod
    def read_cgroup(cls, path: str) -> CgroupOwner | None:
        """A cgroup v2 path -> its owner when it lies in a container of this kind."""
        m = cls.CGROUP_RE.search(path) if cls.CGROUP_RE is not None else None
        return CgroupOwner(cls.kind, m.group(1).lower()) if m else None

    @property
    def spec(self) -> str:
        """The text `parse_container` reads back ("200", "docker:NAME"); '' for the host."""
        return ""

    def owns(self, owner: CgroupOwner) -> bool:
        """Whether a host process in cgroup `owner` runs in this container.
        Kinds known by name, not id, cannot tell from the path alone (False):
        their PID namespace says (the agent's hello)."""
        return False

    @property
    @abc.abstractmethod
    def words(self) -> str:
        """How a person names it: 'CT 200', 'the host'."""

    @property
    def label(self) -> str:
        """What follows the host in a target label ('ct 200'), '' for none."""
        return ""

    @property
    def listing_key(self) -> str:
        """Its key in the host's listing (`Snapshot.container_names`,
        "lxc:201"); '' when it is known by its name alone."""
        return ""

    @abc.abstractmethod
    def wrap(self, argv: list[str]) -> list[str]:
        """argv as the host must run it to reach the container."""

    def attach(self, argv: list[str]) -> list[str]:
        """argv as the host must run it with a terminal (tmux attach)."""
        return self.wrap(argv)

    def phrase(self, command: str) -> str:
        """A command line, as a person would type it on the host to run it here."""
        return command

    def status_argv(self) -> list[str] | None:
        """The host command that says whether the container runs; None: nothing to ask."""
        return None

    def read_status(self, text: str) -> CtStatus | None:
        """The state in a status reply or an error text; None when it does not say."""
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        """The error when the host lacks the container tool (not this kind of host)."""
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        """The one-line error, with the fix, when the container cannot run commands."""
        return None

    def missing_evidence(self) -> tuple[str, str]:
        """(what the host says, the fix) for a container that does not exist."""
        return ("", "")

    def stopped_evidence(self) -> tuple[str, str]:
        """(what the host says, the fix) for a stopped container."""
        return ("", "")

    def grow_disk_hint(self) -> str:
        """How to give the container a larger disk, from the host ('' for none)."""
        return ""

    def more_shm_hint(self) -> str:
        """How to give the container a larger /dev/shm ('' : the generic
        remount inside it is the way)."""
        return ""

    def neighbours_argv(self) -> list[str] | None:
        """The host command listing the host's containers of this kind (to
        name a GPU holder in another one); None: nothing to ask."""
        return None

    def read_neighbours(self, text: str) -> dict[str, str]:
        """`neighbours_argv` output -> {"lxc:201": "eval-box", ...}."""
        return {}

    # ------------------------------------------------------------ the host's listing

    @classmethod
    def list_argv(cls) -> list[str] | None:
        """The host command that lists every container of this kind; None: none."""
        return None

    @classmethod
    def read_list(cls, text: str) -> list[ContainerListing]:
        """`list_argv` output -> the listed containers."""
        return []

    @classmethod
    def tool_absent(cls, exit_status: int | None, err: str) -> bool:
        """Whether a failed host command says the host has no such tool."""
        return exit_status == 127 or (bool(cls.TOOL) and cls.TOOL in err and "not found" in err)

    @classmethod
    def place(cls, listed: ContainerListing) -> int | str:
        """A listed container's key in the host view, which `container_for`
        reads back: "docker:NAME" (a CT: its number)."""
        return f"{cls.kind}:{listed.name}"

    @classmethod
    def listed_names(cls, listing: list[ContainerListing]) -> dict[str, str]:
        """Listed containers -> {"<kind>:<id>": name} (`Snapshot.container_names`)."""
        return listing_names(cls.kind, listing)

    # ------------------------------------------------------------ its main process

    def logs_words(self) -> str:
        """How a person reads its main process's output on the host
        ('docker logs trainer'); '' for a kind that keeps none."""
        return ""

    def logs_argv(self, since: str | None, tail: int) -> list[str] | None:
        """The host command following its main process's output with time
        stamps: from `since` (a stamp as printed), else the last `tail`
        lines; None for a kind that keeps none."""
        return None

    def restart_argv(self) -> list[str] | None:
        """The host command restarting its main process, its log kept
        (`docker restart`); None where that cannot be done."""
        return None

    def started_argv(self) -> list[str] | None:
        """The host command printing 'STATE STARTED_AT' of the container."""
        return None

    def main_env_words(self) -> str:
        """Where a person sets its main process's environment (the fix for
        a buffered stdout with no tmux session); '' for a kind with none."""
        return ""

    def why_no_restart(self) -> str:
        """Why the relaunch verb cannot restart its main process (no tmux
        session named); '' when `restart_argv` can."""
        return "" if self.restart_argv() is not None else "no session selected"

    def restart_refused(self) -> tuple[str, str]:
        """(why, the fix): the one line refusing to restart its main process."""
        return (f"{self.words} has no tmux session to relaunch", "name one with --session NAME")


class Host(Container):
    """No container: commands run on the host itself."""

    @property
    def words(self) -> str:
        return "the host"

    def wrap(self, argv: list[str]) -> list[str]:
        return list(argv)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Host)

    def __hash__(self) -> int:
        return hash(Host)

    def __repr__(self) -> str:
        return "Host()"


def listing_names(kind: str, listing: list[ContainerListing]) -> dict[str, str]:
    """Listed containers -> {"<kind>:<id>": name} (the keys of
    `Snapshot.container_names`; a CT's id is its number)."""
    return {f"{kind}:{c.id}": c.name for c in listing if c.name}
