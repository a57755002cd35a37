"""A transport plus the container the run lives in: "run this in CT 200 on
that host". How a container is entered is remote/container.py's business;
which transport reaches the host (ssh, or this machine) is `make_transport`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputui.errors import GputuiError
from gputui.model import CtStatus
from gputui.remote.base import CommandResult, RemoteProcess, Transport
from gputui.remote.container import Container, container_for

if TYPE_CHECKING:
    from gputui.config import Settings


def in_container(ct: Container | int | None, argv: list[str]) -> list[str]:
    """argv as the host must run it to reach the container."""
    return container_for(ct).wrap(argv)


class Target:
    """A transport plus the container the run lives in (Host() for none).
    `ct` may be given as a Container or, for a Proxmox CT, its number."""

    def __init__(self, transport: Transport, ct: Container | int | None = None) -> None:
        self.transport = transport
        self.container: Container = container_for(ct)

    @property
    def ct(self) -> int | None:
        """The container's number; None on a plain host."""
        return self.container.id

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
        return await self.transport.run(self.wrap(argv), timeout=timeout, input=input)

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        """Start a long-lived argv inside the container."""
        return await self.transport.open(self.wrap(argv), watchdog=watchdog)

    async def run_host(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        """Run argv on the host itself (nvidia-smi on the host, the container's status)."""
        return await self.transport.run(argv, timeout=timeout, input=input)

    async def open_host(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
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
            "no host given", "pass --host H (and --ct N on a Proxmox host), or --local"
        )
    return SshTransport(
        settings.host,
        port=settings.port,
        user=settings.user,
        identity_file=settings.identity_file,
        config_path=settings.ssh_config,
        known_hosts=settings.known_hosts,
        connect_timeout=settings.connect_timeout or 10.0,
        keepalive=settings.keepalive or 15.0,
        accept_new_host_key=settings.accept_new_host_key,
        jump=settings.jump,
    )


def make_target(settings: Settings, transport: Transport | None = None) -> Target:
    """The target the settings name (not yet connected)."""
    return Target(transport or make_transport(settings), container_for(settings.ct))
