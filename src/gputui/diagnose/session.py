"""Rules about the run's session and process: the session dead or
missing, the run ended, exited inside a live pane, killed by the OOM killer,
running code older than its source.

Each rule registers itself with `@rule(...)` (see registry.py). Pure."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import SIGNAL_HINTS, last_error_line, quote_tail, short, signal_name
from gputui.diagnose.oomkill import kernel_log_words
from gputui.diagnose.registry import Kind, rule
from gputui.diagnose.thresholds import MTIME_SLACK_S
from gputui.model import Finding, Pane, Severity, YourKill
from gputui.text.numbers import bounded_int
from gputui.text.words import dur


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


@rule(
    Kind(
        "oom_killed",
        specificity=50,
        cause="oom_killed",
        # said so, not "ended", "died" or "exited"
        supersedes=("session_dead", "run_finished", "run_ended", "run_exited"),
    )
)
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
        *kernel_log_words(ctx.snap.kernel_oom),
    ]
    if tail:
        ev += ["last lines:", *quote_tail(tail)]
    return Finding(
        kind="oom_killed",
        severity=Severity.ERROR,
        title=f"the run in session {name} was killed by the OOM killer (out of host memory)",
        evidence=ev,
        action="relaunch",
        action_label="relaunch",
        fix=f"give {ctx.ct_words} more memory, or lower the batch size / DataLoader workers",
    )


_WRAPPER_EXIT_RE = re.compile(r"^\[gputui\] exit (\d+)\b")


def wrapper_exit_status(lines: list[str]) -> int | None:
    """The exit status gputui's launch wrapper recorded (`[gputui] exit N`),
    the last one in `lines`, else None."""
    for line in reversed(lines):
        m = _WRAPPER_EXIT_RE.match(line.strip())
        status = bounded_int(m.group(1), 0, 255) if m else None
        if status is not None:
            return status
    return None


@rule(
    Kind(
        "session_dead",
        specificity=60,
        cause="run_end",
        stage=3,
        alerts=True,
        gone=True,
        host_word="dead",
    ),
    Kind("run_finished", specificity=240, cause="run_end"),
    Kind("run_ended", specificity=250, cause="run_end", stage=1, gone=True),
    # the user's own k: said so, not "died", "ended without a word" or "killed (OOM?)"
    Kind(
        "run_stopped",
        specificity=235,
        cause="run_stopped",
        supersedes=("run_killed", "run_exited", "kernel_oom_kill", "oom_killed"),
    ),
)
def rule_session_dead(ctx: Context) -> Finding | None:
    """The watched session (or its main pane) is dead: how it ended, in
    the words its exit status, signal and last error allow."""
    snap = ctx.snap
    if not ctx.ct_usable or not ctx.session_dead:
        return None
    pane_tail = list(snap.pane_tail or [])
    log_tail = list(snap.log_tail or [])
    error = last_error_line(pane_tail) or last_error_line(log_tail)
    tail_src, tail = ("pane", pane_tail) if pane_tail else ("log " + (ctx.log.path or ""), log_tail)
    quoted = [f"last lines of the {tail_src}:", *quote_tail(tail)] if tail else []
    session = ctx.session
    pane = session.main_pane if (session is not None and not snap.session_gone) else None
    if pane is None:  # the whole session is gone (no remain-on-exit)
        return _session_gone(ctx, error, quoted)
    if snap.your_kill is not None and pane.dead:
        return _run_stopped(ctx, pane, snap.your_kill, quoted)
    return _pane_dead(ctx, pane, _pane_exit(pane, pane_tail, log_tail), error, quoted)


def _session_gone(ctx: Context, error: str | None, quoted: list[str]) -> Finding:
    """The tmux session no longer exists: no exit status to tell."""
    name = ctx.snap.session_name
    title = f"session {name} is gone"
    if error:
        title += f": {error}"
    ev = [f"tmux session {name} no longer exists in {ctx.ct_words}"]
    restarted = ctx.snap.ct_restarted_at
    if restarted is not None:  # every process in it ended then
        ago = dur(max(0.0, ctx.now - restarted))
        ev.insert(0, f"{ctx.ct_words} was stopped and started again ({ago} ago): its run ended")
        if not error:
            title += f" — {ctx.ct_words} was stopped and started again"
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


@dataclass(frozen=True)
class _Exit:
    """How a dead pane ended: `status` (from tmux or, `recorded`, from the
    log's "[gputui] exit N" line) and `sig` (a signal, also from 128+N)."""

    status: int | None
    sig: int | None
    recorded: bool


def _pane_exit(pane: Pane, pane_tail: list[str], log_tail: list[str]) -> _Exit:
    status, sig = pane.dead_status, pane.dead_signal
    recorded = None
    if status is None and sig is None:
        # tmux 3.3a sometimes loses a dead pane's status; gputui's own
        # launch wrapper writes it into the log as "[gputui] exit N"
        recorded = wrapper_exit_status(pane_tail) or wrapper_exit_status(log_tail)
        status = recorded
    if sig is None and status is not None and 128 < status <= 128 + 64:
        sig = status - 128  # the shell reports a child killed by signal N as 128+N
    return _Exit(status, sig, recorded is not None)


def _pane_dead(
    ctx: Context, pane: Pane, ex: _Exit, error: str | None, quoted: list[str]
) -> Finding:
    """The main pane is dead (remain-on-exit): died, finished or ended."""
    name = ctx.snap.session_name
    status, sig = ex.status, ex.sig
    ev = [f"pane {pane.window_index}.{pane.pane_index} of session {name}: dead"]
    if pane.start_command:
        ev.append(f"it ran: {short(pane.start_command, 120)}")
    if sig:
        hint = SIGNAL_HINTS.get(sig, "")
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
            return _run_finished(name, ev, quoted)
        title = f"session {name} exited 0, but its output ends in an error: {error}"
        ev.insert(1, "exit status 0")
        if "|" in (pane.start_command or ""):
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
            + (" (from the log's [gputui] exit line)" if ex.recorded else ""),
        )
    elif not error:
        return _run_ended(name, ev, quoted)
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


