"""SshTransport: one asyncssh connection to the host, many channels on it.

* ONE connection per host; a semaphore keeps at most `MAX_CHANNELS` channels
  open at once (OpenSSH allows 10 sessions per connection by default).
  One-shot commands wait for a slot; long-lived `open()`s hold one until
  they are closed or end.
* `~/.ssh/config` (or an explicit file), ssh-agent and strict known_hosts
  come from asyncssh; unknown and changed host keys are told apart so the
  user gets the right fix, and `accept_new_host_key` may add an unknown
  (never a changed) key after showing its fingerprint.
* Output is read as bytes (`encoding=None`): a stray non-UTF-8 byte cannot
  drop the connection.
* The command string is `quoting.command_line(argv)` — built once, here.
* When the link dies the transport reconnects with exponential backoff
  (0.5 s → 30 s) and reports connected / reconnecting / failed to listeners;
  `run()` during a reconnect waits for it, bounded by its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncssh

from gputui.errors import CommandTimeout, ConnectError
from gputui.model import ConnectionState
from gputui.remote.base import CommandResult, RemoteProcess, Transport
from gputui.remote.quoting import command_line
from gputui.remote.watchdog import with_watchdog

MAX_CHANNELS = 6
STDERR_LIMIT = 64 * 1024
BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 30.0
RTT_REFRESH_S = 30.0


def _default_known_hosts() -> Path:
    return Path("~", ".ssh", "known_hosts").expanduser()


def _host_port(host: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts / ssh-keygen -R."""
    return host if port == 22 else f"[{host}]:{port}"


class _Client(asyncssh.SSHClient):
    """Sees the host key the server offers (to tell unknown from changed) and
    notices when the connection drops."""

    def __init__(self, transport: SshTransport) -> None:
        self._transport = transport
        self.offered_key: asyncssh.SSHKey | None = None
        self.accepted_new = False
        self.conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Only called when the key is NOT among the trusted keys for this host.
        self.offered_key = key
        t = self._transport
        if t.accept_new_host_key and not t._known_keys_for(host, addr, port):
            self.accepted_new = True
            return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self._transport._connection_lost(self.conn, exc)


