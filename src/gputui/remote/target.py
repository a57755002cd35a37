"""A transport plus the container the run lives in: "run this in CT 200 on
that host". How a container is entered is gputui/containers/' business;
which transport reaches the host (ssh, or this machine) is `make_transport`.
"""

from __future__ import annotations

import logging
import shlex
import time
from dataclasses import dataclass

from gputui.config import Settings, settings_container, split_destination
from gputui.containers import (
    CONTAINER_GRAMMAR,
    Container,
    container_for,
    parse_container,
)
from gputui.errors import GputuiError
from gputui.model import CtStatus
from gputui.remote.base import CommandResult, RemoteProcess, Transport
from gputui.text.untrusted import visible

log = logging.getLogger(__name__)  # `gputui -v` (cli/debuglog.py): each command run
DEBUG_ARGV_CHARS = 2000  # gputui's own scripts are long; the head says which one
DEBUG_ERR_CHARS = 500

TARGET_GRAMMAR = "[user@]host[:port][/ct]"
TARGET_EXAMPLE = "e.g. root@10.1.2.6:22/200, gpu1/200, gpu1/docker:trainer or gpu1"


@dataclass(frozen=True)
class TargetSpec:
    """A target as the user writes it, on any command: `[user@]host[:port][/ct]`."""

    host: str
    user: str | None = None
    port: int | None = None
    ct_id: int | None = None  # a Proxmox CT's number: host/200
    place: str | None = None  # another kind of container: "docker:NAME", "pod:NS/POD/C"

    @property
    def destination(self) -> str:
        """`[user@]host[:port]` (an IPv6 address with a port in brackets)."""
        host = f"[{self.host}]" if ":" in self.host and self.port is not None else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.user}@{host}{port}" if self.user else f"{host}{port}"

    def __str__(self) -> str:
        where = str(self.ct_id) if self.ct_id is not None else self.place
        return self.destination + (f"/{where}" if where else "")

    def matches(self, other: TargetSpec) -> bool:
        """Same host, and no part both sides name differently (a part one
        side leaves out matches any)."""
        if self.host.lower() != other.host.lower():
            return False
        pairs = ((self.user, other.user), (self.port, other.port), (self.ct_id, other.ct_id))
        places = (self.place, other.place)
        return all(a is None or b is None or a == b for a, b in (*pairs, places))


def parse_target(text: str) -> TargetSpec:
    """`[user@]host[:port][/ct]` -> TargetSpec: the one target grammar of
    every command (`--host` takes it too). ValueError: one line saying what
    is wrong."""
    t = text.strip()
    if not t or any(c.isspace() for c in t):
        raise ValueError(f"{text!r} is not {TARGET_GRAMMAR}")
    rest, slash, ct_text = t.partition("/")
    ct_id, place = _place(text, ct_text) if slash else (None, None)
    user, host, port = split_destination(rest)
    if host.startswith("-"):
        raise ValueError(f"{text!r}: a host name cannot start with '-'")
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{text!r}: port {port} is out of range 1-65535")
    return TargetSpec(host=host, user=user, port=port, ct_id=ct_id, place=place)


def _place(text: str, after: str) -> tuple[int | None, str | None]:
    """What follows the host's '/': a CT number, or another kind's spec."""
    if after.isascii() and after.isdigit() and int(after) >= 1:
        return int(after), None
    if ":" not in after:
        if "/" in after:
            raise ValueError(f"{text!r} has more than one '/'")
        raise ValueError(f"{text!r}: the CT after '/' must be a number like 200")
    try:
        return None, parse_container(after).spec
    except ValueError as err:
        raise ValueError(f"{text!r}: after '/' comes {CONTAINER_GRAMMAR} ({err})") from None


def spec_of(settings: Settings) -> TargetSpec | None:
    """The target the settings name as the user gave it (before ssh config
    resolves it); None for this machine."""
    if settings.local or settings.demo or not settings.host:
        return None
    place = settings_container(settings).spec if settings.ct_id is None else ""
    return TargetSpec(settings.host, settings.user, settings.port, settings.ct_id, place or None)


def in_container(container: Container | int | None, argv: list[str]) -> list[str]:
    """argv as the host must run it to reach the container."""
    return container_for(container).wrap(argv)


