"""The Monitor on the test bed: real tmux and real Python runs inside a
stand-in CT, reached through `pct exec` (LocalTransport with the stand-ins on
PATH, or the real sshd when the ssh transport is there)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.containers import ProxmoxLXC
from gputui.errors import ContainerError
from gputui.model import ConnectionState, CtStatus, Snapshot
from gputui.monitor import (
    ConnectionChanged,
    CtChanged,
    GpusRead,
    LogChanged,
    LogLines,
    MetricsChanged,
    News,
    ProcsChanged,
    SessionsChanged,
    Update,
    kinds_of,
    new_lines,
)
from gputui.monitor.engine import (
    PENDING_LINES_MAX,
    Monitor,
    collect_snapshot,
)
from gputui.monitor.gpufeed import SimulatedGpus
from gputui.monitor.logchoice import stdout_log_files
from gputui.monitor.oomcount import READ_EVERY_S as OOM_READ_EVERY_S
from gputui.monitor.plainloop import PANES_LOOP_SCRIPT, space_from_words
from gputui.monitor.runprocs import PANE_CAPTURE_EVERY_S
from gputui.monitor.sessionwatch import LIST_PANES_EVERY_S, choose_session
from gputui.remote.agent_client import AgentError
from gputui.remote.base import RemoteProcess
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"

TRAIN = """\
import sys, time
i = 0
pad = "x" * 60
while True:
    i += 1
    print("step %d loss %.4f tok/s %d %s" % (i, 10.0 / i, 12000 + i, pad))
    time.sleep(0.002)
"""

START_SH = """\
#!/bin/sh
cd "$(dirname "$0")"
exec python3 -u train.py > {log} 2>&1
"""


# Every 100th line is a metric line; the rest is noise.
BURST = """\
import sys
w = sys.stdout.write
for i in range(1, int(sys.argv[1]) + 1):
    w("step %d loss 1.5 tok/s 9000\\n" % i if i % 100 == 0 else "noise %d\\n" % i)
"""


CountingTransport = helpers.CountingTransport
settings = helpers.monitor_settings


async def until(fn: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    return await helpers.until(fn, timeout, what, poll=0.05)


@pytest.fixture
def standin_env(testbed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = testbed.env()
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", env["GPUTUI_STANDIN_STATE"])


@pytest.fixture
async def counting(standin_env: None) -> AsyncIterator[CountingTransport]:
    tr = CountingTransport(LocalTransport())
    await tr.connect()
    try:
        yield tr
    finally:
        await tr.close()


@pytest.fixture
def ws(testbed: Any, ct: int) -> Path:
    d = Path(testbed.workspace) / f"mon-{ct}"
    d.mkdir(exist_ok=True)
    (d / "train.py").write_text(TRAIN)
    return d


def tmux_in_ct(testbed: Any, ct: int, *args: str) -> None:
    """Run tmux inside the CT with a clean environment (no PYTHONUNBUFFERED)."""
    r = testbed.ct_exec(ct, ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "tmux", *args])
    assert r.returncode == 0, r.stderr


def ct_processes(testbed: Any, ct: int) -> str:
    return testbed.ct_exec(ct, ["ps", "-e", "-o", "pid=,args="]).stdout


# ------------------------------------------------------------ pure parts


def test_choose_session() -> None:
    from gputui.model import Session

    a, b = Session("a", created=100.0), Session("b", created=200.0)
    assert choose_session([], None) is None
    assert choose_session([a], None) == "a"
    assert choose_session([a, b], None) == "b"
    assert choose_session([a, b], "a") == "a"
    assert choose_session([a, b], "gone") == "gone"


def test_stdout_log_files_prefers_python_and_skips_ttys() -> None:
    from gputui.model import Proc, StdoutTarget

    sh = Proc(pid=1, stdout=StdoutTarget(kind="tty", path="/dev/pts/1"))
    tee = Proc(pid=3, stdout=StdoutTarget(kind="file", path="/w/copy.log"))
    py = Proc(
        pid=2,
        is_python=True,
        stdout=StdoutTarget(kind="pipe", path="pipe:[9]", reader_files=["/w/train.log"]),
    )
    assert stdout_log_files([sh, tee, py]) == ["/w/train.log"]
    assert stdout_log_files([sh]) == []


class _ReadWatch(RemoteProcess):
    """A real stream of the log whose each read notes how many lines the
    monitor's listeners had heard when the follower asked for more."""

    def __init__(self, inner: RemoteProcess, heard: list[str], seen: list[int]) -> None:
        self.inner, self.heard, self.seen = inner, heard, seen

    async def write(self, data: bytes) -> None:
        await self.inner.write(data)

    async def readline(self) -> bytes:
        return await self.inner.readline()

    async def read(self, n: int = 65536) -> bytes:
        self.seen.append(len(self.heard))
        return await self.inner.read(n)

    async def stderr_text(self) -> str:
        return await self.inner.stderr_text()

    async def wait(self) -> int | None:
        return await self.inner.wait()

    async def close(self) -> None:
        await self.inner.close()


