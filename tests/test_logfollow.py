"""LogFollower against real files and real GNU tail (locally and in a stand-in CT)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.model import LogState
from gputui.monitor.logfollow import (
    BACKOFF_START_S,
    FileStat,
    LogFollower,
    classify_tail_note,
    follow_argv,
)
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target


async def until(fn: Callable[[], Any], timeout: float = 5.0, what: str = "condition") -> Any:
    return await helpers.until(fn, timeout, what)


@pytest.fixture
async def local() -> AsyncIterator[Target]:
    tr = LocalTransport()
    await tr.connect()
    try:
        yield Target(tr)
    finally:
        await tr.close()


class Collect:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.batches = 0
        self.states: list[LogState] = []

    def on_lines(self, batch: list[str]) -> None:
        self.batches += 1
        self.lines.extend(batch)

    def on_state(self, st: LogState) -> None:
        self.states.append(st)


def append(path: Path, data: str | bytes) -> None:
    with open(path, "ab") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# ------------------------------------------------------------ pure parts


def test_follow_argv_passes_values_as_arguments() -> None:
    argv = follow_argv("/work space/it's.log", 1234, 99, backlog=4096)
    assert argv[:2] == ["sh", "-c"]
    assert "1234" not in argv[2] and "it's" not in argv[2]  # never spliced into the script
    assert argv[4:8] == ["1234", "99", "/work space/it's.log", "4096"]
    assert "it's" not in argv[8]  # the batcher is a constant too
    assert follow_argv("/x", 0, None)[5] == ""
    assert follow_argv("/x", None, None)[4] == "-"  # first start: from near the end
    assert follow_argv("/x", 0, None, batch=False)[8] == ""


@pytest.mark.parametrize(
    ("note", "kind"),
    [
        ("tail: cannot open '/w/train.log' for reading: No such file or directory\n", "missing"),
        ("tail: '/w/train.log' has appeared;  following new file\n", "new"),
        ("tail: '/w/train.log' has become inaccessible: No such file or directory\n", "missing"),
        ("tail: '/w/train.log' has been replaced;  following new file\n", "replaced"),
        ("tail: /w/train.log: file truncated\n", "truncated"),
        ("tail: inotify cannot be used, reverting to polling\n", "note"),
        ("tail: the loss went up\n", None),  # data that looks like a note
        ("tail: /other/file.log: file truncated\n", None),
        ("step 1 tail: x\n", None),
    ],
)
def test_classify_tail_note(note: str, kind: str | None) -> None:
    assert classify_tail_note(note, "/w/train.log") == kind


# ------------------------------------------------------------ real tail, local


async def test_follows_lines_and_completes_a_partial_line_across_restarts(
    local: Target, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state, keep=50)
    await f.start()
    try:
        await until(lambda: f.state.exists is False, what="missing state")
        append(log, "1\n2\npar")
        await until(lambda: c.lines == ["1", "2"], what="first lines")
        assert f.state.offset == len(b"1\n2\npar")
        # Cut the stream mid-line three times; each restart resumes at the offset.
        for piece in ("t", "i", "al\n3\n"):
            opened = f.streams_opened
            f.restart()
            await until(lambda o=opened: f.streams_opened > o, what="restart")
            append(log, piece)
        await until(lambda: len(c.lines) >= 4, what="completed line")
        assert c.lines == ["1", "2", "partial", "3"]
        assert f.state.offset == log.stat().st_size
        assert f.state.lines_total == 4
        assert f.state.truncations == 0 and f.state.rotations == 0
        assert f.streams_opened == 4
    finally:
        await f.stop()
    assert not f.running


async def test_truncation_rotation_and_missing_are_noticed(local: Target, tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("a\nb\n")
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    try:
        await until(lambda: c.lines == ["a", "b"], what="initial content")
        assert f.state.exists is True
        inode0 = f.inode
        assert inode0 == log.stat().st_ino
        with open(log, "w") as fh:  # truncate in place
            fh.write("")
        await until(lambda: f.state.truncations == 1, what="truncation")
        append(log, "c\n")
        await until(lambda: c.lines[-1:] == ["c"], what="line after truncation")
        assert f.state.offset == 2
        os.rename(log, tmp_path / "run.log.1")  # rotate
        await until(lambda: f.state.exists is False, what="missing after rename")
        log.write_text("d\n")
        await until(lambda: c.lines[-1:] == ["d"], what="line of the new file")
        assert f.state.rotations == 1
        assert c.lines == ["a", "b", "c", "d"]
        assert f.state.truncations == 1
    finally:
        await f.stop()


async def test_reopen_after_missed_truncation_and_rotation(local: Target, tmp_path: Path) -> None:
    """While no stream runs (a dropped link), the file was truncated, then
    rotated: the header of the next stream says so and reading starts at 0."""
    log = tmp_path / "x.log"
    log.write_text("one\ntwo\n")
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    await until(lambda: len(c.lines) == 2, what="lines")
    await f.stop()
    log.write_text("3\n")  # shorter than the offset: truncated
    await f.start()
    await until(lambda: c.lines[-1:] == ["3"], what="after truncation")
    assert f.state.truncations == 1
    await f.stop()
    os.rename(log, tmp_path / "x.log.1")
    log.write_text("four\nfive\n")  # longer than the offset, new inode: rotated
    await f.start()
    try:
        await until(lambda: c.lines[-1:] == ["five"], what="after rotation")
        assert f.state.rotations == 1
        assert c.lines == ["one", "two", "3", "four", "five"]
    finally:
        await f.stop()


async def test_observe_stat_restarts_a_stream_that_disagrees(local: Target, tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("x\n")
    c = Collect()
    clock = [1000.0]
    f = LogFollower(local, str(log), c.on_lines, c.on_state, clock=lambda: clock[0])
    await f.start()
    try:
        await until(lambda: c.lines == ["x"], what="line")
        st = log.stat()
        f.observe_stat(FileStat(st.st_size, st.st_mtime, st.st_ino))
        assert f.state.size == 2 and f.state.mtime == st.st_mtime
        opened = f.streams_opened
        bogus = FileStat(st.st_size, st.st_mtime, st.st_ino + 1)  # stat says: another file
        f.observe_stat(bogus)
        assert f.streams_opened == opened  # one disagreement is not enough
        clock[0] += 5
        f.observe_stat(bogus)
        await until(lambda: f.streams_opened > opened, what="restart after disagreement")
        f.observe_stat(None)
        assert f.state.exists is False
    finally:
        await f.stop()


async def test_invalid_utf8_ansi_and_carriage_returns(local: Target, tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    try:
        append(log, b"\x1b[32mgreen\x1b[0m\n 10%|#  | 1/10\r 20%|## | 2/10\rbad \xff\xfe byte\n")
        await until(lambda: len(c.lines) == 4, what="lines")
        assert c.lines == ["green", " 10%|#  | 1/10", " 20%|## | 2/10", "bad \ufffd\ufffd byte"]
    finally:
        await f.stop()


async def test_a_line_starting_with_tail_is_data(local: Target, tmp_path: Path) -> None:
    log = tmp_path / "d.log"
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    try:
        append(log, "tail: d.log: file truncated (a quote)\ntail: hello\n")
        await until(lambda: len(c.lines) == 2, what="lines")
        assert c.lines == ["tail: d.log: file truncated (a quote)", "tail: hello"]
        assert f.state.truncations == 0
    finally:
        await f.stop()


BURST = """\
import sys
out = sys.stdout.buffer
line = b"step %d loss 1.2345 tok/s 12000 padding padding padding\\n"
for i in range(1, int(sys.argv[1]) + 1):
    out.write(line % i)
