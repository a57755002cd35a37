"""Local GPU readings through NVML (pynvml, package nvidia-ml-py), for `--local`.

The only module in collect/ that does I/O. Checked against the installed
pynvml.py: `nvmlDeviceGetMemoryInfo(handle, version=nvmlMemory_v2)` calls
`nvmlDeviceGetMemoryInfo_v2` and returns total/reserved/free/used in bytes;
without `version` it returns the v1 struct whose `used` includes memory the
driver reserves (2107 MB vs nvidia-smi's 1395 MiB on an H200, DESIGN.md), so
v2 is used and v1 only when v2 is missing (FunctionNotFound,
ArgumentVersionMismatch, NotSupported, or an old pynvml without `version`).
Power values are milliwatts; memory is bytes; strings are str (bytes on old
pynvml, decoded here). A field NVML cannot give (NotSupported,
NoPermission, ...) is None, never 0. A GPU that is lost (GPU_IS_LOST) is
skipped and reported as a GpuEvent(lost=True) via `take_events()`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from functools import partial
from types import ModuleType
from typing import Any, TypeVar

from gputui.errors import GputuiError
from gputui.model import GpuEvent, GpuHealth, GpuProcess, GpuSample

T = TypeVar("T")
MIB = 1024 * 1024
# The power limit changes only when someone runs `nvidia-smi -pl`; asking the
# driver for it was the dearest of the once-a-second NVML calls on the H200.
LIMIT_EVERY_S = 30.0
# Per-process utilization is read every few seconds, not every listing (it was
# a tenth of the dashboard's samples on the H200); a longer wait comes back as
# a point each UTIL_BUCKET_S, by the driver's own sample times.
UTIL_BUCKET_S = 2.0


def _load_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError:
        raise GputuiError(
            "pynvml is not installed (needed for --local GPU readings)",
            "pip install nvidia-ml-py, or run without --local",
        ) from None
    return pynvml


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


class NvmlReader:
    """Reads the GPUs of this machine. `nvml` is the pynvml module (injectable
    for tests); `init()` must succeed before `read()`/`processes()`."""

    def __init__(self, nvml: ModuleType | Any | None = None) -> None:
        self._nvml = nvml
        self._handles: list[Any] = []
        self._static: list[tuple[str, str]] = []  # (name, uuid) per index
        self._mem_v2: bool | None = None  # None: not tried yet
        self._limits: dict[int, tuple[float, int | None]] = {}  # index -> (read at, mW)
        self._events: list[GpuEvent] = []
        self._started = False
        self._util_seen: dict[int, int] = {}  # index -> newest per-process sample (µs)
        self._util_at: dict[int, float] = {}  # index -> when it was last read
        self._max_sm: dict[int, float | None] = {}  # index -> max SM clock (read once)

    # ------------------------------------------------------------ lifecycle

    def init(self) -> None:
        nv = self._nvml = self._nvml or _load_pynvml()
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:
            raise self._init_error(e) from None
        self._started = True
        try:
            n = nv.nvmlDeviceGetCount()
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except nv.NVMLError as e:
            self.shutdown()
            raise GputuiError(
                f"NVML could not list the GPUs: {e}",
                "check `nvidia-smi` on this machine; reset or reboot if a GPU is lost",
            ) from None
        self._static = []
        for h in self._handles:
            name = _text(self._get(partial(nv.nvmlDeviceGetName, h)) or "")
            uuid = _text(self._get(partial(nv.nvmlDeviceGetUUID, h)) or "")
            self._static.append((name, uuid))

    def _init_error(self, e: Exception) -> GputuiError:
        nv = self._nvml
        if isinstance(e, getattr(nv, "NVMLError_LibraryNotFound", ())):
            return GputuiError(
                "the NVIDIA driver library (libnvidia-ml.so.1) is not installed here",
                "install the NVIDIA driver, or drop --local to read GPUs on the remote host",
            )
        if isinstance(e, getattr(nv, "NVMLError_DriverNotLoaded", ())):
            return GputuiError(
                "the NVIDIA driver is not loaded",
                "load it (`modprobe nvidia`) or reboot; `nvidia-smi` should then work",
            )
        if isinstance(e, getattr(nv, "NVMLError_NoPermission", ())):
            return GputuiError(
                "no permission to open the NVIDIA devices",
                "run as a user that can read /dev/nvidia* (e.g. in the video group)",
            )
        return GputuiError(
            f"NVML failed to start: {e}", "check that `nvidia-smi` works on this machine"
        )

    def shutdown(self) -> None:
        if self._started and self._nvml is not None:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()
        self._started = False

    def __enter__(self) -> NvmlReader:
        self.init()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def count(self) -> int:
        return len(self._handles)

    @property
    def memory_version(self) -> int | None:
        """2 or 1 once memory has been read, None before."""
        return None if self._mem_v2 is None else (2 if self._mem_v2 else 1)

    # ------------------------------------------------------------ reading

    def _get(self, fn: Callable[[], T]) -> T | None:
        """fn() or None when NVML cannot give this value; GPU_IS_LOST propagates."""
        nv = self._nvml
        lost = getattr(nv, "NVMLError_GpuIsLost", ())
        try:
            return fn()
        except nv.NVMLError as e:  # type: ignore[union-attr]
            if lost and isinstance(e, lost):
                raise
            return None

    def _memory(self, h: Any) -> tuple[float | None, float | None]:
        nv = self._nvml
        assert nv is not None
        if self._mem_v2 is not False and hasattr(nv, "nvmlMemory_v2"):
            fallback = tuple(
                c
                for c in (
                    getattr(nv, "NVMLError_FunctionNotFound", None),
                    getattr(nv, "NVMLError_ArgumentVersionMismatch", None),
                    getattr(nv, "NVMLError_NotSupported", None),
                )
                if c is not None
            )
            try:
                m = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                self._mem_v2 = True
                return m.used / MIB, m.total / MIB
            except TypeError:  # old pynvml: no `version` keyword
                self._mem_v2 = False
            except fallback:
                self._mem_v2 = False
        else:
            self._mem_v2 = False
        m1 = self._get(lambda: nv.nvmlDeviceGetMemoryInfo(h))
        if m1 is None:
            return None, None
        return m1.used / MIB, m1.total / MIB

    def _power_limit(self, i: int, h: Any, now: float) -> int | None:
        """The power limit in mW, asked for again every LIMIT_EVERY_S."""
        at, limit = self._limits.get(i, (None, None))
        if at is not None and 0 <= now - at < LIMIT_EVERY_S:
            return limit
        nv = self._nvml
        assert nv is not None
        limit = self._get(lambda: nv.nvmlDeviceGetPowerManagementLimit(h))
        if limit is None:
            limit = self._get(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        self._limits[i] = (now, limit)
        return limit

    def _read_one(self, i: int, h: Any, now: float) -> GpuSample:
        nv = self._nvml
        assert nv is not None
        name, uuid = self._static[i] if i < len(self._static) else ("", "")
        used, total = self._memory(h)
        util = self._get(lambda: nv.nvmlDeviceGetUtilizationRates(h))
        temp = self._get(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        power = self._get(lambda: nv.nvmlDeviceGetPowerUsage(h))
        limit = self._power_limit(i, h, now)
        clock = self._get(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        if i not in self._max_sm:  # it does not change: asked once
            top = self._call("nvmlDeviceGetMaxClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))
            self._max_sm[i] = float(top) if top is not None else None
        reasons = self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:  # an older pynvml/driver: the old name
            reasons = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return GpuSample(
            index=i,
            time=now,
            name=name,
            uuid=uuid,
            mem_used_mib=used,
            mem_total_mib=total,
            util_pct=float(util.gpu) if util is not None else None,
            temp_c=float(temp) if temp is not None else None,
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            sm_clock_mhz=float(clock) if clock is not None else None,
            event_reasons=int(reasons) if reasons is not None else None,
            sm_clock_max_mhz=self._max_sm.get(i),
        )

    def _call(self, name: str, *args: Any) -> Any:
        """nvml.<name>(*args), or None when this pynvml lacks it or NVML
        cannot give it (NotSupported, NoPermission …); GPU_IS_LOST propagates."""
        fn = getattr(self._nvml, name, None)
        return None if fn is None else self._get(partial(fn, *args))

    def health(self, now: float) -> list[GpuHealth]:
        """The slow health fields of every readable GPU (issue 32): the
        same as nvidia-smi's health listing (collect/gpuhealth.py). A GPU
        lost here is skipped: read() reports it."""
        nv = self._nvml
        if not self._started or nv is None:
            raise GputuiError("NVML reader used before init()", "call NvmlReader.init() first")
        out: list[GpuHealth] = []
        for i, h in enumerate(self._handles):
            with contextlib.suppress(nv.NVMLError):
                out.append(self._health_one(i, h, now))
        return out

    def _health_one(self, i: int, h: Any, now: float) -> GpuHealth:
        nv = self._nvml
        pci = self._call("nvmlDeviceGetPciInfo", h)
        util = self._call("nvmlDeviceGetUtilizationRates", h)
        ecc = self._call(
            "nvmlDeviceGetTotalEccErrors",
            h,
            getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
            getattr(nv, "NVML_VOLATILE_ECC", 0),
        )
        remap = self._call("nvmlDeviceGetRemappedRows", h)  # (corr, unc, pending, failure)
        default = self._call("nvmlDeviceGetPowerManagementDefaultLimit", h)
        limits = self._call("nvmlDeviceGetPowerManagementLimitConstraints", h)  # (min, max) mW

        def num(name: str) -> int | None:
            v = self._call(name, h)
            return int(v) if v is not None else None

        return GpuHealth(
            index=i,
            time=now,
            bus_id=_text(getattr(pci, "busId", "")) if pci is not None else "",
            util_pct=float(util.gpu) if util is not None else None,
            ecc_uncorrected=int(ecc) if ecc is not None else None,
            remap_pending=bool(remap[2]) if remap is not None else None,
            remap_failure=bool(remap[3]) if remap is not None else None,
            pcie_gen=num("nvmlDeviceGetCurrPcieLinkGeneration"),
            pcie_gen_max=num("nvmlDeviceGetMaxPcieLinkGeneration"),
            pcie_width=num("nvmlDeviceGetCurrPcieLinkWidth"),
            pcie_width_max=num("nvmlDeviceGetMaxPcieLinkWidth"),
            power_default_w=default / 1000.0 if default is not None else None,
            power_max_w=limits[1] / 1000.0 if limits is not None else None,
        )

    def read(self, now: float) -> list[GpuSample]:
        """One sample per readable GPU; lost GPUs become events (take_events)."""
        if not self._started:
            raise GputuiError("NVML reader used before init()", "call NvmlReader.init() first")
        nv = self._nvml
        assert nv is not None
        out: list[GpuSample] = []
        for i, h in enumerate(self._handles):
            try:
                out.append(self._read_one(i, h, now))
            except nv.NVMLError as e:
                uuid = self._static[i][1] if i < len(self._static) else ""
                self._events.append(
                    GpuEvent(time=now, text=f"GPU {i}{' ' + uuid if uuid else ''}: {e}", lost=True)
                )
        return out

    def take_events(self) -> list[GpuEvent]:
        ev, self._events = self._events, []
        return ev

    def processes(self, util: bool = True) -> list[GpuProcess]:
        """Compute processes on every GPU (host PIDs; used memory None when
        NVML does not report it); with `util`, each one's own utilization
        since the last reading, a point each UTIL_BUCKET_S."""
        if not self._started:
            raise GputuiError("NVML reader used before init()", "call NvmlReader.init() first")
        nv = self._nvml
        assert nv is not None
        out: list[GpuProcess] = []
        for i, h in enumerate(self._handles):
            uuid = self._static[i][1] if i < len(self._static) else ""
            try:
                procs = self._get(partial(nv.nvmlDeviceGetComputeRunningProcesses, h)) or []
            except nv.NVMLError:
                continue  # lost GPU: read() reports it
            points = self._process_util(i, h) if procs and util else None
            for p in procs:
                pid = int(p.pid)
                mem = getattr(p, "usedGpuMemory", None)
                name = _text(self._get(partial(nv.nvmlSystemGetProcessName, pid)) or "")
                gp = GpuProcess(
                    gpu_uuid=uuid,
                    host_pid=pid,
                    used_mib=mem / MIB if mem is not None else None,
                    name=name,
                )
                if points is not None:  # readings since the last; the feed keeps the history
                    gp.util = [(t, means.get(pid, 0.0)) for t, means in points]
                out.append(gp)
        return out

    def _process_util(self, i: int, h: Any) -> list[tuple[float, dict[int, float]]] | None:
        """[(time, {pid: mean SM % of its samples})] since the last call, from
        nvmlDeviceGetProcessUtilization: one point when the last call was
        at most UTIL_BUCKET_S × 1.5 ago, else one a UTIL_BUCKET_S by the
        samples' own time stamps, from the first sample the driver still
        holds (a process idle since then reads idle from then, not from
        this call: the hang rule's clock starts when it went idle). A
        process with no sample was idle (NVML lists only active ones:
        NOT_FOUND when none was). None when this GPU or driver cannot tell
        (NotSupported, an old pynvml)."""
        nv = self._nvml
        fn = getattr(nv, "nvmlDeviceGetProcessUtilization", None)
        if nv is None or fn is None:
            return None
        now = time.time()
        since = self._util_seen.get(i, int((now - 10.0) * 1e6))
        not_found = getattr(nv, "NVMLError_NotFound", ())
        lost = getattr(nv, "NVMLError_GpuIsLost", ())
        try:
            samples = list(fn(h, since) or [])
        except nv.NVMLError as e:
            if lost and isinstance(e, lost):
                raise
            if not_found and isinstance(e, not_found):
                self._util_seen[i] = int(now * 1e6)
                return [(now, {})]
            return None
        fresh: list[tuple[int, int, float]] = []  # (µs, pid, %)
        for smp in samples:
            ts = int(getattr(smp, "timeStamp", 0) or 0)
            if ts > since:
                fresh.append((ts, int(smp.pid), float(getattr(smp, "smUtil", 0) or 0)))
        self._util_seen[i] = max([since, *(ts for ts, _, _ in fresh)])
        after, self._util_at[i] = self._util_at.get(i, 0.0), now
        return util_points(fresh, since / 1e6, now, after)


def util_points(
    fresh: list[tuple[int, int, float]], since: float, now: float, after: float = 0.0
) -> list[tuple[float, dict[int, float]]]:
    """Per-process samples ((µs, pid, %)) since `since` -> [(bucket end,
    {pid: mean %})], oldest first, none at or before `after` (the last
    call's point; see NvmlReader._process_util)."""

    def means(part: list[tuple[int, int, float]]) -> dict[int, float]:
        sums: dict[int, list[float]] = {}
        for _, pid, v in part:
            sums.setdefault(pid, []).append(v)
        return {pid: sum(v) / len(v) for pid, v in sums.items()}

    if now - since <= UTIL_BUCKET_S * 1.5 or not fresh:
        return [(now, means(fresh))]
    first = max(min(ts for ts, _, _ in fresh) / 1e6, after)
    out: list[tuple[float, dict[int, float]]] = []
    end = now
    while end > first:  # buckets (end - UTIL_BUCKET_S, end], newest first
        start = end - UTIL_BUCKET_S
        out.append((end, means([f for f in fresh if start < f[0] / 1e6 <= end])))
        end = start
    return out[::-1]