async def test_a_read_of_the_log_reaches_the_listeners_in_its_own_turn(tmp_path: Path) -> None:
    """The lines of one read of the log's stream go to the listeners before
    the follower reads again, as one LogLines: not one event-loop turn
    later (a wake of the loop for each batch, ~5 a second while a log
    streams)."""
    log = tmp_path / "train.log"
    log.write_text("")
    heard: list[str] = []
    seen: list[int] = []
    batches: list[int] = []
    inner = LocalTransport()

    class Watched(LocalTransport):
        async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
            proc = await inner.open(argv, watchdog=watchdog)
            return _ReadWatch(proc, heard, seen) if "gputui-follow" in argv else proc

    mon = Monitor(Target(Watched()), settings(log=str(log)), gpu_feed=SimulatedGpus(1, lambda: 0.0))

    def listen(_snap: Snapshot, news: News) -> None:
        batch = new_lines(news)
        if batch is not None:
            heard.extend(batch.lines)
            batches.append(len(batch.lines))

    mon.subscribe(listen)
    await mon.log_choice.choose([])
    try:
        await helpers.until(lambda: len(seen) >= 1, timeout=10)
        with log.open("a") as f:
            f.write("step 1 loss 2.5\nstep 2 loss 2.4\nstep 3 loss 2.3\n")
        await helpers.until(lambda: len(heard) >= 3, timeout=10)
        await helpers.until(lambda: len(seen) >= 2, timeout=10)
        # the read after the one that brought the lines: they were heard by then
        assert seen[-1] == 3 and heard == ["step 1 loss 2.5", "step 2 loss 2.4", "step 3 loss 2.3"]
        assert sum(batches) == 3  # (one read brings them all, but a loaded machine may cut it)
    finally:
        if mon.follower is not None:
            await mon.follower.stop()
        await inner.close()


async def test_a_turns_log_lines_come_as_one_bounded_batch() -> None:
    """The lines of one event-loop turn reach each listener once, as one
    LogLines update carrying them (no drain), at most PENDING_LINES_MAX of
    them: the older ones of a burst are counted as dropped."""
    tr = LocalTransport()
    mon = Monitor(Target(tr), settings(), gpu_feed=SimulatedGpus(1, lambda: 0.0))
    heard: list[News] = []
    mon.subscribe(lambda _snap, news: heard.append(news))
    mon._on_log_lines([f"line {i}" for i in range(3000)])
    mon._on_log_lines([f"more {i}" for i in range(9000)])
    await asyncio.sleep(0)  # the turn ends: its news goes out
    assert len(heard) == 1
    batch = new_lines(heard[0])
    assert batch is not None and len(batch.lines) == PENDING_LINES_MAX
    assert batch.lines[-1] == "more 8999" and batch.lines[0] == f"more {9000 - PENDING_LINES_MAX}"
    assert batch.dropped == mon.dropped_log_lines == 12000 - PENDING_LINES_MAX
    assert kinds_of(heard[0]) == {LogChanged, LogLines}
    mon._on_log_lines(["step 7 loss 0.5 tok/s 1000"])
    await asyncio.sleep(0)
    batch = new_lines(heard[-1])
    assert len(heard) == 2 and batch is not None
    assert batch.lines == ("step 7 loss 0.5 tok/s 1000",) and batch.dropped == 0
    assert kinds_of(heard[-1]) == {LogChanged, MetricsChanged, LogLines}
    assert mon.snapshot.metrics.last_step == 7


async def test_a_gpu_sample_reaches_the_listeners_in_the_feeds_own_turn() -> None:
    """The feed coalesced its sample's lines in one turn of the event loop;
    the monitor tells its listeners in that turn, not one more later (a
    wake of the event loop each second, for nothing), with what else
    changed by then."""
    gpus = SimulatedGpus(2, lambda: 1.0)
    mon = Monitor(Target(LocalTransport()), settings(), gpu_feed=gpus)
    heard: list[set[type[Update]]] = []
    mon.subscribe(lambda _snap, news: heard.append(kinds_of(news)))
    gpus.subscribe(mon._on_gpus)  # as start() does
    gpus.tick()
    await asyncio.sleep(0)  # the feed's turn
    assert heard == [{GpusRead}]
    assert mon.snapshot.gpus.latest and len(mon.snapshot.gpus.latest) == 2
    gpus.tick()
    mon._changed(ProcsChanged)  # due to be told in the next turn too: told with it
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert heard == [{GpusRead}, {GpusRead, ProcsChanged}]  # together, once


# ------------------------------------------------------------ on the test bed