"""


async def test_million_line_burst_keeps_memory_bounded(local: Target, tmp_path: Path) -> None:
    n = 1_000_000
    log = tmp_path / "burst.log"
    log.touch()
    seen = [0, 0]  # lines, largest batch

    def on_lines(batch: list[str]) -> None:
        seen[0] += len(batch)
        seen[1] = max(seen[1], len(batch))

    f = LogFollower(local, str(log), on_lines, keep=300)
    tracemalloc.start()
    await f.start()
    try:
        await until(lambda: f.state.exists, what="stream")
        with open(log, "ab") as out:
            subprocess.run([sys.executable, "-c", BURST, str(n)], stdout=out, check=True)
        size = log.stat().st_size
        await until(lambda: f.state.offset == size, timeout=60, what="the whole burst")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await f.stop()
    assert seen[0] == n == f.state.lines_total
    assert len(f.tail) == 300 and f.tail[-1].startswith(f"step {n} ")
    assert seen[1] <= 65536  # handed out per chunk read, never all at once
    assert len(f.state.line_gaps) <= 200
    # The file is ~55 MB; what the follower holds stays a few MB at most.
    assert peak < 16 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


STREAM = """\
import sys, time
with open(sys.argv[1], "ab", buffering=0) as f:
    for i in range(1, int(sys.argv[2]) + 1):
        f.write(b"line %d of a stream\\n" % i)
        time.sleep(0.001)
