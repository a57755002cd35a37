"""The doctor's short watch (doctor_run.watch_once) ends as soon as what it
waits for has come or can no longer come, counts from the end of the
monitor's start-up, and says what it did not see when its bound passes: a
stand-in monitor, a fake clock (one second per look), the real GPU feed
state and mapping rule; the report's part through the test bed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gputui.config import Settings
from gputui.containers import ProxmoxLXC
from gputui.doctor import run as doctor_run
from gputui.doctor.report import exit_code, render_text
from gputui.doctor.run import SETTLE_S, WATCH_MAX_S, watch_incomplete, watch_once
from gputui.model import (
    ConnectionState,
    CtStatus,
    GpuProcess,
    GpuSample,
    Pane,
    Proc,
    Session,
    Severity,
    Snapshot,
)
from gputui.monitor.gpufeed import NvidiaSmiFeed, SimulatedGpus

NOW = 1_800_000_000.0


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake clock moves a second per look: no need to wait between looks."""
    monkeypatch.setattr(doctor_run, "LOOK_S", 0.01)


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
    """What watch_once reads of a Monitor: its snapshot, GPU feed, agent state,
    settings (the buffering watch asks the rules with them)."""

    def __init__(self, feed: NvidiaSmiFeed, agent_error: str | None = None) -> None:
        self.settings = Settings()
        self.gpu_feed = feed
        self.agent_error = agent_error
        self.agent_facts = None  # no pane watched here: its processes are not waited for
        self.log_followed = False  # no log named
        self.plain_loop_pending = False  # the agent runs (or nothing lists panes)
        self.sessions_pending = False  # tmux's sessions listed (none here)
        self.kernel_log_pending = False  # no kernel-log read under way
        self.snapshot = Snapshot(
            time=NOW,
            target="root@127.0.0.1 ct 200",
            connection=ConnectionState.CONNECTED,
            container=ProxmoxLXC(200),
            ct_status=CtStatus.RUNNING,
            gpus=feed.state,
        )
        self.stopped = False
        self.start_up: tuple[Clock, int] | None = None

    @property
    def ct_pids_pending(self) -> bool:
        """As the monitor's: the CT's PID namespace may still come."""
        return self.gpu_feed.ct_pid_ns is None and self.agent_error is None

    async def start(self) -> None:
        if self.start_up is not None:  # a slow start-up: the agent through ssh and pct
            clock, seconds = self.start_up
            clock.reads += seconds

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


async def test_a_slow_start_up_does_not_eat_the_watch() -> None:
    """The field failure under heavy load: the agent's start through ssh and
    pct took most of the watch, which then ended before nvidia-smi listed
    the GPU processes (the JSON had none for the run's PID)."""
    feed = busy_gpu_feed(None)

    def listed() -> None:
        feed.state.processes = []
        feed.state.processes_pending = False

    clock = Clock(at={WATCH_MAX_S + 5: listed})
    mon = StandInMonitor(feed)
    mon.start_up = (clock, int(WATCH_MAX_S))  # the start-up alone took WATCH_MAX_S
    unseen: list[str] = []
    await watch_once(mon, clock=clock, unseen=unseen)  # type: ignore[arg-type]
    assert not feed.state.processes_pending and unseen == []  # it was watched until listed
    assert clock.reads <= WATCH_MAX_S + 5 + 2


async def test_what_never_came_is_said_not_left_out() -> None:
    feed = busy_gpu_feed(None)  # nvidia-smi never lists the processes
    clock = Clock()
    unseen: list[str] = []
    snap = await watch_once(StandInMonitor(feed), clock=clock, unseen=unseen)  # type: ignore[arg-type]
    assert clock.reads >= WATCH_MAX_S  # waited, up to the bound
    assert unseen == ["nvidia-smi's list of GPU processes"]
    finding = watch_incomplete(unseen)
    assert finding.severity == Severity.WARNING and "list of GPU processes" in finding.title
    assert exit_code([finding], inspected=True) == 1
    text = render_text({"target": "t"}, snap, [finding])
    assert "nothing wrong" not in text and "run gputui doctor again" in text


async def test_the_panes_processes_are_waited_for_after_a_poll_that_timed_out() -> None:
    """The session's pane is alive but the poll that reads its processes
    timed out (a loaded CT): the next poll's are waited for."""
    feed = busy_gpu_feed([])
    mon = StandInMonitor(feed)
    mon.agent_facts = SimpleNamespace(alive=True)  # type: ignore[assignment]
    snap = mon.snapshot
    snap.sessions = [Session("dflash", panes=[Pane("dflash", 0, 0, pid=4242)])]
    snap.session_name = "dflash"

    def polled() -> None:
        snap.procs = [Proc(4242, cmdline=["python3", "train.py"], is_python=True)]

    clock = Clock(at={7: polled})
    unseen: list[str] = []
    await watch_once(mon, clock=clock, unseen=unseen)  # type: ignore[arg-type]
    assert snap.procs and unseen == []
    assert 7 <= clock.reads <= 7 + 2


