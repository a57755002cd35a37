"""The hardware's own words (issue 32): a GPU throttled, a power limit set
low, uncorrectable ECC errors or a pending row remap, a PCIe link trained
down, an Xid in the kernel log. Pure.

`gpu_issues(state, now)` judges every GPU of a GpuState (the GPU rows, the
host view, Prometheus and doctor read it); the rules below say the same
about the watched run's GPUs, with what it costs the run.

What is NOT a fault, on purpose:
- the idle reason (0x1), an applications-clocks or sync-boost reason;
- the SW power cap (0x4) at the power limit: a busy H200 sits there (688–691 W
  of 700 W at 0x4, SM 1590–1620 of 1980 MHz, measured) — only a limit set
  well below the GPU's default makes the cap worth a word;
- an unknown field (`[N/A]`, `[Not Supported]`: None), never a fault;
- a PCIe link below its max *generation* while the GPU idles (it downshifts
  to save power): the generation is judged only from a reading under load;
  a narrower *width* than the max is judged whatever the load (the width does
  not downshift on a data-centre GPU; a narrow link is a seating or riser fault).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from gputui.diagnose.context import Context
from gputui.diagnose.registry import Kind, rule
from gputui.diagnose.thresholds import GPU_FRESH_S, RECENT_EVENT_S
from gputui.model import Finding, GpuEvent, GpuHealth, GpuSample, GpuState, Ring, Severity
from gputui.text.hardware import (
    SW_POWER_CAP,
    THROTTLE_MASK,
    XID_MEANING,
    bus_key,
    reason_names,
    throttle_reasons,
    xid_words,
)

THROTTLE_MIN_READINGS = 2  # a throttle bit in this many readings in a row (not one blip)
LOW_LIMIT_FRAC = 0.85  # a power limit under this share of the default was set low
CAP_BUSY_PCT = 50.0  # the cap / the link's generation are judged at this utilization or more
HEALTH_FRESH_S = 60.0  # a health reading older than this says nothing now
SLOWER_FACTOR = 1.1  # steps this much slower since the throttle began: worth saying
STEP_WINDOW_S = 600.0  # step time before the throttle: over at most this long


@dataclass(frozen=True)
class GpuIssue:
    """One thing wrong with one GPU: the finding kind it belongs to, a
    short mark for the GPU row ("thermal", "ECC", "x8"), whether it is
    broken (red) or worth a look (yellow), and one line of evidence."""

    index: int
    kind: str
    mark: str
    broken: bool
    line: str
    since: float | None = None  # when it began (a throttle), if known


# ------------------------------------------------------------------ judgements


def _throttled(v: float | None) -> int:
    """A reading's throttle bits (0: none, or no reading a mask can be: NaN, inf)."""
    if v is None or not math.isfinite(v) or not 0 <= v < 2**64:
        return 0
    return int(v) & THROTTLE_MASK


def throttle_streak(ring: Ring | None, now: float) -> tuple[int, float] | None:
    """(the newest reading's throttle bits, the time the streak began)
    when the last THROTTLE_MIN_READINGS readings, fresh, all hold a
    throttle bit; None otherwise (an unknown reading breaks a streak)."""
    if ring is None:
        return None
    last = ring.last()  # the common case, at every redraw: not throttled now, O(1)
    if not _throttled(last):
        return None
    pts = ring.points()
    if not pts or pts[-1][1] is None or now - pts[-1][0] > GPU_FRESH_S:
        return None
    newest = _throttled(pts[-1][1])
    if not newest:
        return None
    since, n = pts[-1][0], 0
    for t, v in reversed(pts):
        if not _throttled(v):
            break
        since, n = t, n + 1
    return (newest, since) if n >= THROTTLE_MIN_READINGS else None


def _clocks(s: GpuSample) -> str:
    if s.sm_clock_mhz is None:
        return ""
    top = f" of {s.sm_clock_max_mhz:.0f}" if s.sm_clock_max_mhz else ""
    return f"SM clock {s.sm_clock_mhz:.0f}{top} MHz"