"""


def procs_with_arg(arg: str) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if arg in line and "ps -eo" not in line]


async def test_a_stream_arrives_in_batches_and_nothing_is_left(
    local: Target, tmp_path: Path
) -> None:
    """A line a millisecond: tail writes (and ssh would carry) nearly each
    line on its own (~2,000 reads here without the batcher); the batcher on
    the target hands them on at most ~30 times a second, every line once and
    in order. Stopping the follower leaves no tail behind."""
    log = tmp_path / "stream-batches.log"
    log.touch()
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    n = 2000
    try:
        await until(lambda: f.state.exists, what="stream")
        reads0 = c.batches
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", STREAM, str(log), str(n)
        )
        assert await writer.wait() == 0
        size = log.stat().st_size
        await until(lambda: f.state.offset == size, timeout=20, what="the stream")
        reads = c.batches - reads0
        assert c.lines == [f"line {i} of a stream" for i in range(1, n + 1)]
        assert reads <= 100, f"{n} lines came in {reads} reads"
        assert [p for p in procs_with_arg(str(log)) if " tail " in p]
    finally:
        await f.stop()
    await until(lambda: not procs_with_arg(str(log)), what="no tail after stop")


async def test_lines_that_keep_coming_are_handed_on_four_times_a_second(
    local: Target, tmp_path: Path
) -> None:
    """Issue 24: at 20 lines/s the batcher's 0.03 s wait woke it, and
    gputui, for every line. While lines keep coming it hands them on about
    4 times a second; the first line after a quiet spell still at once."""
    log = tmp_path / "stream-20.log"
    log.touch()
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    try:
        await until(lambda: f.state.exists, what="stream")
        await asyncio.sleep(1.5)  # a quiet spell
        t0 = time.monotonic()
        append(log, "first\n")
        await until(lambda: c.lines[-1:] == ["first"], what="the first line")
        assert time.monotonic() - t0 < 1.0  # at once, not at the next batch
        batches0 = c.batches
        n = 80
        writer = await asyncio.create_subprocess_exec(
            sys.executable, "-c", STREAM.replace("0.001", "0.05"), str(log), str(n)
        )
        assert await writer.wait() == 0  # 80 lines at 20 a second
        await until(lambda: len(c.lines) == n + 1, timeout=20, what="the stream")
        batches = c.batches - batches0
        assert c.lines[1:] == [f"line {i} of a stream" for i in range(1, n + 1)]
        assert batches <= 24, f"{n} lines in {batches} batches"  # ~4 s at ~4 a second
    finally:
        await f.stop()


def test_the_batchers_tail_dies_with_it(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, say) gives the batcher no chance to end its
    tail: GNU tail -F notices that its output lost its reader and exits."""
    log = tmp_path / "orphan.log"
    log.write_text("one\n")
    with batcher_following(log) as p:
        assert p.stdout is not None
        assert p.stdout.readline() == b"one\n"
        p.kill()  # the shell exec'd the batcher: this is the batcher
        p.wait()
        helpers.wait_for(lambda: not procs_with_arg(str(log)), what="tail to die with it")


