"""The numbers the rules judge by: the defaults (constants), `Thresholds`
(the config's `[diagnosis]` section sets any of them, `[ui] stale_after` /
--stale-after its `stale_after`) and the stale threshold: the user's
stale_after, else adapted to the run's own cadence. Pure."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, fields

from gputui.model import LogState, Metrics, Snapshot

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
    """The numbers the rules judge by: what the user set and the defaults,
    one object from the config to every rule. `[diagnosis]` in the config
    sets any of them (same names), but `stale_after`: `[ui] stale_after` and
    --stale-after set it (the user's words); config.example.toml documents
    each default."""

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
    # seconds of log silence that are "stale", whatever the run's rhythm;
    # None: adaptive (stale_floor_s, stale_factor, stale_cap_s)
    stale_after: float | None = None


DEFAULT_THRESHOLDS = Thresholds()


# which Thresholds are percentages (0-100); every other one must be > 0
PERCENT_THRESHOLDS = frozenset({"idle_util_pct", "busy_util_pct", "cpu_busy_pct", "disk_low_pct"})

# the Thresholds the config's [diagnosis] section sets (stale_after is [ui]'s)
DIAGNOSIS_KEYS = tuple(f.name for f in fields(Thresholds) if f.name != "stale_after")


def stale_threshold(snap: Snapshot, th: Thresholds = DEFAULT_THRESHOLDS) -> float:
    """Seconds of log silence that count as "silent".

    The user's `th.stale_after` (--stale-after / config) wins. Otherwise it adapts to
    the run's own cadence: max(stale_floor_s, stale_factor × the larger of the
    median gap between log lines and the median step interval), capped at
    stale_cap_s. Lines arriving in one burst (a buffer flush) count as gaps of
    0, so buffering does not stretch the threshold.
    """
    if th.stale_after is not None and th.stale_after > 0:
        return float(th.stale_after)
    log = snap.log if isinstance(snap.log, LogState) else None
    metrics = snap.metrics if isinstance(snap.metrics, Metrics) else None
    # asked three times a second (the diagnosis, the log's state line, the
    # recorder), each sorting ~200 gaps and ~200 steps: kept while the
    # lines and steps it is made of are the same (every new line counts in
    # lines_total, every new step moves last_step_time)
    key = (
        None if log is None else (log.lines_total, len(log.line_gaps)),
        None
        if metrics is None
        else (metrics.last_step_time, metrics.restarts, len(metrics.step_intervals)),
    )
    kept = _kept[0]
    same = kept is not None and kept[0] is th and kept[1] is log and kept[2] is metrics
    if same and kept is not None and kept[3] == key:
        return kept[4]
    value = _adaptive(log, metrics, th)
    _kept[0] = (th, log, metrics, key, value)
    return value


# the last adaptive threshold: the thresholds, the log, the metrics, what of
# them it was made of, and it
_Kept = tuple[Thresholds, LogState | None, Metrics | None, tuple[object, ...], float]
_kept: list[_Kept | None] = [None]


def _adaptive(log: LogState | None, metrics: Metrics | None, th: Thresholds) -> float:
    cadence = 0.0
    gaps = list(getattr(log, "line_gaps", None) or [])
    if gaps:
        cadence = max(cadence, statistics.median(gaps))
    step_median = metrics.median_step_interval if metrics is not None else None
    if step_median is not None:
        cadence = max(cadence, step_median)
    return min(th.stale_cap_s, max(th.stale_floor_s, th.stale_factor * cadence))
