"""GPU feeds: the simulated one, NVML's loop, and the nvidia-smi streams (with
the stand-in nvidia-smi when the test bed has it; real shells and /proc for
the compute-apps loop)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gputui.model import GpuEvent, GpuProcess, GpuSample, GpuState
from gputui.monitor.gpufeed import (
    APPS_SCRIPT,
    NvidiaSmiFeed,
    NvmlFeed,
    SimulatedGpus,
    apps_loop_argv,
    parse_apps_block,
)
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from helpers import until

STANDINS = Path(__file__).resolve().parent / "standins"
HAVE_SMI_STANDIN = (STANDINS / "nvidia-smi").exists()


@pytest.fixture
async def local() -> AsyncIterator[LocalTransport]:
    tr = LocalTransport()
    await tr.connect()
    try:
        yield tr
    finally:
        await tr.close()


# ------------------------------------------------------------ simulated


async def test_simulated_gpus_follow_the_callback() -> None:
    load = [0.0]
    feed = SimulatedGpus(2, lambda: load[0], period_s=0.05, seed=1)
    changes = [0]
    feed.subscribe(lambda: changes.__setitem__(0, changes[0] + 1))
    idle = feed.tick()
    assert [s.util_pct for s in idle] == [0, 0]
    assert all(s.sm_clock_mhz == 345.0 and s.mem_used_mib == 1 for s in idle)
    load[0] = 1.0
    busy = feed.tick()
    assert all(s.util_pct is not None and s.util_pct >= 97 for s in busy)
    assert all(s.power_w is not None and s.power_w > 600 for s in busy)
    assert all((s.mem_frac or 0) > 0.25 for s in busy)
    load[0] = 0.0
    held = feed.tick()  # the run stopped computing but still holds memory: "held but idle"
    assert held[0].util_pct == 0 and (held[0].mem_frac or 0) > 0.25
    feed.release()
    assert feed.tick()[0].mem_used_mib == 1
    await feed.start()
    await until(lambda: len(feed.state.util_history[0]) >= 8, what="ticks")
    await feed.stop()
    n = len(feed.state.util_history[0])
    await asyncio.sleep(0.15)
    assert len(feed.state.util_history[0]) == n  # stopped means stopped
    assert changes[0] >= 4
    assert feed.state.source == "simulated"


async def test_simulated_history_is_bounded() -> None:
    feed = SimulatedGpus(1, lambda: 0.5)
    feed.state.history_len = 10
    for _ in range(50):
        feed.tick()
    assert len(feed.state.util_history[0]) == 10 and len(feed.state.mem_history[0]) == 10


# ------------------------------------------------------------ NVML loop


class FakeReader:
    """Duck-typed NvmlReader (the NVML code itself is tested by its owner)."""

    def __init__(self) -> None:
        self.inits = 0
        self.shut = False
        self.lost = False

    def init(self) -> None:
        self.inits += 1

    def read(self, now: float) -> list[GpuSample]:
        return [] if self.lost else [GpuSample(index=0, time=now, util_pct=42.0)]

    def take_events(self) -> list[GpuEvent]:
        ev = GpuEvent(time=time.time(), text="GPU 0: GPU is lost", lost=True)
        return [ev] if self.lost else []

    def processes(self, util: bool = True) -> list[Any]:
        return []

    def shutdown(self) -> None:
        self.shut = True


async def test_nvml_feed_reads_reports_lost_and_shuts_down() -> None:
    r = FakeReader()
    feed = NvmlFeed(period_s=0.02, reader=r)
    await feed.start()
    try:
        await until(lambda: feed.state.latest.get(0), what="a reading")
        assert feed.state.latest[0].util_pct == 42.0 and feed.state.source == "nvml"
        r.lost = True
        await until(lambda: feed.state.error, what="lost GPU")
        assert feed.state.lost and "lost" in (feed.state.error or "")
    finally:
        await feed.stop()
    assert r.inits == 1 and r.shut


def test_gpu_state_lost_is_the_current_state_not_the_history() -> None:
    st = GpuState()
    assert not st.lost
    st.events.append(GpuEvent(time=5.0, text="Unable to determine the device handle", lost=True))
    assert st.lost  # no reading at all
    st.add(GpuSample(index=0, time=1.0))
    st.add(GpuSample(index=1, time=1.0))
    assert st.lost  # lost after the last readings
    st.add(GpuSample(index=0, time=6.0))
    assert st.lost  # GPU 1 has not been read since
    st.add(GpuSample(index=1, time=6.0))
    assert not st.lost  # every GPU read again: recovered
    st.events.append(GpuEvent(time=7.0, text="Xid 13: Graphics Exception", lost=False))
    assert not st.lost  # other events do not count
    for _ in range(60):  # the lost event has long left the bounded history
        st.events.append(GpuEvent(time=8.0, text="Xid 13", lost=False))
    st.events.append(GpuEvent(time=9.0, text="GPU is lost", lost=True))
    assert st.lost
    st.events.append(GpuEvent(time=9.0, text="same read", lost=True))
    st.add(GpuSample(index=0, time=9.0))  # NVML: one read, GPU 1 lost, GPU 0 read
    st.add(GpuSample(index=1, time=8.5))
    assert st.lost


# ------------------------------------------------------------ compute apps loop


def test_parse_apps_block_maps_host_pids_to_the_ct() -> None:
    lines = [
        "4242, python3, 80000, GPU-aaa",
        "5151, python3, 1000, GPU-aaa",
        "6161, [Not Found], [N/A], GPU-bbb",
        "@gputui rc 0",
        "@gputui pid 4242 /lxc/200 pid:[4026532001] 4242\t17",
        "@gputui pid 5151 /lxc/201 pid:[4026532002] 5151\t9",
        "@gputui pid 6161 - pid:[4026531836] 6161",
    ]
    procs, rc, err = parse_apps_block(lines, ct_id=200)
    assert rc == 0 and err == ""
    by = {p.host_pid: p for p in procs}
    assert by[4242].in_container is True and by[4242].ct_pid == 17
    assert by[4242].used_mib == 80000
    assert by[5151].in_container is False and by[5151].ct_pid is None
    assert by[6161].in_container is False and by[6161].used_mib is None


def test_parse_apps_block_by_pid_namespace() -> None:
    """No /lxc/ cgroup (cgroup v1, the test bed): the CT's PID namespace decides."""
    lines = [
        "700, python3, 500, GPU-aaa",
        "800, python3, 500, GPU-aaa",
        "@gputui rc 0",
        "@gputui pid 700 - pid:[4026532999] 700 12",
        "@gputui pid 800 - pid:[4026532888] 800 3",
    ]
    procs, _, _ = parse_apps_block(lines, ct_id=200, ct_pid_ns="pid:[4026532999]")
    assert [(p.host_pid, p.in_container, p.ct_pid) for p in procs] == [
        (700, True, 12),
        (800, False, None),
    ]
    procs, _, _ = parse_apps_block(lines, ct_id=200)  # namespace unknown: cannot tell
    assert [(p.in_container, p.ct_pid) for p in procs] == [(None, None), (None, None)]