@contextlib.contextmanager
def batcher_following(log: Path) -> Any:
    """The log's follow command (through the batcher) on its own, past its
    header and until its tail runs; killed afterwards, and whatever of it
    is left."""
    p = subprocess.Popen(
        follow_argv(str(log), 0, None), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith(b"@gputui ok ")
        tail_pid_of(log)
        yield p
    finally:
        p.kill()
        p.wait()
        for line in procs_with_arg(str(log)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), 9)


def tails_of(log: Path) -> list[int]:
    """PIDs of the `tail` processes following `log` (not the batcher, whose
    script names tail too)."""
    return [int(x.split()[0]) for x in procs_with_arg(str(log)) if x.split()[1] == "tail"]


def tail_pid_of(log: Path) -> int:
    return helpers.wait_for(lambda: tails_of(log), what="tail")[0]


def proc_status(pid: int, field: str) -> str:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@contextlib.contextmanager
def lines_streaming(log: Path, per_second: float) -> Any:
    """A writer appending a line every 1/per_second s (flushed) until the block ends."""
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "f = open(sys.argv[1], 'ab', buffering=0)\n"
            "while True:\n"
            "    f.write(b'step 1 loss 0.5\\n'); time.sleep(float(sys.argv[2]))\n",
            str(log),
            str(1.0 / per_second),
        ]
    )
    try:
        yield writer
    finally:
        writer.kill()
        writer.wait()


def test_while_lines_stream_tail_wakes_per_batch_not_per_line(tmp_path: Path) -> None:
    """Issue 37: tail woke for every line written (inotify) to pass it into
    the batcher's pipe, 0.16 % of a core at 40 lines/s on the H200; it is
    stopped while the batcher waits, and reads the file once a batch."""
    log = tmp_path / "woken.log"
    log.write_text("one\n")
    with batcher_following(log), lines_streaming(log, 40):
        tail = tail_pid_of(log)
        time.sleep(1.0)  # the batcher in its streaming pace
        woke0 = int(proc_status(tail, "voluntary_ctxt_switches"))
        size0 = log.stat().st_size
        time.sleep(3.0)
        woke = int(proc_status(tail, "voluntary_ctxt_switches")) - woke0
        written = (log.stat().st_size - size0) // len(b"step 1 loss 0.5\n")
    assert written >= 40  # the writer kept writing, even on a busy machine
    assert woke < written / 2, f"tail woke {woke} times for {written} lines"


def test_a_batcher_killed_while_its_tail_is_stopped_takes_tail_along(tmp_path: Path) -> None:
    """The stop has a cost: a batcher killed outright (SIGKILL: no handler
    runs) while tail is stopped would leave it stopped for good, its pipe's
    reader gone and never noticed. tail dies with its parent (PDEATHSIG)."""
    log = tmp_path / "stopped.log"
    log.write_text("one\n")
    with batcher_following(log) as p, lines_streaming(log, 40):
        tail = tail_pid_of(log)
        helpers.wait_for(lambda: proc_status(tail, "State").startswith("T"), what="a stop")
        p.kill()  # the batcher, while its tail is stopped
        p.wait()
        helpers.wait_for(lambda: not tails_of(log), what="tail to die with it")


# ------------------------------------------------------------ inside a stand-in CT