def _throttle_issue(state: GpuState, s: GpuSample, now: float) -> GpuIssue | None:
    streak = throttle_streak(state.reasons_history.get(s.index), now)
    if streak is None:
        return None
    mask, since = streak
    reasons = throttle_reasons(mask)
    words = " and ".join(r.words for r in reasons)
    thermal = any("thermal" in r.name for r in reasons)
    mark = "thermal" if thermal else ("power brake" if mask & 0x80 else "HW slowdown")
    bits = [_clocks(s)]
    if s.temp_c is not None:
        bits.append(f"{s.temp_c:.0f} °C")
    if s.power_w is not None:
        bits.append(f"{s.power_w:.0f}/{s.power_limit_w or 0:.0f} W")
    detail = ", ".join(b for b in bits if b)
    line = f"GPU {s.index}: {words} (reasons 0x{mask:x}) — {detail}, since {hhmm(since)}"
    return GpuIssue(s.index, "gpu_throttled", mark, False, line, since)


def _cap_issue(state: GpuState, s: GpuSample) -> GpuIssue | None:
    """A limit set well below the GPU's default, holding the clocks now
    (0x4 under load). The cap at the default limit is normal: never said."""
    h = state.health.get(s.index)
    default = (h.power_default_w or h.power_max_w) if h is not None else None
    limit = s.power_limit_w
    if default is None or limit is None or limit >= LOW_LIMIT_FRAC * default:
        return None
    if s.event_reasons is None or not s.event_reasons & SW_POWER_CAP:
        return None
    if s.util_pct is None or s.util_pct < CAP_BUSY_PCT:
        return None
    clocks = _clocks(s)
    line = (
        f"GPU {s.index}: power limit {limit:.0f} W of its {default:.0f} W default, "
        f"and the cap holds it{' — ' + clocks if clocks else ''}"
    )
    return GpuIssue(s.index, "gpu_power_capped", f"cap {limit:.0f}W", False, line)


def _health_issues(h: GpuHealth, now: float) -> list[GpuIssue]:
    if now - h.time > HEALTH_FRESH_S:
        return []
    out: list[GpuIssue] = []
    i = h.index
    if h.remap_failure:
        out.append(GpuIssue(i, "gpu_ecc", "remap failed", True,
                            f"GPU {i}: row remapping failed — no spare row was left"))  # fmt: skip
    if h.remap_pending:
        out.append(GpuIssue(i, "gpu_ecc", "reset needed", True,
                            f"GPU {i}: a row remap is pending — a GPU reset applies it"))  # fmt: skip
    if h.ecc_uncorrected:
        out.append(GpuIssue(i, "gpu_ecc", "ECC", True,
                            f"GPU {i}: {h.ecc_uncorrected} uncorrectable ECC error(s) "
                            "since the driver loaded"))  # fmt: skip
    if h.pcie_width is not None and h.pcie_width_max and h.pcie_width < h.pcie_width_max:
        out.append(GpuIssue(i, "gpu_pcie_link", f"x{h.pcie_width}", False,
                            f"GPU {i}: PCIe link x{h.pcie_width} of x{h.pcie_width_max} "
                            f"(gen {h.pcie_gen or '?'})"))  # fmt: skip
    busy = h.util_pct is not None and h.util_pct >= CAP_BUSY_PCT
    if busy and h.pcie_gen is not None and h.pcie_gen_max and h.pcie_gen < h.pcie_gen_max:
        out.append(GpuIssue(i, "gpu_pcie_link", f"gen{h.pcie_gen}", False,
                            f"GPU {i}: PCIe link gen {h.pcie_gen} of gen {h.pcie_gen_max} "
                            f"under load ({h.util_pct:.0f} % utilization)"))  # fmt: skip
    return out


def recent_xids(state: GpuState, now: float) -> list[GpuEvent]:
    return [
        e
        for e in state.events
        if e.xid is not None and e.time is not None and now - e.time <= RECENT_EVENT_S
    ]


def xid_gpu(state: GpuState, ev: GpuEvent) -> int | None:
    """The GPU index an Xid names by its bus id (None: not one we read)."""
    for i, h in state.health.items():
        if h.bus_id and ev.bus_id and bus_key(h.bus_id) == ev.bus_id:
            return i
    return None


