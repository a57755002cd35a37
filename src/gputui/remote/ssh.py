"""SshTransport: one asyncssh connection to the host, many channels on it.

* ONE connection per host; a semaphore keeps at most `MAX_CHANNELS` channels
  open at once (OpenSSH allows 10 sessions per connection by default).
  One-shot commands wait for a slot; long-lived `open()`s hold one until
  they are closed or end.
* `~/.ssh/config` (or an explicit file) and ssh-agent come from asyncssh;
  host keys are checked the way OpenSSH does, which asyncssh leaves to the
  caller in three places (see `HostTrust`): `UserKnownHostsFile none` trusts
  no key (it does not turn checking off), a key marked `@revoked` is refused
  even where asyncssh's port-less retry would not see the mark, and a
  missing known_hosts file is skipped. Unknown, changed and revoked keys are
  told apart so the user gets the right fix; `accept_new_host_key` may add
  an unknown (never a changed or revoked) key after showing its fingerprint.
* ProxyJump hops are connected one by one here (not inside asyncssh), each
  with the same host-key rules and timeout, so an error names the hop that
  failed: a jump host's changed key or silence is the jump host's.
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
import shlex
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
# A refused or unanswered connect costs the host nothing: a host that comes
# back is seen within ~5 s (plus connect_timeout when packets vanish).
BACKOFF_MAX_S = 5.0
RTT_REFRESH_S = 30.0
# Ciphers asked for first when the ssh config names none (`Ciphers`): asyncssh
# does chacha20-poly1305 in Python with three cipher contexts a packet, ~7x the
# CPU of AES-GCM (one OpenSSL call); a busy log stream is hundreds of packets
# a second. The rest of asyncssh's defaults follow, so any server still agrees.
FAST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _default_known_hosts() -> Path:
    return Path("~", ".ssh", "known_hosts").expanduser()


def _host_port(host: str, port: int) -> str:
    """How OpenSSH names a host in known_hosts / ssh-keygen -R."""
    return host if port == 22 else f"[{host}]:{port}"


class HostTrust:
    """The known_hosts view of one hop, built by us and handed to asyncssh as
    its `known_hosts` callable: trusted keys as asyncssh would match them,
    plus every `@revoked` key for the host with or without the port (asyncssh
    forgets the `[host]:port` marks when it retries without the port)."""

    def __init__(self, files: list[str], none_in_config: bool = False) -> None:
        self.files = files
        self.none_in_config = none_in_config  # `UserKnownHostsFile none`
        self._known = asyncssh.import_known_hosts("")
        self._revoked = asyncssh.import_known_hosts("")
        for path in files:
            try:
                text = Path(path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # a missing or unreadable file is skipped, as OpenSSH does
            for line in text.splitlines():
                stripped = line.strip()
                with contextlib.suppress(ValueError):  # a bad line is skipped too
                    self._known.load(stripped)
                    if stripped.startswith("@revoked"):
                        self._revoked.load(stripped[len("@revoked") :])
        self.trusted: list[asyncssh.SSHKey] = []
        self.revoked: list[asyncssh.SSHKey] = []

    def __call__(
        self, host: str, addr: str, port: int | None
    ) -> tuple[list[Any], list[Any], list[Any]]:
        trusted, ca_keys, revoked = self._known.match(host, addr, port)[:3]
        extra = [
            *self._revoked.match(host, addr, port)[0],
            *self._revoked.match(host, addr, None)[0],
        ]
        self.trusted = [k for k in trusted if k not in extra]
        self.revoked = [*revoked, *(k for k in extra if k not in revoked)]
        return self.trusted, list(ca_keys), self.revoked


def preferred_ciphers() -> list[str]:
    """asyncssh's default ciphers with AES-GCM first (see FAST_CIPHERS)."""
    from asyncssh.encryption import get_default_encryption_algs

    default = [a.decode("ascii") for a in get_default_encryption_algs()]
    return [a for a in FAST_CIPHERS if a in default] + [a for a in default if a not in FAST_CIPHERS]


@dataclass
class Hop:
    """One ssh connection on the way: a ProxyJump host, or the target."""

    name: str  # as given: an alias or a host name
    host: str  # HostName after the ssh config
    port: int
    user: str | None
    trust: HostTrust
    jump_to: str | None = None  # for a jump host: the target it leads to
    kw: dict[str, Any] = field(default_factory=dict)

    @property
    def known_name(self) -> str:
        return _host_port(self.host, self.port)

    @property
    def what(self) -> str:
        return "jump host " if self.jump_to else ""

    @property
    def via(self) -> str:
        return f" (ProxyJump to {self.jump_to})" if self.jump_to else ""

    def known_hosts_file(self) -> str:
        return self.trust.files[0] if self.trust.files else str(_default_known_hosts())


