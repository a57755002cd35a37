"""One browser tab's dashboard under `gputui serve`: started, relayed, ended.

textual-serve's own AppService starts `sh -c COMMAND` and, when the tab
goes, asks the app to quit over its stdin and waits for its stdout to end —
it never signals it. A dashboard that does not read that quit (one still
starting up, or Textual's main loop busy: a tab closed ~1.5 s after it
opened left `gputui --demo --read-only` in a resize loop at 100 % CPU, its
asyncio SIGTERM handler never run) outlived the tab and serve itself.

Here each tab's dashboard:
- runs without a shell, in a session of its own (so its process group can
  be signalled as a whole) and with PR_SET_PDEATHSIG: a serve killed even by
  SIGKILL takes it along;
- is ended when its tab goes, at any moment of its start-up: the quit
  message, then SIGTERM to its process group once it has spent QUIT_GRACE_S
  of CPU without exiting (a busy machine's slow quit is not a stuck one), then
  SIGKILL after TERM_GRACE_S; what it left in its group goes too;
- has its stdout read to the end even once the page is gone (a full pipe
  would block its last writes and so its exit);
- when it ends before it started (a target that cannot be reached, a bad
  flag), says why on the page: its own one-line error, in the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import io
import os
import signal
from asyncio.subprocess import Process
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from textual_serve.app_service import AppService

# The dashboard's own quit (its demo run stopped, history flushed) may spend
# QUIT_GRACE_S of its own CPU time, up to QUIT_WALL_MAX_S of the clock. A quit
# is small work, but on a busy machine it can take more than 3 s of the clock
# (the suite's tab test under load was SIGTERMed at 3 s of the clock), while a
# dashboard stuck in a loop (round 5's resize loop at 100 % CPU) spends 3 s of
# CPU in about 3 s.
QUIT_GRACE_S = 3.0
QUIT_WALL_MAX_S = 30.0
TERM_GRACE_S = 3.0  # after SIGTERM to its process group, before SIGKILL
PR_SET_PDEATHSIG = 1
READY = b"__GANGLION__\n"  # Textual's web driver says it is up
SAID_MAX = 4000  # of a dashboard's output before it started, shown on the page


try:  # looked up here: nothing is loaded in the child between fork and exec
    _PRCTL: Any = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def die_with_parent() -> None:
    """In the child, between fork and exec: SIGKILL when serve's thread that
    started it ends (serve runs its loop, and so every start, in its main
    thread)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def kill_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def cpu_seconds(pid: int) -> float | None:
    """The CPU time a process has spent (user + system), or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


async def quit_within(process: Process, cpu_grace: float, wall_max: float) -> bool:
    """Whether it exits before it has spent cpu_grace more CPU seconds (and
    before wall_max of the clock): a slow quit on a busy machine is waited
    for, a spinning one is not."""
    start, loop = cpu_seconds(process.pid), asyncio.get_running_loop()
    deadline = loop.time() + wall_max
    while loop.time() < deadline:
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), 0.1)
            return True
        except asyncio.TimeoutError:
            now = cpu_seconds(process.pid)
            if start is None or now is None:  # /proc unreadable: the clock decides
                deadline = min(deadline, loop.time() + cpu_grace)
            elif now - start >= cpu_grace:
                return False
    return process.returncode is not None


async def end_process(
    process: Process, quit_grace: float, term_grace: float, quit_wall_max: float = QUIT_WALL_MAX_S
) -> str:
    """Wait for it to exit while it spends up to quit_grace of CPU (at most
    quit_wall_max of the clock), then SIGTERM its process group, then SIGKILL
    after term_grace; in every case its group is signalled once it is gone
    (what it started and left behind). Returns how it ended."""
    how = "quit"
    if not await quit_within(process, quit_grace, quit_wall_max):
        how = "SIGTERM"
        kill_group(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), term_grace)
        except asyncio.TimeoutError:
            how = "SIGKILL"
            kill_group(process.pid, signal.SIGKILL)
            await process.wait()
    kill_group(process.pid, signal.SIGTERM)  # its leftovers; the leader is gone
    return how


def page_text(said: bytes, returncode: int | None) -> bytes:
    """What a dashboard that never started printed, for the page's terminal."""
    text = said[-SAID_MAX:].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() or c == "\n" else "?" for c in text).strip()
    head = f"gputui: the dashboard ended before it started (exit status {returncode})"
    lines = [head, *(text.splitlines() or ["(it printed nothing)"])]
    return ("\r\n".join(lines) + "\r\n").encode()


