"""A Proxmox VE LXC container (--ct N, spec "200"): entered with `pct exec`,
listed with `pct list`, its processes under the cgroup `/lxc/<N>/`. Pure."""

from __future__ import annotations

import re
from typing import ClassVar

from gputui.containers.base import (
    CgroupOwner,
    Container,
    ContainerListing,
    CtStatus,
)
from gputui.errors import ContainerError


class ProxmoxLXC(Container):
    """A Proxmox VE LXC container, entered with `pct exec CT -- argv`.

    pct hands argv to lxc-attach with no shell, so the host shell is the only
    one that parses the command string, and the transport quotes it once.
    `pct` is a Perl program: each call costs a few hundred ms on a real host.
    """

    TOOL = "pct"
    # Where a user finds the number (for errors about --ct).
    HOW_TO_LIST = "`pct list` on the host"
    kind = "lxc"
    GRAMMAR = "N (a Proxmox CT)"
    SETTING = "ct"
    FIELD = "ct_id"
    FLAG_HELP = "Proxmox LXC container of the run"
    FLAG_METAVAR = "N"
    SETTING_TYPE = int
    CGROUP_RE: ClassVar[re.Pattern[str] | None] = re.compile(
        r"/lxc(?:\.payload)?[./]([0-9]+)(?:/|$)"
    )
    CGROUP_ORDER = 10  # before Docker and Podman: one nested in a CT is the CT's
    LIST_ORDER = 10  # a host with `pct` is a Proxmox host
    TOOL_DECIDES_HOST = True

    def __init__(self, number: int) -> None:
        self.id = int(number)

    @classmethod
    def read_setting(cls, text: str) -> int:
        """--ct's text -> the CT number, in ASCII digits (int() alone reads
        '２００' as 200). ValueError: one line."""
        t = text.strip()
        if not (t.isascii() and t.isdigit()):
            raise ValueError(
                f"{text!r} is not a CT number (digits 0-9, e.g. 200, as {cls.HOW_TO_LIST} shows)"
            )
        if int(t) < 1:
            raise ValueError(f"{text!r} is not a CT number (e.g. 200)")
        return int(t)

    @classmethod
    def from_setting(cls, value: object, context: str = "") -> ProxmoxLXC:
        return cls(int(value))  # type: ignore[call-overload]  # Settings.ct_id: an int

    def settings_fields(self) -> dict[str, object]:
        return {self.FIELD: self.id}

    @classmethod
    def from_spec(cls, spec: str, context: str = "") -> ProxmoxLXC | None:
        """A CT's spec is its number alone: "200"."""
        if not (spec.isascii() and spec.isdigit()):
            return None
        if int(spec) < 1:
            raise ValueError(f"CT number {spec} is invalid")
        return cls(int(spec))

    @property
    def spec(self) -> str:
        return str(self.id)

    @classmethod
    def read_cgroup(cls, path: str) -> CgroupOwner | None:
        """`/lxc/200/ns/...` -> CT 200 (its number too)."""
        owner = super().read_cgroup(path)
        return (
            None
            if owner is None
            else CgroupOwner(owner.kind, owner.ident, number=cls.number(owner.ident))
        )

    def owns(self, owner: CgroupOwner) -> bool:
        return owner.kind == self.kind and owner.ident == str(self.id)

    @property
    def words(self) -> str:
        return f"CT {self.id}"

    @property
    def label(self) -> str:
        return f"ct {self.id}"

    @property
    def listing_key(self) -> str:
        return f"{self.kind}:{self.id}"

    def wrap(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", str(self.id), "--", *argv]

    def phrase(self, command: str) -> str:
        return f"{self.TOOL} exec {self.id} -- {command}"

    def neighbours_argv(self) -> list[str]:
        return self.list_argv()

    def read_neighbours(self, text: str) -> dict[str, str]:
        return self.listed_names(self.read_list(text))

    def status_argv(self) -> list[str]:
        return [self.TOOL, "status", str(self.id)]

    @classmethod
    def list_argv(cls) -> list[str]:
        """The host command that lists every container on the host."""
        return [cls.TOOL, "list"]

    @classmethod
    def place(cls, listed: ContainerListing) -> int | str:
        return listed.id  # a CT is known by its number

    @staticmethod
    def number(text: str) -> int | None:
        """A CT number as text (up to 9 ASCII digits, blanks around) -> int;
        None for anything else (`²00` is no number)."""
        t = text.strip()
        return int(t) if len(t) <= 9 and t.isascii() and t.isdigit() else None

    @classmethod
    def read_list(cls, text: str) -> list[ContainerListing]:
        """`pct list` output -> containers. Columns `VMID Status Lock Name`,
        the Lock column usually empty (then a row has three words)."""
        out: list[ContainerListing] = []
        for line in text.splitlines():
            words = line.split()
            vmid = cls.number(words[0]) if len(words) >= 2 else None
            if vmid is None:
                continue  # the header, or noise (`²00` is no VMID)
            lock, name = "", ""
            if len(words) >= 4:
                lock, name = words[2], " ".join(words[3:])
            elif len(words) == 3:
                name = words[2]
            out.append(ContainerListing(vmid, words[1], name, lock))
        return out

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

    def more_shm_hint(self) -> str:
        return (
            "/dev/shm in a CT is a tmpfs inside the CT's memory limit: raise that on the "
            f"host ({self.TOOL} set {self.id} --memory <MiB>), and remount /dev/shm larger in "
            "the CT if its size is the limit"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProxmoxLXC) and other.id == self.id

    def __hash__(self) -> int:
        return hash((ProxmoxLXC, self.id))

    def __repr__(self) -> str:
        return f"ProxmoxLXC({self.id})"
