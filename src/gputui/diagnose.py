"""Name what is wrong with a run, from one Snapshot and its recent history.

Pure: no I/O, no clock reads (`now` is an argument). Each rule is one
function `rule_*(ctx) -> Finding | None`, listed in `RULES` so the module reads
like a table; the thresholds are the constants just below, gathered in
`Thresholds` (the config's `[diagnosis]` section sets any of them). A wrong diagnosis
is worse than none, so the rules check the cases that look alike:

- GPUs idle with memory held is a hang, whatever the buffering (buffered
  output never makes GPUs idle), so `held_but_idle` wins over `busy_but_silent`.
  It escalates: a WARNING "stalled" as soon as a step is overdue (k × the
  median step time, never before the stale threshold) and a GPU holding
  memory has gone idle; an ERROR "probably hung" once the idle GPUs stay idle
  for the hang window. One idle GPU among busy ones is a stuck rank;
- a block-buffered stdout into the watched log is always at least a WARNING
  (`buffered_output`, then `busy_but_silent` once the log is silent);
- "missing" only after the container's tools were probed (`Tools.probed`);
- memory still rising with low utilization is loading: no alarm, and it
  holds back `busy_but_silent`, `held_but_idle` and `progress_stalled`;
- a log that still gets lines (stderr, tqdm) within the stale threshold is
  not silent, even when stdout is block-buffered;
- exit status 0 is "finished" unless the output ends in a traceback (then the
  0 is tee's, not Python's).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from gputui.model import (
    UNREADABLE,
    ConnectionState,
    CtStatus,
    Finding,
    GpuProcess,
    GpuSample,
    GpuState,
    LogState,
    Metrics,
    Proc,
    Session,
    Severity,
    Snapshot,
    Tools,
)

# ------------------------------------------------------------- thresholds

HELD_MIB = 1024.0  # a GPU "holds memory" above this (a bare CUDA context is ~500 MiB)
BUSY_UTIL_PCT = 50.0  # "busy": median utilization over BUSY_WINDOW_S at or above this
BUSY_WINDOW_S = 30.0
IDLE_UTIL_PCT = 5.0  # "idle": every utilization reading below this ...
IDLE_AFTER_S = 5.0  # ... for this long: the GPU has "gone idle" (with a step overdue: stalled)
IDLE_FOR_S = 60.0  # ... for this long, a step overdue: probably hung (the hang window)
IDLE_SHORT_S = 5.0  # ... or, with only a short history (doctor), this long with ≥ 3
IDLE_SHORT_SAMPLES = 3  # readings, when nothing has progressed for the hang window
CPU_BUSY_PCT = 80.0  # an idle-GPU process this busy on CPU may be saving/preprocessing
GPU_FRESH_S = 60.0  # GPU readings older than this are ignored
LOADING_RISE_MIB = 256.0  # memory rose at least this much ...
LOADING_WINDOW_S = 60.0  # ... within this window ...
LOADING_UTIL_PCT = 50.0  # ... while utilization stayed below this ...
LOADING_MAX_AGE_S = 900.0  # ... and the process is younger than this (or age unknown)
STALE_FLOOR_S = 120.0  # stale threshold: at least this ...
STALE_FACTOR = 10.0  # ... or this × the run's median line gap / step interval ...
STALE_CAP_S = 1800.0  # ... capped here
STALL_FACTOR = (
    10.0  # a step is overdue after this × the median step interval (and the stale threshold)
)
STALL_FLOOR_S = 60.0  # log still moving but the step not: stalled after at least this long
ORPHAN_GRACE_S = 10.0  # GPU memory is "orphaned" only once the run's log has been quiet this long
MTIME_SLACK_S = 2.0  # a source file modified this long after process start is "newer"
RECENT_EVENT_S = 600.0  # Xid/ECC events in the last 10 minutes are reported
TAIL_LINES = 5  # last lines quoted as evidence
DISK_FULL_BELOW_MIB = 100.0  # the log's file system is "full" with less than this free
DISK_LOW_PCT = 2.0  # ... and "nearly full" (a WARNING) with less than this share free
LEFTOVER_IDLE_S = 60.0  # a GPU holder with no live owner is a leftover once idle this long


@dataclass(frozen=True)
class Thresholds:
    """The numbers the rules judge by. `[diagnosis]` in the config sets any
    of them (same names); config.example.toml documents each default."""

    step_overdue_factor: float = STALL_FACTOR
    gpu_idle_after_s: float = IDLE_AFTER_S
    hang_after_s: float = IDLE_FOR_S
    idle_util_pct: float = IDLE_UTIL_PCT
    busy_util_pct: float = BUSY_UTIL_PCT
    held_mib: float = HELD_MIB
    stale_floor_s: float = STALE_FLOOR_S
    stale_factor: float = STALE_FACTOR
    stale_cap_s: float = STALE_CAP_S
    stalled_floor_s: float = STALL_FLOOR_S
    loading_rise_mib: float = LOADING_RISE_MIB
    loading_window_s: float = LOADING_WINDOW_S
    cpu_busy_pct: float = CPU_BUSY_PCT
    orphan_grace_s: float = ORPHAN_GRACE_S
    disk_full_below_mib: float = DISK_FULL_BELOW_MIB
    disk_low_pct: float = DISK_LOW_PCT


DEFAULT_THRESHOLDS = Thresholds()
# which Thresholds are percentages (0-100); every other one must be > 0
PERCENT_THRESHOLDS = frozenset({"idle_util_pct", "busy_util_pct", "cpu_busy_pct", "disk_low_pct"})

# Order within one severity: the more specific cause first.
SPECIFICITY: tuple[str, ...] = (
    "connection",
    "ct_missing",
    "ct_stopped",
    "gpu_lost",
    "oom_killed",
    "session_dead",
    "run_exited",
    "disk_full",
    "held_but_idle",
    "busy_but_silent",
    "buffered_output",
    "log_drift",
    "log_missing",
    "log_deleted",
    "log_unreadable",
    "stale_code",
    "progress_stalled",
    "session_missing",
    "gpu_memory_orphaned",
    "gpu_xid",
    "gpu_unreadable",
    "disk_low",
    "loading",
    "run_finished",
    "run_ended",
    "tools_missing",
)

_SIGNAL_HINTS = {
    9: "OOM killer?",
    15: "stopped on purpose?",
    11: "segmentation fault in native code",
    6: "aborted (C++ exception, NCCL or CUDA assert?)",
    2: "interrupted (Ctrl-C)",
}

_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b"
    r"|CUDA out of memory|NCCL error|Segmentation fault|^Killed\b|core dumped"
    r"|No space left on device",
)
# A write that failed because the disk is full (tee's and Python's words).
_ENOSPC_LINE = re.compile(r"No space left on device|\[Errno 28\]|\bENOSPC\b")
_ENOSPC_WORDS = ("No space left on device", "[Errno 28]", "ENOSPC")  # each match holds one


# ---------------------------------------------------------------- public API


def stale_threshold(
    snap: Snapshot, configured: float | None = None, th: Thresholds = DEFAULT_THRESHOLDS
) -> float:
    """Seconds of log silence that count as "silent".

    A configured value (--stale-after / config) wins. Otherwise it adapts to
    the run's own cadence: max(stale_floor_s, stale_factor × the larger of the
    median gap between log lines and the median step interval), capped at
    stale_cap_s. Lines arriving in one burst (a buffer flush) count as gaps of
    0, so buffering does not stretch the threshold.
    """
    if configured is not None and configured > 0:
        return float(configured)
    cadence = 0.0
    log = snap.log if isinstance(snap.log, LogState) else None
    gaps = list(getattr(log, "line_gaps", None) or [])
    if gaps:
        cadence = max(cadence, statistics.median(gaps))
    metrics = snap.metrics if isinstance(snap.metrics, Metrics) else None
    step_median = metrics.median_step_interval if metrics is not None else None
    if step_median is not None:
        cadence = max(cadence, step_median)
    return min(th.stale_cap_s, max(th.stale_floor_s, th.stale_factor * cadence))


def diagnose(
    snap: Snapshot,
    now: float,
    stale_after: float | None = None,
    thresholds: Thresholds | None = None,
) -> list[Finding]:
    """Everything wrong with the run in `snap` at time `now`, most severe and
    most specific first. INFO findings are notes (loading, finished, tools)."""
    th = thresholds if isinstance(thresholds, Thresholds) else DEFAULT_THRESHOLDS
    ctx = Context(snap, now, stale_threshold(snap, stale_after, th), th)
    findings: list[Finding] = []
    for rule in RULES:
        if ctx.connection_down and rule is not rule_connection:
            continue  # everything else would be read from stale data
        f = rule(ctx)
        if f is not None:
            findings.append(f)
    return sort_findings(findings)


Diagnose = Callable[[Snapshot, float], list[Finding]]  # (snapshot, now) -> findings


def diagnose_with(stale_after: float | None, thresholds: Thresholds | None = None) -> Diagnose:
    """diagnose() with the user's --stale-after and [diagnosis] thresholds:
    the dashboard, the host view, history and alerts all say the same."""
    return lambda snap, now: diagnose(snap, now, stale_after=stale_after, thresholds=thresholds)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    def key(f: Finding) -> tuple[int, int]:
        spec = SPECIFICITY.index(f.kind) if f.kind in SPECIFICITY else len(SPECIFICITY)
        return (f.severity.rank, spec)

    return sorted(findings, key=key)


def last_error_line(lines: Iterable[str]) -> str | None:
    """The line that says what went wrong: the exception line of the last
    Python traceback, else the last line that looks like an error."""
    xs = [ln.rstrip() for ln in lines if ln is not None]
    tb = None
    for i, ln in enumerate(xs):
        if ln.lstrip().startswith("Traceback (most recent call last)"):
            tb = i
    if tb is not None:
        found = None
        for ln in xs[tb + 1 :]:
            if not ln or ln[0] in " \t" or ln.startswith("Traceback"):
                continue
            if ln.startswith("During handling") or ln.startswith("The above exception"):
                continue
            found = ln
            break
        if found:
            return found.strip()
    for ln in reversed(xs):
        if _ERROR_LINE.search(ln.strip()):
            return ln.strip()
    return None


# ------------------------------------------------------------- formatting


def dur(seconds: float, short: bool = False) -> str:
    """45 s, 4 min, 2 h 5 min, 3 d 4 h — every duration gputui shows, in a
    sentence or (`short`, for a table column) as 45 s, 4 m, 2 h 05 m, 3 d 4 h."""
    s = max(0.0, seconds)
    minute = " m" if short else " min"
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        return f"{s / 60:.0f}{minute}"
    if s < 48 * 3600:
        h, m = divmod(round(s / 60), 60)
        if short:
            return f"{h} h {m:02d} m"
        return f"{h} h {m}{minute}" if m else f"{h} h"
    d, h = divmod(round(s / 3600), 24)
    return f"{d} d {h} h" if h else f"{d} d"


def secs(seconds: float) -> str:
    """0.5 s, 12 s, 4 min: a step time, finer than `dur` below 10 s."""
    if seconds < 0.1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    return dur(seconds)


def gib(mib: float | None) -> str:
    if mib is None:
        return "? GiB"
    return f"{mib / 1024:.1f} GiB"


def size_words(n: float | None) -> str:
    """Bytes as a person reads them: 0 B, 512 KiB, 87 MiB, 31.9 GiB, 1.8 TiB."""
    if n is None:
        return "? B"
    x = max(0.0, float(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024:
            return (
                f"{x:.0f} {unit}" if unit in ("B", "KiB", "MiB") or x >= 100 else f"{x:.1f} {unit}"
            )
        x /= 1024
    return f"{x:.1f} TiB"


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except (ValueError, TypeError):
        return f"signal {n}"


def stdout_words(proc: Proc) -> str:
    """Where stdout goes, in words: 'the file /x.log', 'a pipe into tee (PID 13)
    writing /workspace/train.log', 'the terminal /dev/pts/3'."""
    out = proc.stdout
    if out is None:
        return "an unknown target"
    if out.kind == "file":
        return f"the file {out.path}"
    if out.kind == "pipe":
        readers = ", ".join(f"{program_name(cmd)} (PID {pid})" for pid, cmd in (out.readers or []))
        s = f"a pipe into {readers}" if readers else f"a pipe ({out.path or 'reader unknown'})"
        files = list(out.reader_files or [])
        if files:
            s += " writing " + ", ".join(files)
        return s
    if out.kind == "tty":
        return f"the terminal {out.path or ''}".rstrip()
    if out.kind == "null":
        return "/dev/null"
    return f"a {out.kind} {out.path or ''}".rstrip()