async def test_buffered_run_behind_tee(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    log = ws / "train.log"
    cmd = f"python3 {shlex.quote(str(ws / 'train.py'))} 2>&1 | tee -a {shlex.quote(str(log))}"
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "dflash", cmd)
    gpus = SimulatedGpus(2, lambda: 1.0, period_s=0.2)
    mon = Monitor(Target(counting, ct), settings(), gpu_feed=gpus)
    kinds_seen: set[type[Update]] = set()
    drained: list[str] = []

    def heard(_snap: Snapshot, news: News) -> None:
        kinds_seen.update(kinds_of(news))
        batch = new_lines(news)
        drained.extend(batch.lines if batch is not None else ())

    mon.subscribe(heard)
    await mon.start()
    try:
        snap = mon.snapshot
        assert snap.ct_status == CtStatus.RUNNING
        assert snap.connection == ConnectionState.CONNECTED
        assert snap.started > 0
        await until(lambda: snap.training_proc is not None, what="the training process")
        assert snap.session_name == "dflash"
        tp = snap.training_proc
        assert tp is not None
        assert tp.stdout.kind == "pipe"
        assert str(log) in tp.stdout.reader_files
        assert any("tee" in cmd for _, cmd in tp.stdout.readers)
        assert tp.python_u_flag is False and tp.env_pythonunbuffered is False
        assert tp.block_buffered is True
        # The log is chosen from where stdout ends up, and followed.
        await until(lambda: snap.log.path == str(log), what="log chosen from stdout")
        await until(lambda: len(snap.log_tail) > 10, what="log lines")
        assert snap.log_tail[-1].startswith("step ")
        await until(lambda: snap.metrics.last_step, what="metrics")
        assert snap.metrics.throughput_unit == "tok/s"
        assert snap.metrics.loss.last() is not None
        assert snap.metrics.preset
        assert drained and all(line.startswith("step ") for line in drained)
        steps = [int(line.split()[1]) for line in drained]
        assert steps == list(range(steps[0], steps[0] + len(steps)))  # no gap, no repeat
        assert snap.gpus.source == "simulated" and len(snap.gpus.latest) == 2
        assert {
            SessionsChanged,
            ProcsChanged,
            LogChanged,
            MetricsChanged,
            GpusRead,
            CtChanged,
        } <= kinds_seen
        assert snap.sessions[0].panes[0].pid is not None
        assert snap.tools.tmux
    finally:
        await mon.stop()
    left = ct_processes(testbed, ct)
    assert "gputui-agent" not in left and "gputui-follow" not in left and "tail -c" not in left


async def test_start_script_redirecting_elsewhere_is_reported(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    other = ws / "old-name.log"
    start = ws / "start.sh"
    start.write_text(START_SH.format(log=shlex.quote(str(other))))
    start.chmod(0o755)
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "run", f"sh {shlex.quote(str(start))}")
    mon = Monitor(
        Target(counting, ct), settings(session="run"), gpu_feed=SimulatedGpus(1, lambda: 1.0)
    )
    await mon.start()
    try:
        snap = mon.snapshot
        await until(lambda: snap.training_proc is not None, what="the training process")
        tp = snap.training_proc
        assert tp is not None
        assert tp.stdout.kind == "file" and tp.stdout.path == str(other)
        assert tp.python_u_flag is True and tp.block_buffered is False
        await until(lambda: snap.log.path == str(other), what="log from the redirect")
        await until(lambda: snap.log_tail, what="lines of the redirected log")
        await until(lambda: (snap.log.size or 0) > 0 and snap.log.exists, what="log stat")
    finally:
        await mon.stop()


async def test_dead_pane_keeps_exit_status_and_output(
    testbed: Any, ct: int, counting: CountingTransport
) -> None:
    def tmux(args: list[str]) -> Any:
        return testbed.ct_exec(ct, ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "tmux", *args])

    def start() -> None:
        tmux_in_ct(
            testbed,
            ct,
            "new",
            "-d",
            "-s",
            "crash",
            "sh -c 'echo ImportError: no module named torch; exit 3'",
            ";",
            "set",
            "-p",
            "-t",
            "crash",
            "remain-on-exit",
            "on",
        )

    assert helpers.dead_pane_with_status(tmux, "crash", start, output="ImportError") == "1|3|"
    mon = Monitor(Target(counting, ct), settings(), gpu_feed=SimulatedGpus(1, lambda: 0.0))
    await mon.start()
    try:
        snap = mon.snapshot
        await until(lambda: snap.session and snap.session.panes[0].dead, what="dead pane")
        pane = snap.session.panes[0] if snap.session else None
        assert pane is not None and pane.dead_status == 3
        assert snap.session_name == "crash"
        assert not snap.procs
        try:  # captured every poll while the pane is dead; 30 s for a loaded host
            await until(
                lambda: any("ImportError" in line for line in snap.pane_tail),
                timeout=30.0,
                what="pane output",
            )
        except AssertionError as e:
            raise AssertionError(
                f"{e}: pane tail {[x for x in snap.pane_tail if x.strip()][-3:]!r}, "
                f"{mon.polls} polls, poll error {mon.agent_error!r}, agent error "
                f"{mon.agents.error!r}, tmux now {helpers.pane_text(tmux, 'crash')!r}"
            ) from None
        # The session disappears: reported as gone, not silently switched.
        tmux_in_ct(testbed, ct, "kill-session", "-t", "crash")
        await until(lambda: snap.session_gone, what="session gone")
        assert snap.session_name == "crash"
    finally:
        await mon.stop()


