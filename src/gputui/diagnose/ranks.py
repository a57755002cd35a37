"""A straggling rank: one rank of a multi-rank run much slower than the
others, named from what the run prints about its ranks. Pure.

Two shapes of evidence, both per rank:

- Megatron's straggler detector (`--log-straggler`, rank 0 every log
  interval): "MnRtt/Rnk: 1446.49ms/13 | MxRtt/Rnk: 1570.32ms/30 | … |
  MnClk/Rnk: 1410.00MHz/30 | … | MnDRtt/Rnk: 1.22ms/15 | MxDRtt/Rnk:
  130.33ms/30 | …" — the slowest and fastest rank's time in the traced ops,
  with the GPU clock, temperature and get_batch time beside it;
- lines tagged with their rank — torchrun's `[rank3]:` / `[default3]:`
  prefix (`--tee`, `--redirects`, `--local-ranks-filter`), or the program's
  own `rank 3` / `[RANK 3]` — that carry a rate or a step time (`tok/s`,
  `it/s`, `s/it`, `time 412ms`, Megatron's `elapsed time per iteration (ms):
  412.5`): the medians per rank are compared.

In a synchronous data-parallel run every rank waits for the slowest at the
collective, so a rank's *whole*-step time is the same everywhere; these
figures differ only where the program times a rank's own work (the
detector's traced ops, the forward/backward before the all-reduce, its data
fetch). A rank is a straggler when it is STRAGGLER_FACTOR × slower than the
others' median in the latest evidence and the same rank was the slowest
before (two reports in a row, or its last three tagged figures): one slow
interval is no news.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.numbers import bounded_float, bounded_int
from gputui.text.untrusted import one_line

STRAGGLER_FACTOR = 1.25  # the slowest rank at least this many times the others' time
RECENT_LINES = 400  # rank-tagged lines interleave: read further up the tail than one rank's lines
MIN_FIGURES = 3  # tagged figures per rank before its median counts

# at most 15 digits, from where no digit stands before (a run of digits is
# then passed over in linear time, not quadratic)
_NUM = r"(?<![\d.])(\d{1,15}(?:\.\d{1,9})?)"
_DETECTOR = re.compile(
    r"MnRtt/Rnk:\s*" + _NUM + r"ms/(\d+)\s*\|\s*MxRtt/Rnk:\s*" + _NUM + r"ms/(\d+)"
)
# what the report may add about the slow rank: (words, pattern, unit)
_DETECTOR_BESIDE = (
    ("its GPU's clock is the lowest", re.compile(r"MnClk/Rnk:\s*" + _NUM + r"MHz/(\d+)"), " MHz"),
    ("its GPU's power is the lowest", re.compile(r"MnPwr/Rnk:\s*" + _NUM + r"W/(\d+)"), " W"),
    ("its GPU's util is the lowest", re.compile(r"MnUtl/Rnk:\s*" + _NUM + r"%/(\d+)"), " %"),
    ("its temperature is the highest", re.compile(r"MxTmp/Rnk:\s*" + _NUM + r"C/(\d+)"), " °C"),
    (
        "its get_batch (data) time is the highest",
        re.compile(r"MxDRtt/Rnk:\s*" + _NUM + r"ms/(\d+)"),
        " ms",
    ),
)

# `[rank3]:`, `[default3]:` (torchrun), `rank 3:`, `[RANK 3]`, `rank=3`
_RANK_TAG = re.compile(
    r"^\s*\[(?:rank|default)(\d+)\]:|\brank[ =:]?\s*(\d+)\b|\[RANK (\d+)\]", re.I
)
# a rate (higher is faster) or a time (lower is faster), seconds per unit of work
_RATE = re.compile(
    r"(?<![\d,.])(\d[\d,]{0,20}(?:\.\d{1,9})?)\s*(tok(?:ens)?/s|it/s|samples/s|s/it)\b", re.I
)
_TIME = re.compile(
    r"elapsed time per iteration \(ms\):\s*" + _NUM
    + r"|\b(?:step[_ ]?)?time[=:]?\s*" + _NUM + r"\s*(ms|s)\b",
    re.I,
)  # fmt: skip


@dataclass(frozen=True)
class Slow:
    """The straggler: its rank, how much slower, and what was compared."""

    rank: int
    factor: float
    evidence: list[str]


def _detector_reports(lines: list[str]) -> list[tuple[str, float, int, float, int]]:
    out = []
    for ln in lines:
        if "MxRtt" not in ln:  # the regex only where it can match: this runs every second
            continue
        m = _DETECTOR.search(ln)
        if m is None:
            continue
        fast, slow = bounded_float(m.group(1), 0.0), bounded_float(m.group(3), 0.0)
        fast_rank, slow_rank = bounded_int(m.group(2), 0), bounded_int(m.group(4), 0)
        if fast is None or slow is None or fast_rank is None or slow_rank is None:
            continue  # a number no report holds (5,000 digits, NaN): not a report
        out.append((ln, fast, fast_rank, slow, slow_rank))
    return out


def _from_detector(lines: list[str]) -> Slow | None:
    reports = _detector_reports(lines)
    if len(reports) < 2:
        return None
    line, fast_ms, fast_rank, slow_ms, slow_rank = reports[-1]
    if fast_ms <= 0 or slow_ms < STRAGGLER_FACTOR * fast_ms or slow_rank == fast_rank:
        return None
    before = reports[-2]
    if before[4] != slow_rank or before[3] < STRAGGLER_FACTOR * before[1]:
        return None  # a different rank was slowest last time (or nobody): no straggler yet
    ev = [
        f"Megatron's straggler detector: rank {slow_rank} {slow_ms:g} ms in the traced ops, "
        f"rank {fast_rank} {fast_ms:g} ms (the fastest); rank {slow_rank} was the slowest "
        "in the report before too"
    ]
    for words, rx, unit in _DETECTOR_BESIDE:
        m = rx.search(line)
        value = bounded_float(m.group(1)) if m is not None else None
        if m is not None and value is not None and bounded_int(m.group(2), 0) == slow_rank:
            ev.append(f"{words} of all ranks ({value:g}{unit})")
    ev.append(f"the log: {short(one_line(line, 400), 300)}")
    return Slow(slow_rank, slow_ms / fast_ms, ev)


_DETECTOR_WORDS = ("MxRtt",)  # in every report of the detector
_RANK_WORDS = ("ank", "ANK", "[default")  # in nearly every line _RANK_TAG matches


def _may_name_a_rank(line: str) -> bool:
    """A substring test before the regex: the tail's 400 lines are read
    every second, and a case-blind regex over each was ~10 % of the
    dashboard's CPU on the H200 (run 25)."""
    return any(word in line for word in _RANK_WORDS)