async def test_without_python3_the_plain_loops_first_round_is_waited_for() -> None:
    """CI's failure under load: no python3 in the CT, the plain-command loop
    (tmux's panes, the log's stat and disk) had not answered within the
    settle time; the watch ended without the session and the full disk and
    the report said "ok"."""
    mon = StandInMonitor(busy_gpu_feed([]), agent_error="no python3")
    mon.plain_loop_pending = True

    def answered() -> None:
        mon.plain_loop_pending = False

    clock = Clock(at={6: answered})
    unseen: list[str] = []
    await watch_once(mon, clock=clock, unseen=unseen)  # type: ignore[arg-type]
    assert unseen == [] and 6 <= clock.reads <= 6 + 2
    mon2 = StandInMonitor(busy_gpu_feed([]), agent_error="no python3")
    mon2.plain_loop_pending = True  # it never answers
    clock2 = Clock()
    await watch_once(mon2, clock=clock2, unseen=unseen)  # type: ignore[arg-type]
    assert unseen == ["tmux's panes and the log's stat (plain commands)"]


async def test_the_first_session_listing_is_waited_for() -> None:
    """CI under load (a full pass at load 14): the agent's first listing of
    tmux's sessions came after the 2-s settle; with no pane, its processes
    were not waited for, a held-and-idle GPU's run was not seen as one,
    the hang watch did not run, and a deadlocked run was "nothing wrong".
    The listing is a piece the watch waits for while the agent runs."""
    mon = StandInMonitor(busy_gpu_feed([]))
    mon.sessions_pending = True

    def listed() -> None:
        mon.sessions_pending = False

    clock = Clock(at={6: listed})
    unseen: list[str] = []
    await watch_once(mon, clock=clock, unseen=unseen)  # type: ignore[arg-type]
    assert unseen == [] and 6 <= clock.reads <= 6 + 2
    mon2 = StandInMonitor(busy_gpu_feed([]))
    mon2.sessions_pending = True  # it never lists them
    clock2 = Clock()
    await watch_once(mon2, clock=clock2, unseen=unseen)  # type: ignore[arg-type]
    assert unseen == ["tmux's session listing"]


async def test_the_kernel_logs_read_is_waited_for() -> None:
    """A run that vanished quietly: the kernel log's OOM lines are its word
    (kernel_oom_kill over session_missing). The look is one command after
    the poll that saw the run gone; a report made in between said only
    "no tmux session" — the read under way is a piece the watch waits for."""
    mon = StandInMonitor(busy_gpu_feed([]))
    mon.kernel_log_pending = True

    def read() -> None:
        mon.kernel_log_pending = False

    clock = Clock(at={5: read})
    unseen: list[str] = []
    await watch_once(mon, clock=clock, unseen=unseen)  # type: ignore[arg-type]
    assert unseen == [] and 5 <= clock.reads <= 5 + 2
    mon2 = StandInMonitor(busy_gpu_feed([]))
    mon2.kernel_log_pending = True  # it never ends (its command times out: a failed read)
    await watch_once(mon2, clock=Clock(), unseen=unseen)  # type: ignore[arg-type]
    assert unseen == ["the kernel log's OOM kills"]


async def test_the_doctor_reports_what_its_watch_did_not_see(
    testbed: Any, ct: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a real sshd and pct: a GPU feed whose process list never
    comes; the watch's bound (shortened here) passes and the report says so,
    exit 1, never "nothing wrong"."""
    monkeypatch.setattr(doctor_run, "WATCH_MAX_S", 1.0)
    feed = SimulatedGpus(1, lambda: 0.9)
    feed.state.processes_pending = True  # nvidia-smi never lists the processes
    s = Settings(**testbed.transport_kwargs(), ct_id=ct)
    facts, snap, findings, inspected = await doctor_run.inspect(s, gpu_feed=feed, settle_s=0.5)
    assert facts["not_seen"] == ["nvidia-smi's list of GPU processes"]
    f = next(f for f in findings if f.kind == "watch_incomplete")
    assert f.title.startswith("the watch ended after 1 s without nvidia-smi's list")
    assert exit_code(findings, inspected=inspected) == 1
    assert "nothing wrong" not in render_text(facts, snap, findings)