async def test_a_session_that_ends_between_listings_is_seen_within_two_seconds(
    testbed: Any, ct: int, counting: CountingTransport
) -> None:
    """Issue 24: `tmux list-panes` runs about every LIST_PANES_EVERY_S while
    no pane's process comes or goes (a rename waits that long), yet a run
    that ends between two listings is seen by the next 1 s poll: the agent
    sees the pane's process go in /proc and lists at once."""
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "quick", "sleep 600")
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "other", "sleep 600")
    mon = Monitor(
        Target(counting, ct),
        settings(interval=1.0, session="quick"),
        gpu_feed=SimulatedGpus(1, lambda: 0.0),
    )
    await mon.start()
    try:
        snap = mon.snapshot
        await until(lambda: snap.session and snap.procs, what="quick and its sleep")
        await asyncio.sleep(1.5)  # past a listing that may have caught the start settling
        tmux_in_ct(testbed, ct, "rename-session", "-t", "=other", "other2")
        renamed = time.monotonic()
        await asyncio.sleep(2.5)  # two polls or more: the last listing, still "other"
        names = {s.name for s in snap.sessions}
        if time.monotonic() - renamed < LIST_PANES_EVERY_S - 1.0:  # not past a due listing
            assert names == {"quick", "other"}, names
        pid = snap.procs[0].pid
        assert testbed.ct_exec(ct, ["kill", str(pid)]).returncode == 0
        ended = time.monotonic()
        await until(lambda: snap.session_gone, timeout=10.0, what="quick gone")
        took = time.monotonic() - ended
        assert took < 3.0, f"a run that ended was seen {took:.1f} s later"
        await until(lambda: "other2" in {s.name for s in snap.sessions}, what="the rename")
    finally:
        await mon.stop()


async def test_watch_session_and_watch_log(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    (ws / "a.log").write_text("alpha\n")
    (ws / "b.log").write_text("beta 1\nbeta 2\n")
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "one", "sleep 300")
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "two", "sleep 300")
    mon = Monitor(
        Target(counting, ct),
        settings(log=str(ws / "a.log")),
        gpu_feed=SimulatedGpus(1, lambda: 0.0),
    )
    await mon.start()
    try:
        snap = mon.snapshot
        await until(lambda: list(snap.log_tail) == ["alpha"], what="a.log")
        assert len(snap.sessions) == 2
        mon.watch_session("one")
        await until(lambda: snap.session_name == "one", what="session one")
        mon.watch_session("two")
        await until(lambda: snap.session_name == "two", what="session two")
        mon.watch_log(str(ws / "b.log"))
        await until(lambda: list(snap.log_tail) == ["beta 1", "beta 2"], what="b.log")
        assert snap.log.path == str(ws / "b.log")
    finally:
        await mon.stop()


async def test_steady_state_starts_no_pct_exec(testbed: Any, ct: int, ws: Path) -> None:
    """Over the real sshd, with the GPU stream from the stand-in nvidia-smi on
    the host: count every command gputui starts. A few at start (agent, log
    stream, GPU stream + apps loop; no pct status: the agent runs), then none while 25+ polls
    run — 0 pct exec per minute. (~8 s: it measures a steady state.)"""
    log = ws / "steady.log"
    cmd = f"python3 -u {shlex.quote(str(ws / 'train.py'))} > {shlex.quote(str(log))} 2>&1"
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "steady", cmd)
    testbed.set_gpus({"gpus": [{"index": 0, "utilization.gpu": 99, "memory.used": 80000}]})
    ssh = testbed.transport()
    counting = CountingTransport(ssh)
    await counting.connect()
    mon = Monitor(Target(counting, ct), settings(interval=0.1, gpu_source="auto"))
    await mon.start()
    try:
        await until(lambda: mon.snapshot.log.path == str(log), what="log chosen")
        await until(lambda: mon.snapshot.gpus.latest, what="GPU readings")
        await asyncio.sleep(1.5)  # "the first few seconds"
        agent = mon.agent
        assert agent is not None
        ops: list[str] = []
        call = agent.call

        captures = [0]  # pane captures asked for, in batches or alone
        ooms = [0]  # reads of the run's cgroup OOM-kill count

        async def counted(op: str, timeout: float = 5.0, **args: Any) -> Any:
            ops.append(op)
            inner = [c.get("op") for c in args.get("calls", [])] if op == "batch" else [op]
            captures[0] += inner.count("capture")
            ooms[0] += inner.count("oom")
            return await call(op, timeout, **args)

        agent.call = counted  # type: ignore[method-assign]
        t0 = time.monotonic()
        polls0 = mon.polls
        window = 5.0
        await asyncio.sleep(window)
        agent.call = call  # type: ignore[method-assign]
        started = [a for t, _, a in counting.calls if t >= t0]
        execs = counting.pct_execs(since=t0)
        polls = mon.polls - polls0
        print(
            f"\nsteady state over ssh: {len(execs) * 60.0 / window:.1f} pct exec/min, "
            f"{len(started) * 60.0 / window:.1f} remote commands/min over {polls} polls; "
            f"{mon.channels} long-lived channels (ssh channels in use: {ssh.channels_in_use}, "
            f"max {ssh.max_channels_seen}); at start: {len(counting.calls)} commands, "
            f"{len(counting.pct_execs())} pct exec"
        )
        assert polls >= 25
        # one request (sessions, the pane's processes and last lines, a stat
        # of the log in one batch) a poll: one packet each way
        assert set(ops) == {"batch"} and polls - 1 <= len(ops) <= polls + 1, (ops, polls)
        # a live pane whose processes stay is captured every PANE_CAPTURE_EVERY_S,
        # not every poll (a tmux subprocess each, issue 24)
        assert 1 <= captures[0] <= window / PANE_CAPTURE_EVERY_S + 1, captures
        # the OOM count is a baseline while the run lives: every OOM_READ_EVERY_S
        assert ooms[0] <= window / OOM_READ_EVERY_S + 1, ooms
        assert execs == [] and started == []
        # agent, log stream, GPU stream, compute-apps loop, the host's kernel log (issue 32)
        assert mon.channels == 5
        assert ssh.channels_in_use == mon.channels
        assert ssh.max_channels_seen <= 6
        assert len(mon.snapshot.log_tail) > 0
        assert mon.snapshot.gpus.latest[0].util_pct == 99
    finally:
        await mon.stop()
        await counting.close()
    assert ssh.channels_in_use == 0


