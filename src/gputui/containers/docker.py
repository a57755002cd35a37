"""Docker and Podman containers (--docker NAME, --podman NAME; specs
"docker:NAME", "podman:NAME"): entered with `docker exec`/`podman exec`,
listed with `ps -a`, their processes under `docker-<id>.scope` or
`libpod-<id>.scope` cgroups. Podman is Docker's verbs with its own error
texts. Pure."""

from __future__ import annotations

import re
from typing import ClassVar

from gputui.containers.base import (
    IN_CONTAINER,
    RESTART_GRACE_S,
    UTF8,
    CgroupOwner,
    Container,
    ContainerListing,
    CtStatus,
)
from gputui.errors import ContainerError

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")


class Docker(Container):
    """A Docker container, entered with `docker exec -i NAME argv` (no shell:
    the docker CLI stops reading its own flags at NAME). The container runs
    when `docker container inspect` says `running`; `docker exec` into a
    missing one says `Error response from daemon: No such container: NAME`,
    into a stopped one `... container ID is not running` (exit 1)."""

    TOOL = "docker"
    kind = "docker"
    WHAT = "Docker"
    SPEC_PREFIXES = ("docker",)
    GRAMMAR = "docker:NAME"
    SETTING = "docker"
    FLAG_HELP = "Docker container of the run"
    CGROUP_RE: ClassVar[re.Pattern[str] | None] = re.compile(
        r"/docker[-/]([0-9a-f]{12,64})(?:\.scope)?(?:/|$)"
    )
    CGROUP_ORDER = 30
    LIST_ORDER = 30  # no `pct`: a Docker host, else a Podman one
    HOST_RUNS_TOO = True
    KEEPS_LOGS = True

    def __init__(self, name: str, container_id: str = "") -> None:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"{name!r} is not a {self.WHAT} container name or ID")
        self.name = name
        self.container_id = container_id  # the full ID, when known (cgroup paths name it)

    @classmethod
    def from_name(cls, name: str, context: str = "") -> Docker:
        return cls(name)

    def settings_fields(self) -> dict[str, object]:
        return {self.FIELD: self.name}

    @property
    def how_to_list(self) -> str:
        return f"`{self.TOOL} ps -a` on the host"

    @property
    def words(self) -> str:
        return f"{self.kind} container {self.name}"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.name}"

    @property
    def listing_key(self) -> str:
        return f"{self.kind}:{self.container_id}" if self.container_id else ""

    def neighbours_argv(self) -> list[str]:
        return self.list_argv()

    def read_neighbours(self, text: str) -> dict[str, str]:
        return self.listed_names(self.read_list(text))

    def owns(self, owner: CgroupOwner) -> bool:
        ident = self.container_id or self.name
        return (
            owner.kind == self.kind and len(ident) >= 12 and owner.ident.startswith(ident.lower())
        )

    def wrap(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", "-i", *self._as_root(), self.name, *IN_CONTAINER, *argv]

    def attach(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", "-it", *self._as_root(), self.name, *IN_CONTAINER, *argv]

    @staticmethod
    def _as_root() -> list[str]:
        """Root, from `/`: not the image's USER or WORKDIR, which its author
        chose (issue 34: a planted base64.py in the WORKDIR ran as root);
        IN_CONTAINER puts the system directories first on its PATH."""
        return ["-w", "/", "-u", "0", "-e", UTF8]

    def phrase(self, command: str) -> str:
        return f"{self.TOOL} exec {self.name} {command}"

    def status_argv(self) -> list[str]:
        return [self.TOOL, "container", "inspect", "-f", "{{.State.Status}}", self.name]

    @classmethod
    def list_argv(cls) -> list[str]:
        """Every container on the host, one `ID<TAB>NAMES<TAB>STATE` line each."""
        return [cls.TOOL, "ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Names}}\t{{.State}}"]

    @classmethod
    def read_list(cls, text: str) -> list[ContainerListing]:
        """`list_argv` output -> containers (id: the full container ID)."""
        out: list[ContainerListing] = []
        for line in text.splitlines():
            cid, _, rest = line.partition("\t")
            names, _, state = rest.partition("\t")
            if re.fullmatch(r"[0-9a-f]{12,64}", cid.strip()) and names.strip():
                out.append(ContainerListing(cid.strip(), state.strip(), names.strip()))
        return out

    def read_status(self, text: str) -> CtStatus | None:
        """`inspect -f {{.State.Status}}` output or an exec error -> the state."""
        low = text.lower()
        if "no such container" in low or "no such object" in low or "no container with" in low:
            return CtStatus.MISSING
        if "is not running" in low or "state improper" in low or "is paused" in low:
            return CtStatus.STOPPED
        words = low.split()
        if words[:1] == ["running"]:
            return CtStatus.RUNNING
        stopped = ("exited", "created", "paused", "dead", "stopped", "configured", "restarting")
        if words[:1] and words[0] in stopped:
            return CtStatus.STOPPED
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        if self.tool_absent(exit_status, err):
            return ContainerError(
                f"`{self.TOOL}` not found on {where}: it has no {self.WHAT}",
                f"check the host, or use without --{self.kind} on a plain GPU server",
            )
        if "permission denied" in err.lower() and "socket" in err.lower():
            return ContainerError(
                f"`{self.TOOL}` on {where} may not talk to its daemon: {err.strip()[:160]}",
                f"log in as a user in the {self.TOOL} group, or as root (--user root)",
            )
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        if status == CtStatus.MISSING:
            return ContainerError(
                f"{self.words} does not exist on {where}",
                f"check the name with {self.how_to_list}",
            )
        if status == CtStatus.STOPPED:
            return ContainerError(
                f"{self.words} on {where} is not running",
                f"start it with `{self.TOOL} start {self.name}` on the host",
            )
        return None

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f"Error response from daemon: No such container: {self.name}",
            f"check the name: {self.how_to_list}, then --{self.kind} NAME",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (
            f"Error response from daemon: container {self.name} is not running",
            f"{self.TOOL} start {self.name}",
        )

    def grow_disk_hint(self) -> str:
        return (
            f"the container's disk is the host's {self.TOOL} storage: free space there "
            f"(`{self.TOOL} system df`), or write the log to a mounted volume"
        )

    def more_shm_hint(self) -> str:
        return (
            f"{self.TOOL} gives a container 64 MB of /dev/shm unless told: recreate it with "
            f"`{self.TOOL} run --shm-size=16g …` (or `--ipc=host`)"
        )

    def logs_words(self) -> str:
        return f"{self.TOOL} logs {self.name}"

    def logs_argv(self, since: str | None, tail: int) -> list[str]:
        start = ["--since", since] if since else ["--tail", str(int(tail))]
        return [self.TOOL, "logs", "-f", "-t", *start, self.name]

    def main_env_words(self) -> str:
        return f"`{self.TOOL} run -e PYTHONUNBUFFERED=1` (a restart runs the same command)"

    def restart_argv(self) -> list[str]:
        return [self.TOOL, "restart", "-t", str(RESTART_GRACE_S), self.name]

    def started_argv(self) -> list[str]:
        fmt = "{{.State.Status}} {{.State.StartedAt}}"
        return [self.TOOL, "container", "inspect", "-f", fmt, self.name]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.name == self.name  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Podman(Docker):
    """A Podman container: the docker CLI's verbs, its own error texts —
    `Error: no container with name or ID "NAME" found: no such container`,
    `Error: can only create exec sessions on running containers: container
    state improper` (exit 125)."""

    TOOL = "podman"
    kind = "podman"
    WHAT = "Podman"
    SPEC_PREFIXES = ("podman",)
    GRAMMAR = "podman:NAME"
    SETTING = "podman"
    FLAG_HELP = "Podman container of the run"
    CGROUP_RE: ClassVar[re.Pattern[str] | None] = re.compile(
        r"/libpod-(?!conmon-)([0-9a-f]{12,64})(?:\.scope)?(?:/|$)"
    )
    CGROUP_ORDER = 20
    LIST_ORDER = 31

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f'Error: no container with name or ID "{self.name}" found: no such container',
            f"check the name: {self.how_to_list}, then --podman NAME",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (
            "Error: can only create exec sessions on running containers: container state improper",
            f"{self.TOOL} start {self.name}",
        )