def test_parse_apps_block_failure() -> None:
    procs, rc, err = parse_apps_block(["No devices were found", "@gputui rc 6"], ct_id=200)
    assert procs == [] and rc == 6 and err == "No devices were found"


def test_apps_loop_argv_quotes_nothing_into_the_script() -> None:
    argv = apps_loop_argv(5)
    assert argv[:3] == ["sh", "-c", APPS_SCRIPT]
    assert argv[4] == "5" and argv[5] == "nvidia-smi"


async def test_apps_loop_script_reads_real_proc(local: LocalTransport) -> None:
    """The loop's shell side on this machine: our own PID is listed with its
    NSpid (one level: not in a container)."""
    me = os.getpid()
    argv = ["sh", "-c", APPS_SCRIPT, "t", "0.05", "printf", "%s\\n", f"{me}, python3, 10, GPU-x"]
    proc = await local.open(argv)
    block: list[str] = []
    try:
        while True:
            line = (await asyncio.wait_for(proc.readline(), 5)).decode().rstrip("\n")
            if line == "@gputui end":
                break
            block.append(line)
    finally:
        await proc.close()
    procs, rc, _ = parse_apps_block(block, ct_id=200)
    assert rc == 0 and [p.host_pid for p in procs] == [me]
    assert procs[0].in_container is False and procs[0].ct_pid is None