async def test_burst_through_the_monitor_stays_bounded(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    log = ws / "burst.log"
    log.write_text("")
    mon = Monitor(
        Target(counting, ct), settings(log=str(log)), gpu_feed=SimulatedGpus(1, lambda: 1.0)
    )
    n = 1_000_000
    heard = [0, 0]  # lines heard of, the largest batch

    def count(_snap: Snapshot, news: News) -> None:
        batch = new_lines(news)
        if batch is not None:
            heard[0] += len(batch.lines)
            heard[1] = max(heard[1], len(batch.lines))

    mon.subscribe(count)
    tracemalloc.start()
    await mon.start()
    try:
        # The stream has started (else the burst would be an existing log,
        # read from near its end).
        await until(lambda: mon.follower is not None and mon.follower.positioned, what="stream")
        with open(log, "ab") as out:
            subprocess.run(["python3", "-c", BURST, str(n)], stdout=out, check=True)
        size = log.stat().st_size
        await until(lambda: mon.snapshot.log.offset == size, timeout=60, what="the burst")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await mon.stop()
    snap = mon.snapshot
    f = mon.follower
    assert f is not None
    assert snap.log.lines_total == n
    assert len(snap.log_tail) == snap.log_tail.maxlen == 200
    assert heard[1] <= PENDING_LINES_MAX
    assert mon.dropped_log_lines + heard[0] == n
    assert len(snap.metrics.step) <= 600 and snap.metrics.last_step == n
    assert peak < 24 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


async def test_collect_snapshot_one_shot(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    (ws / "x.log").write_text("hello\n")
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "s1", "sleep 300")
    snap = await collect_snapshot(
        Target(counting, ct),
        settings(log=str(ws / "x.log")),
        settle_s=1.5,
        gpu_feed=SimulatedGpus(1, lambda: 0.5),
    )
    assert isinstance(snap, Snapshot)
    assert snap.session_name == "s1" and snap.sessions
    assert list(snap.log_tail) == ["hello"]
    assert snap.gpus.latest[0].util_pct is not None
    # What `gputui doctor --json` prints from it.
    import json

    from gputui.doctor.report import snapshot_to_dict

    d = json.loads(json.dumps(snapshot_to_dict(snap)))
    assert d["ct"] == {"id": ct, "status": "running"}
    assert 47 <= d["gpus"]["devices"][0]["util_pct"] <= 53  # load 0.5 ± jitter
    assert d["tools"]["tmux"]
    left = ct_processes(testbed, ct)
    assert "gputui-agent" not in left and "tail -c" not in left


async def test_start_is_concurrent_and_skips_pct_status_when_the_agent_runs(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    """With the log path given, its stream opens before the agent is up (not
    after the first poll), and a running agent stands for `pct status`: no
    `pct status` at all while the CT runs."""
    log = ws / "given.log"
    log.write_text("first line\n")
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "s", "sleep 300")
    mon = Monitor(
        Target(counting, ct), settings(log=str(log)), gpu_feed=SimulatedGpus(1, lambda: 0.0)
    )
    seen: list[set[type[Update]]] = []
    mon.subscribe(lambda snap, news: seen.append(kinds_of(news)))
    agent_up_at_follow: list[bool] = []
    inner_open = counting.open

    async def open_(argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        if "gputui-follow" in argv:
            agent_up_at_follow.append(mon.agent is not None)
        return await inner_open(argv, watchdog=watchdog)

    counting.open = open_  # type: ignore[method-assign]
    await mon.start()
    try:
        assert mon.snapshot.ct_status == CtStatus.RUNNING and mon.agent is not None
        await until(lambda: list(mon.snapshot.log_tail) == ["first line"], what="log")
        assert agent_up_at_follow == [False]  # opened while the agent was still starting
        argvs = [a for _, _, a in counting.calls]
        assert not [a for a in argvs if a[:2] == ["pct", "status"]]
        assert len(seen) >= 2  # published in parts, not once at the end
    finally:
        await mon.stop()


@pytest.mark.parametrize("delay", [0.05, 0.4])
async def test_stop_during_start_up_leaves_nothing_running(
    testbed: Any,
    ct: int,
    ws: Path,
    counting: CountingTransport,
    delay: float,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """q while the monitor is still starting: start() ends quietly, and the
    agent that was on its way up is closed, not left running in the CT."""
    monkeypatch.setenv("GPUTUI_PCT_DELAY", "1.0")  # each pct call: still starting at `delay`
    log = ws / "early.log"
    log.write_text("x\n")
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "s", "sleep 300")
    mon = Monitor(
        Target(counting, ct), settings(log=str(log)), gpu_feed=SimulatedGpus(1, lambda: 0.0)
    )
    start = asyncio.create_task(mon.start())
    await asyncio.sleep(delay)
    assert not start.done()  # still starting (the agent takes >= the pct delay, 1 s)
    t0 = time.monotonic()
    await mon.stop()
    took = time.monotonic() - t0
    await asyncio.wait_for(start, 5)  # returns, no error
    assert mon.channels == 0 and mon.agent is None
    assert took < 5  # (bench figure over ssh: < 1 s)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = ct_processes(testbed, ct)
        if "gputui-agent" not in left and "gputui-follow" not in left:
            break
        await asyncio.sleep(0.1)
    assert "gputui-agent" not in left and "gputui-follow" not in left, left


async def test_stopped_ct_is_reported(testbed: Any, ct: int, counting: CountingTransport) -> None:
    testbed.ct_stop(ct)
    mon = Monitor(Target(counting, ct), settings(), gpu_feed=SimulatedGpus(1, lambda: 0.0))
    with contextlib.suppress(Exception):
        await asyncio.wait_for(mon.start(), 30)
    try:
        assert mon.snapshot.ct_status == CtStatus.STOPPED
        assert mon.agent is None and mon.agent_error
    finally:
        await mon.stop()


async def test_without_python_in_the_ct_a_shell_loop_lists_sessions(
    testbed: Any, ct: int, counting: CountingTransport
) -> None:
    """python3 missing (simulated by a python name that does not exist): the
    agent is reported unavailable and one long-lived shell loop lists tmux."""
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "nopy", "sleep 300")
    mon = Monitor(
        Target(counting, ct),
        settings(interval=0.2),
        gpu_feed=SimulatedGpus(1, lambda: 0.0),
        agent_python="python3-missing",
    )
    await mon.start()
    try:
        snap = mon.snapshot
        assert mon.agent is None
        assert mon.agent_error and "python3-missing is not installed" in mon.agent_error
        await until(lambda: snap.session_name == "nopy", what="session via the shell loop")
        assert snap.sessions[0].panes[0].pid
        t0 = time.monotonic()
        await asyncio.sleep(1.5)
        assert counting.pct_execs(since=t0) == []  # the loop is long-lived
        assert mon.channels == 1
    finally:
        await mon.stop()
    left = ct_processes(testbed, ct)
    assert "gputui-panes" not in left


def test_ct_status_from_text() -> None:
    ct_status_from_text = ProxmoxLXC(200).read_status

    assert ct_status_from_text("status: running\n") == CtStatus.RUNNING
    assert ct_status_from_text("status: stopped\n") == CtStatus.STOPPED
    assert ct_status_from_text("CT 200 not running\n") == CtStatus.STOPPED
    assert (
        ct_status_from_text("Configuration file 'nodes/pve/lxc/999.conf' does not exist\n")
        == CtStatus.MISSING
    )
    assert ct_status_from_text("ssh: connection reset") is None


async def test_ct_stopping_mid_run_is_noticed(
    testbed: Any, ct: int, counting: CountingTransport
) -> None:
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "s", "sleep 300")
    mon = Monitor(
        Target(counting, ct), settings(interval=0.2), gpu_feed=SimulatedGpus(1, lambda: 0.0)
    )
    await mon.start()
    try:
        assert mon.snapshot.ct_status == CtStatus.RUNNING
        await until(lambda: mon.snapshot.session_name == "s", what="session")
        testbed.ct_stop(ct)
        await until(lambda: mon.snapshot.ct_status == CtStatus.STOPPED, what="CT stopped")
        assert mon.agent is None
    finally:
        await mon.stop()


