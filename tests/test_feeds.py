"""The now-and-then feeds share one shape (monitor/feed.py `NowAndThen`):
each declares its agent op, how often it is asked, the Snapshot field it
owns and the update it emits, and the monitor drives every one of them
through one loop — a new one is its module and its line in
engine.NOW_AND_THEN."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pytest

from gputui.model import GpuOwners, Snapshot
from gputui.monitor import UPDATES, GpusRead, News, SimulatedGpus, Update
from gputui.monitor import engine as engine_mod
from gputui.monitor.engine import NOW_AND_THEN, Monitor
from gputui.monitor.feed import NowAndThen, Poll
from gputui.monitor.gpuowners import GpuOwnerWatch, owners_from
from gputui.monitor.oomcount import OomCount
from gputui.monitor.portwatch import PortWatch
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from helpers import monitor_settings, until
from test_gpu_owner import LEFT, RUN_PID, _processes
from test_port_in_use import LIBUV

EVERY_POLL_OPS = {"sessions", "procs", "capture", "stat"}  # the poll's other batch keys


def _oom() -> tuple[Snapshot, Any]:
    return Snapshot(time=0.0, target="t"), {"oom_kill": 2, "files": ["/sys/fs/cgroup/x"]}


def _ports() -> tuple[Snapshot, Any]:
    snap = Snapshot(time=0.0, target="t")
    snap.log_tail.extend(["step 1", LIBUV])
    holder = {"port": 29500, "pid": 812, "user": "root", "cmdline": ["torchrun"]}
    return snap, {"listeners": [holder], "unseen": [], "uid": 0}


def _owners() -> tuple[Snapshot, Any]:
    from test_diagnose import run

    owners = [{"pid": LEFT, "uid": 1001, "user": "alice"}, {"pid": RUN_PID, "uid": 0}]
    return run(gpu_procs=_processes()), {"owners": owners, "uid": 0}


# each registered feed: a snapshot that makes it ask, and an answer that moves its field
ASKED: dict[type[NowAndThen], Callable[[], tuple[Snapshot, Any]]] = {
    OomCount: _oom,
    PortWatch: _ports,
    GpuOwnerWatch: _owners,
}


def test_every_now_and_then_feed_declares_the_shape() -> None:
    assert set(NOW_AND_THEN) == set(ASKED), "a registered feed without its case here"
    fields = {f.name for f in dataclasses.fields(Snapshot)}
    ops = [feed.op for feed in NOW_AND_THEN]
    assert len(set(ops)) == len(ops) and not set(ops) & EVERY_POLL_OPS  # one key each in a batch
    for feed in NOW_AND_THEN:
        assert issubclass(feed, NowAndThen), feed
        assert feed.every_s > 0 and feed.owns in fields and feed.emits in UPDATES, feed


@pytest.mark.parametrize("feed", NOW_AND_THEN, ids=lambda f: f.__name__)
def test_a_feed_fills_its_own_field_and_no_other(feed: type[NowAndThen]) -> None:
    snap, answer = ASKED[feed]()
    watch = feed(clock=lambda: 0.0)
    poll = Poll(pane_pid=77, now=123.0)
    assert watch.call(snap, poll) is not None  # asked
    before = {f.name: repr(getattr(snap, f.name)) for f in dataclasses.fields(Snapshot)}
    assert watch.apply(answer, snap, poll) is feed.emits
    after = {f.name: repr(getattr(snap, f.name)) for f in dataclasses.fields(Snapshot)}
    moved = {name for name in before if before[name] != after[name]}
    assert moved == {feed.owns}
    assert watch.apply(None, snap, poll) is None  # not asked: the answer stands
    assert repr(getattr(snap, feed.owns)) == after[feed.owns]


class WhoAmI(NowAndThen):
    """A toy feed: whose this test process is, asked of the real agent."""

    op = "owners"
    every_s = 60.0
    owns = "gpu_owners"
    emits = GpusRead

    def call(self, snap: Snapshot, poll: Poll) -> dict[str, Any] | None:
        return None if self.fresh() else self.asking({"pids": [os.getpid()]})

    def apply(self, answer: Any, snap: Snapshot, poll: Poll) -> type[Update] | None:
        got = owners_from(answer) if answer is not None else None
        if got is None:
            return None
        snap.gpu_owners = GpuOwners(got[0], got[1], poll.now)
        return self.emits


async def test_a_new_feed_is_its_module_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered in NOW_AND_THEN only, a feed is asked in the real agent's
    batch, its answer lands in its field and its update goes out."""
    monkeypatch.setattr(engine_mod, "NOW_AND_THEN", (WhoAmI,))
    tr = LocalTransport()
    await tr.connect()
    mon = Monitor(Target(tr), monitor_settings(), gpu_feed=SimulatedGpus(1, lambda: 0.0))
    heard: list[News] = []
    mon.subscribe(lambda _snap, news: heard.append(news))
    await mon.start()
    try:
        owners = await until(lambda: mon.snapshot.gpu_owners, what="the toy feed's answer")
        assert owners.owners[os.getpid()][0] == os.getuid()
        assert any(isinstance(u, GpusRead) for news in heard for u in news)
    finally:
        await mon.stop()
        await tr.close()
