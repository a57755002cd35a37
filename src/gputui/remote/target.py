"""The container wrapper: "run this in CT 200 on that host".

With a CT number, argv runs as `pct exec CT -- argv` on the host (pct hands
argv to lxc-attach with no shell, so the host shell is the only one that
parses the string, and the transport quotes it once). Without one, argv runs
on the host itself (a plain GPU server, or this machine with --local).
"""

from __future__ import annotations

from gputui.remote.base import CommandResult, RemoteProcess, Transport


def in_container(ct: int | None, argv: list[str]) -> list[str]:
    """argv as the host must run it to reach the container."""
    if ct is None:
        return list(argv)
    return ["pct", "exec", str(ct), "--", *argv]


class Target:
    """A transport plus, optionally, the container the run lives in."""

    def __init__(self, transport: Transport, ct: int | None = None) -> None:
        self.transport = transport
        self.ct = ct

    @property
    def label(self) -> str:
        return (
            f"{self.transport.label} ct {self.ct}" if self.ct is not None else self.transport.label
        )

    def wrap(self, argv: list[str]) -> list[str]:
        return in_container(self.ct, argv)

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
        """Run argv on the host itself (nvidia-smi on the host, pct status)."""
        return await self.transport.run(argv, timeout=timeout, input=input)

    async def open_host(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        return await self.transport.open(argv, watchdog=watchdog)