async def test_gpus_from_the_standin_with_processes_mapped_into_the_ct(
    testbed: Any, ct: int, ws: Path, counting: CountingTransport
) -> None:
    """nvidia-smi on the host reports host PIDs; the snapshot maps the one
    running in the CT to its CT PID (the PID the agent sees in the pane)."""
    marker = f"gputui-gpu-proc-{ct}"
    tmux_in_ct(
        testbed, ct, "new", "-d", "-s", "g", f"python3 -c 'import time; time.sleep(300)' {marker}"
    )
    host_pid = None
    deadline = time.monotonic() + 10
    while host_pid is None and time.monotonic() < deadline:
        out = subprocess.run(
            ["pgrep", "-f", f"^python3 -c .* {marker}$"], capture_output=True, text=True
        ).stdout
        pids = [int(p) for p in out.split()]
        host_pid = pids[0] if pids else None
        await asyncio.sleep(0.05)
    assert host_pid is not None
    uuid = "GPU-6b6e6f3c-0000-4000-8000-000000000000"
    testbed.set_gpus(
        {
            "gpus": [
                {"index": 0, "uuid": uuid, "memory.used": 81000, "utilization.gpu": 97},
                {"index": 1, "temperature.gpu": None, "power.draw": "[N/A]"},
            ],
            "apps": [
                {
                    "pid": host_pid,
                    "process_name": "python3",
                    "used_memory": 80000,
                    "gpu_uuid": uuid,
                },
                {"pid": 1, "process_name": "host-thing", "used_memory": 100, "gpu_uuid": uuid},
            ],
        }
    )
    from gputui.monitor.gpufeed import NvidiaSmiFeed

    target = Target(counting, ct)
    feed = NvidiaSmiFeed(target, where="auto", period_ms=200, apps_period_s=0.3)
    mon = Monitor(target, settings(interval=0.2), gpu_feed=feed)
    await mon.start()
    try:
        snap = mon.snapshot
        await until(lambda: len(snap.gpus.latest) == 2, what="GPU readings")
        g0, g1 = snap.gpus.latest[0], snap.gpus.latest[1]
        assert g0.util_pct == 97 and g0.mem_used_mib == 81000 and g0.uuid == uuid
        assert g1.temp_c is None and g1.power_w is None  # [N/A] is unknown, not 0
        assert snap.gpus.source == "nvidia-smi (host)" and snap.tools.nvidia_smi_host is True
        await until(lambda: snap.training_proc is not None, what="the python process")
        ct_pid = snap.training_proc.pid if snap.training_proc else None
        await until(
            lambda: any(p.in_container for p in snap.gpus.processes), what="mapped GPU process"
        )
        by = {p.host_pid: p for p in snap.gpus.processes}
        assert by[host_pid].in_container is True and by[host_pid].ct_pid == ct_pid
        assert ct_pid != host_pid  # really two PID namespaces
        assert by[1].in_container is False and by[1].ct_pid is None
        assert mon.channels <= 6
    finally:
        await mon.stop()