def _xid_issues(state: GpuState, now: float) -> list[GpuIssue]:
    out = []
    for ev in recent_xids(state, now):
        i = xid_gpu(state, ev)
        if i is None or ev.xid is None:
            continue
        broken = XID_MEANING.get(ev.xid, ("", "", False))[2]  # an Xid we do not know: yellow
        out.append(GpuIssue(i, "gpu_xid", f"Xid {ev.xid}", broken,
                            f"GPU {i}: Xid {ev.xid}, {xid_words(ev.xid)}"))  # fmt: skip
    return out


def gpu_issues(state: GpuState, now: float) -> list[GpuIssue]:
    """Everything wrong with each GPU now, by GPU index, the broken first."""
    out: list[GpuIssue] = []
    for s in state.latest.values():
        if now - s.time > GPU_FRESH_S:
            continue
        for issue in (_throttle_issue(state, s, now), _cap_issue(state, s)):
            if issue is not None:
                out.append(issue)
    for h in state.health.values():
        out += _health_issues(h, now)
    out += _xid_issues(state, now)
    return sorted(out, key=lambda x: (x.index, not x.broken))


def gpu_marks(state: GpuState, now: float) -> dict[int, tuple[str, bool]]:
    """A GPU row's mark: {index: ("thermal · x8", broken)}."""
    marks: dict[int, tuple[list[str], bool]] = {}
    for x in gpu_issues(state, now):
        words, broken = marks.get(x.index, ([], False))
        if x.mark not in words:
            words.append(x.mark)
        marks[x.index] = (words, broken or x.broken)
    return {i: (" · ".join(w), b) for i, (w, b) in marks.items()}


def hhmm(t: float) -> str:
    return time.strftime("%H:%M", time.localtime(t))


def step_seconds(ring: Ring, t0: float, t1: float) -> float | None:
    """Seconds a step over [t0, t1], from the step counter's points; None
    with fewer than two advances there."""
    pts = [(t, v) for t, v in ring.since(t0) if t <= t1 and v is not None]
    if len(pts) < 2 or pts[-1][1] - pts[0][1] < 2:
        return None
    return (pts[-1][0] - pts[0][0]) / (pts[-1][1] - pts[0][1])


def slowdown_words(ctx: Context, since: float) -> str | None:
    """ "this run's steps are 1.6× slower since 14:02 (0.52 → 0.83 s a step)",
    or that they are not; None when the steps before or since are unknown."""
    ring = ctx.metrics.step
    before = step_seconds(ring, since - STEP_WINDOW_S, since)
    after = step_seconds(ring, since, ctx.now)
    if before is None or after is None or before <= 0:
        return None
    ratio = after / before
    if ratio >= SLOWER_FACTOR:
        return (
            f"this run's steps are {ratio:.1f}× slower since {hhmm(since)} "
            f"({before:.2f} → {after:.2f} s a step)"
        )
    return f"this run's step time has not risen with it ({before:.2f} → {after:.2f} s a step)"


# ------------------------------------------------------------------ the rules


def _run_issues(ctx: Context, kind: str) -> list[GpuIssue]:
    """The issues of `kind` on the watched run's GPUs (all GPUs when the
    run's are not known)."""
    mine = {g.sample.index for g in ctx.gpu_views}
    found = ctx.once("gpu_issues", lambda: gpu_issues(ctx.gpus, ctx.now))
    return [x for x in found if x.kind == kind and x.index in mine]


@rule(Kind("gpu_throttled", specificity=202, cause="gpu_throttled", alerts=True))
def rule_gpu_throttled(ctx: Context) -> Finding | None:
    found = _run_issues(ctx, "gpu_throttled")
    if not found:
        return None
    first = min(found, key=lambda x: x.since or ctx.now)
    names = ", ".join(str(x.index) for x in found)
    what = found[0].line.split(": ", 1)[1].split(" (reasons", 1)[0]
    gpus = f"GPU {names} is" if len(found) == 1 else f"GPUs {names} are"
    slower = slowdown_words(ctx, first.since or ctx.now)
    thermal = any(x.mark == "thermal" for x in found)
    title = f"{gpus} {'thermally ' if thermal else ''}throttled ({what})"
    if slower is not None and "slower" in slower:
        title += ": " + slower
    evidence = [x.line for x in found] + ([slower] if slower else [])
    fix = (
        "check the cooling: fans, airflow, inlet temperature, a blocked heatsink "
        "(`nvidia-smi -q -d TEMPERATURE,PERFORMANCE` on the host)"
        if thermal
        else "check the power supply and the board (`nvidia-smi -q -d PERFORMANCE` "
        "on the host); a HW slowdown or power brake is signalled from outside the GPU"
    )
    return Finding(
        kind="gpu_throttled", severity=Severity.WARNING, title=title, evidence=evidence, fix=fix
    )