def buffering_words(proc: Proc) -> list[str]:
    """Why Python does (or does not) block-buffer this process's stdout."""
    out: list[str] = []
    out.append("started with -u" if proc.python_u_flag else "no -u on its command line")
    if proc.env_pythonunbuffered is None:
        out.append("PYTHONUNBUFFERED unknown (environ unreadable)")
    else:
        out.append(
            "PYTHONUNBUFFERED set" if proc.env_pythonunbuffered else "PYTHONUNBUFFERED unset"
        )
    kind = proc.stdout.kind if proc.stdout is not None else "unknown"
    out.append("stdout is a tty" if kind == "tty" else f"stdout is not a tty ({kind})")
    return out


def program_name(cmd: str) -> str:
    """'tee -a /x.log' -> 'tee'; '/usr/bin/python3 t.py' -> 'python3'."""
    words = (cmd or "").split()
    return os.path.basename(words[0]) if words else "a process"


def _short(cmd: str, n: int = 60) -> str:
    cmd = (cmd or "").strip()
    return cmd if len(cmd) <= n else cmd[: n - 1] + "…"


def _quote_tail(lines: list[str]) -> list[str]:
    xs = [ln.rstrip() for ln in lines if ln and ln.strip()]
    return ["  │ " + (ln if len(ln) <= 160 else ln[:159] + "…") for ln in xs[-TAIL_LINES:]]


# ---------------------------------------------------------------- context


@dataclass
class GpuView:
    sample: GpuSample
    recent_util: list[float]  # known readings within BUSY_WINDOW_S
    idle_for: float | None  # how long every reading has been < idle_util_pct (None: not idle)
    idle_samples: int
    idle_whole_history: bool
    mem_rise_mib: float  # rise of used memory within the loading window
    th: Thresholds = DEFAULT_THRESHOLDS
    span_s: float = 0.0  # seconds of readings held for this GPU
    # The run's own processes' SM utilization on this GPU (per-process
    # readings): when known, busy/idle above are judged from it, not from
    # the whole GPU's (another run may keep it busy). None: not known.
    own_util: float | None = None
    min_samples: int = 2  # idle readings needed to call it gone idle (1: per-process averages)

    @property
    def held(self) -> bool:
        m = self.sample.mem_used_mib
        return m is not None and m >= self.th.held_mib

    @property
    def util_median(self) -> float | None:
        if self.recent_util:
            return statistics.median(self.recent_util)
        return self.sample.util_pct

    @property
    def busy(self) -> bool:
        m = self.util_median
        return m is not None and m >= self.th.busy_util_pct

    @property
    def gone_idle(self) -> bool:
        """Every reading below the idle line for gpu_idle_after_s (two readings at least)."""
        return (
            self.idle_for is not None
            and self.idle_for >= self.th.gpu_idle_after_s
            and self.idle_samples >= self.min_samples
        )

    def line(self) -> str:
        s = self.sample
        util = "? %" if s.util_pct is None else f"{s.util_pct:.0f} %"
        total = f" of {gib(s.mem_total_mib)}" if s.mem_total_mib else ""
        own = "" if self.own_util is None else f" (the run's own: {self.own_util:.0f} %)"
        return f"GPU {s.index}: {gib(s.mem_used_mib)}{total} used, {util} util{own}"