SEQ_WRITER = """\
import os, sys, time
stop = sys.argv[1]
i = 0
while not os.path.exists(stop):
    i += 1
    sys.stdout.write("seq %d" % i)
    sys.stdout.flush()
    sys.stdout.write(" done\\n")  # the cut often lands between the two halves
    sys.stdout.flush()
    time.sleep(0.001)
"""


async def test_log_resumes_after_the_ssh_connection_is_cut(testbed: Any, ct: int, ws: Path) -> None:
    """Over the real sshd: numbered lines are written while the TCP
    connection is cut twice; the lines received are exactly 1..N.
    (~6 s: two real reconnects with the transport's backoff.)"""
    import socket

    (ws / "seq.py").write_text(SEQ_WRITER)
    log = ws / "seq.log"
    log.write_text("")
    stop = ws / "seq.stop"
    tr = testbed.transport()
    await tr.connect()
    mon = Monitor(
        Target(tr, ct), settings(interval=0.5, log=str(log)), gpu_feed=SimulatedGpus(1, lambda: 1)
    )
    got: list[str] = []
    states: list[ConnectionState] = []
    at_cut: list[int] = []

    def on_change(snap: Snapshot, news: News) -> None:
        batch = new_lines(news)
        got.extend(batch.lines if batch is not None else ())
        if ConnectionChanged in kinds_of(news):
            states.append(snap.connection)

    mon.subscribe(on_change)
    await mon.start()
    try:
        await until(lambda: mon.follower is not None and mon.follower.positioned, what="stream")
        py = shlex.quote(str(ws / "seq.py"))
        cmd = f"python3 {py} {shlex.quote(str(stop))} >> {shlex.quote(str(log))}"
        tmux_in_ct(testbed, ct, "new", "-d", "-s", "seq", cmd)
        for k in (1, 2):
            await until(lambda k=k: len(got) >= k * 300, what=f"lines before cut {k}")
            sock = tr._socket()
            assert sock is not None
            sock.shutdown(socket.SHUT_RDWR)
            at_cut.append(len(got))
            await until(lambda: tr.state == ConnectionState.RECONNECTING, what="link down")
            await until(lambda: tr.state == ConnectionState.CONNECTED, what="link back")
        await until(lambda: len(got) > at_cut[-1] + 300, what="lines after the cuts")
        stop.touch()  # the writer ends; N is what the file holds
        await asyncio.sleep(0.2)
        n = len(log.read_text().splitlines())
        await until(lambda: len(got) >= n, timeout=30, what="all lines")
        await asyncio.sleep(0.3)
    finally:
        stop.touch()
        await mon.stop()
        await tr.close()
    assert tr.reconnects >= 2
    assert at_cut[-1] < n - 300  # both cuts landed while lines were still coming
    assert ConnectionState.RECONNECTING in states and states[-1] != ConnectionState.RECONNECTING
    assert got == [f"seq {i} done" for i in range(1, n + 1)]
    assert mon.follower is not None and mon.follower.streams_opened >= 3
    assert mon.snapshot.log.truncations == 0 and mon.snapshot.log.rotations == 0
    deadline = time.monotonic() + 5
    while "gputui-follow" in ct_processes(testbed, ct) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    left = ct_processes(testbed, ct)
    assert "gputui-follow" not in left and "gputui-agent" not in left


async def test_connection_failed_is_published_at_once() -> None:
    """A first connect that fails (before start) reaches subscribers through
    the monitor's public method, not by reaching into its listeners."""
    mon = Monitor(Target(LocalTransport()), settings(), gpu_feed=SimulatedGpus(1, lambda: 0.0))
    seen: list[tuple[ConnectionState, str | None, set[type[Update]]]] = []
    mon.subscribe(
        lambda snap, news: seen.append((snap.connection, snap.connection_error, kinds_of(news)))
    )
    mon.connection_failed("connection refused by 127.0.0.1 port 1")
    assert seen == [
        (ConnectionState.FAILED, "connection refused by 127.0.0.1 port 1", {ConnectionChanged})
    ]


