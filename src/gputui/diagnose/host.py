"""Rules about reaching the run: the connection, the container (stopped,
missing), the tools in it, the log's disk (full, nearly full).

Each rule registers itself with `@rule(...)` (see registry.py). Pure."""

from __future__ import annotations

import os
import shlex

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.registry import Kind, rule
from gputui.model import ConnectionState, CtStatus, Finding, Severity
from gputui.text.words import dur, program_name, size_words


@rule(
    Kind("connection", specificity=10, cause="connection", alerts=True, host_level=True),
    offline=True,
)
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
        return f"container {ctx.snap.ct_id}"
    return c.words


@rule(Kind("ct_missing", specificity=20, cause="container", stage=1, alerts=True, host_level=True))
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


@rule(Kind("ct_stopped", specificity=30, cause="container", alerts=True, host_level=True))
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


def _nvidia_smi_missing(ctx: Context) -> bool:
    """Known missing on both sides: the host said so, and the CT's probe
    answered without it (or there is no CT). Not yet known is not missing."""
    t = ctx.tools
    if t.nvidia_smi_host is not False:
        return False
    if ctx.snap.container is None or not ctx.snap.container.kind:  # the host itself
        return True
    return t.probed and t.nvidia_smi_ct is False


@rule(Kind("tools_missing", specificity=260, cause="tools_missing"))
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


def _space_line(ctx: Context) -> str | None:
    free, total = ctx.log.fs_free, ctx.log.fs_total
    if free is None:
        return None
    of = f" of {size_words(total)} ({100.0 * free / total:.1f} % free)" if total else ""
    return f"the file system holding {ctx.log.path} in {ctx.ct_words}: {size_words(free)} free{of}"


@rule(
    Kind(
        "disk_full",
        specificity=80,
        cause="disk",
        stage=1,
        alerts=True,
        host_word="stalled",
        host_word_error="full",
        # a run whose writes fail for space waits, its GPUs idle: the disk is
        # the cause, not a hang (a doctor that watched long enough said both)
        supersedes=("held_but_idle",),
    ),
    Kind("disk_low", specificity=220, cause="disk"),
)
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
        ev.append(f"the {said[0]} says: {short(said[1], 160)}")
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