class _Client(asyncssh.SSHClient):
    """Sees the host key the server offers (to tell unknown from changed) and
    notices when the connection drops."""

    def __init__(self, transport: SshTransport, hop: Hop) -> None:
        self._transport = transport
        self.hop = hop
        self.offered_key: asyncssh.SSHKey | None = None
        self.accepted_new = False
        self.conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self.conn = conn

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        # Only called when the key is neither trusted nor revoked for this host.
        self.offered_key = key
        trust = self.hop.trust
        if (
            self._transport.accept_new_host_key
            and not trust.trusted  # a different key is known: CHANGED, never accepted
            and not trust.revoked
            and not trust.none_in_config  # nowhere to write it, and OpenSSH refuses
        ):
            self.accepted_new = True
            return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None and self.hop.jump_to is None:
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
        jump: str | None = None,
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
        self.jump = jump  # ProxyJump as `ssh -J` takes it; None: the ssh config's
        self.label = host
        # What the connection resolved to (ssh config HostName/Port/User).
        self.resolved_host: str = host
        self.resolved_port: int = port or 22
        self.resolved_user: str | None = user
        self.connect_s: float | None = None  # how long the last successful connect took
        self.reconnects = 0
        self.hops: list[Hop] = []  # the last connect's ProxyJump hops, then the target
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

    def _base_kw(self) -> dict[str, Any]:
        return {
            "keepalive_interval": self.keepalive,
            "keepalive_count_max": self.keepalive_count_max,
            "connect_timeout": self.connect_timeout,
            "login_timeout": self.connect_timeout,
        }

    async def _resolve(
        self, name: str, config: Any, kw: dict[str, Any], jump_to: str | None
    ) -> tuple[Hop, Any]:
        """A Hop for `name` as the ssh config resolves it, and its options."""
        try:
            opts = await asyncssh.SSHClientConnectionOptions.construct(
                None, config=config, host=name, **kw
            )
        except (OSError, asyncssh.Error, ValueError) as err:
            which = f"jump host {name}" if jump_to else name
            raise ConnectError(
                f"cannot set up ssh to {which}: {err}",
                "check the ssh config, -i key file and known_hosts path",
            ) from None
        if "encryption_algs" not in kw and not opts.config.get("Ciphers"):
            kw["encryption_algs"] = preferred_ciphers()
        kh: Any = opts.known_hosts
        none_in_config = False
        if self.known_hosts:  # --known-hosts: for every hop, as given
            files = [str(Path(self.known_hosts).expanduser())]
        elif kh is None:  # `UserKnownHostsFile none`: only GlobalKnownHostsFile, if any
            none_in_config = True
            files = [str(Path(p).expanduser()) for p in opts.config.get("GlobalKnownHostsFile", [])]
        elif isinstance(kh, (list, tuple)) and kh:
            files = [str(Path(p).expanduser()) for p in kh]
        elif isinstance(kh, (str, Path)) and str(kh):
            files = [str(Path(kh).expanduser())]
        else:
            files = [str(_default_known_hosts())]
        hop = Hop(
            name, opts.host, opts.port, opts.username, HostTrust(files, none_in_config), jump_to
        )
        return hop, opts

    async def _plan_hops(self) -> tuple[list[Hop], Any]:
        """The ProxyJump hops (in order) and then the target, with their
        connect kwargs; also what the ssh config says about the target
        (HostName, Port, User) for messages."""
        if self.identity_file:
            self._check_file(self.identity_file, "identity file", "-i / identity_file")
        if self.config_path:
            self._check_file(self.config_path, "ssh config file", "--ssh-config")
        kw = self._base_kw()
        if self.port is not None:
            kw["port"] = self.port
        if self.user is not None:
            kw["username"] = self.user
        if self.identity_file:
            kw["client_keys"] = [str(Path(self.identity_file).expanduser())]
        config: Any = [str(Path(self.config_path).expanduser())] if self.config_path else ()
        target, opts = await self._resolve(self.host, config, kw, None)
        target.kw = kw
        self.resolved_host = target.host
        self.resolved_port = target.port
        self.resolved_user = target.user
        self.label = f"{target.user}@{target.host}" + (
            f":{target.port}" if target.port != 22 else ""
        )
        hops: list[Hop] = []
        jumps = self.jump or (opts.tunnel if isinstance(opts.tunnel, str) else "")
        if jumps.strip().lower() not in ("", "none"):
            for spec in jumps.split(","):
                jkw = self._base_kw()
                user, _, hostport = spec.strip().rpartition("@")
                name, colon, port = hostport.partition(":")
                if user:
                    jkw["username"] = user
                if colon:
                    try:
                        jkw["port"] = int(port)
                    except ValueError:
                        raise ConnectError(
                            f"ProxyJump {spec!r} for {self.host} has a bad port",
                            "fix ProxyJump in the ssh config ([user@]host[:port],...)",
                        ) from None
                hop, _ = await self._resolve(name, config, jkw, target.known_name)
                hop.kw = jkw
                hops.append(hop)
        return [*hops, target], config

    @staticmethod
    def _check_file(path: str, what: str, given: str) -> None:
        p = Path(path).expanduser()
        if not p.exists():
            raise ConnectError(
                f"{what} {path} does not exist", f"check the path given with {given}"
            )
        if not p.is_file():
            raise ConnectError(f"{what} {path} is not a file", f"pass a file with {given}")

    @staticmethod
    def _host_key_error(
        err: BaseException, client: _Client | None, hop: Hop
    ) -> ConnectError | None:
        """The host key was revoked, has changed or is not known; None when
        `err` is about something else."""
        host, port = hop.host, hop.port
        what, via, name = hop.what, hop.via, hop.known_name
        kh = hop.known_hosts_file()
        reason = str(getattr(err, "reason", "") or "")
        if isinstance(err, asyncssh.HostKeyNotVerifiable) and "revoked" in reason.lower():
            return ConnectError(
                f"host key for {what}{name} is REVOKED (marked @revoked in known_hosts){via}; "
                "refusing to connect",
                "the key was withdrawn: get the host's current key from its admin, check its "
                f"fingerprint, and replace the @revoked line in {kh}",
            )
        if isinstance(err, asyncssh.HostKeyNotVerifiable) or (
            isinstance(err, asyncssh.KeyExchangeFailed) and client and client.offered_key
        ):
            key = client.offered_key if client else None
            fp = f"{key.get_algorithm()} {key.get_fingerprint('sha256')}" if key else "unknown"
            if hop.trust.trusted:
                return ConnectError(
                    f"host key for {what}{name} has CHANGED (now {fp}){via}; refusing to connect",
                    "if the host was reinstalled, remove the old key with "
                    f"`ssh-keygen -R {shlex.quote(name)}"
                    + (f" -f {shlex.quote(kh)}" if kh != str(_default_known_hosts()) else "")
                    + "`, otherwise someone may be intercepting the connection",
                )
            keyscan = (
                f"ssh-keyscan -p {port} {host} >> FILE"
                if port != 22
                else f"ssh-keyscan {host} >> FILE"
            )
            if hop.trust.none_in_config:
                return ConnectError(
                    f"host key for {what}{name} cannot be checked ({fp}){via}: the ssh config "
                    "says `UserKnownHostsFile none`, so no key is trusted (OpenSSH refuses too)",
                    "name a known_hosts file: --known-hosts FILE or UserKnownHostsFile in the "
                    f"ssh config; check the fingerprint, then add it with `{keyscan}`",
                )
            return ConnectError(
                f"host key for {what}{name} is not known ({fp}){via}",
                f"check the fingerprint, then add it with "
                f"`{keyscan.replace('FILE', shlex.quote(kh))}`, "
                "or rerun with --accept-new-host-key",
            )
        return None

    def _translate(self, err: BaseException, client: _Client | None, hop: Hop) -> ConnectError:
        """One line naming the problem, the hop it happened on, and the fix."""
        host, port = hop.host, hop.port
        what, via = hop.what, hop.via
        where = f"{what}{host} port {port}"
        host_key = self._host_key_error(err, client, hop)
        if host_key is not None:
            return host_key
        if isinstance(err, asyncssh.PermissionDenied):
            who = f"{hop.user}@{host}"
            return ConnectError(
                f"{what}{who} port {port} refused our ssh keys (authentication failed){via}",
                "check -i FILE / IdentityFile, ssh-agent and the host's authorized_keys; "
                f"`ssh -p {port} {who}` must log in without a password",
            )
        if isinstance(err, socket.gaierror):
            return ConnectError(
                f"unknown {what or 'host '}{hop.name!r}{via}: not a Host alias in your ssh config "
                "and DNS cannot resolve it",
                "check the name, or add a `Host` entry to ~/.ssh/config (or pass --ssh-config FILE)",
            )
        if isinstance(err, UnicodeError):  # the IDNA codec: an empty or over-long label
            return ConnectError(
                f"{what or 'host '}{hop.name!r} is not a valid host name{via}: not a Host alias "
                "in your ssh config, and no DNS name has an empty label (`..`) or one over 63 "
                "characters",
                "check the name, or add a `Host` entry to ~/.ssh/config (or pass --ssh-config FILE)",
            )
        if isinstance(err, ConnectionRefusedError):
            return ConnectError(
                f"connection refused by {where}{via}",
                "is sshd running there and is the port right"
                + (" (ProxyJump in the ssh config)?" if what else " (--port)?"),
            )
        if isinstance(err, (asyncio.TimeoutError, TimeoutError)):
            return ConnectError(
                f"no ssh answer from {where} within {self.connect_timeout:g} s{via}",
                "check the address, the port and any firewall, or raise connect_timeout",
            )
        if isinstance(err, asyncssh.KeyImportError | asyncssh.KeyEncryptionError):
            return ConnectError(
                f"cannot use the identity file {self.identity_file}: {err}",
                "pass an unencrypted key with -i, or load it into ssh-agent",
            )
        if isinstance(err, asyncssh.Error):
            return ConnectError(
                f"ssh to {where} failed: {err.reason or type(err).__name__}{via}",
                "check that `ssh` to this host works from this machine",
            )
        if isinstance(err, OSError):
            return ConnectError(
                f"cannot reach {where}: {err.strerror or err}{via}",
                "check the address and the network",
            )
        return ConnectError(
            f"ssh to {where} failed: {type(err).__name__}: {err}{via}",
            "check that `ssh` to this host works from this machine",
        )

    async def _open_connection(self) -> asyncssh.SSHClientConnection:
        hops, config = await self._plan_hops()
        self.hops = hops
        tunnel: asyncssh.SSHClientConnection | None = None
        t0 = time.perf_counter()
        try:
            for hop in hops:
                conn = await self._connect_hop(hop, config, tunnel)
                if tunnel is not None:
                    conn.set_tunnel(tunnel)  # closing the target closes the hops too
                tunnel = conn
        except BaseException:
            if tunnel is not None:
                tunnel.close()
            raise
        self.connect_s = time.perf_counter() - t0
        assert tunnel is not None
        return tunnel

    async def _connect_hop(
        self, hop: Hop, config: Any, tunnel: asyncssh.SSHClientConnection | None
    ) -> asyncssh.SSHClientConnection:
        client_box: list[_Client] = []

        def factory() -> _Client:
            c = _Client(self, hop)
            client_box.append(c)
            return c

        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    hop.name,
                    config=config,
                    client_factory=factory,
                    known_hosts=hop.trust,
                    tunnel=tunnel,  # None: our hops, never asyncssh's own ProxyJump
                    **hop.kw,
                ),
                self.connect_timeout + 1.0,
            )
        except asyncio.CancelledError:
            raise
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            client = client_box[-1] if client_box else None
            raise self._translate(err, client, hop) from None
        client = client_box[-1] if client_box else None
        if client is not None and client.accepted_new and client.offered_key is not None:
            self._remember_host_key(hop, client.offered_key)
        return conn

    def _remember_host_key(self, hop: Hop, key: asyncssh.SSHKey) -> None:
        name = hop.known_name
        path = Path(hop.known_hosts_file())
        algo, blob = key.export_public_key("openssh").decode().split()[:2]
        self.notify(
            f"accepted NEW host key for {hop.what}{name}: "
            f"{key.get_algorithm()} {key.get_fingerprint('sha256')} (added to {path})"
        )
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(f"{name} {algo} {blob}\n")
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
                if isinstance(err, ConnectError) and any(
                    w in err.problem
                    for w in ("CHANGED", "REVOKED", "cannot be checked", "refused our ssh keys")
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
                    # surrogateescape: an argument's non-UTF-8 bytes (read from
                    # /proc/PID/cmdline as lone surrogates) go out as the same bytes
                    conn.create_process(
                        command.encode("utf-8", "surrogateescape"),  # type: ignore[arg-type]
                        encoding=None,
                    ),
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
        if self.jump:
            out += ["-J", self.jump]
        out.append(f"{self.user}@{self.host}" if self.user else self.host)
        return [*out, "--", shlex.join(argv)]  # ssh hands ONE string to the remote shell

    # ------------------------------------------------------------ tests/bench

    def _socket(self) -> socket.socket | None:
        """The TCP socket under the connection (tests cut it to force a reconnect)."""
        if self._conn is None:
            return None
        return self._conn.get_extra_info("socket")
