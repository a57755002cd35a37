"""AgentClient: talk to gputui's agent (`agent.py`) inside the container.

The agent is started once, as `python3 -I -S -c BOOTSTRAP gputui-agent` (from
`/`, remote.identity.python_argv): the short
bootstrap reads the agent's source (zlib + base64, one line) from stdin and
runs it, so stdin then carries the JSON-line requests and `ps` shows a
short, recognisable command. Closing the client closes the agent's stdin,
and the agent exits on that EOF.

    client = await AgentClient.start(target)          # in the CT
    host = await AgentClient.start(target, on_host=True)
    procs = await client.processes(pane.pid)          # list[Proc], local clock
    await client.close()
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import sys
import time
import zlib
from importlib import resources
from typing import Any

from gputui.collect.procs import procs_from_agent
from gputui.containers import Container, container_for, in_cgroups
from gputui.errors import CommandTimeout, GputuiError
from gputui.model import Proc, Session, Tools
from gputui.remote.base import RemoteProcess
from gputui.remote.identity import python_argv
from gputui.remote.target import Target

AGENT_MARKER = "gputui-agent"
BOOTSTRAP = (
    "import sys,zlib,base64;"
    "exec(compile(zlib.decompress(base64.b64decode(sys.stdin.buffer.readline())),"
    "'gputui-agent','exec'))"
)
START_TIMEOUT_S = 20.0
CLOCK_SAMPLES = 3  # pings after the hello to measure the clock offset by


class AgentUnavailable(GputuiError):
    """The agent could not start (no python3, too old, CT not running...).
    Callers fall back to plain commands."""


class AgentError(GputuiError):
    """The agent answered a request with an error, or went away."""


Request = tuple[str, dict[str, Any]]  # (op, its arguments)


class _Expired(Exception):
    """An agent's answer did not come within its time limit."""


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(_Expired())


def _raised(res: Any) -> Any:
    """A `batch` answer: the result, or the AgentError it got raised."""
    if isinstance(res, AgentError):
        raise res
    return res


def agent_source() -> bytes:
    return resources.files("gputui.remote").joinpath("agent.py").read_bytes()


def agent_argv(python: str = "python3", in_container: bool = False) -> list[str]:
    """`python3 -I -S -c BOOTSTRAP gputui-agent`, from `/`, with an
    interpreter root owns (remote.identity.python_argv): the bootstrap's
    own `import base64` once ran a base64.py from the working directory."""
    return python_argv(python, ["-c", BOOTSTRAP, AGENT_MARKER], AGENT_MARKER, in_container)


def source_line() -> bytes:
    return base64.b64encode(zlib.compress(agent_source(), 9)) + b"\n"


def _why_not_started(
    stderr: str, exit_status: int | None, where: str, python: str
) -> AgentUnavailable:
    last = " ".join(stderr.strip().splitlines()[-1:]) if stderr.strip() else ""
    low = stderr.lower()
    if exit_status == 127 or "not found" in low or "no such file" in low or "failed to exec" in low:
        return AgentUnavailable(
            f"{python} is not installed {where}",
            "install it (apt install python3-minimal) — until then gputui uses plain commands",
        )
    if "syntaxerror" in low or "attributeerror" in low:
        return AgentUnavailable(
            f"{python} {where} is too old for the agent (needs Python 3.6+)",
            "install a newer python3 — until then gputui uses plain commands",
        )
    return AgentUnavailable(
        f"the gputui agent did not start {where}: {last or f'exit {exit_status}'}",
        "run `gputui doctor` for details; gputui falls back to plain commands",
    )