class Context:
    """What the rules share, computed once per diagnosis."""

    def __init__(
        self, snap: Snapshot, now: float, threshold: float, th: Thresholds = DEFAULT_THRESHOLDS
    ) -> None:
        self.snap = snap
        self.now = now
        self.threshold = threshold
        self.th = th
        self.gpus: GpuState = snap.gpus if isinstance(snap.gpus, GpuState) else GpuState()
        self.log: LogState = snap.log if isinstance(snap.log, LogState) else LogState()
        self.metrics: Metrics = snap.metrics if isinstance(snap.metrics, Metrics) else Metrics()
        self.tools: Tools = snap.tools if isinstance(snap.tools, Tools) else Tools()
        self.procs: list[Proc] = [p for p in (snap.procs or []) if isinstance(p, Proc)]
        self.sessions: list[Session] = [s for s in (snap.sessions or []) if isinstance(s, Session)]

    # -- connection / container ------------------------------------------
    @property
    def connection_down(self) -> bool:
        return self.snap.connection in (ConnectionState.RECONNECTING, ConnectionState.FAILED)

    @property
    def ct_usable(self) -> bool:
        return self.snap.ct_status not in (CtStatus.STOPPED, CtStatus.MISSING)

    @property
    def ct_words(self) -> str:
        c = self.snap.container
        return c.words if c is not None else "the host"

    def in_ct(self, argv: str) -> str:
        """A command line as the user types it on the host to run it in the container."""
        c = self.snap.container
        return c.phrase(argv) if c is not None else argv

    # -- session / process -----------------------------------------------
    @cached_property
    def session(self) -> Session | None:
        for s in self.sessions:
            if s.name == self.snap.session_name:
                return s
        return None

    @cached_property
    def session_dead(self) -> bool:
        if not self.snap.session_name:
            return False
        if self.snap.session_gone:
            return True
        s = self.session
        return s is not None and bool(s.panes) and not s.alive

    @property
    def run_known_gone(self) -> bool:
        """We know no run is alive: the watched session died or is not there,
        or the container is down."""
        if not self.ct_usable:
            return True
        if not self.snap.session_name:
            return False
        if self.session_dead:
            return True
        return self.session is None and (self.tools.tmux is not None or bool(self.sessions))

    @cached_property
    def proc(self) -> Proc | None:
        pys = [p for p in self.procs if p.is_python]
        for p in pys:
            if p.stdout is None or p.stdout.kind != "tty":
                return p
        return pys[0] if pys else None

    @property
    def proc_alive(self) -> bool:
        return self.proc is not None and self.proc.state != "Z" and not self.session_dead

    def proc_age(self) -> float | None:
        p = self.proc
        if p is None or p.start_time is None:
            return None
        return max(0.0, self.now - p.start_time)

    @property
    def block_buffered(self) -> bool | None:
        return self.proc.block_buffered if self.proc is not None else None

    # -- log ---------------------------------------------------------------
    @cached_property
    def log_silent_s(self) -> float | None:
        """Seconds with no new log line, counted at most from the process start
        (an old log's mtime says nothing about a process started since)."""
        silent = self.log.silent_for(self.now)
        if silent is None and self.snap.started:
            silent = max(0.0, self.now - self.snap.started)
        age = self.proc_age()
        if silent is not None and age is not None:
            silent = min(silent, age)
        return silent

    @property
    def log_silent(self) -> bool:
        return self.log_silent_s is not None and self.log_silent_s > self.threshold

    @cached_property
    def enospc(self) -> tuple[str, str] | None:
        """(where, line): the last line of the pane (tee says it there) or
        the log (Python's OSError) that says a write failed for lack of space."""
        for src, lines in (("pane", self.snap.pane_tail), ("log", self.snap.log_tail)):
            # one substring scan of the whole tail first: a regex per line
            # of a 200-line tail, every tick, was a tenth of gputui's CPU
            # while a log streamed (issue 24)
            joined = "\n".join(ln for ln in lines or [] if ln)
            if not any(word in joined for word in _ENOSPC_WORDS):
                continue
            for ln in reversed(list(lines or [])):
                if ln and _ENOSPC_LINE.search(ln):
                    return src, ln.strip()
        return None

    @cached_property
    def disk_full(self) -> bool:
        """The log's file system has less than disk_full_below_mib free; or,
        with its space unknown (no statvfs), the output says a write failed
        for lack of space. The log's silence is then the disk's doing."""
        free = self.log.fs_free
        if free is not None:
            return free < self.th.disk_full_below_mib * 1024 * 1024
        return self.log.path != "" and self.enospc is not None

    @property
    def disk_silenced(self) -> bool:
        """The log's silence is the disk's doing: it is full, or a write
        failed for lack of space (tee never writes that file again) and
        the log has been silent since."""
        if self.disk_full:
            return True
        return self.enospc is not None and self.proc_alive and self.log_silent

    def no_step_for(self) -> float | None:
        """Seconds since the step counter last advanced, counted at most from
        the process start; with no step seen, since the last line."""
        last = self.metrics.last_step_time
        if last is None:
            return self.no_progress_for()
        gap = max(0.0, self.now - last)
        age = self.proc_age()
        return min(gap, age) if age is not None else gap

    @cached_property
    def cadence(self) -> tuple[float, str] | None:
        """(seconds, "step" | "line"): the run's usual gap between steps, else
        between log lines; None when neither is known yet."""
        med = self.metrics.median_step_interval
        if med is not None:
            return med, "step"
        gaps = [g for g in (self.log.line_gaps or []) if g > 0]
        if len(gaps) >= 3:
            return statistics.median(gaps), "line"
        return None

    @property
    def overdue_after(self) -> float:
        """A step is overdue after k × the median step interval, and never
        before the stale threshold."""
        c = self.cadence
        return max(self.threshold, self.th.step_overdue_factor * (c[0] if c else 0.0))

    @property
    def step_overdue(self) -> bool:
        gap = self.no_step_for()
        return gap is not None and gap >= self.overdue_after

    def no_progress_for(self) -> float | None:
        """Seconds since the run last showed progress (a step, else a line)."""
        ts = [t for t in (self.metrics.last_step_time, self.log.last_line_time) if t is not None]
        if ts:
            return max(0.0, self.now - max(ts))
        return self.log_silent_s

    # -- GPUs --------------------------------------------------------------
    @cached_property
    def gpu_views(self) -> list[GpuView]:
        """Fresh readings of the GPUs this run uses (all GPUs when the
        process-to-GPU mapping is unknown)."""
        run_uuids = self._run_gpu_uuids()
        views = []
        for idx in sorted(self.gpus.latest or {}):
            s = self.gpus.latest[idx]
            if not isinstance(s, GpuSample) or s.time is None:
                continue
            if self.now - s.time > GPU_FRESH_S:
                continue
            if run_uuids and s.uuid and s.uuid not in run_uuids:
                continue
            views.append(self._view(idx, s))
        return views

    def _run_gpu_uuids(self) -> set[str]:
        pids = {p.pid for p in self.procs}
        return {
            gp.gpu_uuid
            for gp in (self.gpus.processes or [])
            if gp.ct_pid is not None and gp.ct_pid in pids and gp.gpu_uuid
        }

    def _view(self, idx: int, s: GpuSample) -> GpuView:
        util_ring = (self.gpus.util_history or {}).get(idx)
        pts: list[tuple[float, float | None]] = (
            [(t, v) for t, v in util_ring.points()] if util_ring is not None else []
        )
        if not pts:
            pts = [(s.time, s.util_pct)]
        own = run_own_util(self.gpus.processes or [], self.run_pids, s.uuid)
        if own:  # the run's own readings: what another run does on this GPU is not ours
            pts = list(own)
        recent = [v for t, v in pts if t >= self.now - BUSY_WINDOW_S and v is not None]
        # the trailing streak of idle readings
        streak_start = None
        n = 0
        for t, v in reversed(pts):
            if v is None or v >= self.th.idle_util_pct:
                break
            streak_start = t
            n += 1
        idle_for = None if streak_start is None else max(0.0, self.now - streak_start)
        whole = n == len(pts)
        mem_ring = (self.gpus.mem_history or {}).get(idx)
        rise = 0.0
        if mem_ring is not None:
            window = [
                v for t, v in mem_ring.since(self.now - self.th.loading_window_s) if v is not None
            ]
            if len(window) >= 2:
                rise = window[-1] - min(window)
        span = max(0.0, self.now - pts[0][0]) if pts else 0.0
        own_now = own[-1][1] if own else None
        # a per-process reading is an average over its whole period (pmon,
        # NVML's samples since the last one): one idle reading is enough
        return GpuView(s, recent, idle_for, n, whole, rise, self.th, span, own_now, 1 if own else 2)

    @cached_property
    def run_pids(self) -> set[int]:
        return {p.pid for p in self.procs}

    @cached_property
    def holders(self) -> list[Holder]:
        """Who holds each GPU process of the watched GPUs' listing."""
        return [gpu_holder(self, gp) for gp in (self.gpus.processes or [])]

    @property
    def steps_since_start(self) -> bool:
        """A step was seen since the run's process started (a relaunch's old
        steps do not count)."""
        last = self.metrics.last_step_time
        if last is None or self.metrics.last_step is None:
            return False
        p = self.proc
        return p is None or p.start_time is None or last >= p.start_time

    @property
    def held(self) -> list[GpuView]:
        return [g for g in self.gpu_views if g.held]

    @property
    def busy(self) -> list[GpuView]:
        return [g for g in self.gpu_views if g.busy]

    @property
    def held_mib(self) -> float:
        return sum(g.sample.mem_used_mib or 0.0 for g in self.held)

    # -- the judgements the rules share --------------------------------------
    @cached_property
    def loading(self) -> bool:
        """Memory rising while utilization stays low, in a young process; or a
        young process busy on CPU that has not made a step yet."""
        if not self.proc_alive or not self.gpu_views:
            return False
        if any(
            g.util_median is not None and g.util_median >= LOADING_UTIL_PCT for g in self.gpu_views
        ):
            return False
        age = self.proc_age()
        young = age is None or age < LOADING_MAX_AGE_S
        if not young or self.steps_since_start:
            return False  # loading ends at the first step: a hang after it is a hang
        rising = sum(g.mem_rise_mib for g in self.gpu_views) >= self.th.loading_rise_mib
        p = self.proc
        cpu_prep = (
            age is not None
            and self.metrics.last_step is None
            and p is not None
            and p.cpu_pct is not None
            and p.cpu_pct >= self.th.cpu_busy_pct
        )
        return rising or cpu_prep

    @cached_property
    def idle_held(self) -> list[GpuView]:
        """GPUs of the run that hold memory and have gone idle."""
        return [g for g in self.held if g.gone_idle]

    @cached_property
    def stalled(self) -> bool:
        """The escalation's first step: a step is overdue (k × median, at
        least the stale threshold) and a GPU holding memory has gone idle."""
        if not self.proc_alive or self.loading or not self.idle_held:
            return False
        if self.log.behind:
            return False  # the file holds lines gputui has not delivered: steps may be in them
        return self.step_overdue

    @cached_property
    def hung(self) -> bool:
        """The second step: the idle GPUs have stayed idle for the hang window
        (or, in a doctor's short watch, for all of it, with no step for the
        hang window), and no step for the hang window or the overdue time,
        whichever is shorter."""
        if not self.proc_alive or self.loading or not self.idle_held:
            return False
        no_step = self.no_step_for()
        hang = self.th.hang_after_s
        quiet = min(hang, self.overdue_after)
        if no_step is None or no_step < quiet:
            return False
        for g in self.idle_held:
            idle = g.idle_for or 0.0
            short_but_all = (
                g.idle_whole_history
                and idle >= IDLE_SHORT_S
                and g.idle_samples >= IDLE_SHORT_SAMPLES
                and no_step >= hang
            )
            if not (idle >= hang or short_but_all):
                return False
        return True

    @cached_property
    def log_written_by_run(self) -> bool:
        """Some process of the run has the watched log open for writing (a
        `logging.FileHandler`, `open(log, "a")`, tee...)."""
        if not self.log.path:
            return False
        watched = os.path.normpath(self.log.path)
        return any(
            os.path.normpath(f) == watched
            for p in self.procs
            for f in (getattr(p, "write_files", None) or [])
            if f
        )

    @cached_property
    def drift_files(self) -> list[str]:
        """Files the process's stdout really reaches, when the watched log is
        not one of them and no process of the run writes it by itself."""
        p = self.proc
        if p is None or p.stdout is None or not self.log.path:
            return []
        files = [f for f in p.stdout.files if f]
        if not files:
            return []
        watched = os.path.normpath(self.log.path)
        if any(os.path.normpath(f) == watched for f in files):
            return []
        if self.log_written_by_run:
            return []
        return files


# ------------------------------------------------------- GPU holders


def run_own_util(
    gprocs: Iterable[GpuProcess], run_pids: set[int], uuid: str
) -> list[tuple[float, float | None]]:
    """The watched run's own SM utilization on GPU `uuid`, summed over its
    processes there, one point per listing (oldest first); [] when the run
    has no process with per-process readings on it."""
    mine = [
        gp
        for gp in gprocs
        if gp.gpu_uuid == uuid and gp.ct_pid is not None and gp.ct_pid in run_pids
    ]
    if not mine or not all(gp.util for gp in mine):
        return []
    sums: dict[float, float] = {}
    for gp in mine:
        for t, v in gp.util:
            sums[t] = sums.get(t, 0.0) + v
    return sorted(sums.items())