class TabDashboard(AppService):  # type: ignore[misc]
    """textual-serve's AppService with the process handling above."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        write_bytes: Callable[[bytes], Awaitable[Any]],
        write_str: Callable[[str], Awaitable[Any]],
        close: Callable[[], Awaitable[Any]],
        download_manager: Any,
        live: set[TabDashboard],
    ) -> None:
        super().__init__(
            " ".join(argv),
            write_bytes=_quiet(write_bytes),
            write_str=_quiet(write_str),
            close=_quiet(close),
            download_manager=download_manager,
        )
        self.argv = list(argv)
        self.live = live
        self.ended = asyncio.Event()
        self._stopping = False
        self.how_ended = ""
        self.said = io.BytesIO()  # its stderr (bounded): the why of a failed start
        self._said_task: asyncio.Future[None] | None = None
        self.starting: asyncio.Future[None] | None = None

    def begin(self, width: int, height: int) -> asyncio.Future[None]:
        """Start it, in a task of its own: a tab that goes while it starts
        cannot cancel the start half-way and leave a process unknown."""
        self.starting = asyncio.ensure_future(self.start(width, height))
        return self.starting

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.live.add(self)
        assert process.stdin is not None and process.stderr is not None
        self._said_task = asyncio.ensure_future(_keep_tail(process.stderr, self.said))
        self._stdin = process.stdin
        return process

    async def send_meta(self, data: dict[str, str | int | bool | None]) -> bool:
        if self._stdin is None:
            return False
        try:
            return bool(await super().send_meta(data))
        except (OSError, RuntimeError):  # its stdin is closed: it is ending
            return False

    async def send_bytes(self, data: bytes) -> bool:
        try:
            return bool(await super().send_bytes(data))
        except (OSError, RuntimeError):
            return False

    async def stop(self) -> None:
        """End it (see the module's words); safe to call twice and at once."""
        if self._stopping:
            await self.ended.wait()
            return
        self._stopping = True
        try:
            if self.starting is not None:
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self.starting
            with contextlib.suppress(Exception):
                await self._download_manager.cancel_app_downloads(
                    app_service_id=self.app_service_id
                )
            await self.send_meta({"type": "quit"})
            if self._process is not None:
                self.how_ended = await end_process(self._process, QUIT_GRACE_S, TERM_GRACE_S)
            if self._task is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(self._task, TERM_GRACE_S)
                self._task = None
        finally:
            self.live.discard(self)
            self.ended.set()

    async def run(self) -> None:
        """Relay its packets to the page until its stdout ends; before it is
        ready, keep what it prints, and show that on the page if it ends."""
        assert self._process is not None
        stdout = self._process.stdout
        assert stdout is not None
        ready = False
        try:
            while not ready:
                line = await stdout.readline()
                if not line:
                    break
                ready = line == READY
                if not ready and self.said.tell() < 64 * 1024:
                    self.said.write(line)
            while ready:
                await self._relay_one(stdout)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            pass
        if self._said_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._said_task, TERM_GRACE_S)
        if not ready:
            returncode = await self._process.wait()
            await self.remote_write_bytes(page_text(self.said.getvalue(), returncode))
            await self.remote_close()

    async def _relay_one(self, stdout: asyncio.StreamReader) -> None:
        kind = await stdout.readexactly(1)
        size = int.from_bytes(await stdout.readexactly(4), "big")
        payload = await stdout.readexactly(size)
        if kind == b"D":
            await self.on_data(payload)
        elif kind == b"M":
            await self.on_meta(payload)
        elif kind == b"P":
            await self.on_packed(payload)


async def _keep_tail(stream: asyncio.StreamReader, into: io.BytesIO) -> None:
    """Read a stream to its end, keeping its first 64 KiB."""
    while data := await stream.read(4096):
        if into.tell() < 64 * 1024:
            into.write(data)


def _quiet(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[None]]:
    """A write to the page that may find it gone: the dashboard's output is
    still read to its end (see TabDashboard.run)."""

    async def call(*args: Any) -> None:
        with contextlib.suppress(Exception):
            await fn(*args)

    return call


async def end_all(live: set[TabDashboard]) -> None:
    """serve is ending (any signal it can catch): every tab's dashboard ends."""
    await asyncio.gather(*(t.stop() for t in list(live)), return_exceptions=True)


async def run_tab(
    server: Any, request: Any, argv: Sequence[str], after_kill: Callable[[], None] | None
) -> Any:
    """textual-serve's websocket handler, with a TabDashboard: started in a
    task of its own, ended (`stop`) however the page's socket ends."""
    from aiohttp import web
    from textual_serve.server import to_int

    websocket = web.WebSocketResponse(heartbeat=15)
    width = to_int(request.query.get("width", "80"), 80)
    height = to_int(request.query.get("height", "24"), 24)
    tab: TabDashboard | None = None
    try:
        await websocket.prepare(request)
        tab = TabDashboard(
            argv,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=server.download_manager,
            live=server.tabs,
        )
        await asyncio.shield(tab.begin(width, height))
        await server._process_messages(websocket, tab)
    except (asyncio.CancelledError, Exception):
        pass  # the page went, or sent what is not textual-serve's: the tab ends
    finally:
        if tab is not None:
            await asyncio.shield(_end_tab(tab, server.tabs, after_kill))
        with contextlib.suppress(Exception):
            await websocket.close()
    return websocket


async def _end_tab(
    tab: TabDashboard, live: set[TabDashboard], after_kill: Callable[[], None] | None
) -> None:
    await tab.stop()
    if tab.how_ended not in ("", "quit"):
        print(f"gputui serve: a tab's dashboard did not quit: ended by {tab.how_ended}")
        if after_kill is not None and not live:
            await asyncio.to_thread(after_kill)
