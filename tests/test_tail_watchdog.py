"""The log follower's watchdog: a stream that stops delivering while the file
grows is gputui's fault, said as such and resumed from the byte offset; a
stream that is behind but delivering is left alone; and neither is ever the
run being silent (status line, diagnosis).

The follower runs real GNU tail over the real LocalTransport; the only fault
injected is the one being watched for: a stream whose reads stop returning.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.monitor.logfollow import STUCK_AFTER_S, VERIFY_GRACE_S, FileStat, LogFollower
from gputui.remote.base import CommandResult, RemoteProcess, Transport
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from gputui.ui.widgets.logview import log_state_text


class Stalling(RemoteProcess):
    """A real stream that, after `limit` bytes, silently stops delivering:
    its read awaits forever (the tail behind it keeps running)."""

    def __init__(self, inner: RemoteProcess, limit: int) -> None:
        self.inner = inner
        self.left = limit
        self.closed = False
        self.cancelled_reads = 0

    async def write(self, data: bytes) -> None:
        await self.inner.write(data)

    async def readline(self) -> bytes:
        return await self.inner.readline()

    async def read(self, n: int = 65536) -> bytes:
        if self.left <= 0:
            try:
                await asyncio.Event().wait()  # never set: the await that never resumes
            except asyncio.CancelledError:
                self.cancelled_reads += 1
                raise
        data = await self.inner.read(min(n, self.left))
        self.left -= len(data)
        return data

    async def stderr_text(self) -> str:
        return await self.inner.stderr_text()

    async def wait(self) -> int | None:
        return await self.inner.wait()

    async def close(self) -> None:
        self.closed = True
        await self.inner.close()


class FirstStreamStalls(Transport):
    """LocalTransport whose first opened stream stalls after `limit` bytes."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.inner = LocalTransport()
        self.limit = limit
        self.streams: list[RemoteProcess] = []

    async def connect(self) -> None:
        await self.inner.connect()

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        return await self.inner.run(argv, timeout=timeout, input=input)

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        proc = await self.inner.open(argv, watchdog=watchdog)
        if "gputui-follow" not in argv:
            return proc  # the agent, a GPU stream: left alone
        if not self.streams:
            proc = Stalling(proc, self.limit)
        self.streams.append(proc)
        return proc

    async def close(self) -> None:
        await self.inner.close()


@pytest.fixture
async def stalling() -> AsyncIterator[FirstStreamStalls]:
    tr = FirstStreamStalls(limit=20_000)
    await tr.connect()
    try:
        yield tr
    finally:
        await tr.close()


async def stall_then_resume(
    stalling: FirstStreamStalls, tmp_path: Path, *, agent_python: str, resume_within: float
) -> None:
    """The real Monitor follows a log whose first stream stalls after 20,000
    bytes while the run writes on: the stream must be resumed from its offset,
    no line lost, and the log never called stale meanwhile."""
    from gputui.monitor import new_lines
    from gputui.monitor.engine import Monitor
    from gputui.monitor.gpufeed import SimulatedGpus

    log = tmp_path / "run.log"
    log.touch()
    mon = Monitor(
        Target(stalling),
        helpers.monitor_settings(log=str(log), interval=0.25),
        gpu_feed=SimulatedGpus(1, lambda: 0.0),
        agent_python=agent_python,
    )
    got: list[str] = []

    def heard(_snap: Any, news: Any) -> None:
        batch = new_lines(news)
        got.extend(batch.lines if batch is not None else ())

    mon.subscribe(heard)
    await mon.start()
    try:
        f = mon.follower
        assert f is not None
        await helpers.until(lambda: f.positioned, 10, "first header")
        if mon.agent is None:  # the plain-command loop must stat this log
            await helpers.until(lambda: mon.plain_loop.log == str(log), 10, "the loop's stat")
        with open(log, "a") as w:
            w.write(lines(0, 2000))
        await helpers.until(lambda: f.state.offset == 20_000, 10, "the stall")
        t0 = time.monotonic()
        for k in range(2000, 2010):  # the run goes on, a line every 0.5 s
            with open(log, "a") as w:
                w.write(lines(k, k + 1))
            await asyncio.sleep(0.5)
            if f.state.stuck:
                assert "stale" not in log_state_text(f.state, time.time(), 1.0).plain
        size = log.stat().st_size
        await helpers.until(lambda: f.state.offset == size, resume_within + 7, "resumed to the end")
        assert time.monotonic() - t0 < STUCK_AFTER_S + resume_within
        await asyncio.sleep(0)  # the last batch's turn
    finally:
        await mon.stop()
    assert f.state.resumes == 1 and len(stalling.streams) == 2
    # the stall cost no line
    assert got == [f"line {i} of the run" for i in range(2010)]