def own_idle_for(gp: GpuProcess, now: float, idle_pct: float) -> float | None:
    """Seconds this process's own readings have been below `idle_pct`
    (from the first idle reading); None when it is not idle or not read."""
    start = None
    for t, v in reversed(gp.util):
        if v >= idle_pct:
            break
        start = t
    return None if start is None else max(0.0, now - start)


@dataclass(frozen=True)
class Holder:
    """Who owns a process that holds GPU memory.

    kind: "run" (the watched run) · "session" (another tmux session) · "ct"
    (another container) · "host" (a host process, outside the CT) ·
    "process" (a live process with a live parent, not in tmux) · "orphan"
    (no live owner: a zombie, or its parent is gone) · "unknown"."""

    gp: GpuProcess
    kind: str
    owner: str  # in words: "session eval", "CT 201", "a host process", ...
    leftover: bool = False  # no live owner, idle on its GPU a while (or a zombie)

    @property
    def pid(self) -> int:
        """Its PID as the user types it where the run lives."""
        return self.gp.ct_pid if self.gp.ct_pid is not None else self.gp.host_pid

    @property
    def live_other(self) -> bool:
        """A live process of another run: never advice to kill it."""
        return self.kind in ("session", "ct", "host", "process")

    def words(self) -> str:
        """'held by session eval (PID 491)'."""
        return f"held by {self.owner} (PID {self.pid})"


def _pane_sessions(sessions: Iterable[Session]) -> dict[int, Session]:
    return {pane.pid: s for s in sessions for pane in s.panes if pane.pid and not pane.dead}


def gpu_holder(ctx: Context, gp: GpuProcess) -> Holder:
    """Name the owner of one GPU process from its parents (`ancestors`),
    its container and the tmux sessions' pane PIDs."""
    if gp.ct_pid is not None and gp.ct_pid in ctx.run_pids:
        return Holder(gp, "run", "the watched run")
    if gp.in_container is False:
        if gp.ct_id is not None:
            return Holder(gp, "ct", f"CT {gp.ct_id}")
        if ctx.snap.container is not None:
            return Holder(gp, "host", "a host process")
        return Holder(gp, "unknown", "a process outside the watched run")
    panes = _pane_sessions(ctx.sessions)
    chain = [gp.ct_pid, *(gp.ancestors or [])] if gp.ct_pid is not None else []
    for pid in chain:
        if pid in ctx.run_pids or (
            pid in panes and panes[pid].name == ctx.snap.session_name and pid is not None
        ):
            return Holder(gp, "run", "the watched run")
        s = panes.get(pid) if pid is not None else None
        if s is not None:
            who = f" (tmux of {s.owner})" if s.owner and s.owner != "root" else ""
            return Holder(gp, "session", f"session {s.name}{who}")
    if gp.in_container is None:
        return Holder(gp, "unknown", "an unknown process")
    idle = own_idle_for(gp, ctx.now, ctx.th.idle_util_pct)
    if idle is None and not gp.util:  # no own readings: the whole GPU idle says it for all
        view = next((g for g in ctx.gpu_views if g.sample.uuid == gp.gpu_uuid), None)
        idle = view.idle_for if view is not None and view.own_util is None else None
    idle_long = idle is not None and idle >= LEFTOVER_IDLE_S
    if gp.state == "Z":
        return Holder(gp, "orphan", "a zombie", leftover=True)
    if gp.ancestors == []:
        return Holder(gp, "orphan", "no live owner (its parent is gone)", leftover=idle_long)
    if gp.ancestors:
        return Holder(gp, "process", f"a process under PID {gp.ancestors[0]}")
    return Holder(gp, "unknown", "an unknown process")


def holder_line(h: Holder, now: float, idle_pct: float) -> str:
    """'held by session eval (PID 491): 5.1 GiB on GPU-…, 98 % SM, state R, CPU 40 s'."""
    gp = h.gp
    bits = [f"{gib(gp.used_mib)} on {gp.gpu_uuid or 'a GPU'}"]
    if gp.sm_util is not None:
        idle = own_idle_for(gp, now, idle_pct)
        bits.append(f"{gp.sm_util:.0f} % SM" + (f", idle {dur(idle)}" if idle else ""))
    if gp.state:
        bits.append(f"state {gp.state}")
    if gp.cpu_s is not None:
        bits.append(f"CPU {dur(gp.cpu_s)}")
    name = f" {gp.name}" if gp.name else ""
    return f"{h.words()}{name}: " + ", ".join(bits)


def snapshot_holders(snap: Snapshot, now: float) -> dict[tuple[str, int], str]:
    """(GPU uuid, host PID) -> who holds it in words ("the watched run",
    "held by session eval (PID 491)"), for the GPU rows and process panel."""
    ctx = Context(snap, now, DEFAULT_THRESHOLDS.stale_floor_s)
    return {
        (h.gp.gpu_uuid, h.gp.host_pid): (h.owner if h.kind == "run" else h.words())
        for h in ctx.holders
    }


def oom_killed(ctx: Context) -> int | None:
    """OOM kills counted in the run's cgroups while gputui watched and the
    run is gone (its session dead, or no Python process left in it): how
    many; None when none (or unknown)."""
    oom = ctx.snap.oom
    if not oom or oom[1] <= oom[0]:
        return None
    gone = ctx.session_dead or (
        ctx.session is not None and bool(ctx.procs) and not any(p.is_python for p in ctx.procs)
    )
    return oom[1] - oom[0] if gone else None


def rule_oom_killed(ctx: Context) -> Finding | None:
    """The run was killed by the kernel's OOM killer (the CT's cgroup
    memory.events `oom_kill` rose): said so, not "ended" or "died"."""
    if not ctx.ct_usable:
        return None
    n = oom_killed(ctx)
    if n is None:
        return None
    name = ctx.snap.session_name or "the run"
    tail = list(ctx.snap.pane_tail or []) or list(ctx.snap.log_tail or [])
    ev = [
        f"memory.events of {ctx.ct_words}'s cgroup: oom_kill rose by {n} while the run was watched",
    ]
    if tail:
        ev += ["last lines:", *_quote_tail(tail)]
    return Finding(
        kind="oom_killed",
        severity=Severity.ERROR,
        title=f"the run in session {name} was killed by the OOM killer (out of host memory)",
        evidence=ev,
        action="relaunch",
        action_label="relaunch",
        fix=f"give {ctx.ct_words} more memory, or lower the batch size / DataLoader workers",
    )


# ------------------------------------------------------------------ rules


def stdout_evidence(p: Proc) -> str:
    """The evidence line naming a process and where its stdout goes."""
    return f"PID {p.pid} ({_short(p.command, 80)}): stdout is {stdout_words(p)}"


def rule_connection(ctx: Context) -> Finding | None:
    snap = ctx.snap
    if snap.connection == ConnectionState.FAILED:
        return Finding(
            kind="connection",
            severity=Severity.ERROR,
            title=f"cannot reach {snap.target}: {snap.connection_error or 'connection failed'}",
            evidence=[f"connection state: failed ({snap.connection_error or 'no detail'})"],
            fix=f"check that the host is up and that `ssh {(snap.target.split() or ['HOST'])[0]}` works",
        )
    if snap.connection == ConnectionState.RECONNECTING:
        return Finding(
            kind="connection",
            severity=Severity.WARNING,
            title=f"connection to {snap.target} lost, reconnecting — the figures shown are old",
            evidence=[f"last error: {snap.connection_error}"] if snap.connection_error else [],
            fix="wait; gputui reconnects by itself and resumes the log where it stopped",
        )
    return None


def _container_words(ctx: Context) -> str:
    """'container 200' for a Proxmox CT (as before); 'docker container trainer', 'pod ml/p'."""
    c = ctx.snap.container
    if c is None or c.id is not None or not c.kind:
        return f"container {ctx.snap.ct}"
    return c.words


def rule_ct_missing(ctx: Context) -> Finding | None:
    if ctx.snap.ct_status != CtStatus.MISSING:
        return None
    said, fix = ctx.snap.container.missing_evidence() if ctx.snap.container else ("", "")
    return Finding(
        kind="ct_missing",
        severity=Severity.ERROR,
        title=f"{_container_words(ctx)} does not exist on this host",
        evidence=[said] if said else [],
        fix=fix,
    )


def rule_ct_stopped(ctx: Context) -> Finding | None:
    if ctx.snap.ct_status != CtStatus.STOPPED:
        return None
    said, fix = ctx.snap.container.stopped_evidence() if ctx.snap.container else ("", "")
    return Finding(
        kind="ct_stopped",
        severity=Severity.ERROR,
        title=f"{_container_words(ctx)} is stopped",
        evidence=[said] if said else [],
        fix=fix,
    )


def rule_gpu_lost(ctx: Context) -> Finding | None:
    lost = [e for e in (ctx.gpus.events or []) if e.lost]
    if not lost or not ctx.gpus.lost:  # GpuState.lost: still lost now, not recovered
        return None
    return Finding(
        kind="gpu_lost",
        severity=Severity.ERROR,
        title=f"a GPU fell off the bus: {_short(lost[-1].text, 100)}",
        evidence=[_short(e.text, 160) for e in lost[-3:]],
        fix="check `dmesg | grep -i xid` on the host; the GPU needs a reset (`nvidia-smi -r`) or a reboot",
    )


_WRAPPER_EXIT_RE = re.compile(r"^\[gputui\] exit (\d+)\b")


