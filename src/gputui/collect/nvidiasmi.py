"""nvidia-smi: the argv to ask it, and parsing what it prints.

Pure functions, no I/O. The GPU stream is
`nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits -lms N`:
one CSV row per GPU per period, with Xid/ECC/lost-GPU text possibly
interleaved. Columns are mapped by the order we asked for, never by header
text (driver 580 renames headers, e.g. `clocks.sm` -> `clocks.current.sm [MHz]`).

Unknown values (`[N/A]`, `N/A`, `[Not Supported]`, `[Unknown Error]`, empty)
become None, never 0.

Which texts mean "GPU lost" (GpuEvent.lost=True): the device, or all
devices, became unreachable while the driver still answers —
"Unable to determine the device handle for GPU…" (nvidia-smi, NVML
GPU_IS_LOST), "GPU is lost", "fallen off the bus" (also the text of Xid 79),
"GPU requires reset"/"reset required", and "No devices were found" seen in a
stream. Driver problems ("couldn't communicate with the NVIDIA driver",
"Driver/library version mismatch", "Failed to initialize NVML") are events
with lost=False: the GPUs may be fine, the reader is broken; `explain_exit`
gives the fix. Other text (Xid, ECC, anything unrecognised) is an event with
lost=False.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass, field

from gputui.model import GpuEvent, GpuProcess, GpuSample
from gputui.text.numbers import ascii_int, bounded_float, bounded_int

GPU_FIELDS: tuple[str, ...] = (
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

# The stream's fields: the above, then the health a second can change
# (issue 32): the clocks' event reasons and the SM clock's maximum. An older
# driver that knows the reasons only by their old name gets the second set;
# one that knows neither, the plain GPU_FIELDS (`fallback_fields`).
STREAM_FIELDS: tuple[str, ...] = (*GPU_FIELDS, "clocks_event_reasons.active", "clocks.max.sm")
_STREAM_FALLBACKS: tuple[tuple[str, ...], ...] = (
    STREAM_FIELDS,
    (*GPU_FIELDS, "clocks_throttle_reasons.active", "clocks.max.sm"),
    GPU_FIELDS,
)

COMPUTE_APPS_FIELDS: tuple[str, ...] = ("pid", "process_name", "used_memory", "gpu_uuid")

# Values nvidia-smi prints for "no value". Compared case-insensitively,
# with surrounding brackets removed.
_UNKNOWN = {
    "",
    "n/a",
    "not supported",
    "unknown error",
    "insufficient permissions",
    "requested functionality has been deprecated",
    "gpu is lost",
    "no data",
}

# ASCII digits only: float() takes any Unicode digit (`٣٠` is 30.0)
_NUM_RE = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)$", re.ASCII)
# The GPUs one table holds: a row for a higher index (a CT's nvidia-smi can
# print anything) is an event saying it was not read, never a new row.
MAX_GPUS = 64

# Multipliers to MiB for memory values printed with a unit.
_MEM_UNITS = {"": 1.0, "mib": 1.0, "mb": 1.0, "gib": 1024.0, "gb": 1024.0, "kib": 1 / 1024}

_LOST_PATTERNS = (
    "unable to determine the device handle",
    "gpu is lost",
    "fallen off the bus",
    "gpu requires reset",
    "reset required",
    "no devices were found",
)
_XID79_RE = re.compile(r"\bXid\b[^\n]*?:\s*79\b")


def fallback_fields(fields: tuple[str, ...]) -> tuple[str, ...] | None:
    """The stream's next field set after nvidia-smi refused `fields` (an
    older driver: `Field "…" is not a valid field to query.`); None: none left."""
    try:
        k = _STREAM_FALLBACKS.index(fields)
    except ValueError:
        return None
    return _STREAM_FALLBACKS[k + 1] if k + 1 < len(_STREAM_FALLBACKS) else None


def is_unknown_field_error(text: str) -> bool:
    return _FIELD_RE.search(text) is not None


def query_gpu_argv(period_ms: int | None = None, fields: tuple[str, ...] = GPU_FIELDS) -> list[str]:
    """argv for one GPU reading, or a stream of readings every `period_ms`."""
    argv = [
        "nvidia-smi",
        "--query-gpu=" + ",".join(fields),
        "--format=csv,noheader,nounits",
    ]
    if period_ms is not None:
        if period_ms <= 0:
            raise ValueError(f"period_ms must be positive, got {period_ms}")
        argv += ["-lms", str(int(period_ms))]
    return argv


def compute_apps_argv() -> list[str]:
    """argv listing the processes that hold GPU memory."""
    return [
        "nvidia-smi",
        "--query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS),
        "--format=csv,noheader,nounits",
    ]


def is_unknown(value: str) -> bool:
    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        v = v[1:-1]
    return v.strip().lower() in _UNKNOWN


def parse_number(value: str, mem: bool = False) -> float | None:
    """`"1395"`, `"1395 MiB"`, `"100 %"`, `"684.21 W"` -> float; unknown -> None.

    With `mem`, a unit other than MiB is converted to MiB. A value that is not a
    number at all (garbage) is also None: unknown, never 0."""
    v = value.strip()
    if v.isascii() and v.replace(".", "", 1).isdigit():  # "1395", "684.21": most readings
        x = float(v)  # (a plain number of memory is MiB: nounits)
        return x if math.isfinite(x) else None
    if is_unknown(value):
        return None
    m = _NUM_RE.match(v)
    if not m:
        return None
    x = float(m.group(1))
    if not math.isfinite(x):  # 1e999: no reading
        return None
    if mem:
        factor = _MEM_UNITS.get(m.group(2).lower())
        if factor is None:
            return None
        x *= factor
    return x


def is_lost_text(text: str) -> bool:
    t = text.lower()
    return any(p in t for p in _LOST_PATTERNS) or bool(_XID79_RE.search(text))


def _is_header(fields: list[str]) -> bool:
    first = fields[0].strip().lower()
    return first == "index" or first.startswith("index ")


def parse_gpu_line(
    line: str, now: float, asked: tuple[str, ...] = GPU_FIELDS
) -> GpuSample | GpuEvent | None:
    """One line of `query_gpu_argv(…, asked)` output (`asked`: GPU_FIELDS,
    then optionally the reasons' and max clock's, as STREAM_FIELDS).

    -> GpuSample for a data row, None for an empty line or the CSV header,
    GpuEvent for any other text (Xid, ECC, lost GPU, driver errors)."""
    text = line.strip().strip("\r")
    if not text:
        return None
    raw = text.split(",")
    fields = [f.strip() for f in raw]
    n = len(asked)
    if len(fields) >= n:
        if _is_header(fields):
            return None
        if len(fields) > n:  # a name with commas in it: keep the tail fixed
            extra = len(fields) - n
            fields = [fields[0], ",".join(raw[1 : 2 + extra]).strip(), *fields[2 + extra :]]
        idx = ascii_int(fields[0], 9)
        if idx is not None and any("gpu is lost" in f.lower() for f in fields[1:]):
            return GpuEvent(time=now, text=text, lost=True)
        if idx is not None and idx >= MAX_GPUS:
            return GpuEvent(time=now, text=_past_max(idx), lost=False)
        if idx is not None:
            return GpuSample(
                index=idx,
                time=now,
                name="" if is_unknown(fields[1]) else fields[1],
                uuid="" if is_unknown(fields[2]) else fields[2],
                mem_used_mib=parse_number(fields[3], mem=True),
                mem_total_mib=parse_number(fields[4], mem=True),
                util_pct=parse_number(fields[5]),
                temp_c=parse_number(fields[6]),
                power_w=parse_number(fields[7]),
                power_limit_w=parse_number(fields[8]),
                sm_clock_mhz=parse_number(fields[9]),
                event_reasons=parse_mask(fields[10]) if n > 10 else None,
                sm_clock_max_mhz=parse_number(fields[11]) if n > 11 else None,
            )
    return GpuEvent(time=now, text=text, lost=is_lost_text(text))


def parse_mask(value: str) -> int | None:
    """`0x0000000000000004` -> 4; unknown or garbage -> None."""
    v = value.strip()
    if is_unknown(v):
        return None
    try:
        return int(v, 16) if v.lower().startswith("0x") else int(v, 10)
    except ValueError:
        return None


def _past_max(idx: int) -> str:
    return f"nvidia-smi row for GPU {idx} unreadable: gputui reads GPUs 0-{MAX_GPUS - 1}"


def parse_gpu_output(text: str, now: float) -> list[GpuSample | GpuEvent]:
    """All lines of a one-shot reading (or a chunk of the stream)."""
    out: list[GpuSample | GpuEvent] = []
    for line in text.splitlines():
        item = parse_gpu_line(line, now)
        if item is not None:
            out.append(item)
    return out


def parse_compute_apps(text: str) -> list[GpuProcess]:
    """Output of `compute_apps_argv()` -> processes.

    "No running processes found" (older drivers print it even with csv) and
    blank lines -> nothing; `[N/A]` memory -> None (common inside containers
    and on MIG). The process name may contain commas: pid is the first field,
    memory and uuid the last two."""
    procs: list[GpuProcess] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cols = line.split(",")
        fields = [f.strip() for f in cols]
        pid = ascii_int(fields[0], 10) if len(fields) >= 4 else None
        if pid is None:
            continue  # header, "No running processes found", or noise
        name = ",".join(cols[1:-2]).strip()
        procs.append(
            GpuProcess(
                gpu_uuid=fields[-1],
                host_pid=pid,
                used_mib=parse_number(fields[-2], mem=True),
                name="" if is_unknown(name) else name,
            )
        )
    return procs


@dataclass
class AppsListing:
    """One listing of the compute-apps loop (gpufeed.APPS_LISTING), split:
    nvidia-smi's exit status and text, and for each listed PID as the host
    sees it: (its container's cgroup path — `/lxc/<n>/...`, `/docker-<id>.scope`,
    `/libpod-<id>.scope`, `/kubepods...` — or "-", PID namespace or "-", NSpid fields;
    an empty list when the process is gone)."""

    rc: int | None
    text: str
    pids: dict[int, tuple[str, str, list[int]]]
    # per listed PID: (state, CPU seconds or None, ancestors' PIDs in its CT's
    # PID space, nearest first) — from the `@gputui stat` lines
    stats: dict[int, tuple[str, float | None, list[int]]] = field(default_factory=dict)
    # per PID: its own SM utilization (%) from `nvidia-smi pmon -c 1 -s u`
    # (None: pmon printed no line, or is not supported here)
    pmon: dict[int, float] | None = None
    # the health queries' tagged lines (`@gputui health …`, `@gputui remap …`:
    # collect/gpuhealth.py reads them)
    health: list[str] = field(default_factory=list)


def parse_pmon(lines: list[str]) -> dict[int, float]:
    """`nvidia-smi pmon -c 1 -s u` rows -> {pid: own SM %}. A listed process
    with "-" in the sm column had no sample in the period: it is idle (0).
    Header lines (`# gpu …`) and rows without a process (pid "-") are
    skipped; so is anything that is not a row (an error text)."""
    out: dict[int, float] = {}
    for line in lines:
        words = line.split()
        if len(words) < 4 or words[0].startswith("#"):
            continue
        pid = bounded_int(words[1], 1, 1 << 22) if bounded_int(words[0], 0) is not None else None
        sm = words[3]
        util = 0.0 if sm == "-" else bounded_float(sm, 0.0, 100.0)  # never NaN, inf, 5,000 digits
        if pid is None or util is None:
            continue
        out[pid] = out.get(pid, 0.0) + util  # one row per GPU it uses: summed per PID
    return out


def parse_proc_stat_line(
    words: list[str],
) -> tuple[int, tuple[str, float | None, list[int]]] | None:
    """`@gputui stat PID CLK_TCK STATE PPID TICKS ANC…` (words after "stat")
    -> (pid, (state, CPU seconds, ancestors)). None: malformed."""
    try:
        pid = int(words[0])
        clk = float(words[1]) or 100.0
        state = words[2]
        ticks = float(words[4])
        anc = [int(w) for w in words[5:]]
    except (IndexError, ValueError):
        return None
    if not state.isalpha() or len(state) != 1:
        return None
    return pid, (state, ticks / clk, anc)


def parse_apps_listing(lines: list[str]) -> AppsListing:
    rc: int | None = None
    data: list[str] = []
    pidinfo: dict[int, tuple[str, str, list[int]]] = {}
    stats: dict[int, tuple[str, float | None, list[int]]] = {}
    pmon: list[str] | None = None
    health: list[str] = []
    for line in lines:
        if line.startswith(("@gputui health ", "@gputui remap ")):
            health.append(line)
        elif line.startswith("@gputui rc "):
            with contextlib.suppress(ValueError, IndexError):
                rc = int(line.split()[2])
        elif line.startswith("@gputui pmon"):
            pmon = pmon if pmon is not None else []
            pmon.append(line[len("@gputui pmon") :])
        elif line.startswith("@gputui stat "):
            st = parse_proc_stat_line(line.split()[2:])
            if st is not None:
                stats[st[0]] = st[1]
        elif line.startswith("@gputui pid "):
            words = line.split()
            try:
                pid = int(words[2])
                nspids = [int(w) for w in words[5:]]
            except (IndexError, ValueError):
                continue
            pidinfo[pid] = (words[3], words[4], nspids)
        else:
            data.append(line)
    util = parse_pmon(pmon) if pmon is not None else None
    return AppsListing(rc, "\n".join(data), pidinfo, stats, util, health)


UTIL_KEEP_S = 150.0  # per-process utilization readings kept this long


def carry_util(
    before: list[GpuProcess],
    now_procs: list[GpuProcess],
    readings: dict[int, float] | None,
    t: float,
) -> None:
    """Each process's own utilization history: the readings of the same
    process (host PID on the same GPU) in `before`, plus this listing's
    (`readings`: {host PID: %}; None: no per-process reading this time, the
    history is carried as it is), the last UTIL_KEEP_S seconds."""
    prev = {(p.gpu_uuid, p.host_pid): p.util for p in before}
    # A process missing from the readings had no sample (idle) — but only when
    # the readings name some listed process: PIDs of another namespace (pmon
    # inside a CT) or an empty answer say nothing about ours.
    seen = readings is not None and any(p.host_pid in readings for p in now_procs)
    for p in now_procs:
        hist = [
            (ts, v) for ts, v in prev.get((p.gpu_uuid, p.host_pid), []) if ts >= t - UTIL_KEEP_S
        ]
        if readings is not None and seen:
            hist.append((t, readings.get(p.host_pid, 0.0)))
        p.util = hist


# Return values from the nvidia-smi man page ("RETURN VALUE").
_EXIT_MEANING = {
    2: "a supplied argument or flag is invalid",
    3: "the requested operation is not available on this device",
    4: "insufficient permissions",
    6: "no GPU matched the query (no devices found)",
    8: "a GPU's external power cables are not properly attached",
    9: "the NVIDIA driver is not loaded",
    10: "the kernel detected an interrupt issue with a GPU",
    12: "the NVML shared library could not be found or loaded",
    13: "the local NVML does not implement a needed function",
    14: "a GPU's infoROM is corrupted",
    15: "a GPU has fallen off the bus or become inaccessible (GPU lost)",
    127: "nvidia-smi was not found",
    255: "nvidia-smi failed with an internal driver error",
}

_FIELD_RE = re.compile(r'Field "([^"]*)" is not a valid field to query')


def explain_exit(status: int | None, stderr: str) -> str:
    """One line: what nvidia-smi's failure means and what to do about it."""
    err = " ".join(stderr.split())
    low = err.lower()
    m = _FIELD_RE.search(err)
    if m:
        return (
            f'nvidia-smi does not know the field "{m.group(1)}" (exit {status}) — '
            "the driver is too old for this query; upgrade the NVIDIA driver or report it"
        )
    if "couldn't communicate with the nvidia driver" in low or status == 9:
        return (
            "nvidia-smi cannot talk to the NVIDIA driver (not loaded, or the container "
            "lacks /dev/nvidia*) — load the driver on the host (`modprobe nvidia`) "
            "or query GPUs on the host instead of in the CT"
        )
    if "driver/library version mismatch" in low:
        return (
            "NVIDIA driver/library version mismatch (driver updated, old module "
            "loaded) — reboot the host or reload the nvidia kernel modules"
        )
    if "unable to determine the device handle" in low or status == 15 or "gpu is lost" in low:
        return (
            "a GPU is lost (fallen off the bus / device handle unavailable) — "
            "check `dmesg` for Xid 79, then reset the GPU (`nvidia-smi -r`) or reboot"
        )
    if "no devices were found" in low or status == 6:
        return (
            "nvidia-smi found no GPUs (exit 6) — check the GPU index you asked for, "
            "and that the devices are passed into the container"
        )
    if (
        status == 127
        or "command not found" in low
        or "no such file or directory" in low
        or "executable file not found" in low
    ):
        return (
            "nvidia-smi not found — install the NVIDIA driver utilities "
            '(nvidia-utils) or query GPUs on the host (gpu_source = "host")'
        )
    if status == 2:
        return f"nvidia-smi rejected its arguments (exit 2): {err or 'no message'} — report this"
    if "failed to initialize nvml" in low or status == 12:
        return (
            f"NVML could not be initialised: {err or 'exit 12'} — reinstall the driver "
            "utilities matching the loaded driver"
        )
    meaning = _EXIT_MEANING.get(status) if status is not None else None
    detail = f": {err}" if err else ""
    if meaning:
        return f"nvidia-smi failed (exit {status}, {meaning}){detail}"
    return f"nvidia-smi failed (exit {status}){detail}"