async def test_the_monitor_resumes_a_stuck_log_stream_from_the_agents_stat(
    stalling: FirstStreamStalls, tmp_path: Path
) -> None:
    """End to end with the real Monitor and its real agent (locally): the
    only stat is the one the monitor already takes each poll."""
    await stall_then_resume(stalling, tmp_path, agent_python="python3", resume_within=8)


async def test_without_python3_the_shell_loops_stat_resumes_a_stuck_stream(
    stalling: FirstStreamStalls, tmp_path: Path
) -> None:
    """No agent (python3 missing in the target): the plain-command loop that
    lists tmux also stats the log, and that stat is the watchdog (every
    plainloop.PERIOD_S, 5 s: hence the longer bound)."""
    await stall_then_resume(stalling, tmp_path, agent_python="python3-missing", resume_within=15)


def test_the_loops_stat_words() -> None:
    from gputui.monitor.logfollow import file_stat_from_words

    assert file_stat_from_words(["120", "1700000000", "77"]) == FileStat(120, 1700000000.0, 77)
    assert file_stat_from_words(["-"]) is None
    assert file_stat_from_words(["12x", "1", "2"]) is None
    assert file_stat_from_words([]) is None


def lines(a: int, b: int) -> str:
    return "".join(f"line {i} of the run\n" for i in range(a, b))


def stat_of(path: Path) -> FileStat:
    st = path.stat()
    return FileStat(st.st_size, st.st_mtime, st.st_ino)


async def test_a_stream_that_stops_delivering_is_resumed_from_its_offset(
    stalling: FirstStreamStalls, tmp_path: Path
) -> None:
    log = tmp_path / "run.log"
    log.touch()
    got: list[str] = []
    clock = [1000.0]
    f = LogFollower(Target(stalling), str(log), got.extend, clock=lambda: clock[0])
    await f.start()
    try:
        await helpers.until(lambda: f.positioned, 5, "first header")
        with open(log, "a") as w:
            w.write(lines(0, 2000))  # ~40 KB: the stream stops at 20,000 bytes
        await helpers.until(lambda: f.state.offset == 20_000, 5, "the stall")
        await asyncio.sleep(0.2)
        assert f.state.offset == 20_000  # really stuck there
        with open(log, "a") as w:
            w.write(lines(2000, 2100))  # the run goes on printing
        f.observe_stat(stat_of(log), f.state.offset)
        assert f.state.behind and not f.state.stuck and f.state.resumes == 0
        clock[0] += STUCK_AFTER_S - 1
        f.observe_stat(stat_of(log), f.state.offset)
        assert not f.state.stuck  # a few seconds behind is not yet a fault
        clock[0] += 1.5
        f.observe_stat(stat_of(log), f.state.offset)
        assert f.state.stuck and f.state.resumes == 1
        # said as gputui's fault, never as the run being silent or stale
        text = log_state_text(f.state, clock[0], stale_s=1.0).plain
        assert "gputui" in text and "20,000" in text
        assert "stale" not in text and "silent" not in text
        size = log.stat().st_size
        await helpers.until(lambda: f.state.offset == size, 10, "resumed to the end")
    finally:
        await f.stop()
    first = stalling.streams[0]
    assert isinstance(first, Stalling)
    assert first.cancelled_reads == 1 and first.closed  # dropped, not waited for
    assert len(stalling.streams) == 2
    assert got == [f"line {i} of the run" for i in range(2100)]  # no gap, no repeat
    assert not f.state.stuck and not f.state.behind