class AgentClient:
    """One running agent; concurrent calls are matched to answers by id."""

    def __init__(self, proc: RemoteProcess, where: str) -> None:
        self._proc = proc
        self.where = where
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self._gone: str | None = None  # why the agent is gone
        self.hello: dict[str, Any] = {}
        self.clock_offset = 0.0  # local clock - remote clock, seconds
        self.rtt_ms: float | None = None
        # Other users' tmux servers not used (one line each: whose, why, what
        # to do), from the latest sessions answer.
        self.tmux_skipped: list[str] = []
        self._sessions_key: tuple[Any, ...] | None = None  # sessions_result's last answer
        self._sessions: list[Session] = []

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def start(
        cls,
        target: Target,
        on_host: bool = False,
        *,
        python: str = "python3",
        timeout: float = START_TIMEOUT_S,
        clock_samples: int = CLOCK_SAMPLES,
        probe_tools: bool = True,
    ) -> AgentClient:
        """Start the agent in the CT (or on the host) and say hello;
        `clock_samples` pings after it set clock_offset, and the hello
        probes the tools (`tools()`) unless `probe_tools` is off — a caller
        that needs neither, such as a plan's facts, waits for none.

        Raises AgentUnavailable (python3 missing or too old, CT not running)
        with the fix; the caller falls back to plain commands."""
        argv = agent_argv(python, in_container=not on_host and target.in_container)
        check = "python3 -V" if on_host else target.container.phrase("python3 -V")
        where = (
            "on the host" if on_host or not target.in_container else f"in {target.container.words}"
        )
        if on_host:
            proc = await target.open_host(argv, watchdog=False)
        else:
            proc = await target.open(argv, watchdog=False)
        client = cls(proc, where)
        client._reader = asyncio.ensure_future(client._read_loop())
        try:
            await proc.write(source_line())
            await client._say_hello(timeout, clock_samples, probe_tools)
        except (AgentError, CommandTimeout, OSError, ConnectionError) as err:
            stderr, status = "", None
            with contextlib.suppress(Exception):
                status = await asyncio.wait_for(proc.wait(), 2.0)
            with contextlib.suppress(Exception):
                stderr = await proc.stderr_text()
            await client.close()
            task = asyncio.current_task()
            # Task.cancelling() is Python 3.11+; on 3.10 the error is raised as is.
            if sys.version_info >= (3, 11) and task is not None and task.cancelling():
                # cancelled meanwhile (the event loop is shutting down after
                # a stop()): end as cancelled, not as an error nobody reads —
                # asyncio would print its traceback after the one-line message
                raise asyncio.CancelledError from None
            if isinstance(err, CommandTimeout) and not stderr:
                raise AgentUnavailable(
                    f"the gputui agent did not answer within {timeout:g} s {where}",
                    f"check the connection and `{check}` by hand",
                ) from None
            raise _why_not_started(stderr, status, where, python) from None
        return client

    async def _say_hello(
        self, timeout: float, clock_samples: int = CLOCK_SAMPLES, probe_tools: bool = True
    ) -> None:
        t0 = time.time()
        hello = await self.call("hello", timeout=timeout, tools=probe_tools)
        t1 = time.time()
        self.hello = hello
        self.rtt_ms = (t1 - t0) * 1000.0
        self.clock_offset = (t0 + t1) / 2.0 - float(hello["clock"])
        await self.sync_clock(clock_samples)

    async def sync_clock(self, samples: int = CLOCK_SAMPLES) -> None:
        """Refine clock_offset from pings, keeping the one with the shortest
        round trip (its error is at most half of it). The hello's round trip
        holds the agent's start-up and its tools' probes: seconds on a busy
        machine, and the offset from it as far off — which put a process's
        start after its first steps and called an early hang "loading"
        (issue 31). A ping that fails leaves the offset as it is."""
        best = self.rtt_ms / 1000.0 if self.rtt_ms is not None else float("inf")
        for _ in range(samples):
            t0 = time.time()
            try:
                answer = await self.call("ping", timeout=5.0)
            except GputuiError:  # AgentError, CommandTimeout
                return
            t1 = time.time()
            if t1 - t0 < best and isinstance(answer, dict) and "clock" in answer:
                best = t1 - t0
                self.clock_offset = (t0 + t1) / 2.0 - float(answer["clock"])

    async def close(self) -> None:
        """Close the agent's stdin (it exits on EOF) and stop reading."""
        if self._closed:
            return
        self._closed = True
        self._fail_pending("the agent was closed")
        with contextlib.suppress(Exception):
            await self._proc.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def alive(self) -> bool:
        return not self._closed and self._gone is None

    # ------------------------------------------------------------ protocol

    async def _read_loop(self) -> None:
        try:
            while True:
                line = await self._proc.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue  # not ours (e.g. a banner); ignore
                if not isinstance(msg, dict):
                    continue
                rid = msg.get("id")
                fut = self._pending.pop(rid, None) if isinstance(rid, int) else None
                if fut is None or fut.done():
                    continue
                if msg.get("ok"):
                    fut.set_result(msg.get("result"))
                else:
                    fut.set_exception(AgentError(f"agent {self.where}: {msg.get('error')}"))
        except (OSError, ConnectionError, asyncio.IncompleteReadError) as err:
            self._gone = f"the agent connection broke: {err}"
        finally:
            if self._gone is None:
                self._gone = "the agent exited"
            self._fail_pending(self._gone)

    def _fail_pending(self, why: str) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(AgentError(f"{why} ({self.where})", "gputui restarts it"))

    async def call(self, op: str, timeout: float = 5.0, **args: Any) -> Any:
        """Send one request; its result, or AgentError / CommandTimeout."""
        if self._closed or self._gone is not None:
            raise AgentError(
                f"{self._gone or 'the agent was closed'} ({self.where})", "gputui restarts it"
            )
        rid = next(self._ids)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending[rid] = fut
        line = json.dumps({"id": rid, "op": op, **args}).encode() + b"\n"
        timer: asyncio.TimerHandle | None = None
        try:
            try:
                await self._proc.write(line)
            except (OSError, ConnectionError) as err:
                self._gone = self._gone or f"the agent went away: {err}"
                raise AgentError(f"{self._gone} ({self.where})", "gputui restarts it") from None
            # the answer's future is awaited as it is, with a bare timer for
            # the time limit: `asyncio.wait_for` waits on a second future of
            # its own, released from the first one's callback — a turn of the
            # event loop more for every answer (the poll's, each second)
            timer = loop.call_later(timeout, _expire, fut)
            return await fut
        except _Expired:
            raise CommandTimeout(
                f"the gputui agent {self.where} did not answer `{op}` within {timeout:g} s",
                "the machine may be overloaded; gputui retries",
            ) from None
        finally:
            if timer is not None:
                timer.cancel()
            self._pending.pop(rid, None)

    # ------------------------------------------------------------ helpers

    def to_local(self, remote_time: float | None) -> float | None:
        return None if remote_time is None else remote_time + self.clock_offset

    def tools(self) -> Tools:
        t = self.hello.get("tools") or {}
        return Tools(
            tmux=t.get("tmux"),
            python3=self.hello.get("python"),
            py_spy=t.get("py-spy"),
            gdb=t.get("gdb"),
            nvidia_smi_ct=bool(t.get("nvidia-smi")),
            probed="tools" in self.hello,
        )

    async def ping(self, timeout: float = 5.0) -> float:
        """Round trip in ms."""
        t0 = time.perf_counter()
        await self.call("ping", timeout=timeout)
        return (time.perf_counter() - t0) * 1000.0

    async def processes(
        self, root_pid: int, *, sources: bool = True, timeout: float = 5.0
    ) -> list[Proc]:
        """The process tree under root_pid (root first); [] when it is gone."""
        op, args = self.processes_request(root_pid, sources)
        return self.processes_result(await self.call(op, timeout=timeout, **args))

    async def batch(self, calls: list[Request], timeout: float = 5.0) -> list[Any]:
        """Several requests in one round trip: each one's raw result, or the
        AgentError it got, in order (read them with the `*_result` methods)."""
        answers = await self.call(
            "batch", timeout=timeout, calls=[{"op": op, **args} for op, args in calls]
        )
        out: list[Any] = []
        for a in answers:
            if isinstance(a, dict) and a.get("ok"):
                out.append(a.get("result"))
            else:
                error = a.get("error") if isinstance(a, dict) else a
                out.append(AgentError(f"agent {self.where}: {error}"))
        return out

    # One poll of the monitor asks for these together (`batch`): the request,
    # and what its raw result means.
    @staticmethod
    def sessions_request(socket_path: str | None = None, reuse_s: float = 0.0) -> Request:
        """Every session: of the default server, and (socket_path None) of
        every other tmux server in the CT (another user's, a `-L` one).
        `reuse_s`: the agent may answer with its last listing while that is
        younger and no tmux pane's process came, went or was reparented."""
        from gputui.collect import tmux

        args: dict[str, Any] = {
            "socket": socket_path,
            "commands": [tmux.list_panes_argv()[1:]],
            "other_servers": socket_path is None,
        }
        if reuse_s > 0:
            args["reuse_s"] = reuse_s
        return "tmux", args

    def sessions_result(self, res: Any) -> list[Session]:
        """The sessions of a `tmux` answer. The agent answers with the same
        listing for seconds at a time (reuse_s): an answer equal to the last
        one gives the last one's sessions again, not parsed twice (issue 24)."""
        answer = _raised(res)
        key = (self.clock_offset, _listing_key(answer))
        if key == self._sessions_key:
            return list(self._sessions)
        sessions = self._parse_sessions(answer)
        self._sessions_key, self._sessions = key, sessions
        return list(sessions)

    def _parse_sessions(self, answer: dict[str, Any]) -> list[Session]:
        from gputui.collect import tmux

        r = answer["results"][0]
        sessions = tmux.sessions_from_result(r["exit"], r["stdout"], r["stderr"])
        self.tmux_skipped = []
        for server in answer.get("servers") or []:
            if server.get("skipped"):  # not reachable as its owner: not used at all
                self.tmux_skipped.append(str(server["skipped"]))
                continue
            r = server["results"][0]
            # Gone since, or not ours to reach: not a session to show. A listing
            # with a failed exit is one of that server's hooks failing (one
            # that opens a file its owner may not): the sessions are listed.
            if r["exit"] != 0 and not r["stdout"]:
                continue
            for s in tmux.parse_panes(r["stdout"]):
                s.socket, s.owner = str(server["socket"]), str(server["owner"])
                s.server_tmux = [str(a) for a in server["tmux"]]
                sessions.append(s)
        for s in sessions:
            s.created = self.to_local(s.created)
        return sessions

    @staticmethod
    def processes_request(root_pid: int, sources: bool = True) -> Request:
        return "procs", {"root_pid": int(root_pid), "sources": sources}

    def processes_result(self, res: Any) -> list[Proc]:
        return procs_from_agent(_raised(res), self.clock_offset)

    @staticmethod
    def capture_request(
        pane_target: str, lines: int = 50, socket_path: str | None = None
    ) -> Request:
        return "capture", {"target": pane_target, "lines": lines, "socket": socket_path}

    @staticmethod
    def capture_result(res: Any, pane_target: str, lines: int = 50) -> list[str]:
        r = _raised(res)
        if r["exit"] != 0:
            raise AgentError(f"tmux capture-pane {pane_target}: {(r['stderr'] or '').strip()}")
        out = r["stdout"].rstrip("\n").split("\n")
        return list(out[-lines:])

    @staticmethod
    def stat_request(paths: list[str]) -> Request:
        return "stat", {"paths": list(paths)}

    def stat_result(self, res: Any) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for d in _raised(res):
            if d.get("mtime") is not None:
                d["mtime"] = self.to_local(d["mtime"])
            out[d["path"]] = d
        return out

    async def writers(self, path: str, timeout: float = 5.0) -> dict[str, Any]:
        """The run writing `path`, found without tmux: {writers: [{pid, fd,
        command}], readers: [pid] (tee-like writers followed back), run:
        [pid], roots: [pid] (tops of the run's process trees)}."""
        return dict(await self.call("writers", timeout=timeout, path=str(path)))

    async def sessions(self, socket_path: str | None = None, timeout: float = 5.0) -> list[Session]:
        """tmux sessions with their panes (tmux's own `list-panes -a`)."""
        op, args = self.sessions_request(socket_path)
        return self.sessions_result(await self.call(op, timeout=timeout, **args))

    async def capture(
        self,
        pane_target: str,
        lines: int = 50,
        socket_path: str | None = None,
        timeout: float = 5.0,
    ) -> list[str]:
        """The last `lines` lines of a pane (`capture-pane -p -J`)."""
        op, args = self.capture_request(pane_target, lines, socket_path)
        return self.capture_result(await self.call(op, timeout=timeout, **args), pane_target, lines)

    async def stat(self, paths: list[str], timeout: float = 5.0) -> dict[str, dict[str, Any]]:
        """path -> {exists, size, mtime (local clock), inode, ...}."""
        op, args = self.stat_request(paths)
        return self.stat_result(await self.call(op, timeout=timeout, **args))

    async def read(
        self, path: str, offset: int = 0, max_bytes: int = 65536, timeout: float = 5.0
    ) -> dict[str, Any]:
        """Bytes of a file from offset: {data: bytes, offset, size, inode, mtime, truncated}."""
        r = await self.call("read", timeout=timeout, path=path, offset=offset, max_bytes=max_bytes)
        r["data"] = base64.b64decode(r["data"])
        r["mtime"] = self.to_local(r.get("mtime"))
        return r

    async def pidmap(
        self,
        pids: list[int],
        container: Container | int | None,
        ct_pid_ns: str | None = None,
        timeout: float = 5.0,
    ) -> dict[int, dict[str, Any]]:
        """Host PID -> {ct_pid, in_container, exists, pid_ns, cgroup, cgroups,
        cmdline} (for an agent started with on_host=True). In `container`
        when one of its cgroup paths is the container's (`Container.owns`,
        as `containers.cgroup_owner` reads it) or its PID namespace is
        `ct_pid_ns` (the in-container agent's `hello["pid_ns"]`)."""
        where = container_for(container)
        items = await self.call("pidmap", timeout=timeout, pids=[int(p) for p in pids])
        for d in items:
            paths = d.get("cgroups") or []
            in_ct = in_cgroups(paths, where)
            same_ns = bool(ct_pid_ns) and d.get("pid_ns") == ct_pid_ns
            d["in_container"] = (in_ct or same_ns) if (paths or same_ns) else None
        return {int(d["pid"]): d for d in items}


def _listing_key(answer: dict[str, Any]) -> tuple[Any, ...]:
    """What of a `tmux` answer its sessions are made from, comparable."""
    r = answer["results"][0]
    servers = tuple(
        (
            srv.get("skipped"),
            srv.get("socket"),
            srv.get("owner"),
            tuple(srv.get("tmux") or ()),
            tuple((x["exit"], x["stdout"]) for x in srv.get("results") or ()),
        )
        for srv in answer.get("servers") or ()
    )
    return (r["exit"], r["stdout"], r["stderr"], servers)
