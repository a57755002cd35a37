"""The history's reading of the run's log, against what the run can write:
the line splitter is linear and runs off the event loop on a large chunk;
a FIFO at the log's path is never read (its bytes belong to the run's own
reader), and the read script ends within its time limit, children too.

Real parts: a real log file (or FIFO) read through a real target."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from gputui.collect.metrics import MetricParser
from gputui.model import ConnectionState, LogState, Snapshot
from gputui.record.history import HistoryWriter
from gputui.record.recorder import RunRecorder, parse_read, read_argv
from gputui.record.runlog import parse_chunk
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

MIB = 1024 * 1024


class LogOnlyMonitor:
    """The public side of a Monitor a recorder uses, on a real local target."""

    def __init__(self, path: Path) -> None:
        self.target = Target(LocalTransport())
        self.snapshot = Snapshot(time=0.0, target=self.target.label)
        self.snapshot.log = LogState(path=str(path), exists=True)
        self.snapshot.connection = ConnectionState.CONNECTED
        self.settings = SimpleNamespace(metric_regexes=[])

    def subscribe(self, cb: object) -> None:
        pass


def short_lines(size: int) -> bytes:
    line = b"epoch 3 batch 17 ok\n"  # 20 bytes
    return line * (size // len(line))


def cpu_of_parse(data: bytes, enough: float = 0.0) -> float:
    """The least CPU time of five parses (the machine is shared), or of
    those up to the first that took no more than `enough`: the least of
    five is then at most that too."""
    parser = MetricParser()
    best = float("inf")
    for _ in range(5):
        t = time.process_time()
        parse_chunk(data, 0, parser)
        best = min(best, time.process_time() - t)
        if best <= enough:
            break
    return best


def test_the_splitter_is_linear_in_the_chunk() -> None:
    """4 MiB costs about four times 1 MiB (it cost ~16 times: quadratic).
    The bound is 10, between the two: a loaded CI run measured 6.0 on the
    linear code (allocation and cache misses grow with the chunk too). The
    4 MiB parse is repeated only until one is under the bound (its least of
    five would be too): on linear code the first is, which saves four
    parses of 4 MiB (~7 s of CPU of this test's ~11 s); on quadratic code
    none is, and all five are tried."""
    for make in (short_lines, lambda size: b"a\n" * (size // 2)):
        small = cpu_of_parse(make(MIB))
        bound = 10 * max(small, 1e-3)
        large = cpu_of_parse(make(4 * MIB), enough=bound * 0.999)
        assert large < bound, (small, large)


def test_a_line_end_only_at_the_end_and_cr_lines_keep_their_offsets() -> None:
    parser = MetricParser()
    data = b"x" * 70_000 + b"\nstep 4 loss 1.0\rstep 5 loss 0.5\r\nhalf"
    pts, consumed = parse_chunk(data, 10, parser)
    assert [(p.offset, p.step) for p in pts] == [(70_011, 4), (70_027, 5)]
    assert consumed == len(data) - 4
    assert parse_chunk(b"no end yet", 0, parser) == ([], 0)
    assert parse_chunk(b"y" * 70_000, 0, parser) == ([], 70_000)  # outgrew MAX_LINE
    assert parse_chunk(b"tail", 0, parser, at_eof=True) == ([], 4)


async def test_the_event_loop_keeps_its_turn_while_4_mib_of_log_is_parsed(
    tmp_path: Path,
) -> None:
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    log.write_bytes(b"a\n" * (2 * MIB))  # 4 MiB of 2-byte lines: the most lines per byte
    w = HistoryWriter(db)
    rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
    rec.target_id = await asyncio.wrap_future(w.target_id(rec.name))
    try:
        await rec.import_log()  # first sight: the run is made, nothing read yet
        gaps: list[float] = []

        async def tick() -> None:
            last = time.monotonic()
            while True:
                await asyncio.sleep(0.005)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        t0 = time.monotonic()
        await rec.import_log()
        took = time.monotonic() - t0
        ticker.cancel()
        assert rec._run is not None and rec._run.cursor == 4 * MIB  # it was all read
        assert len(gaps) >= 5, (took, gaps)
        assert max(gaps) < took / 2, f"the loop stood still {max(gaps):.2f} s of {took:.2f} s"
    finally:
        w.close()


def gputui_read_processes(path: Path) -> dict[int, str]:
    """Processes still running for a read of `path` (sh, tail, head): pid -> args."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            args = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(path).encode() in args:
            out[int(d.name)] = b" ".join(args).decode("utf-8", "replace")
    return out


def end_processes(pids: dict[int, str]) -> None:
    """End the processes this test left (a failing run's `tail`)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


async def test_a_fifo_log_is_not_read_its_reader_gets_every_line(tmp_path: Path) -> None:
    fifo, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    os.mkfifo(fifo)
    reader = subprocess.Popen(  # the run's own reader of its FIFO
        [
            sys.executable,
            "-c",
            "import sys\nprint(sum(1 for _ in open(sys.argv[1], 'rb')))",
            str(fifo),
        ],
        stdout=subprocess.PIPE,
    )
    w = HistoryWriter(db)
    rec = RunRecorder(LogOnlyMonitor(fifo), w, diagnose=lambda s, n: [])
    rec.target_id = await asyncio.wrap_future(w.target_id(rec.name))
    reads: list[asyncio.Task[int]] = []
    try:
        with open(fifo, "wb", buffering=0) as writer:
            for i in range(200):
                writer.write(b"step %d loss 1.0\n" % i)
                if i % 20 == 0:  # the history reads the log now and then
                    rec.read_log_soon()
                    reads.append(asyncio.create_task(rec.import_log()))
                await asyncio.sleep(0.005)
        out, _ = reader.communicate(timeout=30)
        await asyncio.wait_for(asyncio.gather(*reads), 60)
        assert int(out) == 200  # no line went to the history's read
        # and with no writer at all: the read ends at once, nothing left behind
        res = await Target(LocalTransport()).run(read_argv(str(fifo), 0, MIB), timeout=20)
        assert res.stdout.startswith(b"@gputui notfile")
        assert parse_read(res.stdout) is None
        assert gputui_read_processes(fifo) == {}
    finally:
        for t in reads:
            t.cancel()
        if reader.poll() is None:
            reader.kill()
        end_processes(gputui_read_processes(fifo))
        w.close()


def test_a_read_that_hangs_is_killed_at_its_time_limit_children_too(tmp_path: Path) -> None:
    """A `tail` that never returns (a hung file system): the read script
    ends after its limit, and takes its children with it."""
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1 loss 1.0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    hung = bin_dir / "tail"
    hung.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(300)' \"$@\"\n")
    hung.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            read_argv(str(log), 0, MIB, limit_s=1), env=env, capture_output=True, timeout=60
        )
        assert time.monotonic() - t0 < 30
        assert res.stdout.startswith(b"@gputui ")
        deadline = time.monotonic() + 10
        while gputui_read_processes(log) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gputui_read_processes(log) == {}
    finally:
        end_processes(gputui_read_processes(log))
