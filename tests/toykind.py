"""A toy container kind, written the way a new kind is (issue 35): this one
module and its line in `containers.KINDS` (test_container_toy.py adds the
line). Nothing else in gputui learns of it.

`toybox` (tests/standins/toybox) runs its containers: `toybox list` prints
`NAME<TAB>STATE` lines, `toybox exec NAME -- ARGV` runs ARGV in the running
container NAME (its own tmux directory), else says
`toybox: NAME is not running` (exit 1) or `toybox: no container NAME` (exit 1).
Its processes lie in the cgroup `/toybox.slice/toybox-<id>.scope`."""

from __future__ import annotations

import re
from typing import ClassVar

from gputui.containers.base import Container, ContainerListing, CtStatus
from gputui.errors import ContainerError

NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,62}")


class Toy(Container):
    """A toybox container, entered with `toybox exec NAME -- argv`."""

    TOOL = "toybox"
    kind = "toy"
    SPEC_PREFIXES = ("toy",)
    GRAMMAR = "toy:NAME"
    CGROUP_RE: ClassVar[re.Pattern[str] | None] = re.compile(r"/toybox-([0-9a-f]{12,64})\.scope")
    CGROUP_ORDER = 40
    LIST_ORDER = 40

    def __init__(self, name: str) -> None:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"{name!r} is not a toybox container name")
        self.name = name

    @classmethod
    def from_name(cls, name: str, context: str = "") -> Toy:
        return cls(name)

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def words(self) -> str:
        return f"toybox {self.name}"

    @property
    def label(self) -> str:
        return f"toy {self.name}"

    def wrap(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", self.name, "--", *argv]

    def phrase(self, command: str) -> str:
        return f"{self.TOOL} exec {self.name} -- {command}"

    @classmethod
    def list_argv(cls) -> list[str]:
        return [cls.TOOL, "list"]

    @classmethod
    def read_list(cls, text: str) -> list[ContainerListing]:
        out = []
        for line in text.splitlines():
            name, _, state = line.partition("\t")
            if NAME_RE.fullmatch(name) and state:
                out.append(ContainerListing(name, state.strip(), name))
        return out

    def read_status(self, text: str) -> CtStatus | None:
        if "no container" in text:
            return CtStatus.MISSING
        return CtStatus.STOPPED if "is not running" in text else None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        if status == CtStatus.MISSING:
            return ContainerError(f"{self.words} does not exist on {where}", "`toybox list`")
        if status == CtStatus.STOPPED:
            return ContainerError(f"{self.words} on {where} is stopped", "`toybox start`")
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Toy) and other.name == self.name

    def __hash__(self) -> int:
        return hash((Toy, self.name))
