"""Name what is wrong with a run, from one Snapshot and its recent history.

Pure: no I/O, no clock reads (`now` is an argument). The package:

- `registry.py`  `@rule(Kind(...))`: each rule declares, next to its code,
                 the finding kinds it names, their specificity, their cause
                 (the incident) and whether they alert. `RULES`,
                 `SPECIFICITY` and record/incidents.py's causes come from it;
- `thresholds.py` the numbers the rules judge by (`Thresholds`, `[diagnosis]`);
- `context.py`   `Context`: what the rules share about one snapshot;
- `evidence.py`  evidence lines (last error, signals, stdout, quoted tails);
- `holders.py`   who holds each GPU process (the run, another session, a leftover);
- one module per family of rules: `host.py` (connection, container, tools,
  disk), `session.py` (dead, ended, exited, OOM, stale code), `progress.py`
  (loading, stalled, probably hung), `log.py` (buffered, silent, missing,
  deleted, unreadable, drift), `gpu.py` (lost, Xid, leftovers, unreadable),
  `failures.py` (the run's own: CUDA OOM, shared memory, NCCL
  timeout/error, NaN loss, loss spike, data-loader bound), `ports.py` (a
  port the run could not listen on, and who holds it), `torchrun.py` (the
  rank that failed first), `waiting.py` (a run that waits for an answer), `ranks.py` (a straggling rank), `hardware.py`
  (throttled, power capped low, ECC/row remap, PCIe link, kernel-log Xid).

A new rule: a function `rule_x(ctx) -> Finding | None` under
`@rule(Kind("x", specificity=..., cause=...))` in its family's module.

A wrong diagnosis is worse than none, so the rules check the cases that look alike:

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

from collections.abc import Callable

# The families, in evaluation order: importing one registers its rules.
from gputui.diagnose import host, gpu, hardware, session, progress, log  # noqa: F401  # isort: skip
from gputui.diagnose import waiting, failures, ports, torchrun, ranks  # noqa: F401  # isort: skip
from gputui.diagnose.context import Context, GpuView
from gputui.diagnose.evidence import (
    buffering_words,
    last_error_line,
    signal_name,
    stdout_evidence,
    stdout_words,
)
from gputui.diagnose.holders import Holder, holder_line, holders_of, snapshot_holders
from gputui.diagnose.registry import ENTRIES, KINDS, Kind, Rule, rule, sort_findings, specificity
from gputui.diagnose.thresholds import (
    BUSY_UTIL_PCT,
    DEFAULT_THRESHOLDS,
    GPU_FRESH_S,
    HELD_MIB,
    IDLE_AFTER_S,
    IDLE_FOR_S,
    IDLE_SHORT_S,
    IDLE_UTIL_PCT,
    PERCENT_THRESHOLDS,
    STALE_CAP_S,
    STALE_FLOOR_S,
    STALL_FACTOR,
    Thresholds,
    stale_threshold,
)
from gputui.model import Finding, Snapshot

# The table, built from the rules' own declarations (see registry.py):
RULES: tuple[Rule, ...] = tuple(e.func for e in ENTRIES)  # evaluation order
SPECIFICITY: tuple[str, ...] = specificity()  # display order within one severity
_OFFLINE = tuple(e.func for e in ENTRIES if e.offline)  # run while the connection is down


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
    for rule_fn in RULES:
        if ctx.connection_down and rule_fn not in _OFFLINE:
            continue  # everything else would be read from stale data
        f = rule_fn(ctx)
        if f is not None:
            findings.append(f)
    return sort_findings(findings)


Diagnose = Callable[[Snapshot, float], list[Finding]]  # (snapshot, now) -> findings


def diagnose_with(stale_after: float | None, thresholds: Thresholds | None = None) -> Diagnose:
    """diagnose() with the user's --stale-after and [diagnosis] thresholds:
    the dashboard, the host view, history and alerts all say the same."""
    return lambda snap, now: diagnose(snap, now, stale_after=stale_after, thresholds=thresholds)


class SharedDiagnosis:
    """One diagnosis a second for a dashboard and its recorder, which both
    diagnosed the same snapshot each second (~0.3 ms each). The dashboard
    calls it (always afresh: its banner); the recorder's tick calls
    `recent`, which gives the dashboard's findings when they are of the
    same snapshot object (a monitor keeps one, updated in place) and under
    `fresh_s` old by the same clock — else it diagnoses itself. So the
    alerts hear of a finding at most `fresh_s` after the banner shows it."""

    def __init__(self, diagnose: Diagnose, fresh_s: float = 1.0) -> None:
        self.diagnose = diagnose
        self.fresh_s = fresh_s
        self._last: tuple[Snapshot, float, list[Finding]] | None = None

    def __call__(self, snap: Snapshot, now: float) -> list[Finding]:
        findings = list(self.diagnose(snap, now))
        self._last = (snap, now, findings)
        return findings

    def recent(self, snap: Snapshot, now: float) -> list[Finding]:
        last = self._last
        if last is not None and last[0] is snap and 0.0 <= now - last[1] < self.fresh_s:
            return list(last[2])
        return self(snap, now)


__all__ = [
    "BUSY_UTIL_PCT",
    "DEFAULT_THRESHOLDS",
    "GPU_FRESH_S",
    "HELD_MIB",
    "IDLE_AFTER_S",
    "IDLE_FOR_S",
    "IDLE_SHORT_S",
    "IDLE_UTIL_PCT",
    "KINDS",
    "PERCENT_THRESHOLDS",
    "RULES",
    "SPECIFICITY",
    "STALE_CAP_S",
    "STALE_FLOOR_S",
    "STALL_FACTOR",
    "Context",
    "Diagnose",
    "GpuView",
    "Holder",
    "Kind",
    "Rule",
    "SharedDiagnosis",
    "Thresholds",
    "buffering_words",
    "diagnose",
    "diagnose_with",
    "holder_line",
    "holders_of",
    "last_error_line",
    "rule",
    "signal_name",
    "snapshot_holders",
    "sort_findings",
    "stale_threshold",
    "stdout_evidence",
    "stdout_words",
]
