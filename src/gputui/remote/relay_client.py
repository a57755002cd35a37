"""RelayTransport: many commands on the host over one channel (relay.py).

A Transport that runs every command through one relay process on the host,
itself one long-lived command on the real transport. The host view gives it
to each container's monitor, so an agent and a log stream per container cost
no ssh channel of their own: however many containers run, the host holds
three channels (the relay and the two GPU streams).

Connection state, label and terminal are the real transport's. When the
relay's channel ends (the link died), every command on it ends as if its
channel closed; the next `open`/`run` starts a new relay.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import zlib
from importlib import resources

from gputui.errors import CommandTimeout, ConnectError
from gputui.model import ConnectionState
from gputui.remote.agent_client import BOOTSTRAP
from gputui.remote.base import CommandResult, RemoteProcess, StateListener, Transport
from gputui.remote.identity import python_argv
from gputui.remote.relay import CHUNK as RELAY_CHUNK
from gputui.remote.relay import WINDOW as RELAY_WINDOW
from gputui.remote.watchdog import with_watchdog

RELAY_MARKER = "gputui-relay"
START_TIMEOUT_S = 20.0
STDERR_LIMIT = 64 * 1024
# Bytes used before they are acknowledged to the relay, which sends at most
# relay.WINDOW unacknowledged bytes per command (so a command's output held
# here never exceeds that, however fast it writes and slowly it is read).
ACK_EVERY = 128 * 1024
# The longest line `readline` hands out whole. A longer one is cut: its first
# LINE_MAX bytes, then LINE_CUT_MARK with the number of bytes dropped, then
# the newline; the dropped bytes are acknowledged as they come, never held.
# Under the relay's window (which must hold a whole line to see its end) and
# above the agent's longest response (agent.MAX_RESPONSE_BYTES).
LINE_MAX = RELAY_WINDOW - RELAY_CHUNK
LINE_CUT_MARK = "\u2026 [line cut: {n} bytes]"


def relay_source_line() -> bytes:
    source = resources.files("gputui.remote").joinpath("relay.py").read_bytes()
    return base64.b64encode(zlib.compress(source, 9)) + b"\n"


class RelayProcess(RemoteProcess):
    """One command run by the relay; see RemoteProcess."""

    def __init__(self, relay: RelayTransport, cid: int) -> None:
        self._relay = relay
        self.cid = cid
        self._buf = bytearray()
        self._eof = False
        self._data = asyncio.Event()
        self._stderr = bytearray()
        self._exit: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closed = False
        # Output bytes (stdout and stderr) received, used, and acknowledged.
        self._received = self._used_bytes = self._acked = 0
        self.held_most = 0  # the most stdout bytes held here at once (tests, bench)

    def _used(self, n: int) -> None:
        """`n` bytes of output were used: acknowledge them in batches."""
        self._used_bytes += n
        pending = self._used_bytes - self._acked
        if pending >= ACK_EVERY or (pending and not self._buf):
            self._ack_upto(self._used_bytes)

    def _ack_upto(self, total: int) -> None:
        n = total - self._acked
        if n > 0 and not self._eof:
            self._acked = total
            self._relay._ack(self.cid, n)

    # fed by the relay's reader
    def _out(self, data: bytes) -> None:
        self._received += len(data)
        self._buf += data
        self.held_most = max(self.held_most, len(self._buf))
        self._data.set()

    def _err(self, data: bytes) -> None:
        self._stderr += data
        if len(self._stderr) > STDERR_LIMIT:
            del self._stderr[: len(self._stderr) - STDERR_LIMIT]
        self._received += len(data)
        # kept (bounded) as it comes: used, and acknowledged, at once (held
        # back, it would shrink the window a long stdout line needs)
        self._used_bytes += len(data)
        self._ack_upto(self._used_bytes)

    def _ended(self, status: int | None, why: str | None = None) -> None:
        if why and not self.started.done():
            self.started.set_exception(ConnectError(why, "gputui retries"))
        elif not self.started.done():
            self.started.set_result(None)
        self._eof = True
        self._data.set()
        if not self._exit.done():
            self._exit.set_result(status)
        self._relay._children.pop(self.cid, None)

    async def write(self, data: bytes) -> None:
        if self._eof or self._closed:
            raise ConnectionError("the command has ended")
        await self._relay._send(
            {"op": "in", "id": self.cid, "data": base64.b64encode(data).decode()}
        )

    async def read(self, n: int = 65536) -> bytes:
        while not self._buf and not self._eof:
            self._data.clear()
            await self._data.wait()
        out = bytes(self._buf[:n])
        del self._buf[:n]
        self._used(len(out))
        return out

    async def readline(self) -> bytes:
        """One line; a line over LINE_MAX bytes comes cut and marked
        (LINE_CUT_MARK): memory stays bounded whatever the run writes."""
        head: bytes | None = None  # the kept start of a line being cut
        dropped = 0
        while True:
            if head is not None:
                i = self._buf.find(b"\n")
                skip = len(self._buf) if i < 0 else i
                dropped += skip
                del self._buf[:skip]
                self._used(skip)
                if i >= 0 or self._eof:
                    end = bytes(self._buf[:1])  # the newline, or nothing at EOF
                    del self._buf[:1]
                    self._used(len(end))
                    if not dropped:  # exactly LINE_MAX bytes: whole after all
                        return head + end
                    return head + LINE_CUT_MARK.format(n=dropped).encode() + end
            else:
                i = self._buf.find(b"\n", 0, LINE_MAX + 1)
                if i >= 0:
                    out = bytes(self._buf[: i + 1])
                    del self._buf[: i + 1]
                    self._used(len(out))
                    return out
                if len(self._buf) >= LINE_MAX:
                    head = bytes(self._buf[:LINE_MAX])
                    del self._buf[:LINE_MAX]
                    self._used(LINE_MAX)
                    continue
                if self._eof:
                    out = bytes(self._buf)
                    self._buf.clear()
                    return out
            # Bytes used but not yet acknowledged would shrink the window
            # the rest of this line needs: give them back before waiting.
            self._ack_upto(self._used_bytes)
            self._data.clear()
            await self._data.wait()

    async def stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    async def wait(self) -> int | None:
        return await asyncio.shield(self._exit)

    async def close(self) -> None:
        """Close its stdin (an agent or watchdog-wrapped command ends on it)."""
        if self._closed:
            return
        self._closed = True
        if not self._eof:
            with contextlib.suppress(Exception):
                await self._relay._send({"op": "eof", "id": self.cid})
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._exit), 5.0)


class RelayTransport(Transport):
    """See the module docstring. `base` is the real (connected) transport."""

    def __init__(self, base: Transport, python: str = "python3") -> None:
        super().__init__()
        self.base = base
        self.python = python
        self._proc: RemoteProcess | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting = asyncio.Lock()
        self._children: dict[int, RelayProcess] = {}
        self._ids = itertools.count(1)
        self._acks: set[asyncio.Task[None]] = set()
        self.relay_starts = 0

    # the real transport's face
    @property
    def label(self) -> str:  # type: ignore[override]
        return self.base.label

    @property
    def state(self) -> ConnectionState:  # type: ignore[override]
        return self.base.state

    @property
    def state_detail(self) -> str | None:  # type: ignore[override]
        return self.base.state_detail

    @property
    def rtt_ms(self) -> float | None:  # type: ignore[override]
        return self.base.rtt_ms

    def on_state(self, listener: StateListener) -> None:
        self.base.on_state(listener)

    def terminal_argv(self, argv: list[str]) -> list[str]:
        return self.base.terminal_argv(argv)

    async def connect(self) -> None:
        await self.base.connect()

    @property
    def commands(self) -> int:
        """Commands running through the relay now."""
        return len(self._children)

    @property
    def channels(self) -> int:
        return 1 if self._proc is not None else 0

    # ------------------------------------------------------------ the relay

    async def start(self) -> None:
        """Start the relay now (it otherwise starts with the first command)."""
        await self._ensure_relay()

    async def _ensure_relay(self) -> RemoteProcess:
        async with self._starting:
            if self._proc is not None:
                return self._proc
            proc = await self.base.open(
                python_argv(self.python, ["-c", BOOTSTRAP, RELAY_MARKER], RELAY_MARKER, False),
                watchdog=False,
            )
            try:
                await proc.write(relay_source_line())
                line = await asyncio.wait_for(proc.readline(), START_TIMEOUT_S)
                hello = json.loads(line) if line else {}
            except (asyncio.TimeoutError, ValueError, OSError, ConnectionError):
                hello = {}
            if not hello.get("started"):
                err = (await proc.stderr_text()).strip().splitlines()[-1:] or ["no answer"]
                await proc.close()
                raise ConnectError(
                    f"the gputui relay did not start on {self.label}: {err[0]}",
                    "check that python3 runs on the host (`python3 -V`)",
                )
            self.relay_starts += 1
            self._proc = proc
            self._reader = asyncio.ensure_future(self._read_loop(proc))
            return proc

    async def _read_loop(self, proc: RemoteProcess) -> None:
        try:
            while True:
                line = await proc.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                    child = self._children.get(int(msg["id"]))
                except (ValueError, KeyError, TypeError):
                    continue
                if child is None:
                    continue
                if "out" in msg:
                    child._out(base64.b64decode(msg["out"]))
                elif "err" in msg:
                    child._err(base64.b64decode(msg["err"]))
                elif msg.get("started"):
                    if not child.started.done():
                        child.started.set_result(None)
                elif "error" in msg:
                    child._err(str(msg["error"]).encode() + b"\n")
                elif "exit" in msg:
                    child._ended(msg.get("exit"))
        finally:
            if self._proc is proc:
                self._proc = None
            for child in list(self._children.values()):
                child._ended(None, "the relay's channel closed")

    def _ack(self, cid: int, n: int) -> None:
        """Give the relay back `n` bytes of credit for command `cid` (in the
        background: a lost ack only matters if the relay is gone too)."""
        if self._proc is None:
            return
        task = asyncio.ensure_future(self._send_quietly({"op": "ack", "id": cid, "n": n}))
        self._acks.add(task)
        task.add_done_callback(self._acks.discard)

    async def _send_quietly(self, msg: dict[str, object]) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            await self._send(msg)

    async def _send(self, msg: dict[str, object]) -> None:
        proc = self._proc
        if proc is None:
            raise ConnectionError("the relay is gone")
        await proc.write(json.dumps(msg).encode() + b"\n")

    # ------------------------------------------------------------ Transport

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        await self._ensure_relay()
        child = RelayProcess(self, next(self._ids))
        self._children[child.cid] = child
        full = with_watchdog(argv) if watchdog else list(argv)
        try:
            await self._send({"op": "open", "id": child.cid, "argv": full})
            await asyncio.wait_for(asyncio.shield(child.started), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            self._children.pop(child.cid, None)
            raise CommandTimeout(f"the relay on {self.label} did not start {argv[0]}", "") from None
        except (OSError, ConnectionError) as err:
            self._children.pop(child.cid, None)
            raise ConnectError(
                f"the relay on {self.label} went away: {err}", "gputui retries"
            ) from None
        return child

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        try:
            return await asyncio.wait_for(self._run(argv, input), timeout)
        except asyncio.TimeoutError:
            raise CommandTimeout(
                f"`{argv[0] if argv else ''}` on {self.label} took over {timeout:g} s",
                "the host may be overloaded; try again",
            ) from None

    async def _run(self, argv: list[str], input: bytes | None) -> CommandResult:
        proc = await self.open(argv, watchdog=False)
        assert isinstance(proc, RelayProcess)
        try:
            if input:
                await proc.write(input)
            await self._send({"op": "eof", "id": proc.cid})
            out = bytearray()
            while True:
                chunk = await proc.read()
                if not chunk:
                    break
                out += chunk
            status = await proc.wait()
            return CommandResult(list(argv), status, bytes(out), bytes(proc._stderr))
        finally:
            proc._closed = True

    async def close(self) -> None:
        """End the relay (and with it every command it runs); the real
        transport stays open: its owner closes it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(Exception):
                await proc.close()
        if self._reader is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._reader, 5.0)
            self._reader = None