def _rank_of(line: str) -> int | None:
    if not _may_name_a_rank(line):
        return None
    m = _RANK_TAG.search(line)
    if m is None:
        return None
    return bounded_int(next(g for g in m.groups() if g is not None), 0)


def _seconds_per_unit(line: str) -> float | None:
    """A figure where lower is faster: seconds per step (or per token/sample)."""
    m = _TIME.search(line)
    if m is not None:
        if m.group(1) is not None:
            ms = bounded_float(m.group(1), 0.0)
            return ms / 1000 if ms is not None else None
        value = bounded_float(m.group(2), 0.0)
        if value is None:
            return None
        return value / 1000 if m.group(3).lower() == "ms" else value
    m = _RATE.search(line)
    if m is not None:
        value = bounded_float(m.group(1).replace(",", ""), 0.0)
        if value is None:
            return None
        if m.group(2).lower() == "s/it":
            return value
        return 1.0 / value if value > 0 else None
    return None


def _from_tagged(lines: list[str]) -> Slow | None:
    per_rank: dict[int, list[float]] = {}
    last_line: dict[int, str] = {}  # each rank's latest line with a figure: the evidence
    for ln in lines:
        rank = _rank_of(ln)
        if rank is None:
            continue
        spu = _seconds_per_unit(ln)
        if spu is not None and spu > 0:
            per_rank.setdefault(rank, []).append(spu)
            last_line[rank] = ln
    ranks = {r: v for r, v in per_rank.items() if len(v) >= MIN_FIGURES}
    if len(ranks) < 2:
        return None
    # each rank's latest figures: a rank that turned slow is named from its
    # last MIN_FIGURES, all of them slower than the others' (no median of
    # older, faster figures to wait out)
    medians = {r: statistics.median(v[-MIN_FIGURES:]) for r, v in ranks.items()}
    slow = max(medians, key=lambda r: medians[r])
    others = statistics.median(v for r, v in medians.items() if r != slow)
    if others <= 0 or min(ranks[slow][-MIN_FIGURES:]) < STRAGGLER_FACTOR * others:
        return None
    fastest = min(medians, key=lambda r: medians[r])
    last = last_line[slow]
    ev = [
        f"rank {slow}: {_per(medians[slow])} (median of its last {MIN_FIGURES} figures); "
        f"the other {len(medians) - 1} rank(s): {_per(others)} "
        f"(the fastest, rank {fastest}: {_per(medians[fastest])})",
        f"the log: {short(one_line(last, 400), 300)}",
    ]
    return Slow(slow, medians[slow] / others, ev)


def _per(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms per step" if seconds >= 0.01 else f"{1 / seconds:,.0f} per s"


@rule(Kind("straggler", specificity=207, cause="straggler"))
def rule_straggler(ctx: Context) -> Finding | None:
    """One rank STRAGGLER_FACTOR × slower than the others, in two reports
    in a row of Megatron's straggler detector or in its own tagged figures:
    the rank, how much slower, and what its GPU says beside it."""
    if not ctx.proc_alive or ctx.stalled or ctx.hung:
        return None
    tail = ctx.recent_lines(RECENT_LINES)
    slow = None
    if ctx.recent_hold(RECENT_LINES, _DETECTOR_WORDS):
        slow = _from_detector(tail)
    if slow is None and ctx.recent_hold(RECENT_LINES, _RANK_WORDS):
        slow = _from_tagged(tail)
    if slow is None:
        return None
    return Finding(
        kind="straggler",
        severity=Severity.WARNING,
        title=(
            f"straggler: rank {slow.rank} is {slow.factor:.1f}× slower than the other ranks — "
            "every step waits for it"
        ),
        evidence=slow.evidence,
        action="dump",
        action_label="py-spy dump every rank",
        fix=(
            f"look at rank {slow.rank}'s GPU (clock, temperature, PCIe link: the GPU panel) "
            "and its data loading; the dump shows where it spends the time the others wait"
        ),
    )