@rule(Kind("gpu_power_capped", specificity=204, cause="gpu_power_capped"))
def rule_gpu_power_capped(ctx: Context) -> Finding | None:
    found = _run_issues(ctx, "gpu_power_capped")
    if not found:
        return None
    x = found[0]
    return Finding(
        kind="gpu_power_capped",
        severity=Severity.WARNING,
        title=x.line.replace(": power limit", "'s power limit is set low:", 1),
        evidence=[y.line for y in found],
        fix=f"if nobody meant it: `nvidia-smi -i {x.index} -pl <watts>` on the host "
        "(the default is `nvidia-smi -q -d POWER`'s Default Power Limit)",
    )


@rule(Kind("gpu_ecc", specificity=42, cause="gpu_ecc", alerts=True))
def rule_gpu_ecc(ctx: Context) -> Finding | None:
    found = _run_issues(ctx, "gpu_ecc")
    if not found:
        return None
    idx = sorted({x.index for x in found})
    failed = any(x.mark == "remap failed" for x in found)
    fix = (
        "the GPU ran out of spare rows: have it replaced (RMA)"
        if failed
        else f"stop the run and reset the GPU (`nvidia-smi -r -i {idx[0]}` on the host, "
        "or reboot); resume from the last checkpoint — results since the error may be wrong"
    )
    head = found[0].line.split(": ", 1)[1]
    return Finding(
        kind="gpu_ecc",
        severity=Severity.ERROR,
        title=f"GPU {', '.join(map(str, idx))}: {head}",
        evidence=[x.line for x in found],
        fix=fix,
    )


@rule(Kind("gpu_pcie_link", specificity=206, cause="gpu_pcie_link"))
def rule_gpu_pcie_link(ctx: Context) -> Finding | None:
    found = _run_issues(ctx, "gpu_pcie_link")
    if not found:
        return None
    return Finding(
        kind="gpu_pcie_link",
        severity=Severity.WARNING,
        title=found[0].line + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
        evidence=[x.line for x in found]
        + ["the generation is judged under load only: an idle GPU downshifts it to save power"],
        fix="reseat the GPU or its riser and check the slot's BIOS setting "
        "(`lspci -vv -s <bus id>`: LnkSta vs LnkCap)",
    )


def xid_finding(ctx: Context, events: list[GpuEvent]) -> Finding:
    """The kernel log's Xid events -> one finding: number, meaning, the GPU
    by bus id, and whether the watched run holds it."""
    ev = events[-1]
    xid = ev.xid if ev.xid is not None else 0
    meaning, whose, broken = XID_MEANING.get(xid, ("see NVIDIA's Xid catalog", "hardware", False))
    idx = xid_gpu(ctx.gpus, ev)
    where = f"GPU {idx} (PCI {ev.bus_id})" if idx is not None else f"the GPU at PCI {ev.bus_id}"
    held = _run_holds(ctx, idx, ev.pid)
    title = f"{where} reported Xid {xid}: {meaning}"
    if held is not None:
        title += " — this run holds it" if held else " — not this run's GPU"
    evidence = [e.text[:160] for e in events[-5:]]
    if ev.pid is not None:
        evidence.append(f"the driver names PID {ev.pid} (a host PID)")
    if whose == "program":
        fix = (
            "the program faulted: read its traceback; rerun with CUDA_LAUNCH_BLOCKING=1 "
            "to find the kernel (compute-sanitizer for an illegal address)"
        )
    else:
        gpu = f" -i {idx}" if idx is not None else ""
        fix = (
            f"stop the runs on it and reset the GPU (`nvidia-smi -r{gpu}` on the host) or "
            "reboot; if it comes back, have the GPU checked (`nvidia-bug-report.sh`)"
        )
    sev = Severity.ERROR if broken and held is not False else Severity.WARNING
    return Finding(kind="gpu_xid", severity=sev, title=title, evidence=evidence, fix=fix)