# ------------------------------------------------------------ nvidia-smi streams


@pytest.fixture
def only_pct_on_path(testbed: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH with the stand-in pct but no nvidia-smi anywhere."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pct").symlink_to(Path(testbed.bin_dir) / "pct")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", str(testbed.state_dir))


async def test_nvidia_smi_missing_everywhere_is_one_clear_error(
    testbed: Any, ct: int, only_pct_on_path: None, local: LocalTransport
) -> None:
    feed = NvidiaSmiFeed(Target(local, ct), where="auto", period_ms=200)
    await feed.start()
    try:
        await until(lambda: feed.state.error, what="error")
    finally:
        await feed.stop()
    assert feed.state.error is not None
    assert f"nvidia-smi not found on the host or in CT {ct}" in feed.state.error
    assert feed.state.latest == {} and feed.channels == 0
    assert feed.streams_opened == 2  # tried the host, then the CT; no busy retry


def test_unknown_source_is_a_clear_error() -> None:
    from gputui.errors import GputuiError

    with pytest.raises(GputuiError, match="unknown GPU source"):
        NvidiaSmiFeed(Target(LocalTransport()), where="gpu0")


@pytest.fixture
def standin_env(testbed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = testbed.env()
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", env["GPUTUI_STANDIN_STATE"])


GPU_STATE = {
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-0000aaaa",
            "memory.used": 81234,
            "memory.total": 143771,
            "utilization.gpu": 100,
            "temperature.gpu": 61,
            "power.draw": 684.2,
            "power.limit": 700,
            "clocks.sm": 1980,
        },
        {
            "index": 1,
            "name": "NVIDIA H200",
            "uuid": "GPU-0000bbbb",
            "memory.used": 1,
            "memory.total": 143771,
            "utilization.gpu": 0,
            "temperature.gpu": "[N/A]",
            "power.draw": "[N/A]",
            "power.limit": 700,
            "clocks.sm": 345,
        },
    ],
}


@pytest.mark.skipif(not HAVE_SMI_STANDIN, reason="the test bed has no nvidia-smi stand-in yet")
async def test_stream_from_the_standin_on_the_host(
    testbed: Any, standin_env: None, local: LocalTransport
) -> None:
    testbed.set_gpus(GPU_STATE)
    feed = NvidiaSmiFeed(Target(local, None), where="auto", period_ms=100, apps_period_s=0.2)
    assert feed.state.processes_pending  # not listed yet is not "nobody holds a GPU"
    await feed.start()
    try:
        await until(lambda: len(feed.state.latest) == 2, what="two GPUs")
        await until(lambda: not feed.state.processes_pending, what="the first listing")
        assert feed.state.processes == []  # listed, and empty
        await until(lambda: len(feed.state.util_history[0]) >= 3, what="a stream, not one reading")
        g0, g1 = feed.state.latest[0], feed.state.latest[1]
        assert g0.name == "NVIDIA H200" and g0.mem_used_mib == 81234 and g0.util_pct == 100
        assert g1.temp_c is None and g1.power_w is None  # [N/A] is unknown, not 0
        assert feed.state.source == "nvidia-smi (host)" and feed.side == "host"
        # the stream, the compute-apps loop (with the health queries) and the kernel log
        assert feed.channels == 3
        opened = feed.streams_opened
        await asyncio.sleep(0.5)
        assert feed.streams_opened == opened  # long-lived: nothing new per period
    finally:
        await feed.stop()
    assert feed.channels == 0


