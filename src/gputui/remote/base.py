"""The transport interface: run a command, or open a long-lived one.

Every command is an argv list. Transports that need a command *string*
(ssh) build it with `shlex.join` exactly once; nothing is ever formatted
into a shell string by hand.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from gputui.model import ConnectionState

log = logging.getLogger(__name__)  # `gputui -v` (cli/debuglog.py)


@dataclass
class CommandResult:
    argv: list[str]
    exit_status: int | None  # None when killed by a signal / unknown
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class RemoteProcess(abc.ABC):
    """A long-lived command: write to its stdin, read its stdout as bytes.

    Closing it closes stdin; commands opened with `watchdog=True` (the
    default) are wrapped so they end when their stdin closes, so nothing is
    left behind on the remote side.
    """

    @abc.abstractmethod
    async def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    async def read(self, n: int = 65536) -> bytes:
        """Up to n bytes of stdout; b"" at EOF."""

    @abc.abstractmethod
    async def readline(self) -> bytes:
        """One line of stdout including b"\\n"; b"" at EOF."""

    @abc.abstractmethod
    async def stderr_text(self) -> str:
        """What the command wrote to stderr so far (bounded)."""

    @abc.abstractmethod
    async def wait(self) -> int | None:
        """Wait for the command to end; its exit status."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close stdin and the channel; idempotent."""

    async def lines(self) -> AsyncIterator[bytes]:
        while True:
            line = await self.readline()
            if not line:
                return
            yield line

    async def __aenter__(self) -> RemoteProcess:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


StateListener = Callable[[ConnectionState, str | None], None]


class Transport(abc.ABC):
    """One machine gputui talks to: the Proxmox host over ssh, or this one."""

    label: str = ""
    state: ConnectionState = ConnectionState.CONNECTING
    state_detail: str | None = None
    rtt_ms: float | None = None

    def __init__(self) -> None:
        self._listeners: list[StateListener] = []

    def on_state(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    def _set_state(self, state: ConnectionState, detail: str | None = None) -> None:
        log.debug("%s: %s%s", self.label, state.name.lower(), f" ({detail})" if detail else "")
        self.state, self.state_detail = state, detail
        for listener in list(self._listeners):
            listener(state, detail)

    @abc.abstractmethod
    async def connect(self) -> None:
        """Open the connection; raise ConnectError with a one-line fix."""

    @abc.abstractmethod
    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        """Run argv to completion; raise CommandTimeout after `timeout`."""

    @abc.abstractmethod
    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        """Start a long-lived argv; see RemoteProcess."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    def terminal_argv(self, argv: list[str]) -> list[str]:
        """The argv to run on this machine that runs argv on the host with
        this terminal attached (`ssh -t … -- argv` for ssh)."""
        raise NotImplementedError(f"{type(self).__name__} cannot open a terminal")