def _run_holds(ctx: Context, idx: int | None, pid: int | None) -> bool | None:
    """Whether the watched run holds GPU `idx` (or is the PID the driver
    names); None when neither the GPU nor the run's processes are known."""
    if not ctx.run_pids:
        return None
    mine = [
        gp for gp in ctx.gpus.processes or [] if gp.ct_pid is not None and gp.ct_pid in ctx.run_pids
    ]
    if pid is not None and any(gp.host_pid == pid for gp in mine):
        return True
    s = ctx.gpus.latest.get(idx) if idx is not None else None
    if s is None or not s.uuid:
        return None
    return any(gp.gpu_uuid == s.uuid for gp in mine)


def reasons_words(mask: int | None) -> str:
    """The reasons a bitmask holds, for a zoom line ("idle", "SW power cap")."""
    if mask is None:
        return "not read"
    return ", ".join(reason_names(mask)) or "none"


# ------------------------------------------------------------------ in words, per GPU


def _or_dash(v: object, fmt: str = "{}") -> str:
    return "–" if v is None else fmt.format(v)


def health_summary(state: GpuState, index: int) -> str:
    """Every health field of one GPU in one line, as read ("–": not read or
    not supported): the `g` zoom, the host view, doctor."""
    s = state.latest.get(index)
    h = state.health.get(index)
    parts = []
    if s is not None:
        clocks = _clocks(s) or "SM clock –"
        parts.append(f"{clocks} ({reasons_words(s.event_reasons)})")
    if h is not None:
        parts.append(
            f"PCIe gen {_or_dash(h.pcie_gen)} x{_or_dash(h.pcie_width)} "
            f"of gen {_or_dash(h.pcie_gen_max)} x{_or_dash(h.pcie_width_max)}"
        )
        parts.append(f"uncorrectable ECC {_or_dash(h.ecc_uncorrected)}")
        remap = (
            "–"
            if h.remap_pending is None and h.remap_failure is None
            else ("failed" if h.remap_failure else ("pending" if h.remap_pending else "none"))
        )
        parts.append(f"row remap {remap}")
        if h.power_default_w is not None and s is not None and s.power_limit_w is not None:
            parts.append(f"power limit {s.power_limit_w:.0f} of {h.power_default_w:.0f} W default")
    return f"GPU {index}: " + (" · ".join(parts) if parts else "no health reading yet")


def health_facts(state: GpuState, now: float) -> list[dict[str, object]]:
    """Per GPU, for `doctor --json` and the host view: the fields as read
    (None: not read / not supported) and what is wrong ({kind, mark,
    broken, line})."""
    issues = gpu_issues(state, now)
    out: list[dict[str, object]] = []
    for i in sorted(set(state.latest) | set(state.health)):
        s = state.latest.get(i)
        h = state.health.get(i)
        out.append(
            {
                "gpu": i,
                "event_reasons": None if s is None else s.event_reasons,
                "reasons": []
                if s is None or s.event_reasons is None
                else reason_names(s.event_reasons),
                "sm_clock_mhz": None if s is None else s.sm_clock_mhz,
                "sm_clock_max_mhz": None if s is None else s.sm_clock_max_mhz,
                "bus_id": "" if h is None else h.bus_id,
                "ecc_uncorrected": None if h is None else h.ecc_uncorrected,
                "remap_pending": None if h is None else h.remap_pending,
                "remap_failure": None if h is None else h.remap_failure,
                "pcie": None
                if h is None
                else {
                    "gen": h.pcie_gen,
                    "gen_max": h.pcie_gen_max,
                    "width": h.pcie_width,
                    "width_max": h.pcie_width_max,
                },
                "issues": [
                    {"kind": x.kind, "mark": x.mark, "broken": x.broken, "line": x.line}
                    for x in issues
                    if x.index == i
                ],
            }
        )
    return out