@pytest.mark.skipif(not HAVE_SMI_STANDIN, reason="the test bed has no nvidia-smi stand-in yet")
async def test_lost_gpu_is_a_state_not_a_crash(
    testbed: Any, standin_env: None, local: LocalTransport
) -> None:
    testbed.set_gpus(GPU_STATE)
    feed = NvidiaSmiFeed(Target(local, None), where="host", period_ms=100)
    await feed.start()
    try:
        await until(lambda: feed.state.latest, what="readings")
        testbed.set_gpus({**GPU_STATE, "lost": True})
        await until(lambda: feed.state.lost, what="lost GPU event")
        assert feed.state.error and "lost" in feed.state.error.lower()
        assert feed.state.lost
        testbed.set_gpus(GPU_STATE)  # back (e.g. after a reset): the stream restarts
        await until(lambda: feed.state.error is None, timeout=15, what="recovery")
        await until(lambda: len(feed.state.latest) == 2, what="readings again")
        assert not feed.state.lost  # recovered: not lost now ...
        assert any(e.lost for e in feed.state.events)  # ... and the history keeps it
    finally:
        await feed.stop()


@pytest.mark.skipif(not HAVE_SMI_STANDIN, reason="the test bed has no nvidia-smi stand-in yet")
async def test_listing_is_mapped_again_when_the_ct_pid_namespace_becomes_known(
    testbed: Any, ct: int, standin_env: None, local: LocalTransport
) -> None:
    """The feed lists the apps before the agent says the CT's PID namespace:
    setting it maps the last listing at once, not at the next one."""
    import subprocess

    marker = f"gputui-late-ns-{ct}"
    cmd = f"python3 -c 'import time; time.sleep(300)' {marker}"
    r = testbed.ct_exec(ct, ["tmux", "new", "-d", "-s", "g", cmd])
    assert r.returncode == 0, r.stderr
    pid = await until(
        lambda: subprocess.run(
            ["pgrep", "-f", f"^python3 -c .* {marker}$"], capture_output=True, text=True
        ).stdout.split(),
        what="the CT process",
    )
    host_pid = int(pid[0])
    testbed.set_gpus(
        {
            **GPU_STATE,
            "apps": [{"pid": host_pid, "used_memory": 100, "gpu_uuid": "GPU-0000aaaa"}],
        }
    )
    # A listing period far beyond the test: only the re-map can map it.
    feed = NvidiaSmiFeed(Target(local, ct), where="host", period_ms=100, apps_period_s=300)
    await feed.start()
    try:
        await until(lambda: feed.state.processes, what="the first listing")
        (p,) = feed.state.processes
        assert p.host_pid == host_pid and p.ct_pid is None
        feed.ct_pid_ns = os.readlink(f"/proc/{host_pid}/ns/pid")
        (p,) = feed.state.processes
        assert p.in_container is True and p.ct_pid is not None and p.ct_pid != host_pid
    finally:
        await feed.stop()


class UtilReader(FakeReader):
    """One process on GPU 0 at `busy` %: records whether each listing asked
    for per-process utilization."""

    def __init__(self, busy: float) -> None:
        super().__init__()
        self.busy = busy
        self.asked: list[bool] = []

    def read(self, now: float) -> list[GpuSample]:
        return [GpuSample(index=0, time=now, uuid="GPU-0", util_pct=self.busy)]

    def processes(self, util: bool = True) -> list[Any]:
        self.asked.append(util)
        gp = GpuProcess(gpu_uuid="GPU-0", host_pid=7, used_mib=1000.0)
        if util:
            gp.util = [(time.time(), self.busy)]
        return [gp]