def _run_stopped(ctx: Context, pane: Pane, kill: YourKill, quoted: list[str]) -> Finding:
    """The pane is dead because the user stopped its run with k (gputui's
    audit log says so, doctor read it): an ending, not a death."""
    name = ctx.snap.session_name
    ago = dur(max(0.0, ctx.now - kill.at))
    how = f", {kill.ended_by}" if kill.ended_by and kill.ended_by != "already gone" else ""
    return Finding(
        kind="run_stopped",
        severity=Severity.INFO,
        title=f"the run in session {name} ended: stopped by you (k, {ago} ago{how})",
        evidence=[
            f"pane {pane.window_index}.{pane.pane_index} of session {name}: dead, kept "
            "(remain-on-exit) with its output",
            f"gputui's audit log: kill of session {name}, pane PID {pane.pid}",
            *quoted,
        ],
        action="relaunch",
        action_label="relaunch",
    )


def _run_finished(name: str | None, ev: list[str], quoted: list[str]) -> Finding:
    return Finding(
        kind="run_finished",
        severity=Severity.INFO,
        title=f"the run in session {name} finished (exit status 0)",
        evidence=[*ev, "exit status 0", *quoted],
        action="relaunch",
        action_label="relaunch",
    )


def _run_ended(name: str | None, ev: list[str], quoted: list[str]) -> Finding:
    """tmux 3.3a (Debian 12, Proxmox 8 CTs) loses a dead pane's status at
    times. Nothing says it failed: "died" would be a guess, and a run that
    finished is the common case — but a kill (OOM) looks the same."""
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


@rule(
    Kind(
        "run_exited",
        specificity=70,
        cause="run_end",
        stage=2,
        alerts=True,
        gone=True,
        host_word="dead",
    ),
)
def rule_run_exited(ctx: Context) -> Finding | None:
    """The pane is alive (a shell), but the Python process is gone and the
    output ends in an error: the run crashed inside a live session."""
    snap = ctx.snap
    s = ctx.session
    if not ctx.ct_usable or s is None or ctx.session_dead or not ctx.procs:
        return None
    if any(p.is_python for p in ctx.procs):
        return None
    pane_tail = list(snap.pane_tail or [])
    log_tail = list(snap.log_tail or [])
    error = last_error_line(pane_tail) or last_error_line(log_tail)
    shell = ", ".join(f"PID {p.pid} {short(p.command, 40)}" for p in ctx.procs[:3])
    if not error:
        return None  # ended without an error: killed.py's words (killed, finished, ended)
    src, tail = ("pane", pane_tail) if last_error_line(pane_tail) else ("log", log_tail)
    return Finding(
        kind="run_exited",
        severity=Severity.ERROR,
        title=f"no Python process left in session {s.name}; the {src} ends in: {error}",
        evidence=[f"the pane still runs: {shell}", f"last lines of the {src}:", *quote_tail(tail)],
        action="relaunch",
        action_label="relaunch",
    )


@rule(
    Kind("session_missing", specificity=180, cause="session_missing", gone=True),
    names=("session_dead",),
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
            evidence=[*ev, f"PID {p.pid} ({short(p.command, 80)}) writes {ctx.log.path}"],
            fix="drop --session to watch it by its log",
        )
    error = last_error_line(list(snap.log_tail or []))
    if error:
        ev += [f"last lines of the log {ctx.log.path}:", *quote_tail(list(snap.log_tail))]
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


@rule(Kind("stale_code", specificity=160, cause="stale_code"))
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
        + [f"PID {p.pid} ({short(p.command, 80)}) still runs the old code"],
        action="relaunch",
        action_label="relaunch",
    )