def wrapper_exit_status(lines: list[str]) -> int | None:
    """The exit status gputui's launch wrapper recorded (`[gputui] exit N`),
    the last one in `lines`, else None."""
    for line in reversed(lines):
        m = _WRAPPER_EXIT_RE.match(line.strip())
        if m:
            return int(m.group(1))
    return None


def rule_session_dead(ctx: Context) -> Finding | None:
    snap = ctx.snap
    if not ctx.ct_usable or not ctx.session_dead:
        return None
    if oom_killed(ctx) is not None:
        return None  # oom_killed names it
    name = snap.session_name
    pane_tail = list(snap.pane_tail or [])
    log_tail = list(snap.log_tail or [])
    error = last_error_line(pane_tail) or last_error_line(log_tail)
    tail_src, tail = ("pane", pane_tail) if pane_tail else ("log " + (ctx.log.path or ""), log_tail)
    quoted = [f"last lines of the {tail_src}:", *_quote_tail(tail)] if tail else []

    session = ctx.session
    pane = session.main_pane if (session is not None and not snap.session_gone) else None
    if pane is None:  # the whole session is gone (no remain-on-exit)
        title = f"session {name} is gone"
        if error:
            title += f": {error}"
        ev = [f"tmux session {name} no longer exists in {ctx.ct_words}"]
        if not error:
            ev.append("no exit status: set remain-on-exit on the session to keep it")
        return Finding(
            kind="session_dead",
            severity=Severity.ERROR,
            title=title,
            evidence=ev + quoted,
            action="launch",
            action_label="launch",
        )

    status, sig = pane.dead_status, pane.dead_signal
    recorded = None
    if status is None and sig is None:
        # tmux 3.3a sometimes loses a dead pane's status; gputui's own
        # launch wrapper writes it into the log as "[gputui] exit N"
        recorded = wrapper_exit_status(pane_tail) or wrapper_exit_status(log_tail)
        status = recorded
    if sig is None and status is not None and 128 < status <= 128 + 64:
        sig = status - 128  # the shell reports a child killed by signal N as 128+N
    piped = "|" in (pane.start_command or "")
    ev = [f"pane {pane.window_index}.{pane.pane_index} of session {name}: dead"]
    if pane.start_command:
        ev.append(f"it ran: {_short(pane.start_command, 120)}")
    if sig:
        hint = _SIGNAL_HINTS.get(sig, "")
        how = f"killed (signal {sig}, {signal_name(sig)})" + (f" — {hint}" if hint else "")
        ev.insert(
            1,
            f"exit: signal {sig} ({signal_name(sig)})"
            + (f", status {status}" if status is not None else ""),
        )
        title = f"session {name} died: {how}"
        if error:
            title += f"; last error: {error}"
    elif status == 0:
        if not error:
            return Finding(
                kind="run_finished",
                severity=Severity.INFO,
                title=f"the run in session {name} finished (exit status 0)",
                evidence=[*ev, "exit status 0", *quoted],
                action="relaunch",
                action_label="relaunch",
            )
        title = f"session {name} exited 0, but its output ends in an error: {error}"
        ev.insert(1, "exit status 0")
        if piped:
            ev.append(
                "the 0 is the exit status of the last command of the pipeline (tee), "
                "not Python's: use `set -o pipefail`"
            )
    elif status is not None:
        title = f"session {name} died with exit status {status}"
        if error:
            title += f": {error}"
        ev.insert(
            1,
            f"exit status {status}"
            + (" (from the log's [gputui] exit line)" if recorded is not None else ""),
        )
    elif not error:
        # tmux 3.3a (Debian 12, Proxmox 8 CTs) loses a dead pane's status at
        # times. Nothing says it failed: "died" would be a guess, and a run
        # that finished is the common case — but a kill (OOM) looks the same.
        return Finding(
            kind="run_ended",
            severity=Severity.WARNING,
            title=(
                f"the run in session {name} ended; tmux kept no exit status and its output "
                "ends without an error — finished, or killed (OOM?)"
            ),
            evidence=[
                *ev,
                "exit status unknown: tmux loses a dead pane's status at times (3.3a)",
                "runs started with r / launch record it in the log ([gputui] exit N)",
                *quoted,
            ],
            action="relaunch",
            action_label="relaunch",
        )
    else:
        title = f"session {name} died (exit status unknown): {error}"
    return Finding(
        kind="session_dead",
        severity=Severity.ERROR,
        title=title,
        evidence=ev + quoted,
        action="relaunch",
        action_label="relaunch",
    )


def rule_run_exited(ctx: Context) -> Finding | None:
    """The pane is alive (a shell), but the Python process is gone and the
    output ends in an error: the run crashed inside a live session."""
    snap = ctx.snap
    s = ctx.session
    if not ctx.ct_usable or s is None or ctx.session_dead or not ctx.procs:
        return None
    if any(p.is_python for p in ctx.procs) or oom_killed(ctx) is not None:
        return None
    pane_tail = list(snap.pane_tail or [])
    log_tail = list(snap.log_tail or [])
    error = last_error_line(pane_tail) or last_error_line(log_tail)
    if not error:
        return None
    src, tail = ("pane", pane_tail) if last_error_line(pane_tail) else ("log", log_tail)
    shell = ", ".join(f"PID {p.pid} {_short(p.command, 40)}" for p in ctx.procs[:3])
    return Finding(
        kind="run_exited",
        severity=Severity.ERROR,
        title=f"no Python process left in session {s.name}; the {src} ends in: {error}",
        evidence=[f"the pane still runs: {shell}", f"last lines of the {src}:", *_quote_tail(tail)],
        action="relaunch",
        action_label="relaunch",
    )


def rule_session_missing(ctx: Context) -> Finding | None:
    snap = ctx.snap
    if not snap.session_name or snap.session_gone or not ctx.ct_usable:
        return None
    if ctx.session is not None:
        return None
    # only when the session list was really read: tmux present, or sessions seen
    if ctx.tools.tmux is None and not ctx.sessions:
        return None
    others = ", ".join(s.name for s in ctx.sessions) or "none"
    ev = [f"tmux sessions in {ctx.ct_words}: {others}"]
    if snap.run_found_by == "log" and ctx.procs:
        # The run is alive outside tmux (nohup, a closed ssh shell): found by
        # the processes writing the log. Launching would start a second one.
        p = ctx.proc or ctx.procs[0]
        return Finding(
            kind="session_missing",
            severity=Severity.INFO,
            title=(
                f"no tmux session named {snap.session_name}; the run writing "
                f"{ctx.log.path} runs outside tmux (PID {p.pid})"
            ),
            evidence=[*ev, f"PID {p.pid} ({_short(p.command, 80)}) writes {ctx.log.path}"],
            fix="drop --session to watch it by its log",
        )
    error = last_error_line(list(snap.log_tail or []))
    if error:
        ev += [f"last lines of the log {ctx.log.path}:", *_quote_tail(list(snap.log_tail))]
        return Finding(
            kind="session_dead",
            severity=Severity.ERROR,
            title=f"session {snap.session_name} is not running; the log ends in: {error}",
            evidence=ev,
            action="launch",
            action_label="launch",
        )
    return Finding(
        kind="session_missing",
        severity=Severity.WARNING,
        title=f"no tmux session named {snap.session_name} in {ctx.ct_words}",
        evidence=ev,
        action="launch",
        action_label="launch",
        fix="or pick the right session with --session NAME",
    )


def rule_loading(ctx: Context) -> Finding | None:
    if not ctx.ct_usable or not ctx.loading:
        return None
    rise = sum(g.mem_rise_mib for g in ctx.gpu_views)
    used = sum(g.sample.mem_used_mib or 0.0 for g in ctx.gpu_views)
    p = ctx.proc
    age = ctx.proc_age()
    ev = [g.line() for g in ctx.gpu_views]
    if rise:
        ev.append(f"GPU memory rose {gib(rise)} in the last {dur(ctx.th.loading_window_s)}")
    if p is not None:
        started = f", started {dur(age)} ago" if age is not None else ""
        cpu = f", CPU {p.cpu_pct:.0f} %" if p.cpu_pct is not None else ""
        ev.append(
            f"PID {p.pid}{started}{cpu}; no step yet"
            if ctx.metrics.last_step is None
            else f"PID {p.pid}{started}{cpu}"
        )
    return Finding(
        kind="loading",
        severity=Severity.INFO,
        title=f"loading ({gib(used)} so far) — wait",
        evidence=ev,
    )


def _gpu_list(views: list[GpuView]) -> str:
    idx = [str(g.sample.index) for g in views]
    return ("GPU " if len(idx) == 1 else "GPUs ") + ", ".join(idx)


def _no_step_words(ctx: Context) -> str:
    """'no step for 12 s, median 0.5 s' / 'no new line for 12 s, usually every 2 s'."""
    gap = ctx.no_step_for() or 0.0
    c = ctx.cadence
    steps = ctx.metrics.last_step_time is not None
    what = f"no step for {dur(gap)}" if steps else f"no new line for {dur(gap)}"
    if c is None:
        return f"{what} (stale after {dur(ctx.threshold)})"
    return (
        f"{what}, median {secs(c[0])}" if c[1] == "step" else f"{what}, usually every {secs(c[0])}"
    )