class SshProcess(RemoteProcess):
    """A long-lived command on one channel; holds a channel slot until it ends."""

    def __init__(self, proc: asyncssh.SSHClientProcess[bytes], release: Callable[[], None]) -> None:
        self._proc = proc
        self._release = release
        self._released = False
        self._closed = False
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        self._watch_task = asyncio.ensure_future(self._watch())
        self.error: str | None = None

    def _release_once(self) -> None:
        if not self._released:
            self._released = True
            self._release()

    async def _watch(self) -> None:
        with contextlib.suppress(Exception):
            await self._proc.wait_closed()
        self._release_once()

    async def _drain_stderr(self) -> None:
        try:
            while True:
                chunk = await self._proc.stderr.read(65536)
                if not chunk:
                    return
                self._stderr += chunk
                if len(self._stderr) > STDERR_LIMIT:
                    del self._stderr[: len(self._stderr) - STDERR_LIMIT]
        except Exception as err:  # connection lost: stderr ends here
            self.error = self.error or str(err) or type(err).__name__

    async def write(self, data: bytes) -> None:
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def read(self, n: int = 65536) -> bytes:
        try:
            return await self._proc.stdout.read(n)
        except Exception as err:  # the connection died: that is EOF for the reader
            self.error = str(err) or type(err).__name__
            return b""

    async def readline(self) -> bytes:
        try:
            return await self._proc.stdout.readline()
        except Exception as err:
            self.error = str(err) or type(err).__name__
            return b""

    async def stderr_text(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    async def wait(self) -> int | None:
        with contextlib.suppress(Exception):
            await self._proc.wait_closed()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
        self._release_once()
        return self._proc.exit_status if self._proc.exit_signal is None else None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._proc.stdin.write_eof()  # EOF: the watchdog ends the command
        self._proc.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._proc.wait_closed(), 5.0)
        self._release_once()
        for task in (self._stderr_task, self._watch_task):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class SshTransport(Transport):
    """The host over ssh (asyncssh), see the module docstring."""

    def __init__(
        self,
        host: str,
        port: int | None = None,
        user: str | None = None,
        identity_file: str | None = None,
        config_path: str | None = None,
        known_hosts: str | None = None,
        connect_timeout: float = 10,
        keepalive: float = 15,
        accept_new_host_key: bool = False,
        notify: Callable[[str], None] | None = None,
        keepalive_count_max: int = 3,
        rtt_refresh: float | None = RTT_REFRESH_S,
    ) -> None:
        super().__init__()
        self.host = host
        self.port = port
        self.user = user
        self.identity_file = identity_file
        self.config_path = config_path
        self.known_hosts = known_hosts
        self.connect_timeout = float(connect_timeout)
        self.keepalive = keepalive
        self.keepalive_count_max = keepalive_count_max
        self.accept_new_host_key = accept_new_host_key
        self.notify = notify or (lambda line: print(f"gputui: {line}", file=sys.stderr))
        self.rtt_refresh = rtt_refresh
        self.label = host
        # What the connection resolved to (ssh config HostName/Port/User).
        self.resolved_host: str = host
        self.resolved_port: int = port or 22
        self.resolved_user: str | None = user
        self.connect_s: float | None = None  # how long the last successful connect took
        self.reconnects = 0
        self._known_hosts_files: list[str] = []
        self._known_hosts_disabled = False
        self._conn: asyncssh.SSHClientConnection | None = None
        self._slots = asyncio.Semaphore(MAX_CHANNELS)
        self._in_use = 0
        self._max_in_use = 0
        self._connected = asyncio.Event()
        self._closing = False
        self._failure: ConnectError | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._rtt_task: asyncio.Task[None] | None = None
        self._procs: set[SshProcess] = set()

    # ------------------------------------------------------------ connecting

    @property
    def channels_in_use(self) -> int:
        return self._in_use

    @property
    def max_channels_seen(self) -> int:
        """The most channels this transport ever had open at once."""
        return self._max_in_use

    async def _options(self) -> tuple[dict[str, Any], Any]:
        """asyncssh.connect kwargs and config paths; also resolves what the ssh
        config says (HostName, Port, User, known_hosts files) for messages."""
        if self.identity_file and not Path(self.identity_file).expanduser().is_file():
            raise ConnectError(
                f"identity file {self.identity_file} does not exist",
                "check the path given with -i / identity_file",
            )
        if self.config_path and not Path(self.config_path).expanduser().is_file():
            raise ConnectError(
                f"ssh config file {self.config_path} does not exist", "check the path"
            )
        kw: dict[str, Any] = {
            "keepalive_interval": self.keepalive,
            "keepalive_count_max": self.keepalive_count_max,
            "connect_timeout": self.connect_timeout,
            "login_timeout": self.connect_timeout,
        }
        if self.port is not None:
            kw["port"] = self.port
        if self.user is not None:
            kw["username"] = self.user
        if self.identity_file:
            kw["client_keys"] = [str(Path(self.identity_file).expanduser())]
        if self.known_hosts:
            kw["known_hosts"] = str(Path(self.known_hosts).expanduser())
        config: Any = [str(Path(self.config_path).expanduser())] if self.config_path else ()
        try:
            opts = await asyncssh.SSHClientConnectionOptions.construct(
                None, config=config, host=self.host, **kw
            )
        except (OSError, asyncssh.Error, ValueError) as err:
            raise ConnectError(
                f"cannot set up ssh to {self.host}: {err}",
                "check the ssh config, -i key file and known_hosts path",
            ) from None
        self.resolved_host = opts.host
        self.resolved_port = opts.port
        self.resolved_user = opts.username
        kh: Any = opts.known_hosts
        if kh is None:
            self._known_hosts_disabled = True
            self._known_hosts_files = []
        elif kh == () or kh == [] or kh == b"" or kh == "":
            self._known_hosts_files = [str(_default_known_hosts())]
        elif isinstance(kh, (str, Path)):
            self._known_hosts_files = [str(kh)]
        elif isinstance(kh, (list, tuple)):
            self._known_hosts_files = [str(Path(p).expanduser()) for p in kh]
        self.label = f"{opts.username}@{opts.host}" + (f":{opts.port}" if opts.port != 22 else "")
        return kw, config

    def _known_keys_for(self, host: str, addr: str, port: int) -> list[asyncssh.SSHKey]:
        """Keys known_hosts already lists for this host (any type)."""
        keys: list[asyncssh.SSHKey] = []
        for path in self._known_hosts_files:
            if not os.path.isfile(path):
                continue
            try:
                trusted = asyncssh.match_known_hosts(
                    path, host, addr, port if port != 22 else None
                )[0]
            except (OSError, ValueError, asyncssh.Error):
                continue
            keys.extend(trusted)
        return keys

    def _where(self) -> str:
        return f"{self.resolved_host} port {self.resolved_port}"

    def _known_hosts_file(self) -> str:
        return (
            self._known_hosts_files[0] if self._known_hosts_files else str(_default_known_hosts())
        )

    def _translate(self, err: BaseException, client: _Client | None) -> ConnectError:
        """One line naming the problem and the fix for a failed connect."""
        host, port = self.resolved_host, self.resolved_port
        kh = self._known_hosts_file()
        if isinstance(err, asyncssh.HostKeyNotVerifiable) or (
            isinstance(err, asyncssh.KeyExchangeFailed) and client and client.offered_key
        ):
            key = client.offered_key if client else None
            if key is not None and self._known_keys_for(host, host, port):
                return ConnectError(
                    f"host key for {_host_port(host, port)} has CHANGED "
                    f"(now {key.get_algorithm()} {key.get_fingerprint('sha256')}); refusing to connect",
                    "if the host was reinstalled, remove the old key with "
                    f"`ssh-keygen -R '{_host_port(host, port)}'`"
                    + (f" -f {kh}" if kh != str(_default_known_hosts()) else "")
                    + ", otherwise someone may be intercepting the connection",
                )
            fp = f"{key.get_algorithm()} {key.get_fingerprint('sha256')}" if key else "unknown"
            keyscan = (
                f"ssh-keyscan -p {port} {host} >> {kh}"
                if port != 22
                else f"ssh-keyscan {host} >> {kh}"
            )
            return ConnectError(
                f"host key for {_host_port(host, port)} is not known ({fp})",
                f"check the fingerprint, then add it with `{keyscan}`, "
                "or rerun with --accept-new-host-key",
            )
        if isinstance(err, asyncssh.PermissionDenied):
            who = f"{self.resolved_user}@{host}"
            return ConnectError(
                f"{who} port {port} refused our ssh keys (authentication failed)",
                "check -i FILE / IdentityFile, ssh-agent and the host's authorized_keys; "
                f"`ssh -p {port} {who}` must log in without a password",
            )
        if isinstance(err, socket.gaierror):
            return ConnectError(
                f"unknown host {self.host!r}: not a Host alias in your ssh config and DNS cannot resolve it",
                "check the name, or add a `Host` entry to ~/.ssh/config (or pass --ssh-config FILE)",
            )
        if isinstance(err, ConnectionRefusedError):
            return ConnectError(
                f"connection refused by {self._where()}",
                "is sshd running there and is the port right (--port)?",
            )
        if isinstance(err, (asyncio.TimeoutError, TimeoutError)):
            return ConnectError(
                f"no ssh answer from {self._where()} within {self.connect_timeout:g} s",
                "check the address, the port and any firewall, or raise connect_timeout",
            )
        if isinstance(err, asyncssh.KeyImportError | asyncssh.KeyEncryptionError):
            return ConnectError(
                f"cannot use the identity file {self.identity_file}: {err}",
                "pass an unencrypted key with -i, or load it into ssh-agent",
            )
        if isinstance(err, asyncssh.Error):
            return ConnectError(
                f"ssh to {self._where()} failed: {err.reason or type(err).__name__}",
                "check that `ssh` to this host works from this machine",
            )
        if isinstance(err, OSError):
            return ConnectError(
                f"cannot reach {self._where()}: {err.strerror or err}",
                "check the address and the network",
            )
        return ConnectError(f"ssh to {self._where()} failed: {err!r}", "")

    async def _open_connection(self) -> asyncssh.SSHClientConnection:
        kw, config = await self._options()
        client_box: list[_Client] = []

        def factory() -> _Client:
            c = _Client(self)
            client_box.append(c)
            return c

        t0 = time.perf_counter()
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(self.host, config=config, client_factory=factory, **kw),
                self.connect_timeout + 1.0,
            )
        except asyncio.CancelledError:
            raise
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            raise self._translate(err, client_box[-1] if client_box else None) from None
        self.connect_s = time.perf_counter() - t0
        client = client_box[-1] if client_box else None
        if client is not None and client.accepted_new and client.offered_key is not None:
            self._remember_host_key(client.offered_key)
        return conn

    def _remember_host_key(self, key: asyncssh.SSHKey) -> None:
        host, port = self.resolved_host, self.resolved_port
        path = Path(self._known_hosts_file())
        line = f"{_host_port(host, port)} {key.export_public_key('openssh').decode().split()[0]} "
        line += key.export_public_key("openssh").decode().split()[1] + "\n"
        self.notify(
            f"accepted NEW host key for {_host_port(host, port)}: "
            f"{key.get_algorithm()} {key.get_fingerprint('sha256')} (added to {path})"
        )
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(line)
        except OSError as err:
            self.notify(f"could not write {path}: {err.strerror}")

    async def connect(self) -> None:
        """Open the connection; ConnectError (one line) when it cannot be."""
        if self._conn is not None:
            return
        self._closing = False
        self._set_state(ConnectionState.CONNECTING, None)
        try:
            self._conn = await self._open_connection()
        except ConnectError as err:
            self._failure = err
            self._set_state(ConnectionState.FAILED, str(err))
            raise
        self._failure = None
        await self._on_connected()
        if self.rtt_refresh and self._rtt_task is None:
            self._rtt_task = asyncio.ensure_future(self._refresh_rtt())

    async def _on_connected(self) -> None:
        with contextlib.suppress(Exception):
            await self.measure_rtt()
        self._connected.set()
        self._set_state(ConnectionState.CONNECTED, self._rtt_detail())

    def _rtt_detail(self) -> str | None:
        return f"rtt {self.rtt_ms:.1f} ms" if self.rtt_ms is not None else None

    async def measure_rtt(self) -> float:
        """Round-trip of a trivial `true` on a fresh channel, in ms."""
        conn = self._conn
        if conn is None:
            raise ConnectError(f"not connected to {self.label}", "connect first")
        async with self._slot(self.connect_timeout):
            t0 = time.perf_counter()
            await asyncio.wait_for(
                conn.run("true", encoding=None, stdin=asyncssh.DEVNULL), self.connect_timeout
            )
            self.rtt_ms = (time.perf_counter() - t0) * 1000.0
        return self.rtt_ms

    async def _refresh_rtt(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.rtt_refresh or RTT_REFRESH_S)
            if self._conn is not None and self.state == ConnectionState.CONNECTED:
                with contextlib.suppress(Exception):
                    await self.measure_rtt()

    # ------------------------------------------------------------ reconnecting

    def _connection_lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        if conn is not self._conn or self._closing:
            return
        self._conn = None
        self._connected.clear()
        why = f"connection lost: {exc}" if exc else "connection closed by the host"
        self._set_state(ConnectionState.RECONNECTING, why)
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.ensure_future(self._reconnect(why))

    async def _reconnect(self, why: str) -> None:
        delay = BACKOFF_START_S
        while not self._closing:
            await asyncio.sleep(delay)
            if self._closing:
                return
            try:
                conn = await self._open_connection()
            except ConnectError as err:
                if isinstance(err, ConnectError) and (
                    "CHANGED" in err.problem or "refused our ssh keys" in err.problem
                ):
                    self._failure = err
                    self._set_state(ConnectionState.FAILED, str(err))
                    self._connected.set()  # wake waiters: they raise the failure
                    return
                why = str(err)
                delay = min(delay * 2, BACKOFF_MAX_S)
                self._set_state(ConnectionState.RECONNECTING, f"{why} (retry in {delay:g} s)")
                continue
            except Exception as err:  # never let the reconnect loop die
                delay = min(delay * 2, BACKOFF_MAX_S)
                self._set_state(ConnectionState.RECONNECTING, f"{err!r} (retry in {delay:g} s)")
                continue
            if self._closing:
                conn.close()
                return
            self._conn = conn
            self._failure = None
            self.reconnects += 1
            await self._on_connected()
            return

    async def _connection(self, deadline: float) -> asyncssh.SSHClientConnection:
        """The live connection, waiting for a reconnect until `deadline`."""
        while True:
            if self._closing:
                raise ConnectError(f"the connection to {self.label} is closed", "")
            if self._conn is not None:
                return self._conn
            if self._failure is not None and self.state == ConnectionState.FAILED:
                raise self._failure
            if self._reconnect_task is None and self.state in (
                ConnectionState.CONNECTING,
                ConnectionState.CLOSED,
            ):
                await self.connect()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CommandTimeout(
                    f"no connection to {self.label} ({self.state_detail or self.state.value})",
                    "gputui keeps reconnecting; check the network",
                )
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._connected.wait(), remaining)

    @contextlib.asynccontextmanager
    async def _slot(self, timeout: float) -> Any:
        try:
            await asyncio.wait_for(self._slots.acquire(), timeout)
        except asyncio.TimeoutError:
            raise CommandTimeout(
                f"all {MAX_CHANNELS} ssh channels to {self.label} stayed busy for {timeout:g} s",
                "close other streams or try again",
            ) from None
        self._take()
        try:
            yield
        finally:
            self._give()

    def _take(self) -> None:
        self._in_use += 1
        self._max_in_use = max(self._max_in_use, self._in_use)

    def _give(self) -> None:
        self._in_use -= 1
        self._slots.release()

    # ------------------------------------------------------------ commands

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        """Run argv on the host; CommandTimeout after `timeout` (the remote
        command is then ended too: without input it runs under the watchdog,
        which kills it when the channel closes)."""
        argv = list(argv)
        wrapped = argv if input is not None else with_watchdog(argv)
        command = command_line(wrapped)
        deadline = time.monotonic() + timeout
        try:
            async with self._slot(max(0.0, deadline - time.monotonic())):
                proc = await self._start(command, deadline)
                try:
                    out, err = await asyncio.wait_for(
                        self._collect(proc, input), max(0.01, deadline - time.monotonic())
                    )
                finally:
                    proc.close()
        except asyncio.TimeoutError:
            raise CommandTimeout(
                f"`{argv[0] if argv else ''}` on {self.label} did not finish within {timeout:g} s",
                "the host may be overloaded or the link slow; try again",
            ) from None
        except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError) as e:
            raise ConnectError(
                f"ssh channel to {self.label} failed: {e.reason or type(e).__name__}",
                "the connection dropped; gputui reconnects — try again",
            ) from None
        status = proc.exit_status if proc.exit_signal is None else None
        if status is not None and status < 0:
            status = None
        return CommandResult(argv, status, out, err)

    async def _start(self, command: str, deadline: float) -> asyncssh.SSHClientProcess[bytes]:
        """Open a channel running `command`. When the connection turns out to
        be dead before the channel opened (nothing ran yet), wait for the
        reconnect and try again, until `deadline`."""
        while True:
            conn = await self._connection(deadline)
            try:
                return await asyncio.wait_for(
                    conn.create_process(command, encoding=None),
                    max(0.01, deadline - time.monotonic()),
                )
            except (
                asyncssh.ChannelOpenError,
                asyncssh.ConnectionLost,
                asyncssh.DisconnectError,
            ) as e:
                if conn is self._conn and not conn.is_closed():
                    raise  # a live connection refused the channel: not a dead link
                self._connection_lost(conn, e)
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(0.05)

    @staticmethod
    async def _collect(
        proc: asyncssh.SSHClientProcess[bytes], input: bytes | None
    ) -> tuple[bytes, bytes]:
        if input is not None:
            proc.stdin.write(input)
            proc.stdin.write_eof()
        out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
        await proc.wait_closed()
        return out, err

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        """Start a long-lived argv; it holds one of the channel slots until
        closed or ended. With `watchdog` it runs with stdin from /dev/null and
        is killed (with its process group) when the channel closes; without,
        it gets our writes on stdin and must exit on EOF itself."""
        argv = list(argv)
        command = command_line(with_watchdog(argv) if watchdog else argv)
        deadline = time.monotonic() + self.connect_timeout
        try:
            await asyncio.wait_for(self._slots.acquire(), max(0.01, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise CommandTimeout(
                f"all {MAX_CHANNELS} ssh channels to {self.label} are in use",
                "close a stream first",
            ) from None
        self._take()
        try:
            proc = await self._start(command, deadline)
        except BaseException as e:
            self._give()
            if isinstance(e, asyncio.TimeoutError):
                raise CommandTimeout(
                    f"opening a channel to {self.label} took over {self.connect_timeout:g} s", ""
                ) from None
            if isinstance(e, asyncssh.Error):
                raise ConnectError(
                    f"ssh channel to {self.label} failed: {e.reason or type(e).__name__}",
                    "the connection dropped; gputui reconnects — try again",
                ) from None
            raise
        p: SshProcess

        def release() -> None:
            self._procs.discard(p)
            self._give()

        p = SshProcess(proc, release)
        self._procs.add(p)
        return p

    async def close(self) -> None:
        self._closing = True
        for task in (self._reconnect_task, self._rtt_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._reconnect_task = self._rtt_task = None
        for p in list(self._procs):
            await p.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 5.0)
        self._connected.clear()
        self._set_state(ConnectionState.CLOSED, None)

    def terminal_argv(self, argv: list[str]) -> list[str]:
        """`ssh -t [-F C] [-p P] [-i F] [user@]host -- 'argv'`: the same host,
        port, key and known_hosts as this connection, with a terminal."""
        out = ["ssh", "-t"]
        if self.config_path:
            out += ["-F", str(self.config_path)]
        if self.port:
            out += ["-p", str(self.port)]
        if self.identity_file:
            out += ["-i", str(self.identity_file)]
        if self.known_hosts:
            out += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        out.append(f"{self.user}@{self.host}" if self.user else self.host)
        return [*out, "--", shlex.join(argv)]  # ssh hands ONE string to the remote shell

    # ------------------------------------------------------------ tests/bench

    def _socket(self) -> socket.socket | None:
        """The TCP socket under the connection (tests cut it to force a reconnect)."""
        if self._conn is None:
            return None
        return self._conn.get_extra_info("socket")