async def test_a_stream_behind_but_delivering_is_not_resumed(tmp_path: Path) -> None:
    """Catching up on a burst is not a fault: bytes keep arriving."""
    tr = LocalTransport()
    await tr.connect()
    log = tmp_path / "run.log"
    log.touch()
    clock = [1000.0]
    f = LogFollower(Target(tr), str(log), lambda _b: None, clock=lambda: clock[0])
    await f.start()
    try:
        await helpers.until(lambda: f.positioned, 5, "first header")
        for k in range(6):
            with open(log, "a") as w:
                w.write(lines(k * 100, k * 100 + 100))
            ahead = FileStat(log.stat().st_size + 10_000, 0.0, log.stat().st_ino)
            clock[0] += STUCK_AFTER_S - 1  # each step under the limit, all together far over
            size = log.stat().st_size
            await helpers.until(lambda s=size: f.state.offset == s, 5, "delivery")
            f.observe_stat(ahead, f.state.offset)
            assert f.state.behind and not f.state.stuck
        assert f.state.resumes == 0 and f.streams_opened == 1
        text = log_state_text(f.state, clock[0], stale_s=1.0).plain
        assert "catching up" in text and " of " in text  # delivered of file size
    finally:
        await f.stop()
        await tr.close()


async def test_a_stat_taken_before_the_stream_read_on_is_not_a_truncation(
    tmp_path: Path,
) -> None:
    tr = LocalTransport()
    await tr.connect()
    log = tmp_path / "run.log"
    log.write_text(lines(0, 100))
    clock = [1000.0]
    f = LogFollower(Target(tr), str(log), lambda _b: None, clock=lambda: clock[0])
    await f.start()
    try:
        size = log.stat().st_size
        await helpers.until(lambda: f.state.offset == size, 5, "first lines")
        early = FileStat(size - 500, 0.0, log.stat().st_ino)  # taken while at size - 800
        for _ in range(4):
            f.observe_stat(early, size - 800)
            clock[0] += VERIFY_GRACE_S
        assert f.streams_opened == 1 and f.state.truncations == 0
        assert f.state.size == size  # never shown below the bytes delivered
        f.observe_stat(early, size)  # asked when at `size`: the file really shrank
        clock[0] += VERIFY_GRACE_S
        f.observe_stat(early, size)
        await helpers.until(lambda: f.streams_opened == 2, 5, "restart on a real shrink")
    finally:
        await f.stop()
        await tr.close()


def test_behind_is_never_silence() -> None:
    """The file grew (mtime fresh) but its lines have not arrived: the status
    line and diagnosis see a growing file, not a silent run."""
    from gputui.demo import scenes
    from gputui.diagnose import diagnose

    snap, _, _ = scenes.buffered()  # block-buffered run, log silent 184 s
    now = scenes.T0
    assert "busy_but_silent" in {x.kind for x in diagnose(snap, now)}
    st = snap.log
    assert "stale" in log_state_text(st, now, stale_s=20).plain
    # the same run, but the file holds bytes gputui has not delivered yet
    st.size, st.mtime, st.behind_since = 22_289_042, now - 0.5, now - 54
    assert st.silent_for(now) == pytest.approx(0.5)
    assert "busy_but_silent" not in {x.kind for x in diagnose(snap, now)}
    text = log_state_text(st, now, stale_s=20).plain
    assert "stale" not in text and "61 of 22,289,042 bytes" in text
    st.stuck = True
    text = log_state_text(st, now, stale_s=20).plain
    assert "gputui's tail stopped" in text and "stale" not in text


def test_steps_are_not_stalled_while_gputui_is_behind_the_file() -> None:
    """A stuck tail while the file grows: the steps may be in the undelivered
    bytes, so 'the log still moves, but the step has not advanced' would be a
    claim about gputui's lag, not about the run."""
    from gputui.demo import scenes
    from gputui.diagnose import diagnose

    snap, _, _ = scenes.healthy()  # last step and line ~T0
    now = scenes.T0 + 100
    assert not {x.kind for x in diagnose(snap, now)}
    st = snap.log
    st.size, st.mtime = st.offset + 5_000_000, now - 0.5  # the run wrote 5 MB since
    st.behind_since = now - 90  # a stat showed the file ahead of the bytes delivered
    assert st.silent_for(now) == pytest.approx(0.5)  # the file moves
    assert not {x.kind for x in diagnose(snap, now)}  # and that says nothing of its steps