def rule_held_but_idle(ctx: Context) -> Finding | None:
    """Escalation for a hang: WARNING "stalled" as soon as a step is overdue
    and a GPU holding memory has gone idle; ERROR "probably hung" once the
    idle GPUs stay idle for the hang window."""
    if not ctx.ct_usable or not (ctx.stalled or ctx.hung):
        return None
    p = ctx.proc
    assert p is not None
    th = ctx.th
    idle_views = ctx.idle_held
    busy_views = [g for g in ctx.held if not g.gone_idle]
    idle = min(g.idle_for or 0.0 for g in idle_views)
    ev = [
        f"{g.line()}, below {th.idle_util_pct:.0f} % for {dur(g.idle_for or 0)}" for g in idle_views
    ]
    ev += [f"{g.line()}, still busy" for g in busy_views]
    m = ctx.metrics
    if m.last_step_time is not None:
        ev.append(f"last step {m.last_step} arrived {dur(ctx.now - m.last_step_time)} ago")
    else:
        ev.append("no step seen in the log")
    ev.append(
        f"a step is overdue after {dur(ctx.overdue_after)} ({th.step_overdue_factor:g} × the "
        f"median step time, at least the stale threshold {dur(ctx.threshold)}); "
        f"probably hung after {dur(th.hang_after_s)} idle"
    )
    state = f"state {p.state}" if p.state else "state unknown"
    cpu = f", CPU {p.cpu_pct:.0f} %" if p.cpu_pct is not None else ""
    ev.append(f"PID {p.pid} ({_short(p.command, 60)}): {state}{cpu}")
    if p.block_buffered:
        ev.append(
            "its stdout is block-buffered too, but buffering does not make GPUs idle: "
            "this run is stuck, and relaunching unbuffered would not fix it"
        )
    cpu_busy = (p.cpu_pct is not None and p.cpu_pct >= th.cpu_busy_pct) or p.state == "D"
    age = ctx.proc_age()
    # no step seen yet in a young process: maybe still starting — unless stdout
    # is block-buffered, where the steps it made are stuck in the buffer
    starting = (
        m.last_step is None and age is not None and age < LOADING_MAX_AGE_S and not p.block_buffered
    )
    one_rank = (
        f"{_gpu_list(idle_views)} idle {dur(idle)} while {_gpu_list(busy_views)} stay busy "
        "— one rank stuck, the others waiting for it in a collective (NCCL)?"
        if busy_views
        else f"GPUs idle {dur(idle)}"
    )
    if not ctx.hung or cpu_busy or starting:
        why = ""
        if cpu_busy:
            why = f" — PID {p.pid} is busy on CPU or disk: saving a checkpoint or preprocessing?"
        elif starting:
            why = f" — no step yet, {dur(age or 0)} after start: still starting up?"
        elif p.block_buffered and m.last_step is None:
            why = " — stdout is block-buffered, so the steps it made may not be in the log yet"
        return Finding(
            kind="held_but_idle",
            severity=Severity.WARNING,
            title=f"stalled: {_no_step_words(ctx)}; {one_rank}{why}",
            evidence=ev,
            action="dump",
            action_label="py-spy dump",
        )
    idle_words = dur(idle) if idle >= th.hang_after_s else f"for all {dur(idle)} sampled"
    step_words = (
        f"no new step for {dur(ctx.now - m.last_step_time)}"
        if m.last_step_time is not None
        else "no step seen"
    )
    if busy_views:
        title = (
            f"probably hung: {_gpu_list(idle_views)} idle {idle_words} while "
            f"{_gpu_list(busy_views)} spin, {step_words} — one rank is stuck and the "
            "others wait for it in a collective (NCCL)"
        )
    else:
        title = (
            f"probably hung: GPUs hold {gib(ctx.held_mib)} but have been idle "
            f"{idle_words}, {step_words}"
        )
    return Finding(
        kind="held_but_idle",
        severity=Severity.ERROR,
        title=title,
        evidence=ev,
        action="dump",
        action_label="py-spy dump",
    )


def rule_busy_but_silent(ctx: Context) -> Finding | None:
    if not ctx.ct_usable or not ctx.proc_alive or ctx.loading or ctx.hung or ctx.stalled:
        return None
    if ctx.disk_silenced:
        return None  # the log is silent because its disk is full: disk_full says so
    if ctx.block_buffered is not True or not ctx.log_silent or ctx.drift_files:
        return None
    p = ctx.proc
    assert p is not None
    silent = ctx.log_silent_s or 0.0
    active = ctx.held or ctx.busy
    if active:
        what = "GPUs busy"
        ev = [g.line() for g in ctx.gpu_views]
    elif not ctx.gpu_views and (p.state == "R" or (p.cpu_pct or 0) >= ctx.th.cpu_busy_pct):
        what = "process busy"
        ev = [f"no GPU readings; PID {p.pid} is running (CPU {p.cpu_pct or 0:.0f} %)"]
    else:
        return None
    ev.append(
        f"log {ctx.log.path or '(none)'}: no new line for {dur(silent)} "
        f"(stale after {dur(ctx.threshold)})"
    )
    ev.append(stdout_evidence(p))
    ev.append("; ".join(buffering_words(p)) + " → Python writes stdout in 8 KiB blocks")
    if p.fd1_pos is not None and p.stdout is not None and p.stdout.kind == "file":
        ev.append(f"fd 1 has written {p.fd1_pos} bytes so far")
    return Finding(
        kind="busy_but_silent",
        severity=Severity.WARNING,
        title=(
            f"{what}, log silent {dur(silent)}: stdout of PID {p.pid} is {stdout_words(p)} "
            "with no -u and PYTHONUNBUFFERED unset, so output is block-buffered"
        ),
        evidence=ev,
        action="relaunch",
        action_label="relaunch unbuffered",
        alt_action="flush",
        alt_action_label="flush live",
        fix="add `-u` to the python command or `export PYTHONUNBUFFERED=1` in the start script",
    )


BURST_GAP_S = 0.05  # lines closer than this arrived in one write
BURST_PAUSE_S = 2.0  # ... and a pause at least this long separates bursts
BURST_SHARE = 0.8  # this share of the recent gaps is "same write"


def log_bursts(gaps: list[float]) -> tuple[int, float] | None:
    """(lines per burst, longest pause) when the log's recent lines came in
    bursts — most gaps ~0 with long pauses between — else None. That is what
    an 8 KiB stdout buffer looks like from the outside."""
    gs = gaps[-200:]
    if len(gs) < 20:
        return None
    same_write = sum(1 for g in gs if g < BURST_GAP_S)
    pauses = [g for g in gs if g >= BURST_PAUSE_S]
    if not pauses or same_write / len(gs) < BURST_SHARE:
        return None
    return max(1, round(len(gs) / len(pauses))), max(pauses)


def rule_buffered_output(ctx: Context) -> Finding | None:
    """Block-buffered stdout into the watched log, not (yet) silent past the
    threshold: the lines reach the log late, 8 KiB at a time. Always a
    WARNING with its fix — a run whose log lags is never "nothing wrong" —
    whether or not the bursts have been seen yet. A hang or a silent log
    (held_but_idle, busy_but_silent) says it instead."""
    if not ctx.ct_usable or not ctx.proc_alive or ctx.hung or ctx.stalled or ctx.disk_silenced:
        return None
    if ctx.block_buffered is not True or ctx.drift_files:
        return None
    if rule_busy_but_silent(ctx) is not None:
        return None
    p = ctx.proc
    assert p is not None
    ev = [
        stdout_evidence(p),
        "; ".join(buffering_words(p)) + " → Python writes stdout in 8 KiB blocks",
    ]
    bursts = log_bursts(list(getattr(ctx.log, "line_gaps", None) or []))
    if bursts is None:
        silent = ctx.log_silent_s
        if silent is not None:
            ev.append(
                f"log {ctx.log.path or '(none)'}: last line {dur(silent)} ago "
                f"(stale after {dur(ctx.threshold)})"
            )
        title = (
            f"stdout of PID {p.pid} is block-buffered: its lines reach the log late, "
            "8 KiB at a time"
        )
    else:
        per_burst, pause = bursts
        ev.insert(
            0,
            f"log {ctx.log.path or '(none)'}: ~{per_burst} lines at once, "
            f"then up to {dur(pause)} of silence",
        )
        title = (
            f"log lines arrive in bursts up to {dur(pause)} late: stdout of PID {p.pid} is "
            f"{stdout_words(p)} with no -u and PYTHONUNBUFFERED unset"
        )
    return Finding(
        kind="buffered_output",
        severity=Severity.WARNING,
        title=title,
        evidence=ev,
        action="relaunch",
        action_label="relaunch unbuffered",
        alt_action="flush",
        alt_action_label="flush live",
        fix="add `-u` to the python command or `export PYTHONUNBUFFERED=1` in the start script",
    )


def rule_log_missing(ctx: Context) -> Finding | None:
    if not ctx.ct_usable or not ctx.log.path or ctx.log.exists is not False:
        return None
    files = _proc_files(ctx)
    ev = [f"{ctx.log.path} does not exist in {ctx.ct_words}"]
    if ctx.log.error:
        ev.append(ctx.log.error)
    if files:
        p = ctx.proc
        assert p is not None
        ev.append(stdout_evidence(p))
        return Finding(
            kind="log_missing",
            severity=Severity.WARNING,
            title=f"log {ctx.log.path} does not exist; PID {p.pid} writes {files[0]}",
            evidence=ev,
            action="watch_log",
            action_label=f"watch {files[0]}",
        )
    logs = _written_logs(ctx)
    if logs:
        p = ctx.proc
        who = f"PID {p.pid}" if p is not None else "the run"
        ev.append(f"{who} has open for writing: {', '.join(logs[:5])}")
        return Finding(
            kind="log_missing",
            severity=Severity.WARNING,
            title=f"log {ctx.log.path} does not exist; {who} writes {logs[0]}",
            evidence=ev,
            action="watch_log",
            action_label=f"watch {logs[0]}",
        )
    return Finding(
        kind="log_missing",
        severity=Severity.WARNING,
        title=f"log {ctx.log.path} does not exist",
        evidence=ev,
        fix="check the path (--log), or wait for the run to create it",
    )


