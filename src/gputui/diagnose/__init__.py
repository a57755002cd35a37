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
  (throttled, power capped low, ECC/row remap, PCIe link, kernel-log Xid),
  `gradients.py` (a NaN gradient norm, a collapsed fp16 loss scale),
  `killed.py` (a run ended without a word: killed, or finished behind tee),
  `space.py` (a run that died of a write that found no room).

A new rule: a function `rule_x(ctx) -> Finding | None` under
`@rule(Kind("x", specificity=..., cause=...))` in its family's module.
Which finding wins when two are named is declared on the kinds
(`supersedes=` / `defers_to=`, registry.py), never as a guard in another
rule; the order the rules run in means nothing.

Each rule runs isolated: one that raises loses only its own finding, is
written with its traceback to the debug log (`gputui -v`), and shows as a
`rule_failed` WARNING of its own ("could not evaluate …"); the rest holds.

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

import logging
from collections.abc import Callable

# The families: importing one registers its rules (their order means nothing:
# precedence is declared on the kinds, registry.py).
from gputui.diagnose import (  # noqa: F401
    deploy,
    failures,
    gpu,
    gradients,
    hardware,
    host,
    killed,
    listing,
    log,
    oomkill,
    ports,
    progress,
    ranks,
    session,
    space,
    torchrun,
    waiting,
)
from gputui.diagnose.context import Context, GpuView
from gputui.diagnose.evidence import (
    buffering_words,
    last_error_line,
    signal_name,
    stdout_evidence,
    stdout_words,
)
from gputui.diagnose.holders import Holder, holder_line, holders_of, snapshot_holders
from gputui.diagnose.registry import (
    ENTRIES,
    KINDS,
    Kind,
    Rule,
    RuleEntry,
    apply_precedence,
    declare,
    precedence_problems,
    precedence_table,
    rule,
    sort_findings,
    specificity,
)
from gputui.diagnose.thresholds import (
    BUSY_UTIL_PCT,
    DEFAULT_THRESHOLDS,
    DIAGNOSIS_KEYS,
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
from gputui.model import Finding, Severity, Snapshot

_log = logging.getLogger(__name__)  # `gputui -v` (cli/debuglog.py): a rule's traceback

# A rule that raised: a gputui bug, said as a finding of its own (never dark).
declare(Kind("rule_failed", specificity=990, cause="rule_failed"))

# The table, built from the rules' own declarations (see registry.py):
RULES: tuple[Rule, ...] = tuple(e.func for e in ENTRIES)  # evaluation order
SPECIFICITY: tuple[str, ...] = specificity()  # display order within one severity
_OFFLINE = tuple(e.func for e in ENTRIES if e.offline)  # run while the connection is down
# run while the run is not read (Snapshot.run_unread): they judge no process of it
_HOST_LEVEL = tuple(e.func for e in ENTRIES if all(k.host_level for k in e.kinds))


def diagnose(snap: Snapshot, now: float, thresholds: Thresholds | None = None) -> list[Finding]:
    """Everything wrong with the run in `snap` at time `now`, most severe and
    most specific first, judged by the user's `thresholds` (--stale-after
    among them). INFO findings are notes (loading, finished, tools)."""
    th = thresholds if isinstance(thresholds, Thresholds) else DEFAULT_THRESHOLDS
    try:
        threshold = stale_threshold(snap, th)
    except Exception as err:  # a bug: judge by the default threshold, and say so
        _log.error("the stale threshold could not be computed", exc_info=err)
        threshold = th.stale_floor_s
    ctx = Context(snap, now, threshold, th)
    findings: list[Finding] = []
    for entry in ENTRIES:
        if ctx.connection_down and entry.func not in _OFFLINE:
            continue  # everything else would be read from stale data
        if ctx.run_unread and entry.func not in _HOST_LEVEL:
            continue  # the run's processes as shown are old (listing.py's run_unread says so)
        f = run_rule(entry, ctx)
        if isinstance(f, Finding):
            findings.append(f)
    return sort_findings(apply_precedence(findings))


def run_rule(entry: RuleEntry, ctx: Context) -> Finding | None:
    """One rule, isolated: what it says, or, when it raises, a `rule_failed`
    finding naming it (its traceback goes to the debug log)."""
    try:
        return entry.func(ctx)
    except Exception as err:
        name = entry.func.__name__
        _log.error("diagnosis rule %s raised", name, exc_info=err)
        return diagnosis_failed(err, ", ".join(k.name for k in entry.kinds), name)


def diagnosis_failed(err: BaseException, what: str = "the run", where: str = "") -> Finding:
    """A `rule_failed` WARNING: `what` could not be evaluated (a gputui
    bug), said rather than left dark."""
    rest = "; the rest holds" if where else ""
    return Finding(
        kind="rule_failed",
        severity=Severity.WARNING,
        title=f"could not evaluate {what} — a gputui bug{rest}",
        evidence=[
            f"{where or 'diagnose'} raised {type(err).__name__}: {str(err)[:200]}",
            "its traceback is in the debug log (`gputui -v`)",
        ],
        fix="please report it with the debug log (gputui -v)",
    )


Diagnose = Callable[[Snapshot, float], list[Finding]]  # (snapshot, now) -> findings


def diagnose_with(thresholds: Thresholds | None) -> Diagnose:
    """diagnose() with the user's thresholds (Settings.diagnosis: [diagnosis]
    and --stale-after): the dashboard, the host view, history and alerts all
    say the same."""
    return lambda snap, now: diagnose(snap, now, thresholds)


class SharedDiagnosis:
    """One diagnosis a second for a dashboard and its recorder, which both
    diagnosed the same snapshot each second (~0.3 ms each). The dashboard
    calls it (always afresh: its banner); the recorder's tick calls
    `recent`, which gives the dashboard's findings when they are of the
    same snapshot object (a monitor keeps one, updated in place) and under
    `fresh_s` old by the same clock — else it diagnoses itself. So the
    alerts hear of a finding at most `fresh_s` after the banner shows it.
    1.5 s, not 1.0: the GPU samples bring the dashboard's tick, a little
    late on a busy machine, and a recorder's tick just past the second
    diagnosed afresh — about one in four (issue 48)."""

    def __init__(self, diagnose: Diagnose, fresh_s: float = 1.5) -> None:
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
    "DIAGNOSIS_KEYS",
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
    "RuleEntry",
    "SharedDiagnosis",
    "Thresholds",
    "apply_precedence",
    "buffering_words",
    "diagnose",
    "diagnose_with",
    "diagnosis_failed",
    "holder_line",
    "holders_of",
    "last_error_line",
    "precedence_problems",
    "precedence_table",
    "rule",
    "run_rule",
    "signal_name",
    "snapshot_holders",
    "sort_findings",
    "stale_threshold",
    "stdout_evidence",
    "stdout_words",
]
