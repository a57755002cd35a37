"""Rules about the GPUs themselves: a GPU lost or reporting Xid errors,
memory held by leftovers or by no live process, GPUs unreadable (the
hardware's own health — throttling, ECC, PCIe, the kernel log's Xid — is
hardware.py's).

Each rule registers itself with `@rule(...)` (see registry.py). Pure."""

from __future__ import annotations

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.hardware import recent_xids, xid_finding
from gputui.diagnose.holders import (
    Holder,
    gpu_holders,
    holder_line,
    leftover_is_mine,
    leftover_words,
)
from gputui.diagnose.host import _nvidia_smi_missing
from gputui.diagnose.registry import Kind, rule
from gputui.diagnose.thresholds import LEFTOVER_IDLE_S, RECENT_EVENT_S
from gputui.model import Finding, GpuProcess, Severity
from gputui.text.words import dur, gib


@rule(Kind("gpu_lost", specificity=40, cause="gpu_lost", alerts=True, host_level=True))
def rule_gpu_lost(ctx: Context) -> Finding | None:
    lost = [e for e in (ctx.gpus.events or []) if e.lost]
    if not lost or not ctx.gpus.lost:  # GpuState.lost: still lost now, not recovered
        return None
    return Finding(
        kind="gpu_lost",
        severity=Severity.ERROR,
        title=f"a GPU fell off the bus: {short(lost[-1].text, 100)}",
        evidence=[short(e.text, 160) for e in lost[-3:]],
        fix="check `dmesg | grep -i xid` on the host; the GPU needs a reset (`nvidia-smi -r`) or a reboot",
    )


@rule(Kind("gpu_memory_orphaned", specificity=190, cause="gpu_memory_orphaned"))
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
        h for h in gpu_holders(ctx) if tree and h.kind != "run" and h.leftover and h.gp.in_container
    ]
    run_alive = ctx.proc_alive or (
        ctx.session is not None and ctx.session.alive and not ctx.session_dead
    )
    if leftovers and run_alive:
        return _leftover_finding(ctx, leftovers)
    if run_alive or not ctx.run_known_gone or not ctx.ct_usable:
        return None
    live = {(h.gp.gpu_uuid, h.gp.host_pid) for h in gpu_holders(ctx) if h.live_other}
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
        fix += _others_words(ctx, gprocs)
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
    ev += [
        holder_line(h, ctx.now, idle)
        for h in gpu_holders(ctx)
        if h.kind != "run" and not h.leftover
    ]
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
        fix=_leftover_fix(ctx, leftovers),
    )


def _leftover_fix(ctx: Context, leftovers: list[Holder]) -> str:
    """`kill PID` in the container for the run user's own leftovers only;
    another user's is named with its owner, one of an unknown owner gets the
    command that says whose it is (issue 45: never a bare kill of a process
    the run's user does not own)."""
    mine = [h.pid for h in leftovers if leftover_is_mine(ctx, h)]
    parts = []
    if mine:
        kill = ctx.in_ct("kill " + " ".join(map(str, mine)))
        parts.append(f"{kill}  (after checking they are leftovers)")
    parts += [leftover_words(ctx, h) for h in leftovers if not leftover_is_mine(ctx, h)]
    return "; ".join(parts)


def _others_words(ctx: Context, gprocs: list[GpuProcess]) -> str:
    """'' when no holder is known to be another user's; else that only the
    run user's are to be killed, and whose the others are (issue 45)."""
    listed = {(gp.gpu_uuid, gp.host_pid) for gp in gprocs}
    theirs = [
        h
        for h in gpu_holders(ctx)
        if (h.gp.gpu_uuid, h.gp.host_pid) in listed and leftover_is_mine(ctx, h) is False
    ]
    if not theirs:
        return ""
    named = "; ".join(
        f"{h.whose}'s PID {h.pid} in {ctx.ct_words} is not this run's user's: ask them or, as root, kill it"
        for h in theirs
    )
    return f" of this run's user only — {named}"


def _gp_line(gp: GpuProcess) -> str:
    used = f"{gib(gp.used_mib)}" if gp.used_mib is not None else "? GiB"
    name = f" {gp.name}" if gp.name else ""
    if gp.ct_pid == gp.host_pid:  # a plain host: one PID space
        return f"PID {gp.host_pid}{name}: {used} on {gp.gpu_uuid or 'a GPU'}"
    where = f"CT PID {gp.ct_pid}" if gp.ct_pid is not None else "not in the watched CT"
    return f"host PID {gp.host_pid}{name} ({where}): {used} on {gp.gpu_uuid or 'a GPU'}"


@rule(Kind("gpu_xid", specificity=200, cause="gpu_xid", alerts=True, host_level=True))
def rule_gpu_xid(ctx: Context) -> Finding | None:
    xids = recent_xids(ctx.gpus, ctx.now)  # the kernel log's, parsed: number, GPU, meaning
    if xids:
        return xid_finding(ctx, xids)
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
        title=f"the GPU driver reported {len(recent)} error event(s): {short(recent[-1].text, 100)}",
        evidence=[short(e.text, 160) for e in recent[-5:]],
        fix="check `dmesg | grep -i xid` on the host (Xid 79/48/63/64: hardware; 13/31/43: the program)",
    )


@rule(Kind("gpu_unreadable", specificity=210, cause="gpu_unreadable", host_level=True))
def rule_gpu_unreadable(ctx: Context) -> Finding | None:
    if not ctx.gpus.error or _nvidia_smi_missing(ctx):
        return None
    return Finding(
        kind="gpu_unreadable",
        severity=Severity.WARNING,
        title=f"cannot read the GPUs: {short(ctx.gpus.error, 100)}",
        evidence=[ctx.gpus.error] + ([f"source: {ctx.gpus.source}"] if ctx.gpus.source else []),
        fix="run `nvidia-smi` on the host by hand to see the error",
    )
