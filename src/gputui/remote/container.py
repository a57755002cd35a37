"""Where the run lives: a container on the host, or the host itself.

One class per kind of container. Each says how to run argv inside it
(`wrap`), how to run it with a terminal (`attach`), how to ask the host
whether it runs (`status_argv`, `read_status`), and how to phrase, for a
person, a command to run in it (`phrase`). The kinds today are Proxmox LXC
(`pct`) and none (`Host`: a plain GPU server, or this machine with --local);
`docker exec` or `kubectl exec` would be one more class here.

Pure: argv building and text reading only; remote/target.py runs them.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from gputui.errors import ContainerError
from gputui.model import CtStatus


@dataclass
class ContainerListing:
    """One container as the host lists it: number, state, name, lock."""

    id: int
    status: str  # "running", "stopped", ... as the host tool prints it
    name: str = ""
    lock: str = ""


class Container(abc.ABC):
    """A place on the host that commands enter through a host tool."""

    id: int | None = None  # the container's number; None for the host itself

    @property
    @abc.abstractmethod
    def words(self) -> str:
        """How a person names it: 'CT 200', 'the host'."""

    @property
    def label(self) -> str:
        """What follows the host in a target label ('ct 200'), '' for none."""
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


class ProxmoxLXC(Container):
    """A Proxmox VE LXC container, entered with `pct exec CT -- argv`.

    pct hands argv to lxc-attach with no shell, so the host shell is the only
    one that parses the command string, and the transport quotes it once.
    `pct` is a Perl program: each call costs a few hundred ms on a real host.
    """

    TOOL = "pct"
    # Where a user finds the number (for errors about --ct).
    HOW_TO_LIST = "`pct list` on the host"

    def __init__(self, ct: int) -> None:
        self.id = int(ct)

    @property
    def words(self) -> str:
        return f"CT {self.id}"

    @property
    def label(self) -> str:
        return f"ct {self.id}"

    def wrap(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", str(self.id), "--", *argv]

    def phrase(self, command: str) -> str:
        return f"{self.TOOL} exec {self.id} -- {command}"

    def status_argv(self) -> list[str]:
        return [self.TOOL, "status", str(self.id)]

    @classmethod
    def list_argv(cls) -> list[str]:
        """The host command that lists every container on the host."""
        return [cls.TOOL, "list"]

    @staticmethod
    def read_list(text: str) -> list[ContainerListing]:
        """`pct list` output -> containers. Columns `VMID Status Lock Name`,
        the Lock column usually empty (then a row has three words)."""
        out: list[ContainerListing] = []
        for line in text.splitlines():
            words = line.split()
            if len(words) < 2 or not words[0].isdigit():
                continue  # the header, or noise
            lock, name = "", ""
            if len(words) >= 4:
                lock, name = words[2], " ".join(words[3:])
            elif len(words) == 3:
                name = words[2]
            out.append(ContainerListing(int(words[0]), words[1], name, lock))
        return out

    @classmethod
    def tool_absent(cls, exit_status: int | None, err: str) -> bool:
        """Whether a failed host command says the host has no container tool."""
        return exit_status == 127 or (cls.TOOL in err and "not found" in err)

    def read_status(self, text: str) -> CtStatus | None:
        """`pct status` output or a pct error (`CT 200 not running`,
        `Configuration file ... does not exist`) -> the state."""
        low = text.lower()
        if "status: running" in low:
            return CtStatus.RUNNING
        if "status: stopped" in low or "not running" in low:
            return CtStatus.STOPPED
        if "does not exist" in low:
            return CtStatus.MISSING
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        if self.tool_absent(exit_status, err):
            return ContainerError(
                f"`{self.TOOL}` not found on {where}: it is not a Proxmox host",
                "use without --ct on a plain GPU server",
            )
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        if status == CtStatus.MISSING:
            return ContainerError(
                f"container {self.id} does not exist on {where}",
                f"check the number with {self.HOW_TO_LIST}",
            )
        if status == CtStatus.STOPPED:
            return ContainerError(
                f"container {self.id} on {where} is stopped",
                f"start it with `{self.TOOL} start {self.id}` on the host",
            )
        return None

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f"{self.TOOL}: Configuration file 'nodes/<node>/lxc/{self.id}.conf' does not exist",
            f"check the CT number: {self.HOW_TO_LIST}, then --ct N",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (f"{self.TOOL} status {self.id}: stopped", f"{self.TOOL} start {self.id}")

    def grow_disk_hint(self) -> str:
        return (
            f"grow its disk on the host: {self.TOOL} resize {self.id} rootfs +50G "
            "(mpN instead of rootfs for a mount point)"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProxmoxLXC) and other.id == self.id

    def __hash__(self) -> int:
        return hash((ProxmoxLXC, self.id))

    def __repr__(self) -> str:
        return f"ProxmoxLXC({self.id})"


def container_for(ct: Container | int | str | None) -> Container:
    """The container a --ct value (or config `ct`) names: a number is a Proxmox CT."""
    if isinstance(ct, Container):
        return ct
    return Host() if ct is None else ProxmoxLXC(int(ct))