def test_per_process_utilization_is_read_every_listing_only_while_it_could_matter() -> None:
    """Issue 24: a run busy alone on its GPU has its own utilization read
    every UTIL_EVERY_S, not every listing; one reading under UTIL_BUSY_PCT
    (it may be hanging) is read every listing again."""
    from gputui.monitor.gpufeed import UTIL_EVERY_S

    clock = [1000.0]
    r = UtilReader(busy=100.0)
    feed = NvmlFeed(reader=r, apps_every=2, clock=lambda: clock[0])
    feed._ready = True

    def listing() -> None:
        for _ in range(feed.apps_every):
            _, _, procs = feed._read_once()
            if procs is not None:  # the feed's loop carries each one's history
                prev = feed.state.processes
                for p in procs:
                    p.util = (prev[0].util if prev else []) + p.util
                feed.state.processes = procs
            clock[0] += 1.0

    for _ in range(12):  # 24 s of listings every 2 s
        listing()
    assert r.asked.count(True) == 3 and len(r.asked) == 12, r.asked  # t = 0, 10, 20
    assert r.asked[0] and r.asked[5] and r.asked[10]
    assert UTIL_EVERY_S == 10.0
    r.busy = 0.0  # the GPU goes idle: every listing asks
    r.asked.clear()
    for _ in range(4):
        listing()
    assert r.asked == [True, True, True, True], r.asked


def test_a_late_reading_starts_the_hang_clock_when_the_process_went_idle() -> None:
    """Read 10 s apart, the driver's samples come back a point each 2 s: a
    process that stopped at t≈3 reads idle from the t=6 point, so the hang rule (its
    clock: own_idle_for) is on time, not up to 20 s late."""
    from gputui.collect.nvml import UTIL_BUCKET_S, util_points
    from gputui.diagnose.holders import own_idle_for

    t0 = 1000.0
    fresh = [(int((t0 + k / 6) * 1e6), 7, 100.0) for k in range(18)]  # busy 0-3 s
    fresh += [(int((t0 + k / 6) * 1e6), 8, 90.0) for k in range(60)]  # another, all 10 s
    points = util_points(fresh, t0, t0 + 10.0)
    assert [round(t - t0) for t, _ in points] == [2, 4, 6, 8, 10]
    gp = GpuProcess(gpu_uuid="GPU-0", host_pid=7, used_mib=1.0)
    gp.util = [(t, m.get(7, 0.0)) for t, m in points]
    assert gp.util[0][1] == 100.0 and all(v == 0.0 for _, v in gp.util[2:])
    idle = own_idle_for(gp, t0 + 60.0, 5.0)
    assert idle is not None
    stopped = 17 / 6  # its last sample
    assert 60.0 - stopped - idle <= 2 * UTIL_BUCKET_S  # the listing pace's lateness, not 10 s more
    # read at the listing's pace (≤ 3 s apart): one point, as before
    assert len(util_points(fresh, t0 + 8.0, t0 + 10.0)) == 1
    # nothing before the driver's first sample is made up
    late = util_points(fresh[18:], t0 - 20.0, t0 + 10.0)
    assert [round(t - t0) for t, _ in late] == [2, 4, 6, 8, 10]


def test_a_health_listing_that_reads_the_same_tells_no_one() -> None:
    """Issue 48: every compute-apps listing (a few seconds apart) told the
    dashboard its GPUs changed, and it drew the whole screen again between
    two samples' frames, though the health fields read the same. The new
    readings are kept (their time moves on); a listing that says something
    new is told at once."""
    from gputui.collect.gpuhealth import HEALTH_TAG

    clock = [1000.0]
    feed = NvidiaSmiFeed(Target(LocalTransport(), None), where="host")
    feed.clock = lambda: clock[0]
    told: list[float] = []
    feed.subscribe(lambda: told.append(clock[0]))
    row = HEALTH_TAG + "0, 00000000:18:00.0, 95, {ecc}, 5, 5, 16, 16, 700.00, 700.00"
    feed._apply_health([row.format(ecc=0)])
    assert told == [1000.0] and feed.state.health[0].ecc_uncorrected == 0
    clock[0] = 1005.0
    feed._apply_health([row.format(ecc=0)])
    assert told == [1000.0]  # the same readings: no one told
    assert feed.state.health[0].time == 1005.0  # ... but taken
    clock[0] = 1010.0
    feed._apply_health([row.format(ecc=2)])
    assert told == [1000.0, 1010.0] and feed.state.health[0].ecc_uncorrected == 2