def test_the_plain_command_loop_reports_the_logs_disk_space(tmp_path: Path) -> None:
    """The fallback loop's `@gputui fs` line (real sh, real stat -f) is the
    statvfs of the log's file system, also while the log does not exist."""

    log = tmp_path / "train.log"
    v = os.statvfs(tmp_path)
    for exists in (False, True):
        if exists:
            log.write_text("x\n")
        proc = subprocess.Popen(
            ["sh", "-c", PANES_LOOP_SCRIPT, "gputui-panes", "1", str(log), "true"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            lines = [proc.stdout.readline().strip() for _ in range(4)]
        finally:
            proc.kill()
            proc.wait()
        fs = [ln for ln in lines if ln.startswith("@gputui fs ")]
        assert fs, lines
        free, total = space_from_words(fs[0].split()[2:]) or (None, None)
        assert total == v.f_blocks * v.f_frsize, (fs, exists)
        assert free is not None and abs(free - v.f_bavail * v.f_frsize) <= 64 << 20
    assert space_from_words(["1", "4096"]) is None
    assert space_from_words(["a", "4096", "3"]) is None
    assert space_from_words(["2", "4096", "3"]) == (8192, 12288)


async def test_a_failed_first_poll_still_leaves_a_polling_monitor(
    testbed: Any, ct: int, counting: CountingTransport
) -> None:
    """Under load the agent's first `tmux list-panes` can overrun its time
    limit. start() then set `_running` and never started the poll loop: the
    host view said "idle: no tmux session" forever and watch recorded
    nothing. The first poll's failure is now one more failed poll."""
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "slowstart", "sleep 300")
    mon = Monitor(
        Target(counting, ct), settings(interval=0.1), gpu_feed=SimulatedGpus(1, lambda: 0.0)
    )
    first = mon._ensure_agent_and_refresh
    calls = [0]

    async def flaky() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise AgentError("list-panes did not answer within 3 s")
        await first()

    mon._ensure_agent_and_refresh = flaky  # type: ignore[method-assign]
    await mon.start()
    try:
        assert "first poll failed" in (mon.agent_error or ""), mon.agent_error
        await until(lambda: mon.snapshot.session_name == "slowstart", what="the session, polled")
    finally:
        await mon.stop()


async def test_a_start_that_fails_can_be_tried_again(
    testbed: Any, ct: int, counting: CountingTransport
) -> None:
    """A start that raises leaves nothing running and a second start() works
    (it returned at once before: `_running` stayed set)."""
    tmux_in_ct(testbed, ct, "new", "-d", "-s", "again", "sleep 300")
    mon = Monitor(
        Target(counting, ct), settings(interval=0.1), gpu_feed=SimulatedGpus(1, lambda: 0.0)
    )
    real = mon._start
    calls = [0]

    async def failing_once() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise ContainerError(f"CT {ct} not running")
        await real()

    mon._start = failing_once  # type: ignore[method-assign]
    with pytest.raises(ContainerError):
        await mon.start()
    assert mon.channels == 0
    await mon.start()
    try:
        await until(lambda: mon.snapshot.session_name == "again", what="the session, polled")
        assert calls[0] == 2
    finally:
        await mon.stop()


def _listing(*sessions: tuple[str, int]) -> list[Any]:
    """Sessions as tmux lists them (list_panes_argv's fields), one pane each."""
    from gputui.collect import tmux as tmux_parse

    rows = [
        "\x1f".join(
            [name, "1", "1700000000", "0", "0", "0", str(pid), "0", "", "", "sh", "sh", "/", "/"]
        )
        for name, pid in sessions
    ]
    return tmux_parse.parse_panes("\x1e\n".join(rows) + "\x1e\n")


def test_one_listing_without_the_session_is_not_gone_until_the_next_agrees() -> None:
    """Loaded CI runs j, q, r: the banner said 'session buffered is gone'
    for one tick while the run went on (the next listing had the same pane
    PID). A session is said gone when two listings in a row lack it; the
    second is asked fresh, not the agent's reused answer."""
    mon = Monitor(Target(LocalTransport()), settings(), gpu_feed=None)
    snap = mon.snapshot
    mon._set_sessions(_listing(("train", 127)))
    assert snap.session_name == "train" and not snap.session_gone
    mon._set_sessions([])  # one listing misses it
    assert not snap.session_gone and [s.name for s in snap.sessions] == ["train"]
    assert mon.session_watch.missing_unconfirmed  # the next poll asks tmux afresh (reuse_s 0)
    mon._set_sessions(_listing(("train", 127)))  # the next has it: it was never gone
    assert not snap.session_gone and mon.session_watch.missed_listings == 1
    mon._set_sessions([])
    mon._set_sessions([])  # two in a row: gone
    assert snap.session_gone and snap.session_name == "train" and snap.sessions == []
    mon._set_sessions([])
    assert snap.session_gone  # stays gone, no second confirmation needed
    mon._set_sessions(_listing(("train", 200)))  # relaunched under its name
    assert not snap.session_gone and snap.session is not None
