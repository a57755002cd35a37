"""Rules about the log: block-buffered stdout, busy but silent, the log
missing, deleted, unreadable, or the run writing another file (drift).

Each rule registers itself with `@rule(...)` (see registry.py). Pure."""

from __future__ import annotations

import os
import shlex

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import buffering_words, stdout_evidence, stdout_words
from gputui.diagnose.registry import Kind, rule
from gputui.model import NOT_FOLLOWED, UNREADABLE, Finding, Severity
from gputui.text.untrusted import one_line
from gputui.text.words import dur, unreadable_fix


def _unbuffer(ctx: Context) -> dict[str, str]:
    """The keys and fix for block-buffered stdout. A run that is its Docker/
    Podman container's or pod's main process (no tmux session) starts over
    with the same command on a restart, buffered again: the fix is its
    environment, not the relaunch key."""
    c = ctx.snap.container
    where = c.main_env_words() if c is not None else ""
    if ctx.snap.session is None and where:
        return {"fix": f"set PYTHONUNBUFFERED=1 in {where}, or add `-u` to its command"}
    panes = ctx.session.panes if ctx.session is not None else []
    launched = next((p.launched_command for p in panes if p.launched_command), "")
    if launched:
        # gputui's (re)launch already ran it with PYTHONUNBUFFERED=1 and
        # `python -u` where the command starts with python: relaunching again
        # starts it buffered again. Flushing live still helps.
        return {
            "action": "flush",
            "action_label": "flush live",
            "fix": (
                f"its start command `{one_line(launched, 80)}` runs python without -u and "
                "drops PYTHONUNBUFFERED (gputui's relaunch set it; relaunching again starts "
                "it buffered again): add `-u` to the python line or "
                "`export PYTHONUNBUFFERED=1` in it"
            ),
        }
    return {
        "action": "relaunch",
        "action_label": "relaunch unbuffered",
        "alt_action": "flush",
        "alt_action_label": "flush live",
        "fix": "add `-u` to the python command or `export PYTHONUNBUFFERED=1` in the start script",
    }


@rule(
    Kind(
        "busy_but_silent",
        specificity=100,
        cause="buffering",
        stage=1,
        alerts=True,
        silence=True,
        host_word="buffered",
    )
)
def rule_busy_but_silent(ctx: Context) -> Finding | None:
    if not ctx.ct_usable or not ctx.proc_alive or ctx.loading or ctx.hung or ctx.stalled:
        return None
    if ctx.disk_silenced:
        return None  # silent because its disk is full
    if not ctx.maybe_buffered or not ctx.log_silent or ctx.drift_files:
        return None  # the log showed the program flushes its lines: not buffering
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
    ev += ctx.buffering.evidence
    if p.fd1_pos is not None and p.stdout is not None and p.stdout.kind == "file":
        ev.append(f"fd 1 has written {p.fd1_pos} bytes so far")
    return Finding(
        kind="busy_but_silent",
        severity=Severity.WARNING,
        title=(  # the cause first: a banner cut at 80 columns still says it
            f"{what}, log silent {dur(silent)}: stdout is block-buffered — PID {p.pid} "
            f"writes to {stdout_words(p)} with no -u and PYTHONUNBUFFERED unset"
        ),
        evidence=ev,
        **_unbuffer(ctx),
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


@rule(
    Kind(
        "buffered_output",
        specificity=110,
        cause="buffering",
        alerts=True,
        host_word="buffered",
        defers_to=("busy_but_silent",),  # the silent log says it with its consequence
    )
)
def rule_buffered_output(ctx: Context) -> Finding | None:
    """Block-buffered stdout into the watched log, not (yet) silent past the
    threshold: the lines reach the log late, 8 KiB at a time. A WARNING with
    its fix once the log has shown it (a line cut at a 4 KiB boundary, its
    rest held back: buffering.py) — argv and environment alone are only a
    suspicion, and many programs flush their own lines. A hang or a silent
    log (held_but_idle, busy_but_silent) says it instead."""
    if not ctx.ct_usable or not ctx.proc_alive or ctx.hung or ctx.stalled or ctx.disk_silenced:
        return None
    if ctx.block_buffered is not True or ctx.drift_files:
        return None
    p = ctx.proc
    assert p is not None
    ev = [
        *ctx.buffering.evidence,
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
            f"log lines arrive in bursts up to {dur(pause)} late: stdout is block-buffered — "
            f"PID {p.pid} writes to {stdout_words(p)} with no -u and PYTHONUNBUFFERED unset"
        )
    return Finding(
        kind="buffered_output",
        severity=Severity.WARNING,
        title=title,
        evidence=ev,
        **_unbuffer(ctx),
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


@rule(Kind("log_missing", specificity=130, cause="log_missing", silence=True, gone=True))
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


@rule(Kind("log_deleted", specificity=140, cause="log_deleted"))
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


@rule(Kind("log_unreadable", specificity=150, cause="log_unreadable"))
def rule_log_unreadable(ctx: Context) -> Finding | None:
    """A log found from the run's stdout that gputui may not read: the log
    panel said "cannot read" and nothing else did. (A named one never gets
    here: it is one line, exit 2, at start.)"""
    path = ctx.log.path
    if ctx.log.not_a_file != UNREADABLE or not path:
        return None
    ev = _with_stdout(ctx, path, ctx.log.error or f"cannot read {path}: permission denied")
    return Finding(
        kind="log_unreadable",
        severity=Severity.WARNING,
        title=f"cannot read log {path} (permission denied): its lines are not shown",
        evidence=ev,
        fix=f"{unreadable_fix(path)}; or run gputui as a user that can read it",
    )


def _with_stdout(ctx: Context, path: str, said: str) -> list[str]:
    """The log's own words, then — the log found from the run's stdout —
    where that stdout goes."""
    ev = [said]
    p = ctx.proc
    if p is not None and p.stdout is not None and path in p.stdout.files:
        ev.append(stdout_evidence(p))
    return ev


@rule(Kind("log_not_followed", specificity=155, cause="log_not_followed"))
def rule_log_not_followed(ctx: Context) -> Finding | None:
    """A log found from the run's stdout that gputui will not follow as root
    (a directory on its way others may write, or the owner's setpriv
    missing): its log line said why, and the report "nothing wrong" — no
    step, stall or buffering could ever be seen. (A named one is one line,
    exit 2, at start.)"""
    path = ctx.log.path
    if ctx.log.not_a_file != NOT_FOLLOWED or not path:
        return None
    why, _, fix = (ctx.log.error or "").rpartition(" — ")
    ev = _with_stdout(ctx, path, why or f"{path} not followed")
    return Finding(
        kind="log_not_followed",
        severity=Severity.WARNING,
        title=f"log {path} is not followed: its lines, steps and stalls are not shown",
        evidence=ev,
        fix=fix or "keep the log in a directory only its owner can write",
    )


@rule(Kind("log_drift", specificity=120, cause="log_drift"))
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