def rule_log_deleted(ctx: Context) -> Finding | None:
    """The log was deleted (`rm`, a start script's clean-up) while the run
    still writes it: gputui reads on through the fd the writer holds open,
    and the lines live only as long as that process."""
    via, path = ctx.log.read_via, ctx.log.path
    if not via or not path or not ctx.ct_usable:
        return None
    holder = via.split("/")[2] if via.count("/") >= 3 else "?"
    ev = [f"{path} no longer exists in {ctx.ct_words}; gputui reads it through {via}"]
    p = ctx.proc
    if p is not None:
        ev.append(stdout_evidence(p))
    saved = shlex.quote(path + ".saved")
    return Finding(
        kind="log_deleted",
        severity=Severity.WARNING,
        title=(
            f"log {path} was deleted while the run still writes it: shown on, "
            f"but its lines are gone when PID {holder} ends"
        ),
        evidence=ev,
        fix=f"keep a copy now: `{ctx.in_ct(f'cp {via} {saved}')}` (it holds the lines so far)",
    )


def unreadable_fix(path: str) -> str:
    """What to do about a log this user may not read (named or found)."""
    return (
        f"check its owner and mode (ls -l {shlex.quote(path)}); in an unprivileged CT "
        "root cannot read files owned by the host's root"
    )


def rule_log_unreadable(ctx: Context) -> Finding | None:
    """A log found from the run's stdout that gputui may not read: the log
    panel said "cannot read" and nothing else did. (A named one never gets
    here: it is one line, exit 2, at start.)"""
    path = ctx.log.path
    if ctx.log.not_a_file != UNREADABLE or not path:
        return None
    ev = [ctx.log.error or f"cannot read {path}: permission denied"]
    p = ctx.proc
    if p is not None and p.stdout is not None and path in p.stdout.files:
        ev.append(stdout_evidence(p))
    return Finding(
        kind="log_unreadable",
        severity=Severity.WARNING,
        title=f"cannot read log {path} (permission denied): its lines are not shown",
        evidence=ev,
        fix=f"{unreadable_fix(path)}; or run gputui as a user that can read it",
    )


def rule_log_drift(ctx: Context) -> Finding | None:
    if not ctx.ct_usable or ctx.log.exists is not True or not ctx.proc_alive:
        return None
    files = ctx.drift_files
    if not files:
        return None
    p = ctx.proc
    assert p is not None
    ev = [stdout_evidence(p)]
    if ctx.log.mtime is not None:
        ev.append(f"{ctx.log.path} was last written {dur(ctx.now - ctx.log.mtime)} ago")
    return Finding(
        kind="log_drift",
        severity=Severity.WARNING,
        title=f"watching {ctx.log.path}, but PID {p.pid} writes {files[0]}",
        evidence=ev,
        action="watch_log",
        action_label=f"watch {files[0]}",
    )


def rule_progress_stalled(ctx: Context) -> Finding | None:
    """No step for too long while no GPU has gone idle (held_but_idle says
    that): the log still moves but the step does not; or an unbuffered log is
    silent past the threshold with a step overdue while the GPUs stay busy."""
    if not ctx.ct_usable or not ctx.proc_alive or ctx.loading or ctx.hung or ctx.stalled:
        return None
    if ctx.disk_silenced:
        return None  # no line can reach a full disk: disk_full says so
    if ctx.log.behind:
        return None  # the file holds lines gputui has not delivered: the steps may be in them
    if ctx.block_buffered is not False and ctx.log_silent:
        return None  # a buffered (or maybe buffered) silent log: busy_but_silent's call
    if ctx.block_buffered:
        return None  # steps arrive in bursts: buffered_output says it
    m = ctx.metrics
    med = m.median_step_interval
    th = ctx.th
    if not ctx.log_silent:
        if m.last_step_time is None or med is None:
            return None
        limit = max(th.stalled_floor_s, th.step_overdue_factor * med)
        stalled = ctx.now - m.last_step_time
        if stalled < limit:
            return None
        if ctx.log_silent_s is None or ctx.log_silent_s + 1.0 >= stalled:
            return None  # no line since the last step: the log does not "still move"
        return Finding(
            kind="progress_stalled",
            severity=Severity.WARNING,
            title=f"the log still moves, but step {m.last_step} has not advanced for {dur(stalled)}",
            evidence=[
                f"median step interval {med:.1f} s; stalled after {dur(limit)} "
                f"({th.step_overdue_factor:g} × median, at least {dur(th.stalled_floor_s)})",
                f"last log line {dur(ctx.log_silent_s or 0)} ago",
                *[g.line() for g in ctx.gpu_views],
            ],
            action="dump",
            action_label="py-spy dump",
        )
    if not ctx.step_overdue:
        return None
    if any(g.span_s < th.gpu_idle_after_s for g in ctx.gpu_views):
        return None  # too few GPU readings yet to tell a stall from loading (gputui just started)
    # GPUs still working now (not even briefly idle): the ones worth naming
    busy = [g for g in ctx.gpu_views if g.idle_for is None and (g.busy or g.held)]
    where = (
        f"; {_gpu_list(busy)} stay busy — a long evaluation, or ranks spinning in a collective?"
        if busy
        else ""
    )
    return Finding(
        kind="progress_stalled",
        severity=Severity.WARNING,
        title=f"stalled: {_no_step_words(ctx)}{where}",
        evidence=[
            f"log {ctx.log.path or '(none)'}: no new line for {dur(ctx.log_silent_s or 0)} "
            f"(stale after {dur(ctx.threshold)}); stdout is not buffered",
            f"a step is overdue after {dur(ctx.overdue_after)} ({th.step_overdue_factor:g} × "
            f"the median step time, at least the stale threshold)",
            *[g.line() for g in ctx.gpu_views],
        ],
        action="dump",
        action_label="py-spy dump",
    )


def _space_line(ctx: Context) -> str | None:
    free, total = ctx.log.fs_free, ctx.log.fs_total
    if free is None:
        return None
    of = f" of {size_words(total)} ({100.0 * free / total:.1f} % free)" if total else ""
    return f"the file system holding {ctx.log.path} in {ctx.ct_words}: {size_words(free)} free{of}"


def rule_disk_full(ctx: Context) -> Finding | None:
    """The disk holding the log is full (statvfs says so, or the output
    says "No space left on device" where statvfs is unknown): ERROR, and
    the silence is not called buffering or a stall. Nearly full (below
    disk_low_pct): WARNING `disk_low`. A write that failed for lack of space
    while there is space again: WARNING, for tee never writes that file again."""
    log = ctx.log
    if not ctx.ct_usable or not log.path:
        return None
    free, total = log.fs_free, log.fs_total
    said = ctx.enospc
    low = (
        free is not None
        and total is not None
        and total > 0
        and not ctx.disk_full
        and free < total * ctx.th.disk_low_pct / 100.0
    )
    if not ctx.disk_silenced and not low:
        return None
    ev = [line for line in (_space_line(ctx),) if line]
    if log.mtime is not None:
        ev.append(f"{log.path} was last written {dur(ctx.now - log.mtime)} ago")
    if said is not None:
        ev.append(f"the {said[0]} says: {_short(said[1], 160)}")
    tee = [p.pid for p in ctx.procs if program_name(p.command) == "tee"] + [
        pid
        for p in ctx.procs
        for pid, cmd in ((p.stdout.readers or []) if p.stdout is not None else [])
        if program_name(cmd) == "tee"
    ]
    if tee and (said is not None or ctx.disk_full):
        ev.append(
            f"tee (PID {tee[0]}) stops writing a file after a failed write: the log "
            "stays silent even once space is freed, until the run is restarted"
        )
    directory = os.path.dirname(log.path.rstrip("/")) or "/"
    fix = f"free space in {ctx.ct_words} (du -xsh {shlex.quote(directory)}/* | sort -h)"
    c = ctx.snap.container
    grow = c.grow_disk_hint() if c is not None else ""
    fix += f", or {grow}" if grow else ", or move the run's output to a larger disk"
    if said is not None and not ctx.disk_full and not low:
        return Finding(
            kind="disk_full",
            severity=Severity.WARNING,
            title=(
                f"writes to {log.path} failed for lack of space; "
                f"{size_words(free)} free now, but the log stays silent"
            ),
            evidence=ev,
            fix="restart the run (tee does not reopen the log); keep space free: " + fix,
        )
    if low:
        assert free is not None and total
        return Finding(
            kind="disk_low",
            severity=Severity.WARNING,
            title=(
                f"the disk holding {log.path} is nearly full: {size_words(free)} free of "
                f"{size_words(total)} ({100.0 * free / total:.1f} %)"
            ),
            evidence=ev,
            fix=fix,
        )
    if free is not None:
        amount = f"{size_words(free)} free" + (f" of {size_words(total)}" if total else "")
        title = (
            f"the disk holding {log.path} is full: {amount} — writes to the log and "
            "checkpoints fail"
        )
    else:
        title = f"the disk holding {log.path} is full: writes fail with “No space left on device”"
        ev.insert(0, f"free space of {ctx.ct_words}'s file system unknown (no statvfs reply)")
    return Finding(
        kind="disk_full",
        severity=Severity.ERROR,
        title=title,
        evidence=ev,
        fix=fix,
    )


def rule_stale_code(ctx: Context) -> Finding | None:
    if not ctx.ct_usable or not ctx.proc_alive:
        return None
    p = ctx.proc
    assert p is not None
    if p.start_time is None:
        return None
    newer = [
        (path, mtime)
        for path, mtime in (p.source_files or [])
        if path and mtime is not None and mtime > p.start_time + MTIME_SLACK_S
    ]
    if not newer:
        return None
    newer.sort(key=lambda x: x[1], reverse=True)
    path, mtime = newer[0]
    more = f" (and {len(newer) - 1} more)" if len(newer) > 1 else ""
    return Finding(
        kind="stale_code",
        severity=Severity.WARNING,
        title=(
            f"deploy has not taken effect: {os.path.basename(path)} modified "
            f"{dur(mtime - p.start_time)} after PID {p.pid} started{more}"
        ),
        evidence=[
            f"{f} modified {dur(m - p.start_time)} after the process started" for f, m in newer
        ]
        + [f"PID {p.pid} ({_short(p.command, 80)}) still runs the old code"],
        action="relaunch",
        action_label="relaunch",
    )


