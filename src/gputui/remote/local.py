"""LocalTransport: run argv on this machine with asyncio subprocesses.

No shell is ever involved: argv goes straight to exec. Each command runs in
its own process group (session) so a timeout or a close kills the command
and everything it spawned, and the process is always reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Sequence

from gputui.errors import CommandTimeout
from gputui.model import ConnectionState
from gputui.remote.base import CommandResult, RemoteProcess, Transport

STDERR_LIMIT = 64 * 1024  # bytes of stderr kept for a long-lived process
STREAM_LIMIT = 1024 * 1024  # bytes of a long-lived process's stdout line (readline)
KILL_GRACE_S = 1.0  # between SIGTERM and SIGKILL on close


def _not_found(argv: list[str], err: OSError) -> CommandResult:
    """What a shell would say for a command that cannot be executed, so both
    transports report a missing program the same way (exit 127 / 126)."""
    name = argv[0] if argv else ""
    if isinstance(err, FileNotFoundError):
        return CommandResult(list(argv), 127, b"", f"sh: 1: {name}: not found\n".encode())
    return CommandResult(list(argv), 126, b"", f"sh: 1: {name}: {err.strerror}\n".encode())


def _kill_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


async def _end(proc: asyncio.subprocess.Process, grace: float = KILL_GRACE_S) -> None:
    """Terminate the process group, then kill it, and reap the process."""
    if proc.returncode is None:
        _kill_group(proc, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except asyncio.TimeoutError:
            _kill_group(proc, signal.SIGKILL)
            await proc.wait()
    # Children that ignored SIGTERM may outlive the leader: finish the group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _exit_status(code: int | None) -> int | None:
    """asyncio reports death by signal as a negative code; the base contract
    says None for "killed by a signal"."""
    if code is None or code < 0:
        return None
    return code


async def _spawn(argv: Sequence[str | bytes], stdout_fd: int) -> asyncio.subprocess.Process:
    """A long-lived command in a session of its own, its stdout on `stdout_fd`."""
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=stdout_fd,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


async def _read_stdout(fd: int) -> tuple[asyncio.StreamReader, asyncio.ReadTransport]:
    """A command's stdout read straight from its pipe: each chunk reaches the
    reader in the turn of the event loop that read it. asyncio's subprocess
    pipes hand every chunk on a turn later (`call_soon`), and the GPU
    samples, the agent's answers and the log's lines come a chunk at a time:
    a wake of the event loop more for each."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=STREAM_LIMIT, loop=loop)
    try:
        pipe, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", 0)
        )
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return reader, pipe


# The watchdog of a local command: its stdin is a pipe from gputui; EOF (gputui
# is gone without closing the command: its terminal closed, a kill -9) ends
# the command's process group. A `tail -F` of a quiet log would otherwise
# outlive gputui for good. Killed outright once the command has ended, so it
# never signals a process group number used again.
GUARD_SCRIPT = 'read -r _; kill -TERM "-$1" 2>/dev/null; sleep 1; kill -KILL "-$1" 2>/dev/null'


async def _guard(pgid: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        GUARD_SCRIPT,
        "gputui-guard",
        str(pgid),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,  # no SIGHUP from gputui's terminal
    )


class LocalProcess(RemoteProcess):
    """A long-lived local command over its pipes."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        stdout: tuple[asyncio.StreamReader, asyncio.ReadTransport],
        registry: set[LocalProcess] | None = None,
        guard: asyncio.subprocess.Process | None = None,
    ) -> None:
        """`stdout`: the command's stdout, read straight (`_read_stdout`), and its pipe."""
        self._proc = proc
        self._stdout, self._stdout_pipe = stdout
        self._registry = registry
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        self._closed = False
        self._guard = guard
        self._guard_task = asyncio.ensure_future(self._retire_guard()) if guard else None

    async def _retire_guard(self) -> None:
        """The command ended (or was closed): its guard goes, without acting."""
        try:
            await self._proc.wait()
        finally:
            guard = self._guard
            if guard is not None and guard.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    guard.kill()
                await guard.wait()

    @property
    def pid(self) -> int:
        return self._proc.pid

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while True:
            chunk = await self._proc.stderr.read(65536)
            if not chunk:
                return
            self._stderr += chunk
            if len(self._stderr) > STDERR_LIMIT:
                del self._stderr[: len(self._stderr) - STDERR_LIMIT]

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def read(self, n: int = 65536) -> bytes:
        return await self._stdout.read(n)

    async def readline(self) -> bytes:
        try:
            return await self._stdout.readline()
        except ValueError:  # a line longer than the stream limit: hand out a chunk
            return await self._stdout.read(65536)

    async def stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    async def wait(self) -> int | None:
        code = await self._proc.wait()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        return _exit_status(code)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._registry is not None:
            self._registry.discard(self)
        if self._proc.stdin is not None:
            with contextlib.suppress(Exception):
                self._proc.stdin.close()
        await _end(self._proc)
        self._stdout_pipe.close()
        self._stderr_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._stderr_task
        if self._guard_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._guard_task


