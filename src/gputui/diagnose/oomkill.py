"""The kernel's OOM killer named from its own line (`kernel_oom_kill`,
issue 47). Pure: reads `Snapshot.kernel_oom`, the kernel log's OOM kills
the monitor read once when the run's process vanished with no word in its
output (collect/oomkills.py).

A process the OOM killer takes dies of SIGKILL: its log stops, behind `|
tee` the shell prints no "Killed", and run_killed can only say "killed by a
signal?". The kernel's "Out of memory: Killed process 7899 (python) …
anon-rss:15370088kB" says who, how big, and whether the machine's RAM ran
out or a cgroup's limit (a container's memory). Which line is the run's: its
PID where gputui's PIDs are the kernel's; else a Python process (`python3`,
torch's `pt_main_thread`) killed after the log's last write, in the run's
container's cgroup where that is known.

When the kernel log could not be read (an unprivileged container, dmesg
restricted), the words of a vanished run say what could not be read and
where — never "nothing" (`kernel_log_words`).
"""

from __future__ import annotations

import re

from gputui.containers import in_cgroups
from gputui.diagnose.context import Context
from gputui.diagnose.evidence import last_error_line, quote_tail
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, KernelOomRead, OomKill, Severity
from gputui.text.untrusted import one_line
from gputui.text.words import dur, size_words

# the kernel's name of a run's process (comm, 15 characters at most)
_RUN_NAMES = re.compile(r"(?:python[\d.]*|pypy[\d.]*|pt_[\w-]*|torchrun|accelerate|deepspeed)")
# a kill this long before the log's last write is not what ended it
SLACK_S = 5.0
# without the log's time, a kill this recent (before the read) may be the run's
UNTIMED_WINDOW_S = 600.0


def vanished_quietly(ctx: Context, seen_alive: bool = False) -> bool:
    """The run's process is gone (the session dead or gone, its pane back
    at a shell with no Python left, or — `seen_alive`: its Python seen
    before — a run found by its log with no Python left) and neither the log
    nor the pane holds an error line: nothing the run wrote says how it ended."""
    if not ctx.ct_usable:
        return False
    alive_pane = ctx.session is not None and not ctx.session_dead
    no_python = not any(p.is_python for p in ctx.procs)
    gone = (
        ctx.session_dead
        or (alive_pane and bool(ctx.procs) and no_python)
        or (seen_alive and ctx.session is None and no_python)
        or _gone_before_looked(ctx)
    )
    if not gone:
        return False
    return (
        last_error_line(list(ctx.snap.pane_tail or [])) is None
        and last_error_line(list(ctx.snap.log_tail or [])) is None
    )


def _gone_before_looked(ctx: Context) -> bool:
    """The watched session is not there, no process writes its log, and the
    log was written in the last UNTIMED_WINDOW_S: a run started as `tmux new
    -s train "python … | tee log"` that the OOM killer took before gputui
    looked — its session ended with its command (seen on a real kernel: a
    cgroup's OOM kill, doctor said only "no tmux session named train")."""
    mtime = ctx.log.mtime
    return (
        ctx.run_known_gone
        and ctx.session is None
        and not ctx.procs
        and mtime is not None
        and 0.0 <= ctx.now - mtime <= UNTIMED_WINDOW_S
    )


def run_kill(ctx: Context) -> OomKill | None:
    """The OOM kill in the kernel log that ended the run, None when none
    of its kills is the run's (or it was not read)."""
    read = ctx.snap.kernel_oom
    if read is None:
        return None
    for k in reversed(read.kills):
        if k.pid in read.run_pids:
            return k
    last_write = ctx.log.mtime
    container = ctx.snap.container
    for k in reversed(read.kills):
        if not _RUN_NAMES.fullmatch(k.name):
            continue
        if k.t is None:
            continue
        if last_write is not None and k.t < last_write - SLACK_S:
            continue
        if last_write is None and k.t < read.at - UNTIMED_WINDOW_S:
            continue
        if (
            container is not None
            and container.id is not None
            and k.memcg
            and not in_cgroups([k.memcg], container)
        ):
            continue  # another container's process
        return k
    return None


