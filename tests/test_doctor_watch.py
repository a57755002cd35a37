"""The doctor's short watch (doctor_run.watch_once) ends as soon as what it
waits for has come or can no longer come: a stand-in monitor, a fake clock
(one second per look), the real GPU feed state and mapping rule."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gputui.doctor_run import SETTLE_S, WATCH_MAX_S, watch_once
from gputui.gpufeed import NvidiaSmiFeed
from gputui.model import ConnectionState, CtStatus, GpuProcess, GpuSample, Snapshot
from gputui.remote.container import ProxmoxLXC

NOW = 1_800_000_000.0


class Clock:
    """Each reading is one second later; `at` runs callbacks at given readings."""

    def __init__(self, at: dict[int, Any] | None = None) -> None:
        self.reads = 0
        self.at = at or {}

    def __call__(self) -> float:
        self.reads += 1
        if self.reads in self.at:
            self.at[self.reads]()
        return float(self.reads)


class StandInMonitor:
    """What watch_once reads of a Monitor: its snapshot, GPU feed, agent state."""

    def __init__(self, feed: NvidiaSmiFeed, agent_error: str | None = None) -> None:
        self.gpu_feed = feed
        self.agent_error = agent_error
        self.follower = None  # no log named
        self.snapshot = Snapshot(
            time=NOW,
            target="root@127.0.0.1 ct 200",
            connection=ConnectionState.CONNECTED,
            container=ProxmoxLXC(200),
            ct_status=CtStatus.RUNNING,
            gpus=feed.state,
        )
        self.stopped = False

    async def start(self) -> None:
        return None

    async def refresh(self) -> None:
        return None

    async def stop(self) -> None:
        self.stopped = True


def busy_gpu_feed(processes: list[GpuProcess] | None) -> NvidiaSmiFeed:
    """A GPU read (busy, 45 GB); its processes listed (or, None, not yet)."""
    feed = NvidiaSmiFeed(SimpleNamespace(ct=200))  # type: ignore[arg-type]
    feed.state.add(GpuSample(index=0, time=NOW, uuid="GPU-0", mem_used_mib=45_000.0, util_pct=98.0))
    if processes is not None:
        feed.state.processes = processes
        feed.state.processes_pending = False
    return feed


def gone_pid() -> GpuProcess:
    """nvidia-smi listed it; /proc had no such PID by the time it was read."""
    return GpuProcess("GPU-0", 4_000_000, 44_800.0, "python3", ct_pid=None, in_container=None)


async def test_an_exited_gpu_process_does_not_hold_the_watch_once_the_ct_is_known() -> None:
    feed = busy_gpu_feed([gone_pid()])
    feed.ct_pid_ns = "pid:[4026532999]"  # the agent answered: nothing more will map it
    clock = Clock()
    mon = StandInMonitor(feed)
    await watch_once(mon, clock=clock)  # type: ignore[arg-type]
    assert mon.stopped
    assert clock.reads <= SETTLE_S + 3  # it was 12 s (WATCH_MAX_S) before


async def test_an_unmapped_pid_is_waited_for_while_the_agent_may_still_answer() -> None:
    feed = busy_gpu_feed([gone_pid()])
    clock = Clock()
    await watch_once(StandInMonitor(feed), clock=clock)  # type: ignore[arg-type]
    assert clock.reads >= WATCH_MAX_S  # no PID namespace yet: watched to the end
    feed2 = busy_gpu_feed([gone_pid()])
    clock2 = Clock()
    await watch_once(StandInMonitor(feed2, agent_error="no python3"), clock=clock2)  # type: ignore[arg-type]
    assert clock2.reads <= SETTLE_S + 3  # the agent failed: the namespace never comes


async def test_the_watch_waits_for_the_first_gpu_process_listing() -> None:
    feed = busy_gpu_feed(None)
    assert feed.state.processes_pending

    def listed() -> None:
        feed.state.processes = []
        feed.state.processes_pending = False

    clock = Clock(at={6: listed})
    await watch_once(StandInMonitor(feed), clock=clock)  # type: ignore[arg-type]
    assert 6 <= clock.reads <= 6 + 2  # past the settle time, until the listing came