@pytest.fixture
def standin_env(testbed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = testbed.env()
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", env["GPUTUI_STANDIN_STATE"])


async def test_follows_inside_the_ct_only(
    testbed: Any, ct: int, standin_env: None, local: Target
) -> None:
    """The path is read inside the CT: a file of the same name in the CT's
    private /tmp is followed, not the host's."""
    name = f"/tmp/gputui-ct-log-{ct}.log"
    Path(name).write_text("host copy\n")
    try:
        r = testbed.ct_exec(ct, ["sh", "-c", 'printf "in ct\\n" > "$1"', "sh", name])
        assert r.returncode == 0, r.stderr
        c = Collect()
        f = LogFollower(Target(local.transport, ct), name, c.on_lines, c.on_state)
        await f.start()
        try:
            await until(lambda: c.lines, what="a line")
            assert c.lines == ["in ct"]
            assert f.state.exists is True and f.state.size == len("in ct\n")
        finally:
            await f.stop()
    finally:
        os.unlink(name)


WRITER = """\
import sys, time
n = int(sys.argv[2])
with open(sys.argv[1], "ab", buffering=0) as f:
    for i in range(1, n + 1):
        # Written in two pieces so cuts often land mid-line.
        f.write(b"line %d " % i)
        f.write(b"of the run\\n")
        if i % 50 == 0:
            time.sleep(0.005)
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0)  # then keep the file open
"""


async def test_stream_killed_mid_run_resumes_with_no_gap_and_no_repeat(
    local: Target, tmp_path: Path
) -> None:
    """The stream dies (SIGKILL: like a dropped connection) while a real
    writer appends: every line 1..N arrives exactly once, in order."""
    import signal

    log = tmp_path / "seq.log"
    log.touch()
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    n = 20_000
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(n)])
    try:
        kills = 0
        killed: object = None
        while writer.poll() is None and kills < 8:
            await until(lambda k=killed: f._proc not in (None, k), what="a new stream")
            await asyncio.sleep(0.05)
            killed = f._proc
            with contextlib.suppress(ProcessLookupError):
                os.kill(killed.pid, signal.SIGKILL)  # type: ignore[union-attr]
                kills += 1
        writer.wait(timeout=30)
        size = log.stat().st_size
        await until(lambda: f.state.offset == size, timeout=20, what="catch up")
    finally:
        writer.kill()
        await f.stop()
    assert kills >= 3
    assert f.streams_opened >= kills  # each kill hit a different stream
    assert c.lines == [f"line {i} of the run" for i in range(1, n + 1)]


async def test_a_log_deleted_mid_run_is_read_on_through_the_writers_fd(
    local: Target, tmp_path: Path
) -> None:
    """The log is deleted while a real writer appends (it keeps the file
    open); read on through /proc/WRITER/fd/N, every line 1..N arrives
    exactly once, in order: the same file, at the same byte."""
    log = tmp_path / "seq.log"
    log.touch()
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state)
    await f.start()
    n = 20_000
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(n), "60"])
    try:
        await until(lambda: f.state.offset > 0, what="the first lines")
        fds = Path(f"/proc/{writer.pid}/fd")
        fd = next(e.name for e in fds.iterdir() if os.readlink(e) == str(log))
        log.unlink()
        await until(lambda: f.state.exists is False, what="the log seen missing")
        f.read_through(f"/proc/{writer.pid}/fd/{fd}")
        assert f.state.read_via == f"/proc/{writer.pid}/fd/{fd}"
        await until(lambda: len(c.lines) == n, timeout=30, what="every line")
        assert f.state.exists is True
    finally:
        writer.kill()
        await f.stop()
    assert c.lines == [f"line {i} of the run" for i in range(1, n + 1)]


