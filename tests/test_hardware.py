"""The hardware's own words (issue 32): throttling, the normal power cap,
a power limit set low, uncorrectable ECC / row remaps, a PCIe link trained
down, the kernel log's Xid — parsed, judged (diagnose/hardware.py), and, on
the test bed, read over one SSH connection from the stand-in nvidia-smi
and the stand-in dmesg/journalctl, named on the right GPU within 10 s.

Every test here fails on the code before issue 32 (no health fields, no
kernel-log reader, no such finding kinds)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.gpuhealth import (
    kernel_log_problem,
    parse_health,
    parse_kernel_line,
)
from gputui.collect.nvidiasmi import STREAM_FIELDS, parse_gpu_line
from gputui.diagnose import diagnose
from gputui.diagnose.hardware import gpu_issues, gpu_marks, health_summary
from gputui.model import (
    GpuProcess,
    GpuSample,
    GpuState,
    MetricPoint,
    Proc,
    Snapshot,
)
from gputui.monitor.gpufeed import NvidiaSmiFeed
from gputui.remote.target import Target
from helpers import until

HW_KINDS = {"gpu_throttled", "gpu_power_capped", "gpu_ecc", "gpu_pcie_link", "gpu_xid"}
BUSY = "100000, 143771, 100"  # memory.used, memory.total, utilization.gpu


def row(i: int, *, reasons: str, util: str = BUSY, power: str = "690.00", clock: str = "1605",
        temp: str = "61") -> str:  # fmt: skip
    """One stream row of STREAM_FIELDS, as nvidia-smi prints it (nounits)."""
    return (
        f"{i}, NVIDIA H200, GPU-{i:04d}, {util}, {temp}, {power}, 700.00, {clock}, {reasons}, 1980"
    )


def health(i: int, *, util: str = "100", ecc: str = "0", gen: str = "5", width: str = "16",
           default: str = "700.00") -> str:  # fmt: skip
    return (
        f"@gputui health {i}, 00000000:{0x18 + i * 0x10:02X}:00.0, {util}, {ecc}, "
        f"{gen}, 5, {width}, 16, {default}, 700.00"
    )


def state_of(rows: list[str], health_lines: list[str], t0: float = 1000.0, n: int = 5) -> GpuState:
    """A GpuState read `n` times, a second apart, the health once at the end."""
    st = GpuState()
    for k in range(n):
        for r in rows:
            s = parse_gpu_line(r, t0 + k, STREAM_FIELDS)
            assert isinstance(s, GpuSample), r
            st.add(s)
    st.health, _ = parse_health(health_lines, t0 + n - 1)
    return st


def snap_of(st: GpuState, now: float) -> Snapshot:
    snap = Snapshot(time=now, target="t")
    snap.gpus = st
    return snap


def hw_findings(st: GpuState, now: float, snap: Snapshot | None = None) -> list[Any]:
    return [f for f in diagnose(snap or snap_of(st, now), now) if f.kind in HW_KINDS]


# ------------------------------------------------------------ what is not a fault


def test_sw_power_cap_at_the_limit_under_full_load_is_never_a_word() -> None:
    """The trap measured on the H200: 688–691 W of 700 W, 0x4 active, SM
    1590–1620 of 1980 MHz under a real training load — a busy H200."""
    st = state_of(
        [row(i, reasons="0x0000000000000004") for i in range(4)], [health(i) for i in range(4)]
    )
    assert gpu_issues(st, 1004.0) == [] and gpu_marks(st, 1004.0) == {}
    assert hw_findings(st, 1004.0) == []


def test_idle_reason_and_an_idle_link_downshift_are_not_faults() -> None:
    """0x1 (idle) is not a throttle; an idle GPU at PCIe gen 1 of 5 is saving power."""
    idle = "0, 143771, 0"
    st = state_of(
        [row(0, reasons="0x0000000000000001", util=idle, power="117.00", clock="345")],
        [health(0, util="0", gen="1")],
    )
    assert gpu_issues(st, 1004.0) == []
    assert "idle" in health_summary(st, 0) and "gen 1 x16 of gen 5 x16" in health_summary(st, 0)


@pytest.mark.parametrize("unknown", ["[N/A]", "[Not Supported]", "N/A", "[Unknown Error]"])
def test_an_unsupported_field_is_never_a_false_alarm(unknown: str) -> None:
    st = state_of(
        [row(0, reasons=unknown, clock=unknown)],
        [
            f"@gputui health 0, 00000000:18:00.0, {unknown}, {unknown}, {unknown}, {unknown}, "
            f"{unknown}, {unknown}, {unknown}, {unknown}",
            f"@gputui remap 00000000:18:00.0, {unknown}, {unknown}",
        ],
    )
    assert st.latest[0].event_reasons is None and st.health[0].ecc_uncorrected is None
    assert st.health[0].remap_pending is None and st.health[0].pcie_width is None
    assert gpu_issues(st, 1004.0) == [] and hw_findings(st, 1004.0) == []
    assert "–" in health_summary(st, 0)  # shown as not read, not as a fault


def test_a_health_query_the_driver_refuses_is_no_fault() -> None:
    lines = ['@gputui health Field "pcie.link.gen.max" is not a valid field to query.']
    h, err = parse_health(lines, 1.0)
    assert h == {} and "not a valid field" in err


# ------------------------------------------------------------ throttling


def test_thermal_throttle_is_named_with_clocks_since_and_the_runs_slowdown() -> None:
    """GPU 1 goes to HW thermal slowdown at t=1060; the run's steps went
    from 0.5 s to 0.8 s since: "1.6× slower since HH:MM"."""
    t0 = 1000.0
    st = GpuState()
    snap = snap_of(st, 0)
    pid = 4242
    snap.procs = [Proc(pid=pid, is_python=True)]
    st.processes = [GpuProcess(gpu_uuid=f"GPU-{i:04d}", host_pid=pid, ct_pid=pid) for i in (0, 1)]
    step, t = 0, t0
    while t < t0 + 100:
        snap.metrics.add(MetricPoint(time=t, step=step))
        t += 0.5 if t < t0 + 60 else 0.8
        step += 1
    for k in range(100):
        hot = k >= 60
        st.add(parse_gpu_line(row(0, reasons="0x4"), t0 + k, STREAM_FIELDS))  # type: ignore[arg-type]
        r = row(1, reasons="0x40" if hot else "0x4", clock="1110" if hot else "1605", temp="92")
        st.add(parse_gpu_line(r, t0 + k, STREAM_FIELDS))  # type: ignore[arg-type]
    now = t0 + 99
    (f,) = hw_findings(st, now, snap)
    since = time.strftime("%H:%M", time.localtime(t0 + 60))
    assert f.kind == "gpu_throttled" and f.title.startswith(
        "GPU 1 is thermally throttled (HW thermal"
    )
    assert f"1.6× slower since {since}" in f.title, f.title
    assert any("SM clock 1110 of 1980 MHz" in e and "92 °C" in e for e in f.evidence)
    assert "cooling" in f.fix
    assert gpu_marks(st, now) == {1: ("thermal", False)}  # yellow, not red: not broken


def test_one_throttled_reading_is_a_blip_not_a_throttle() -> None:
    st = state_of([row(0, reasons="0x4")], [health(0)], n=4)
    s = parse_gpu_line(row(0, reasons="0x8"), 1004.0, STREAM_FIELDS)
    st.add(s)  # type: ignore[arg-type]
    assert gpu_issues(st, 1004.0) == []
    st.add(parse_gpu_line(row(0, reasons="0x8"), 1005.0, STREAM_FIELDS))  # type: ignore[arg-type]
    assert [x.mark for x in gpu_issues(st, 1005.0)] == ["HW slowdown"]


def test_a_power_limit_set_low_is_worth_a_word_only_when_it_holds_the_clocks() -> None:
    low = "0, NVIDIA H200, GPU-0000, 100000, 143771, 100, 61, 399.00, 400.00, 1200, 0x4, 1980"
    st = state_of([low], [health(0)])
    (f,) = hw_findings(st, 1004.0)
    assert f.kind == "gpu_power_capped" and "400 W of its 700 W default" in f.title
    idle_low = low.replace(", 100, 61, 399.00", ", 0, 33, 117.00").replace("0x4", "0x1")
    assert gpu_issues(state_of([idle_low], [health(0)]), 1004.0) == []


# ------------------------------------------------------------ ECC, remaps, PCIe


def test_uncorrectable_ecc_and_a_pending_remap_are_broken_on_the_right_gpu() -> None:
    rows = [row(i, reasons="0x4") for i in range(3)]
    st = state_of(
        rows,
        [
            health(0),
            health(1, ecc="2"),
            health(2),
            "@gputui remap 00000000:18:00.0, 0, 0",
            "@gputui remap 00000000:28:00.0, 0, 0",
            "@gputui remap 00000000:38:00.0, 1, 0",
        ],
    )
    (f,) = hw_findings(st, 1004.0)
    assert f.kind == "gpu_ecc" and f.title.startswith("GPU 1, 2:")
    assert "reset" in f.fix and f.severity.value == "error"
    assert gpu_marks(st, 1004.0) == {1: ("ECC", True), 2: ("reset needed", True)}


def test_pcie_width_is_judged_always_the_generation_only_under_load() -> None:
    st = state_of([row(0, reasons="0x4"), row(1, reasons="0x4")],
                  [health(0, width="8"), health(1, gen="3")])  # fmt: skip
    assert gpu_marks(st, 1004.0) == {0: ("x8", False), 1: ("gen3", False)}
    idle = state_of([row(0, reasons="0x1", util="0, 143771, 0")], [health(0, util="0", gen="1")])
    assert gpu_issues(idle, 1004.0) == []


# ------------------------------------------------------------ the kernel log


def test_kernel_log_xid_lines_are_parsed_and_history_is_skipped() -> None:
    line = "[ 5012.123456] NVRM: Xid (PCI:0000:28:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
    k = parse_kernel_line(line, 9.0, since_uptime=5000.0)
    assert k is not None and k.event is not None
    assert (k.event.xid, k.event.bus_id, k.event.pid) == (79, "0000:28:00", 4242)
    assert parse_kernel_line(line, 9.0, since_uptime=6000.0) is None  # dmesg -w's replay
    odd = "NVRM: Xid (PCI:0000:18:00): 119, pid='<unknown>', name=<unknown>, Timeout after 6s"
    k2 = parse_kernel_line("host kernel: " + odd, 9.0, None)
    assert k2 is not None and k2.event is not None and k2.event.pid is None
    assert parse_kernel_line("[ 1.0] usb 1-1: new device", 9.0, None) is None
    denied = parse_kernel_line("dmesg: read kernel buffer failed: Operation not permitted", 9, None)
    assert denied is not None and kernel_log_problem(denied.status) is not None


def test_xid_is_named_by_gpu_with_its_meaning_and_whether_the_run_holds_it() -> None:
    st = state_of([row(i, reasons="0x4") for i in range(2)], [health(0), health(1)])
    snap = snap_of(st, 1004.0)
    snap.procs = [Proc(pid=17, is_python=True)]
    st.processes = [GpuProcess(gpu_uuid="GPU-0001", host_pid=4242, ct_pid=17)]
    for xid, gpu_bus, pid, held, sev in ((79, "28", 4242, "this run holds it", "error"),
                                         (13, "28", 4242, "this run holds it", "warning"),
                                         (48, "18", 5151, "not this run's GPU", "warning")):  # fmt: skip
        st.events.clear()
        k = parse_kernel_line(
            f"[9.0] NVRM: Xid (PCI:0000:{gpu_bus}:00): {xid}, pid={pid}, x", 1004, 0
        )
        assert k is not None and k.event is not None
        st.events.append(k.event)
        (f,) = hw_findings(st, 1004.0, snap)
        gpu = 1 if gpu_bus == "28" else 0
        assert f.kind == "gpu_xid" and f.title.startswith(f"GPU {gpu} (PCI 0000:{gpu_bus}:00)")
        assert f"Xid {xid}" in f.title and held in f.title and f.severity.value == sev, f.title
        assert ("CUDA_LAUNCH_BLOCKING" in f.fix) == (xid == 13)  # the program's, or a reset


# ------------------------------------------------------------ on the test bed, over SSH

STANDINS = Path(__file__).resolve().parent / "standins"


H200 = {"utilization.gpu": 100, "power.draw": 690.0, "memory.used": 100000,
        "clocks.sm": 1605, "clocks_event_reasons.active": 0x4}  # fmt: skip


@pytest.fixture
async def feed(testbed: Any) -> AsyncIterator[NvidiaSmiFeed]:
    if not (STANDINS / "dmesg").exists():
        pytest.skip("no dmesg stand-in")
    testbed.kernel_permits()
    (Path(testbed.state_dir) / "kmsg").write_text(
        "[     1.000000] NVRM: Xid (PCI:0000:18:00): 79, pid=1, old news from boot\n"
    )
    testbed.set_gpus({"gpus": [dict(H200) for _ in range(4)]})
    tr = testbed.transport()
    await tr.connect()
    f = NvidiaSmiFeed(Target(tr, None), where="host", period_ms=500, apps_period_s=2.0)
    await f.start()
    try:
        yield f
    finally:
        await f.stop()
        await tr.close()
        testbed.kernel_permits()


def words(feed: NvidiaSmiFeed) -> list[Any]:
    now = time.time()
    return hw_findings(feed.state, now, snap_of(feed.state, now))


async def named(feed: NvidiaSmiFeed, kind: str, gpu: int, t0: float) -> float:
    """Seconds from t0 until `kind` is named on GPU `gpu` (fails after 10 s)."""

    def said() -> bool:
        return any(
            x.kind == kind and x.index == gpu for x in gpu_issues(feed.state, time.time())
        ) and any(f.kind == kind for f in words(feed))

    await until(said, timeout=10.0, what=f"{kind} on GPU {gpu} within 10 s", poll=0.1)
    return time.monotonic() - t0


@pytest.mark.timeout(120)
async def test_each_signal_is_named_on_the_right_gpu_within_10_s(
    testbed: Any, feed: NvidiaSmiFeed
) -> None:
    """All clear at full load under the SW power cap: nothing, for 6 s
    (health read three times); then each fault in turn, on its GPU."""
    await until(lambda: len(feed.state.health) == 4, timeout=15, what="the health fields")
    await until(lambda: "following" in feed.state.kernel_log, what="the kernel-log reader")
    assert feed.state.latest[0].event_reasons == 0x4 and feed.state.health[3].pcie_width == 16
    assert feed.channels == 3  # the stream, the listing (health with it), the kernel log
    t_end = time.monotonic() + 6
    while time.monotonic() < t_end:  # the boot's old Xid 79 is history: not said
        assert words(feed) == [] and gpu_marks(feed.state, time.time()) == {}
        await asyncio.sleep(0.5)
    gpus = [dict(H200) for _ in range(4)]

    async def fault(i: int, kind: str, **change: Any) -> float:
        gpus[i].update(change)
        t0 = time.monotonic()
        testbed.set_gpus({"gpus": gpus})
        took = await named(feed, kind, i, t0)
        gpus[i] = dict(H200)
        testbed.set_gpus({"gpus": gpus})
        await until(lambda: not gpu_issues(feed.state, time.time()), timeout=10, what="clear")
        return took

    took = {
        "thermal": await fault(1, "gpu_throttled", **{"clocks_event_reasons.active": 0x40}),
        "ecc": await fault(2, "gpu_ecc", **{"ecc.errors.uncorrected.volatile.total": 3}),
        "remap": await fault(3, "gpu_ecc", **{"remapped_rows.pending": 1}),
        "pcie": await fault(0, "gpu_pcie_link", **{"pcie.link.width.current": 8}),
    }
    t0 = time.monotonic()
    testbed.kernel_says(
        "NVRM: Xid (PCI:0000:38:00): 79, pid=4242, name=python3, GPU has fallen off the bus.",
    )
    took["xid"] = await named(feed, "gpu_xid", 2, t0)
    assert all(v < 10 for v in took.values()), took


@pytest.mark.timeout(60)
async def test_unsupported_fields_on_the_test_bed_never_alarm(
    testbed: Any, feed: NvidiaSmiFeed
) -> None:
    lacking = {k: "[Not Supported]" for k in (
        "clocks_event_reasons.active", "ecc.errors.uncorrected.volatile.total",
        "pcie.link.gen.current", "pcie.link.gen.max", "remapped_rows.pending",
        "remapped_rows.failure")}  # fmt: skip
    na = {k: None for k in ("pcie.link.width.current", "pcie.link.width.max", "clocks.max.sm")}
    testbed.set_gpus({"gpus": [{**H200, **lacking, **na} for _ in range(2)]})
    await until(
        lambda: len(feed.state.health) == 2 and feed.state.health[0].pcie_width is None,
        timeout=15,
        what="the health fields, unsupported",
    )
    await until(lambda: feed.state.latest[0].event_reasons is None, what="reasons unsupported")
    assert words(feed) == [] and gpu_marks(feed.state, time.time()) == {}
    assert [e.text for e in feed.state.events] == []  # no driver text either


@pytest.mark.timeout(60)
async def test_an_older_driver_without_event_reasons_falls_back(
    testbed: Any, feed: NvidiaSmiFeed
) -> None:
    """A driver that knows neither reasons field: the stream asks again
    without them — readings go on, no event, no false alarm."""
    await until(lambda: 0 in feed.state.latest, what="a reading")
    testbed.set_gpus({"gpus": [dict(H200)], "unknown_fields": [
        "clocks_event_reasons.active", "clocks_throttle_reasons.active"]})  # fmt: skip
    for p in list(feed._procs):  # the stream restarts (as after a driver reload)
        await p.close()
    await until(lambda: len(feed.fields) == 10, timeout=15, what="the fallback to the base fields")
    t = time.time()
    await until(lambda: feed.state.latest[0].time > t, what="readings again")
    assert feed.state.latest[0].event_reasons is None and feed.state.error is None
    assert not [e for e in feed.state.events if "valid field" in e.text]


@pytest.mark.timeout(60)
async def test_kernel_log_refused_says_so_and_journalctl_stands_in(testbed: Any) -> None:
    if not (STANDINS / "dmesg").exists():
        pytest.skip("no dmesg stand-in")
    testbed.set_gpus({"gpus": [dict(H200)]})
    tr = testbed.transport()
    await tr.connect()
    try:
        testbed.kernel_permits(dmesg="denied")
        f = NvidiaSmiFeed(Target(tr, None), where="host", period_ms=500, apps_period_s=2.0)
        await f.start()
        await until(lambda: f.state.kernel_log == "following the kernel log (journalctl)",
                    what="journalctl where dmesg is refused")  # fmt: skip
        # "via journalctl" is said just before journalctl starts: a line written
        # before it reads the journal's end is history to it (`-n 0`), as on a
        # real host. So the line is written until the reader is up: once a second.
        for _ in range(10):
            testbed.kernel_says("NVRM: Xid (PCI:0000:18:00): 13, pid=77, name=python3, Graphics")
            with contextlib.suppress(AssertionError):
                await until(lambda: any(e.xid == 13 for e in f.state.events), timeout=1.0)
                break
        assert any(e.xid == 13 and e.source == "kernel log" for e in f.state.events)
        await f.stop()
        testbed.kernel_permits(dmesg="denied", journalctl="denied")
        f = NvidiaSmiFeed(Target(tr, None), where="host", period_ms=500, apps_period_s=2.0)
        await f.start()
        # dmesg's refusal first, then journalctl's hint: the last word is the one that holds
        await until(lambda: f.state.kernel_log.startswith("journalctl shows this user only"),
                    what="the refusal said")  # fmt: skip
        assert "adm/systemd-journal" in f.state.kernel_log
        assert words(f) == []
        await f.stop()
    finally:
        testbed.kernel_permits()
        await tr.close()


# ------------------------------------------------------------ NVML (--local)


def test_nvml_reads_the_reasons_max_clock_and_slow_health_fields() -> None:
    """The local reader carries the same fields as the nvidia-smi stream
    and listing; a field NVML does not support (NotSupported) is None."""
    from gputui.collect.nvml import NvmlReader
    from test_gpu_parse import make_fake_nvml

    nv = make_fake_nvml()
    nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC = 1, 0
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x40 if h == 1 else 0x4
    nv.nvmlDeviceGetMaxClockInfo = lambda h, c: 1980

    def not_supported(*a: Any) -> Any:
        raise nv.NVMLError_NotSupported()

    nv.nvmlDeviceGetPciInfo = lambda h: type("P", (), {"busId": f"00000000:{0x18 + h:02X}:00.0"})()
    nv.nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: 3 if h == 1 else 0
    nv.nvmlDeviceGetRemappedRows = lambda h: (0, 0, h == 1, False) if h == 1 else not_supported()
    nv.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    nv.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    nv.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 16
    nv.nvmlDeviceGetMaxPcieLinkWidth = not_supported
    nv.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 700_000
    nv.nvmlDeviceGetPowerManagementLimitConstraints = lambda h: (200_000, 700_000)
    with NvmlReader(nv) as r:
        samples = r.read(1000.0)
        health = {h.index: h for h in r.health(1000.0)}
    assert [(s.event_reasons, s.sm_clock_max_mhz) for s in samples] == [(0x4, 1980), (0x40, 1980)]
    h0, h1 = health[0], health[1]
    assert h0.remap_pending is None and h0.pcie_width_max is None  # NotSupported: unknown
    assert (h1.ecc_uncorrected, h1.remap_pending, h1.bus_id) == (3, True, "00000000:19:00.0")
    assert h1.power_default_w == 700 and h1.pcie_gen == 5
    st = GpuState()
    for s in samples:
        st.add(s)
    st.health = health
    assert {x.index for x in gpu_issues(st, 1000.0) if x.broken} == {1}


# ------------------------------------------------------------ where it is shown


def faulty_state() -> GpuState:
    """GPU 0 thermally throttled (yellow), GPU 1 with a pending remap (red), GPU 2 fine."""
    return state_of(
        [
            row(0, reasons="0x40", clock="1110", temp="92"),
            row(1, reasons="0x4"),
            row(2, reasons="0x4"),
        ],
        [health(0), health(1), health(2), "@gputui remap 00000000:28:00.0, Yes, No"],
    )


def test_the_gpu_row_has_a_mark_red_only_when_broken() -> None:
    from gputui.ui.widgets.gpus import gpu_rows

    rows = gpu_rows(faulty_state(), 120, 1004.0)
    assert "⚠ thermal" in rows[0].plain and "✖ reset needed" in rows[1].plain
    assert "⚠" not in rows[2].plain and "✖" not in rows[2].plain

    def style_of(t: Any, word: str) -> str:
        start = t.plain.index(word)
        return " ".join(str(s.style) for s in t.spans if s.start <= start < s.end)

    assert "yellow" in style_of(rows[0], "⚠ thermal") and "red" not in style_of(rows[0], "⚠")
    assert "red" in style_of(rows[1], "✖ reset needed")


def test_the_zoom_and_the_host_view_and_doctor_say_it_per_gpu() -> None:
    from gputui.collect.nvidiasmi import AppsListing
    from gputui.doctor.hostreport import host_exit
    from gputui.doctor.report import snapshot_to_dict
    from gputui.host.view import HostView, RunIndex, gpu_rows, host_gpu_processes
    from gputui.ui.screens.zoom import health_text

    st = faulty_state()
    zoom = health_text(st, 1004.0).plain
    assert "GPU 0: SM clock 1110 of 1980 MHz (HW thermal slowdown)" in zoom
    assert "✖ GPU 1: a row remap is pending" in zoom and "⚠ GPU 0: HW thermal" in zoom
    procs = host_gpu_processes(AppsListing(rc=0, text="", pids={}))
    rows = gpu_rows(st, procs, RunIndex(), plain_host=True)
    assert [(r.mark, r.broken) for r in rows] == [
        ("thermal", False),
        ("reset needed", True),
        ("", False),
    ]
    assert rows[1].issues == ["GPU 1: a row remap is pending — a GPU reset applies it"]
    assert "row remap pending" in rows[1].health
    view = HostView(label="h", containers_known=False, gpus=rows)
    assert host_exit(view) == 1  # a broken GPU is a problem
    doc = snapshot_to_dict(snap_of(st, 1004.0), 1004.0)["gpus"]
    h1 = doc["health"][1]
    assert h1["remap_pending"] is True and h1["issues"][0]["kind"] == "gpu_ecc"
    assert doc["health"][0]["reasons"] == ["HW thermal slowdown"]


def test_prometheus_exports_the_health_gauges_and_leaves_out_unknowns() -> None:
    from gputui.record.prometheus import Exporter

    st = faulty_state()
    unknown = parse_gpu_line(row(3, reasons="[N/A]"), 1004.0, STREAM_FIELDS)
    st.add(unknown)  # type: ignore[arg-type]
    ex = Exporter()
    ex.update("t", snap_of(st, 1004.0), [], now=1004.0)
    got = {(s.name, s.labels.get("gpu")): s.value for fam in ex.collect() for s in fam.samples}
    assert got[("gputui_gpu_throttled", "0")] == 1 and got[("gputui_gpu_throttled", "1")] == 0
    assert got[("gputui_gpu_row_remap_pending", "1")] == 1
    assert got[("gputui_gpu_clocks_event_reasons", "0")] == 0x40
    assert ("gputui_gpu_throttled", "3") not in got  # [N/A]: not exported, never a 0 or a 1


def test_a_containers_view_of_the_host_gpus_carries_their_health() -> None:
    """The host view's per-container monitors judge the same health (and
    throttle history) as the host's feed reads."""
    from gputui.monitor.gpufeed import SharedGpus
    from gputui.remote.local import LocalTransport

    host = NvidiaSmiFeed(Target(LocalTransport(), None), where="host")
    st = faulty_state()
    host.state.latest, host.state.reasons_history = st.latest, st.reasons_history
    host.state.health, host.state.kernel_log = st.health, "following the kernel log (dmesg)"
    shared = SharedGpus(host, 200)
    assert shared.state.health is st.health and shared.state.kernel_log.startswith("following")
    assert gpu_marks(shared.state, 1004.0) == gpu_marks(st, 1004.0) != {}
    host.state.health = {}  # the next listing replaces it: the container's view follows
    shared.refresh()
    assert shared.state.health == {}