def _what_ran_out(ctx: Context, k: OomKill) -> str:
    if k.cgroup_limit:
        limit = f" {k.limit_cgroup}" if k.limit_cgroup else ""
        if ctx.snap.container is None:  # a plain host: a cgroup's own limit (systemd, slurm)
            return f"the memory limit of cgroup{limit}"
        return f"the memory limit of {ctx.ct_words}'s cgroup{limit}"
    return "host RAM"


def _cgroup_fix(ctx: Context, k: OomKill) -> str:
    lower = (
        "lower the run's: fewer DataLoader workers (each holds its own copy), a smaller "
        "batch, low_cpu_mem_usage=True when loading"
    )
    if ctx.snap.container is not None:
        return f"give {ctx.ct_words} more memory, or {lower}"
    where = f"/sys/fs/cgroup{k.limit_cgroup}/memory.max" if k.limit_cgroup else "memory.max"
    return (
        f"raise the cgroup's memory limit ({where}; a systemd unit's MemoryMax=, a "
        f"scheduler's --mem), or {lower}"
    )


def _rss(k: OomKill) -> str:
    return size_words(k.anon_rss_kib * 1024) if k.anon_rss_kib is not None else "?"


@rule(
    Kind(
        "kernel_oom_kill",
        specificity=49,
        cause="kernel_oom_kill",
        alerts=True,
        gone=True,
        host_word="dead",
        # the kernel's own line says who and why: over the cgroup's count,
        # the quiet end's "killed by a signal?" and the dead pane's words
        supersedes=(
            "oom_killed",
            "run_killed",
            "run_ended",
            "run_finished",
            "run_exited",
            "session_dead",
            "session_missing",
        ),
    )
)
def rule_kernel_oom_kill(ctx: Context) -> Finding | None:
    """The run vanished with no word, and the kernel log names its kill."""
    read = ctx.snap.kernel_oom
    if not vanished_quietly(ctx, seen_alive=read is not None and bool(read.run_pids)):
        return None
    k = run_kill(ctx)
    if k is None or read is None:
        return None
    name = ctx.snap.session_name or "the run"
    what = _what_ran_out(ctx, k)
    when = f", {dur(max(0.0, ctx.now - k.t))} ago" if k.t is not None else ""
    ev = [
        f"the kernel log ({read.via} on {read.where}){when}: {one_line(k.text, 300)}",
        "its output has no error line: SIGKILL leaves none, and behind `| tee` "
        "the shell prints no “Killed”",
    ]
    if k.memcg:
        ev.append(f"its cgroup: {one_line(k.memcg, 200)}")
    if k.pid not in read.run_pids:
        ev.append(
            f"PID {k.pid} is the kernel's (the host's PID namespace): taken as the run's "
            "by its name, its time after the log's last line and its cgroup"
        )
    tail = list(ctx.snap.log_tail or []) or list(ctx.snap.pane_tail or [])
    if tail:
        ev += ["last lines:", *quote_tail(tail)]
    if k.cgroup_limit:
        fix = _cgroup_fix(ctx, k)
    else:
        fix = (
            "the host ran out of RAM: fewer DataLoader workers (each holds its own copy), a "
            "smaller batch, low_cpu_mem_usage=True or mmap when loading, or more RAM; "
            "`free -g` and `ps aux --sort=-rss | head` on the host show what else holds it"
        )
    return Finding(
        kind="kernel_oom_kill",
        severity=Severity.ERROR,
        title=(
            f"the run in session {name} was killed by the kernel's OOM killer ({what}): "
            f"PID {k.pid} ({one_line(k.name, 20)}), anon-rss {_rss(k)}"
        ),
        evidence=ev,
        action="relaunch",
        action_label="relaunch",
        fix=fix,
    )


def kernel_log_words(read: KernelOomRead | None) -> list[str]:
    """What the kernel log said of a run that vanished without a word (the
    evidence of run_killed, run_ended and oom_killed when no kill in it is
    the run's): what was read and where, or what could not be read and why."""
    if read is None:
        return []
    if not read.readable:
        why = "; ".join(read.refused) or "no reader answered"
        return [
            f"the kernel log could not be read on {read.where} ({one_line(why, 240)}): "
            "an OOM kill would be named there — run `dmesg -T | grep -i 'killed process'` "
            "as root on the host"
        ]
    n = len(read.kills)
    return [
        f"the kernel log ({read.via} on {read.where}) names no OOM kill of this run"
        + (f" ({n} of other processes or earlier)" if n else "")
    ]
