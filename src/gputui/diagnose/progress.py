"""Rules about progress: loading (no alarm), stalled (a step overdue),
probably hung (GPUs holding memory gone idle).

Each rule registers itself with `@rule(...)` (see registry.py). Pure."""

from __future__ import annotations

from gputui.diagnose.context import Context, GpuView
from gputui.diagnose.evidence import short
from gputui.diagnose.registry import Kind, rule
from gputui.diagnose.thresholds import LOADING_MAX_AGE_S
from gputui.model import Finding, Proc, Severity
from gputui.text.words import dur, gib, secs


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


def _overdue_words(ctx: Context) -> str:
    """When a step counts as overdue, and why then."""
    if ctx.stale_as_set:
        return (
            f"a step is overdue once the log is silent past the stale_after you set "
            f"({dur(ctx.threshold)}), whatever the step time"
        )
    return (
        f"a step is overdue after {dur(ctx.overdue_after)} ({ctx.th.step_overdue_factor:g} × "
        f"the median step time, at least the stale threshold {dur(ctx.threshold)})"
    )


@rule(Kind("loading", specificity=230, cause="loading", silence=True))
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


def _hang_evidence(
    ctx: Context, p: Proc, idle_views: list[GpuView], busy_views: list[GpuView]
) -> list[str]:
    """The GPUs idle and busy, the last step, the thresholds, the process."""
    th = ctx.th
    ev = [
        f"{g.line()}, below {th.idle_util_pct:.0f} % for {dur(g.idle_for or 0)}" for g in idle_views
    ]
    ev += [f"{g.line()}, still busy" for g in busy_views]
    m = ctx.metrics
    if m.last_step_time is not None:
        ev.append(f"last step {m.last_step} arrived {dur(ctx.now - m.last_step_time)} ago")
    else:
        ev.append("no step seen in the log")
    ev.append(f"{_overdue_words(ctx)}; probably hung after {dur(th.hang_after_s)} idle")
    state = f"state {p.state}" if p.state else "state unknown"
    cpu = f", CPU {p.cpu_pct:.0f} %" if p.cpu_pct is not None else ""
    ev.append(f"PID {p.pid} ({short(p.command, 60)}): {state}{cpu}")
    if ctx.block_buffered:
        ev.append(
            "its stdout is block-buffered too, but buffering does not make GPUs idle: "
            "this run is stuck, and relaunching unbuffered would not fix it"
        )
    return ev


def _hung_title(
    ctx: Context, idle: float, idle_views: list[GpuView], busy_views: list[GpuView]
) -> str:
    """'probably hung: ...': a stuck rank, or every GPU holding memory idle."""
    th, m = ctx.th, ctx.metrics
    idle_words = dur(idle) if idle >= th.hang_after_s else f"for all {dur(idle)} sampled"
    step_words = (
        f"no new step for {dur(ctx.now - m.last_step_time)}"
        if m.last_step_time is not None
        else "no step seen"
    )
    if busy_views:
        return (
            f"probably hung: {_gpu_list(idle_views)} idle {idle_words} while "
            f"{_gpu_list(busy_views)} spin, {step_words} — one rank is stuck and the "
            "others wait for it in a collective (NCCL)"
        )
    else:
        if ctx.own_readings and ctx.run_held_mib is not None:
            return (
                f"probably hung: its processes hold {gib(ctx.run_held_mib)} on "
                f"{_gpu_list(idle_views)} but have done no GPU work for {idle_words}, {step_words}"
            )
        return (
            f"probably hung: GPUs hold {gib(ctx.held_mib)} but have been idle "
            f"{idle_words}, {step_words}"
        )


# a run of the same program made its first step this many times faster
# than the new one has waited: the new one is not "still starting up"
FIRST_STEP_SLACK = 3.0


def _past_last_runs_first_step(ctx: Context, age: float) -> bool:
    """The last run of the same program (the history's) made its first step
    N s after its start, and this one has waited FIRST_STEP_SLACK × N — and
    the hang window — with no step: a relaunch that hangs before its first
    step (NCCL init, a dead data node) is a hang, not a start-up. Without
    such a run, a young run with no step may still be loading (15 min)."""
    vs = ctx.snap.vs_last
    first = vs.first_step.old if vs is not None and vs.first_step is not None else None
    if first is None or first <= 0:
        return False
    return age > max(FIRST_STEP_SLACK * first, ctx.th.hang_after_s)


@rule(
    Kind(
        "held_but_idle",
        specificity=90,
        cause="hang",
        stage=1,
        alerts=True,
        silence=True,
        host_word="stalled",
        host_word_error="hung",
    )
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
    ev = _hang_evidence(ctx, p, idle_views, busy_views)
    m = ctx.metrics
    cpu_busy = (p.cpu_pct is not None and p.cpu_pct >= th.cpu_busy_pct) or p.state == "D"
    age = ctx.proc_age()
    # no step seen yet in a young process: maybe still starting — unless stdout
    # is block-buffered, where the steps it made are stuck in the buffer
    starting = (
        m.last_step is None
        and age is not None
        and age < LOADING_MAX_AGE_S
        and not ctx.maybe_buffered
        and not _past_last_runs_first_step(ctx, age)
    )
    one_rank = (
        f"{_gpu_list(idle_views)} idle {dur(idle)} while {_gpu_list(busy_views)} stay busy "
        "— one rank stuck, the others waiting for it in a collective (NCCL)?"
        if busy_views
        else f"no GPU work by its processes for {dur(idle)}"
        if ctx.own_readings
        else f"GPUs idle {dur(idle)}"
    )
    if not ctx.hung or cpu_busy or starting:
        why = ""
        if cpu_busy:
            why = f" — PID {p.pid} is busy on CPU or disk: saving a checkpoint or preprocessing?"
        elif starting:
            why = f" — no step yet, {dur(age or 0)} after start: still starting up?"
        elif ctx.maybe_buffered and m.last_step is None:
            why = " — stdout is block-buffered, so the steps it made may not be in the log yet"
        return Finding(
            kind="held_but_idle",
            severity=Severity.WARNING,
            title=f"stalled: {_no_step_words(ctx)}; {one_rank}{why}",
            evidence=ev,
            action="dump",
            action_label="py-spy dump",
        )
    return Finding(
        kind="held_but_idle",
        severity=Severity.ERROR,
        title=_hung_title(ctx, idle, idle_views, busy_views),
        evidence=ev,
        action="dump",
        action_label="py-spy dump",
    )


@rule(
    Kind(
        "progress_stalled",
        specificity=170,
        cause="hang",
        alerts=True,
        silence=True,
        host_word="stalled",
    )
)
def rule_progress_stalled(ctx: Context) -> Finding | None:
    """No step for too long while no GPU has gone idle (held_but_idle says
    that): the log still moves but the step does not; or an unbuffered log is
    silent past the threshold with a step overdue while the GPUs stay busy."""
    if not ctx.ct_usable or not ctx.proc_alive or ctx.loading or ctx.hung or ctx.stalled:
        return None
    if ctx.disk_silenced:
        return None  # no line can reach a full disk
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
            _overdue_words(ctx),
            *[g.line() for g in ctx.gpu_views],
        ],
        action="dump",
        action_label="py-spy dump",
    )