@pytest.mark.timeout(60)
async def test_local_nvml_follows_this_machines_kernel_log(
    testbed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--local (NVML): this machine's kernel log is followed on one channel,
    as a host's is; an Xid there is an event with its number and bus id."""
    from gputui.monitor.gpufeed import NvmlFeed
    from gputui.remote.local import LocalTransport
    from test_gpufeed import FakeReader

    env = testbed.env()
    monkeypatch.setenv("PATH", env["PATH"])  # the stand-in dmesg
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", env["GPUTUI_STANDIN_STATE"])
    testbed.kernel_permits()
    tr = LocalTransport()
    await tr.connect()
    feed = NvmlFeed(period_s=0.2, reader=FakeReader(), kernel_log=Target(tr, None))
    await feed.start()
    try:
        await until(lambda: "following" in feed.state.kernel_log, what="the reader")
        assert feed.channels == 1
        for _ in range(10):  # written until the reader is up (see the journalctl test)
            testbed.kernel_says("NVRM: Xid (PCI:0000:18:00): 94, pid=1, name=python3, Contained")
            with contextlib.suppress(AssertionError):
                await until(lambda: any(e.xid == 94 for e in feed.state.events), timeout=1.0)
                break
        (ev,) = [e for e in feed.state.events if e.xid == 94][:1]
        assert ev.bus_id == "0000:18:00" and ev.source == "kernel log"
    finally:
        await feed.stop()
        await tr.close()
    assert feed.channels == 0


def test_an_xid_we_do_not_know_is_said_but_not_red() -> None:
    st = state_of([row(0, reasons="0x4")], [health(0)])
    k = parse_kernel_line("[9.0] NVRM: Xid (PCI:0000:18:00): 154, pid=1, GPU recovery", 1004, 0)
    assert k is not None and k.event is not None
    st.events.append(k.event)
    assert gpu_marks(st, 1004.0) == {0: ("Xid 154", False)}
    (f,) = hw_findings(st, 1004.0)
    assert f.severity.value == "warning" and "Xid catalog" in f.title


@pytest.mark.timeout(60)
async def test_an_old_dmesg_replays_its_buffer_and_the_replay_is_not_news(testbed: Any) -> None:
    """A dmesg without -W (util-linux < 2.37): `dmesg -w` prints the whole
    buffer first — an Xid from before gputui started is history, not said;
    one written since is."""
    testbed.set_gpus({"gpus": [dict(H200) for _ in range(2)]})
    testbed.kernel_permits(dmesg_version="old")
    (Path(testbed.state_dir) / "kmsg").write_text("")
    testbed.kernel_says("NVRM: Xid (PCI:0000:28:00): 79, pid=1, name=python3, old news")
    tr = testbed.transport()
    await tr.connect()
    f = NvidiaSmiFeed(Target(tr, None), where="host", period_ms=500, apps_period_s=2.0)
    await f.start()
    try:
        await until(lambda: f.state.kernel_log == "following the kernel log (dmesg -w)",
                    what="dmesg -w")  # fmt: skip
        await asyncio.sleep(1.0)  # the replay has come and gone
        assert [e for e in f.state.events if e.xid is not None] == []
        testbed.kernel_says("NVRM: Xid (PCI:0000:28:00): 48, pid=1, name=python3, DBE")
        await until(lambda: any(e.xid == 48 for e in f.state.events), what="the new Xid")
        assert [e.xid for e in f.state.events if e.xid is not None] == [48]
    finally:
        await f.stop()
        await tr.close()
        testbed.kernel_permits()
