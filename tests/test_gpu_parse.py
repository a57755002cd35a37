"""nvidia-smi argv and parsing (gputui.collect.nvidiasmi) and the NVML mapping
(gputui.collect.nvml, with a small fake NVML module: no GPU here; the lead
checks the real thing on an H200)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from gputui.collect import nvidiasmi
from gputui.collect.nvidiasmi import (
    GPU_FIELDS,
    compute_apps_argv,
    explain_exit,
    parse_compute_apps,
    parse_gpu_line,
    parse_gpu_output,
    query_gpu_argv,
)
from gputui.collect.nvml import NvmlReader
from gputui.errors import GputuiError
from gputui.model import GpuEvent, GpuSample, GpuState

FIX = Path(__file__).parent / "fixtures" / "nvidia-smi"
T = 1000.0


def fixture(name: str) -> str:
    return (FIX / name).read_text()


# ------------------------------------------------------------------ argv


def test_gpu_fields_order() -> None:
    assert GPU_FIELDS == (
        "index",
        "name",
        "uuid",
        "memory.used",
        "memory.total",
        "utilization.gpu",
        "temperature.gpu",
        "power.draw",
        "power.limit",
        "clocks.sm",
    )


def test_query_gpu_argv() -> None:
    assert query_gpu_argv(None) == [
        "nvidia-smi",
        "--query-gpu=index,name,uuid,memory.used,memory.total,utilization.gpu,"
        "temperature.gpu,power.draw,power.limit,clocks.sm",
        "--format=csv,noheader,nounits",
    ]
    assert query_gpu_argv(1000)[-2:] == ["-lms", "1000"]
    with pytest.raises(ValueError):
        query_gpu_argv(0)


def test_compute_apps_argv() -> None:
    assert compute_apps_argv() == [
        "nvidia-smi",
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
        "--format=csv,noheader,nounits",
    ]


# ------------------------------------------------------------------ rows


def test_busy_and_idle_rows() -> None:
    items = parse_gpu_output(fixture("busy-idle.txt"), T)
    assert [type(i) for i in items] == [GpuSample, GpuSample]
    busy, idle = items
    assert isinstance(busy, GpuSample) and isinstance(idle, GpuSample)
    assert (busy.index, busy.name, busy.uuid) == (
        0,
        "NVIDIA H200",
        "GPU-5c0c9e2a-6f1d-4b7e-9a0b-1c2d3e4f5a6b",
    )
    assert busy.mem_used_mib == 97812 and busy.mem_total_mib == 143771
    assert busy.util_pct == 100 and busy.temp_c == 61
    assert busy.power_w == pytest.approx(684.21) and busy.power_limit_w == 700.0
    assert busy.sm_clock_mhz == 1980 and busy.time == T
    assert idle.index == 1 and idle.mem_used_mib == 1395 and idle.util_pct == 0
    assert idle.sm_clock_mhz == 345
    assert busy.mem_frac == pytest.approx(97812 / 143771)


def test_header_580_renamed_and_units_mapped_by_order() -> None:
    lines = fixture("header-580-units.txt").splitlines()
    assert parse_gpu_line(lines[0], T) is None  # the header
    s = parse_gpu_line(lines[1], T)
    assert isinstance(s, GpuSample)
    assert s.mem_used_mib == 1395 and s.mem_total_mib == 143771
    assert s.util_pct == 0 and s.power_w == pytest.approx(95.12)
    assert s.power_limit_w == 700 and s.sm_clock_mhz == 345 and s.temp_c == 33


def test_unknown_values_are_none_never_zero() -> None:
    a, b = parse_gpu_output(fixture("na-fields.txt"), T)
    assert isinstance(a, GpuSample) and isinstance(b, GpuSample)
    assert a.mem_used_mib is None and a.mem_total_mib == 81920
    assert a.util_pct is None and a.temp_c is None
    assert a.power_w is None and a.power_limit_w is None and a.sm_clock_mhz is None
    # zeros that nvidia-smi printed stay zeros
    assert b.mem_used_mib == 0 and b.util_pct == 0
    assert b.power_w is None  # [Unknown Error]
    assert b.power_limit_w == 350 and b.sm_clock_mhz is None  # empty


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[N/A]", None),
        ("N/A", None),
        ("[Not Supported]", None),
        ("", None),
        ("  ", None),
        ("[Unknown Error]", None),
        ("0", 0.0),
        ("684.21", 684.21),
        ("684.21 W", 684.21),
        ("100 %", 100.0),
        ("1980 MHz", 1980.0),
        ("garbage", None),
    ],
)
def test_parse_number(text: str, expected: float | None) -> None:
    assert nvidiasmi.parse_number(text) == expected


def test_memory_units_converted_to_mib() -> None:
    assert nvidiasmi.parse_number("1395 MiB", mem=True) == 1395
    assert nvidiasmi.parse_number("2 GiB", mem=True) == 2048
    assert nvidiasmi.parse_number("12 furlongs", mem=True) is None


def test_name_with_comma_keeps_columns() -> None:
    s = parse_gpu_line("3, Weird, GPU Name, GPU-abc, 10, 20, 30, 40, 50.5, 60, 70", T)
    assert isinstance(s, GpuSample)
    assert s.name == "Weird, GPU Name" and s.uuid == "GPU-abc"
    assert s.mem_used_mib == 10 and s.sm_clock_mhz == 70


def test_blank_lines_and_crlf() -> None:
    assert parse_gpu_line("", T) is None
    assert parse_gpu_line("   \r", T) is None
    s = parse_gpu_line("0, NVIDIA H200, GPU-x, 1, 2, 3, 4, 5, 6, 7\r", T)
    assert isinstance(s, GpuSample) and s.sm_clock_mhz == 7


# ------------------------------------------------------------------ events


def test_stream_with_xid_and_lost_gpu() -> None:
    items = parse_gpu_output(fixture("stream-xid-lost.txt"), T)
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["GpuSample", "GpuEvent", "GpuSample", "GpuEvent", "GpuEvent"]
    xid48, xid79, handle = items[1], items[3], items[4]
    assert isinstance(xid48, GpuEvent) and not xid48.lost and "Xid" in xid48.text
    assert isinstance(xid79, GpuEvent) and xid79.lost  # "fallen off the bus"
    assert isinstance(handle, GpuEvent) and handle.lost
    state = GpuState()
    for i in items:
        if isinstance(i, GpuSample):
            state.add(i)
        else:
            state.events.append(i)
    assert state.lost and state.latest[0].util_pct == 99


@pytest.mark.parametrize(
    ("name", "lost"),
    [
        ("lost.txt", True),
        ("no-devices.txt", True),
        ("driver-not-loaded.txt", False),
        ("invalid-field.txt", False),
    ],
)
def test_error_texts_become_events(name: str, lost: bool) -> None:
    items = parse_gpu_output(fixture(name), T)
    assert len(items) == 1
    ev = items[0]
    assert isinstance(ev, GpuEvent) and ev.lost is lost and ev.text


def test_row_reading_gpu_is_lost_is_a_lost_event() -> None:
    ev = parse_gpu_line("0, [GPU is lost], [GPU is lost], [GPU is lost], x, x, x, x, x, x", T)
    assert isinstance(ev, GpuEvent) and ev.lost


# ------------------------------------------------------------------ processes


def test_compute_apps() -> None:
    procs = parse_compute_apps(fixture("compute-apps.txt"))
    assert [(p.host_pid, p.name, p.used_mib) for p in procs] == [
        (2011, "/usr/bin/python3", 97800),
        (3133, "python -m torch.distributed.run, --nproc_per_node 8", None),
    ]
    assert procs[1].gpu_uuid == "GPU-7d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6"


def test_compute_apps_header_and_units() -> None:
    (p,) = parse_compute_apps(fixture("compute-apps-header-580.txt"))
    assert (p.host_pid, p.name, p.used_mib) == (2011, "python3", 1390)


def test_compute_apps_none() -> None:
    assert parse_compute_apps(fixture("compute-apps-none.txt")) == []
    assert parse_compute_apps("") == []


# ------------------------------------------------------------------ exit codes


@pytest.mark.parametrize(
    ("status", "stderr", "words"),
    [
        (2, fixture("invalid-field.txt"), ['"clocks.foo"', "driver"]),
        (6, fixture("no-devices.txt"), ["no GPUs", "container"]),
        (9, fixture("driver-not-loaded.txt"), ["driver", "modprobe"]),
        (15, fixture("lost.txt"), ["lost", "Xid 79"]),
        (127, "sh: 1: nvidia-smi: not found", ["not found", "host"]),
        (255, "Failed to initialize NVML: Driver/library version mismatch", ["mismatch", "reboot"]),
        (14, "", ["exit 14", "infoROM"]),
        (42, "something odd", ["exit 42", "something odd"]),
    ],
)
def test_explain_exit(status: int, stderr: str, words: list[str]) -> None:
    msg = explain_exit(status, stderr)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


# ------------------------------------------------------------------ NVML


class _FakeNvml(types.SimpleNamespace):
    """A stand-in for pynvml with the same names, error classes and units
    (bytes, milliwatts) as the installed pynvml.py."""


def make_fake_nvml(
    *,
    v2: bool = True,
    lost: set[int] | None = None,
    init_error: str | None = None,
    no_power: bool = False,
) -> _FakeNvml:
    class NVMLError(Exception):
        pass

    errs = {
        n: type(f"NVMLError_{n}", (NVMLError,), {})
        for n in (
            "NotSupported",
            "FunctionNotFound",
            "ArgumentVersionMismatch",
            "GpuIsLost",
            "LibraryNotFound",
            "DriverNotLoaded",
            "NoPermission",
        )
    }
    lost = lost or set()
    calls: list[str] = []
    gib = 1024**3

    def mem(h: int, version: int | None = None) -> types.SimpleNamespace:
        if h in lost:
            raise errs["GpuIsLost"]()
        if version is not None:
            calls.append("v2")
            if not v2:
                raise errs["FunctionNotFound"]()
            return types.SimpleNamespace(
                total=140 * gib, reserved=700 * 2**20, free=0, used=1395 * 2**20
            )
        calls.append("v1")
        return types.SimpleNamespace(total=140 * gib, free=0, used=2107 * 2**20)

    def init() -> None:
        if init_error:
            raise errs[init_error]()

    def power(h: int) -> int:
        if no_power:
            raise errs["NotSupported"]()
        return 684_210

    def procs(h: int) -> list[types.SimpleNamespace]:
        if h == 0:
            return [
                types.SimpleNamespace(pid=2011, usedGpuMemory=97800 * 2**20),
                types.SimpleNamespace(pid=2012, usedGpuMemory=None),
            ]
        return []

    def proc_name(pid: int) -> str:
        if pid == 2012:
            raise errs["NoPermission"]()
        return "python3"

    return _FakeNvml(
        NVMLError=NVMLError,
        **{f"NVMLError_{k}": v for k, v in errs.items()},
        nvmlMemory_v2=0x02000028,
        NVML_TEMPERATURE_GPU=0,
        NVML_CLOCK_SM=1,
        calls=calls,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200" if h else "NVIDIA H200",
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetMemoryInfo=mem,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=100, memory=50),
        nvmlDeviceGetTemperature=lambda h, s: 61,
        nvmlDeviceGetPowerUsage=power,
        nvmlDeviceGetPowerManagementLimit=lambda h: 700_000,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700_000,
        nvmlDeviceGetClockInfo=lambda h, c: 1980 if c == 1 else 0,
        nvmlDeviceGetComputeRunningProcesses=procs,
        nvmlSystemGetProcessName=proc_name,
    )


def test_nvml_reads_with_memory_v2() -> None:
    nv = make_fake_nvml()
    with NvmlReader(nv) as r:
        samples = r.read(T)
        assert r.memory_version == 2
    assert "shutdown" in nv.calls and "v1" not in nv.calls
    assert [s.index for s in samples] == [0, 1]
    s = samples[0]
    assert s.mem_used_mib == 1395 and s.mem_total_mib == 140 * 1024
    assert (s.util_pct, s.temp_c, s.power_limit_w, s.sm_clock_mhz) == (100, 61, 700, 1980)
    assert s.power_w == pytest.approx(684.21)
    assert samples[1].name == "NVIDIA H200" and samples[1].uuid == "GPU-1"


def test_nvml_asks_for_the_power_limit_twice_a_minute() -> None:
    limits = iter([700_000, 700_000, 650_000])
    nv = make_fake_nvml()
    asked: list[int] = []

    def limit(h: int) -> int:
        asked.append(h)
        return next(limits) if h == 0 else 700_000

    nv.nvmlDeviceGetPowerManagementLimit = limit
    r = NvmlReader(nv)
    r.init()
    seen = [r.read(T + dt)[0].power_limit_w for dt in range(0, 61)]
    assert asked.count(0) == 3  # at 0 s, 30 s and 60 s, not 61 times
    assert seen[0] == seen[59] == 700 and seen[60] == 650  # a new limit shows within 30 s


def test_nvml_falls_back_to_v1() -> None:
    nv = make_fake_nvml(v2=False)
    r = NvmlReader(nv)
    r.init()
    s = r.read(T)[0]
    assert s.mem_used_mib == 2107 and r.memory_version == 1
    r.read(T)
    assert nv.calls.count("v2") == 1  # not retried every reading


def test_nvml_not_supported_is_none() -> None:
    r = NvmlReader(make_fake_nvml(no_power=True))
    r.init()
    s = r.read(T)[0]
    assert s.power_w is None and s.util_pct == 100


def test_nvml_lost_gpu_becomes_event() -> None:
    r = NvmlReader(make_fake_nvml(lost={1}))
    r.init()
    samples = r.read(T)
    assert [s.index for s in samples] == [0]
    (ev,) = r.take_events()
    assert ev.lost and "GPU 1" in ev.text
    assert r.take_events() == []


def test_nvml_processes() -> None:
    r = NvmlReader(make_fake_nvml())
    r.init()
    procs = r.processes()
    assert [(p.host_pid, p.used_mib, p.name, p.gpu_uuid) for p in procs] == [
        (2011, 97800, "python3", "GPU-0"),
        (2012, None, "", "GPU-0"),
    ]


@pytest.mark.parametrize(
    ("err", "words"),
    [
        ("LibraryNotFound", "libnvidia-ml"),
        ("DriverNotLoaded", "modprobe"),
        ("NoPermission", "/dev/nvidia"),
    ],
)
def test_nvml_init_errors_are_one_line(err: str, words: str) -> None:
    with pytest.raises(GputuiError) as ei:
        NvmlReader(make_fake_nvml(init_error=err)).init()
    assert words in str(ei.value) and "\n" not in str(ei.value)


def test_nvml_read_before_init() -> None:
    with pytest.raises(GputuiError):
        NvmlReader(make_fake_nvml()).read(T)


def test_real_pynvml_api_names_exist() -> None:
    """The fake uses the names of the installed pynvml; check they are real."""
    pynvml = pytest.importorskip("pynvml")
    fake = make_fake_nvml()
    for name in vars(fake):
        if name.startswith(("nvml", "NVML")):
            assert hasattr(pynvml, name), name
    import inspect

    assert "version" in inspect.signature(pynvml.nvmlDeviceGetMemoryInfo).parameters