async def test_an_existing_log_is_read_from_near_its_end_with_its_own_age(
    local: Target, tmp_path: Path
) -> None:
    """A big old log: only the last `backlog` bytes are read, from a line
    start; those lines are dated by the file's mtime, not by their arrival, so
    "silent for" says an hour, not zero."""
    log = tmp_path / "old.log"
    with open(log, "w") as fh:
        for i in range(1, 100_001):
            fh.write(f"old line {i}\n")
    hour_ago = time.time() - 3600
    os.utime(log, (hour_ago, hour_ago))
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state, backlog=4096)
    await f.start()
    try:
        await until(lambda: c.lines[-1:] == ["old line 100000"], what="backlog")
        assert 4096 / 17 <= len(c.lines) <= 4096 / 14 + 1  # ~4 KiB of "old line NNNNN"
        first = int(c.lines[0].split()[-1])
        assert c.lines == [f"old line {i}" for i in range(first, 100_001)]  # whole lines only
        assert f.state.last_line_time == pytest.approx(hour_ago, abs=1.0)
        silent = f.state.silent_for(time.time())
        assert silent is not None and silent > 3500
        assert f.batch_is_backlog and len(f.state.line_gaps) == 0
        append(log, "fresh\n")
        await until(lambda: c.lines[-1:] == ["fresh"], what="a live line")
        assert f.state.last_line_time is not None
        assert time.time() - f.state.last_line_time < 5
        assert not f.batch_is_backlog
        assert f.state.offset == log.stat().st_size
    finally:
        await f.stop()


async def test_a_backlog_written_within_a_second_is_not_dated_before_it(
    local: Target, tmp_path: Path
) -> None:
    """CI, load 10: a run started at .38 wrote its 3 steps by .91 and hung
    holding its GPU; the follower's `stat -c %Y` gives whole seconds, so the
    backlog's lines were dated .00 — before the run's process started. Its
    steps then did not count as the run's, the run looked still "loading"
    and doctor said nothing of the hang. A backlog line is dated no earlier
    than its second's end (the latest the write can have been), never later
    than now."""
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 7.4\nstep 2 | loss 7.3\nstep 3 | loss 7.2\n")
    wrote = float(int(time.time()) - 30) + 0.91  # 30 s ago, at .91 of its second
    os.utime(log, (wrote, wrote))
    c = Collect()
    f = LogFollower(local, str(log), c.on_lines, c.on_state, backlog=4096)
    await f.start()
    try:
        await until(lambda: c.lines[-1:] == ["step 3 | loss 7.2"], what="backlog")
        t = f.state.last_line_time
        assert t is not None and t >= wrote - 0.001, (t, wrote)  # not its second's start
        assert t <= wrote + 1.0 and t <= time.time()
    finally:
        await f.stop()


def test_a_whole_second_mtime_is_read_as_the_end_of_its_second() -> None:
    from gputui.model import LogState

    assert LogState(mtime=100.0).written_by == 101.0  # `stat -c %Y`: somewhen in 100.x
    assert LogState(mtime=100.25).written_by == 100.25  # exact: itself
    assert LogState().written_by is None


@pytest.mark.parametrize("path", ["/dev/zero", "DIR", "FIFO"])
async def test_a_path_that_is_not_a_file_is_never_read(
    local: Target, tmp_path: Path, path: str
) -> None:
    """/dev/zero, a directory or a FIFO as the log: named as such, never read
    (tail on /dev/zero streams zeros forever), and no retry loop burns a core."""
    if path == "DIR":
        path = str(tmp_path)
    elif path == "FIFO":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    c = Collect()
    f = LogFollower(local, path, c.on_lines, c.on_state)
    cpu0 = time.process_time()
    await f.start()
    try:
        await until(lambda: f.state.not_a_file, what="notfile header")
        # a retry loop would reopen within BACKOFF_START_S: two of its periods
        await asyncio.sleep(2 * BACKOFF_START_S)
        assert f.state.not_a_file in ("character special file", "directory", "fifo")
        assert f.state.error == f"{path} is a {f.state.not_a_file}, not a log file"
        assert f.streams_opened == 1  # waits BACKOFF_MAX_S before looking again
        assert c.lines == [] and f.state.offset == 0
        assert time.process_time() - cpu0 < 0.5
    finally:
        await f.stop()