class Target:
    """A transport plus the container the run lives in (Host() for none).
    `container` may be given as a Container or, for a Proxmox CT, its number."""

    def __init__(self, transport: Transport, container: Container | int | None = None) -> None:
        self.transport = transport
        self.container: Container = container_for(container)

    @property
    def ct_id(self) -> int | None:
        """The Proxmox CT's number; None on a plain host and other kinds."""
        return self.container.id

    @property
    def in_container(self) -> bool:
        """Whether the run lives in a container (of any kind), not on the host."""
        return self.container.kind != ""  # the host's kind is

    @property
    def apps_ct(self) -> int | None:
        """What `gpufeed.parse_apps_block` takes as `ct_id`: the CT number; 0
        for a container of another kind (no `/lxc/N` cgroup is its: its PID
        namespace tells); None on the host itself."""
        return self.ct_id if self.ct_id is not None else (0 if self.in_container else None)

    @property
    def label(self) -> str:
        suffix = self.container.label
        return f"{self.transport.label} {suffix}" if suffix else self.transport.label

    def wrap(self, argv: list[str]) -> list[str]:
        return self.container.wrap(argv)

    def attach_argv(self, argv: list[str]) -> list[str]:
        """The argv to run here that runs argv in the container with this terminal."""
        return self.transport.terminal_argv(self.container.attach(argv))

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        """Run argv inside the container (or on the host when there is none)."""
        return await self.run_host(self.wrap(argv), timeout=timeout, input=input)

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        """Start a long-lived argv inside the container."""
        return await self.open_host(self.wrap(argv), watchdog=watchdog)

    async def run_host(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        """Run argv on the host itself (nvidia-smi on the host, the container's status)."""
        t0 = time.monotonic()
        result = await self.transport.run(argv, timeout=timeout, input=input)
        if log.isEnabledFor(logging.DEBUG):  # `gputui -v`: never stdin, which may hold secrets
            log.debug(
                "ran on %s in %.0f ms, exit %s: %s%s",
                self.transport.label,
                1000 * (time.monotonic() - t0),
                result.exit_status,
                visible(shlex.join(argv))[:DEBUG_ARGV_CHARS],
                f"\n  stderr: {visible(result.err)[:DEBUG_ERR_CHARS]}" if result.err else "",
            )
        return result

    async def open_host(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        log.debug("opened on %s: %s", self.transport.label, visible(shlex.join(argv))[:400])
        return await self.transport.open(argv, watchdog=watchdog)

    async def container_status(self, timeout: float = 15.0) -> CtStatus:
        """Ask the host whether the container runs (NONE for a plain host).
        ContainerError when the host lacks the container tool."""
        argv = self.container.status_argv()
        if argv is None:
            return CtStatus.NONE
        result = await self.run_host(argv, timeout=timeout)
        missing = self.container.tool_missing(result.exit_status, result.err, self.transport.label)
        if missing is not None:
            raise missing
        return self.container.read_status(result.out + result.err) or CtStatus.UNKNOWN

    async def require_running(self, timeout: float = 15.0) -> None:
        """ContainerError, with the fix, when the container cannot run commands."""
        status = await self.container_status(timeout)
        problem = self.container.not_running(status, self.transport.label)
        if problem is not None:
            raise problem


def make_transport(settings: Settings) -> Transport:
    """The transport the settings name: this machine (--local/--demo) or ssh."""
    if settings.local or settings.demo:
        from gputui.remote.local import LocalTransport

        return LocalTransport()
    from gputui.remote.ssh import SshTransport

    if not settings.host:
        raise GputuiError(
            "no host given",
            "pass --host H (with --ct N, --docker NAME, --podman NAME or --pod NS/POD "
            "where the run lives), or --local",
        )
    return SshTransport(
        settings.host,
        port=settings.port,
        user=settings.user,
        identity_file=settings.identity_file,
        config_path=settings.ssh_config,
        known_hosts=settings.known_hosts,
        connect_timeout=settings.connect_timeout,
        keepalive=settings.keepalive,  # 0: keepalives off, as the config says
        accept_new_host_key=settings.accept_new_host_key,
        jump=settings.jump,
    )


def make_target(settings: Settings, transport: Transport | None = None) -> Target:
    """The target the settings name (not yet connected)."""
    return Target(transport or make_transport(settings), settings_container(settings))