class LocalTransport(Transport):
    """This machine, no ssh: argv exec'd directly (used by --local, --demo, tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.label = f"local ({socket.gethostname()})"
        self._procs: set[LocalProcess] = set()

    async def connect(self) -> None:
        await self.measure_rtt()
        self._set_state(ConnectionState.CONNECTED, None)

    async def measure_rtt(self, tries: int = 3) -> float | None:
        """The round trip of a command here: the quickest of `tries` runs of
        `true` (the first spawn of a process, or one on a loaded machine, can
        take seconds: "connected 2963 ms" said nothing about the link)."""
        best: float | None = None
        for _ in range(tries):
            t0 = time.perf_counter()
            result = await self.run(["true"], timeout=5.0)
            if not result.ok:
                break
            ms = (time.perf_counter() - t0) * 1000.0
            best = ms if best is None else min(best, ms)
        self.rtt_ms = best
        return best

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        argv = list(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as oserr:
            return _not_found(argv, oserr)
        try:
            out, err = await asyncio.wait_for(proc.communicate(input), timeout)
        except asyncio.TimeoutError:
            await _end(proc, grace=0.2)
            raise CommandTimeout(
                f"`{argv[0] if argv else ''}` did not finish within {timeout:g} s",
                "the machine may be overloaded; try again or raise the timeout",
            ) from None
        except BaseException:  # cancelled: leave nothing running
            await asyncio.shield(_end(proc, grace=0.2))
            raise
        return CommandResult(argv, _exit_status(proc.returncode), out, err)

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        # close() kills the whole process group; `watchdog` adds a guard
        # (GUARD_SCRIPT) for when gputui ends without a close.
        argv = list(argv)
        out_r, out_w = os.pipe()  # stdout: read straight (`_read_stdout`)
        try:
            try:
                proc = await _spawn(argv, out_w)
            except OSError as err:
                result = _not_found(argv, err)
                says = 'printf "%s" "$1" >&2; exit "$2"'
                proc = await _spawn(
                    ["sh", "-c", says, "sh", result.err, str(result.exit_status)], out_w
                )
        except BaseException:
            os.close(out_r)
            raise
        finally:
            os.close(out_w)  # the command holds it now
        stdout, pipe = await _read_stdout(out_r)
        guard = await _guard(proc.pid) if watchdog and proc.returncode is None else None
        p = LocalProcess(proc, (stdout, pipe), self._procs, guard)
        self._procs.add(p)
        return p

    async def close(self) -> None:
        procs, self._procs = list(self._procs), set()
        for p in procs:
            await p.close()
        self._set_state(ConnectionState.CLOSED, None)

    def terminal_argv(self, argv: list[str]) -> list[str]:
        """argv itself; inside tmux, without $TMUX, so tmux attach nests."""
        return ["env", "-u", "TMUX", *argv] if os.environ.get("TMUX") else list(argv)


def own_ancestry(pid: int | None = None) -> frozenset[int]:
    """This process and its ancestors (parent, its parent, … up to 1), read
    from /proc: a tmux pane whose process is among them is the one gputui
    itself runs in (`gputui --local` inside tmux). Empty where /proc is not
    readable."""
    seen: set[int] = set()
    pid = os.getpid() if pid is None else pid
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            break
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "(comm)": state, ppid, …
        try:
            pid = int(fields[1])
        except (IndexError, ValueError):
            break
    return frozenset(seen)