def rule_gpu_memory_orphaned(ctx: Context) -> Finding | None:
    held = ctx.held
    if not held:
        return None
    tree = {p.pid for p in ctx.procs}
    gprocs = list(ctx.gpus.processes or [])
    # processes in the watched CT but outside the watched run: only a real
    # leftover (no live owner, idle on its GPU a while) is named as one; a
    # live process of another run is not ours to kill
    leftovers = [
        h for h in ctx.holders if tree and h.kind != "run" and h.leftover and h.gp.in_container
    ]
    run_alive = ctx.proc_alive or (
        ctx.session is not None and ctx.session.alive and not ctx.session_dead
    )
    if leftovers and run_alive:
        return _leftover_finding(ctx, leftovers)
    if run_alive or not ctx.run_known_gone or not ctx.ct_usable:
        return None
    live = {(h.gp.gpu_uuid, h.gp.host_pid) for h in ctx.holders if h.live_other}
    if gprocs and all((gp.gpu_uuid, gp.host_pid) in live for gp in gprocs):
        return None  # every holder is a live process of another run
    if ctx.session is None and not ctx.snap.session_gone and any(s.alive for s in ctx.sessions):
        return None  # a --session that is not there (session_missing): a live session may hold it
    quiet = ctx.log.silent_for(ctx.now)
    if quiet is not None and quiet < ctx.th.orphan_grace_s:
        return None  # the run has just exited: the driver frees its memory within a reading or two
    if gprocs and all(gp.in_container is False for gp in gprocs):
        return None  # held by other containers' processes: not ours to call orphaned
    gprocs = [gp for gp in gprocs if gp.in_container is not False]  # theirs are not ours to kill
    gprocs = [gp for gp in gprocs if (gp.gpu_uuid, gp.host_pid) not in live]
    if not gprocs and ctx.gpus.processes_pending:
        return None  # nvidia-smi has not listed the processes yet: nobody is known to hold it
    ev = [g.line() for g in held]
    if gprocs:
        ev += [_gp_line(gp) for gp in gprocs]
        host_pids = sorted({gp.host_pid for gp in gprocs})
        title = f"{gib(ctx.held_mib)} of GPU memory held by PID {', '.join(map(str, host_pids))}, and no run is alive"
        fix = f"check them with `ps -p {','.join(map(str, host_pids))} -o pid,etime,cmd` on the host, then kill the leftovers"
    else:
        ev.append("nvidia-smi lists no process holding it")
        title = f"{gib(ctx.held_mib)} of GPU memory held with no process listed and no run alive"
        fix = "find the holder on the host: `fuser -v /dev/nvidia*`; a zombie holder needs its parent killed or a GPU reset"
    return Finding(
        kind="gpu_memory_orphaned",
        severity=Severity.WARNING,
        title=title,
        evidence=ev,
        fix=fix,
    )


def _leftover_finding(ctx: Context, leftovers: list[Holder]) -> Finding:
    """Memory held in the watched CT by processes with no live owner that
    have been idle on their GPUs a while; every other holder is named."""
    pids = [h.pid for h in leftovers]
    idle = ctx.th.idle_util_pct
    ev = [holder_line(h, ctx.now, idle) for h in leftovers]
    ev += [holder_line(h, ctx.now, idle) for h in ctx.holders if h.kind != "run" and not h.leftover]
    ev.append(
        f"a leftover: no live owner (a zombie, or its parent gone) and idle on its GPU "
        f"for {dur(LEFTOVER_IDLE_S)} or more"
    )
    return Finding(
        kind="gpu_memory_orphaned",
        severity=Severity.WARNING,
        title=(
            f"GPU memory held by leftover PID {', '.join(map(str, pids))} in {ctx.ct_words}: "
            "no live owner, idle on the GPU"
        ),
        evidence=ev,
        fix=ctx.in_ct("kill " + " ".join(map(str, pids))) + "  (after checking they are leftovers)",
    )


def _gp_line(gp: GpuProcess) -> str:
    used = f"{gib(gp.used_mib)}" if gp.used_mib is not None else "? GiB"
    name = f" {gp.name}" if gp.name else ""
    if gp.ct_pid == gp.host_pid:  # a plain host: one PID space
        return f"PID {gp.host_pid}{name}: {used} on {gp.gpu_uuid or 'a GPU'}"
    where = f"CT PID {gp.ct_pid}" if gp.ct_pid is not None else "not in the watched CT"
    return f"host PID {gp.host_pid}{name} ({where}): {used} on {gp.gpu_uuid or 'a GPU'}"


def rule_gpu_xid(ctx: Context) -> Finding | None:
    recent = [
        e
        for e in (ctx.gpus.events or [])
        if not e.lost
        and e.time is not None
        and ctx.now - e.time <= RECENT_EVENT_S
        and e.text != ctx.gpus.error  # the reader's own failure: gpu_unreadable says it
    ]
    if not recent:
        return None
    return Finding(
        kind="gpu_xid",
        severity=Severity.WARNING,
        title=f"the GPU driver reported {len(recent)} error event(s): {_short(recent[-1].text, 100)}",
        evidence=[_short(e.text, 160) for e in recent[-5:]],
        fix="check `dmesg | grep -i xid` on the host (Xid 79/48/63/64: hardware; 13/31/43: the program)",
    )


def rule_gpu_unreadable(ctx: Context) -> Finding | None:
    if not ctx.gpus.error or _nvidia_smi_missing(ctx):
        return None
    return Finding(
        kind="gpu_unreadable",
        severity=Severity.WARNING,
        title=f"cannot read the GPUs: {_short(ctx.gpus.error, 100)}",
        evidence=[ctx.gpus.error] + ([f"source: {ctx.gpus.source}"] if ctx.gpus.source else []),
        fix="run `nvidia-smi` on the host by hand to see the error",
    )


def _nvidia_smi_missing(ctx: Context) -> bool:
    """Known missing on both sides: the host said so, and the CT's probe
    answered without it (or there is no CT). Not yet known is not missing."""
    t = ctx.tools
    if t.nvidia_smi_host is not False:
        return False
    if ctx.snap.container is None or not ctx.snap.container.kind:  # the host itself
        return True
    return t.probed and t.nvidia_smi_ct is False


def rule_tools_missing(ctx: Context) -> Finding | None:
    t = ctx.tools
    if not t.probed or not ctx.ct_usable:
        return None  # nothing is called missing before the probe has answered
    missing: list[str] = []
    fixes: list[str] = []
    severity = Severity.INFO
    if t.tmux is None:
        missing.append("tmux (no sessions can be watched or launched)")
        fixes.append(ctx.in_ct("apt-get install -y tmux"))
        severity = Severity.WARNING
    if _nvidia_smi_missing(ctx):
        missing.append("nvidia-smi, on the host and in the CT (no GPU readings)")
        fixes.append(
            "install the NVIDIA driver utilities on the host (nvidia-smi comes with the driver)"
        )
        severity = Severity.WARNING
    if t.py_spy is None:
        missing.append("py-spy (py-spy dump will not work)")
        fixes.append(ctx.in_ct("pip install py-spy"))
    if t.python3 is None:
        missing.append("python3 (slower fallback commands instead of the agent)")
        fixes.append(ctx.in_ct("apt-get install -y python3"))
    if not missing:
        return None
    names = ", ".join(m.split(" ")[0].rstrip(",") for m in missing)
    return Finding(
        kind="tools_missing",
        severity=severity,
        title=f"missing in {ctx.ct_words}: {names}",
        evidence=[f"missing: {m}" for m in missing],
        fix=" ; ".join(fixes),
    )


Rule = Callable[[Context], "Finding | None"]

# The table: every rule, in the order it is evaluated (display order comes
# from severity and SPECIFICITY, not from here).
RULES: tuple[Rule, ...] = (
    rule_connection,
    rule_ct_missing,
    rule_ct_stopped,
    rule_gpu_lost,
    rule_oom_killed,
    rule_session_dead,
    rule_run_exited,
    rule_session_missing,
    rule_loading,
    rule_held_but_idle,
    rule_busy_but_silent,
    rule_buffered_output,
    rule_log_missing,
    rule_log_deleted,
    rule_log_unreadable,
    rule_log_drift,
    rule_progress_stalled,
    rule_disk_full,
    rule_stale_code,
    rule_gpu_memory_orphaned,
    rule_gpu_xid,
    rule_gpu_unreadable,
    rule_tools_missing,
)


def _proc_files(ctx: Context) -> list[str]:
    p = ctx.proc
    if p is None or p.stdout is None:
        return []
    return [f for f in p.stdout.files if f and f != ctx.log.path]


LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".jsonl")


def _written_logs(ctx: Context) -> list[str]:
    """Log-like files the run's processes have open for writing (not its
    stdout): the same name as the watched log first, then *.log, *.txt ..."""
    watched = os.path.basename(ctx.log.path or "")
    files: list[str] = []
    for p in [ctx.proc, *ctx.procs]:
        for f in getattr(p, "write_files", None) or []:
            if f and f != ctx.log.path and f not in files:
                files.append(f)
    same = [f for f in files if watched and os.path.basename(f) == watched]
    logs = [f for f in files if f not in same and f.lower().endswith(LOG_SUFFIXES)]
    return same + logs
