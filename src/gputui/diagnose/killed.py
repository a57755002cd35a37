"""A run whose process ended without a word (`run_killed`), and one that
ended cleanly behind a pipe (`run_finished`'s note). Pure.

`python train.py | tee train.log` killed by SIGKILL (the kernel's OOM
killer, a scheduler, `kill -9`): Python is gone, the pane is back at its
shell prompt, the log stops mid-output, and bash prints no "Killed" — the
pipeline's status is tee's. Nothing in the output says what happened; what
does is where it stopped: in the middle of a progress bar or a count short
of its total ("Loading checkpoint shards:  38%|███▊  | 3/8", "iteration
5428/ 250000"), a line cut without its newline. A run that ends on its own
finishes its bars and writes its last line whole: such an end gets a note
that it finished (its exit status, tee's, is not the run's), never an alarm
— a run killed at a line that looks like an end is missed, not mistaken."""

from __future__ import annotations

import re

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import last_error_line, quote_tail, short
from gputui.diagnose.oomkill import kernel_log_words
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.numbers import bounded_int
from gputui.text.untrusted import one_line

# a progress count: tqdm's "38%|" and "| 3/8 [", Megatron's "iteration
# 5428/  250000", "step 120/5000", "Epoch 3/10", "batch 17 / 400"
_PERCENT = re.compile(r"(?<![\d.])(\d{1,3})%\|")
_COUNT = re.compile(
    r"\|\s*(\d{1,12})/(\d{1,12})\s*\[|\b(?:iteration|iter|step|epoch|batch|shard)s?\b[\s:#=]*"
    r"(\d{1,12})\s*/\s*(\d{1,12})",
    re.I,
)
# a shell prompt the pane's last line ends in: "$ ", "bash-5.2# ", "user@host:~/x$ ",
# right after a progress bar the kill cut ("…1.28it/s]$ ")
_PROMPT = re.compile(r"(?:\S+@\S+:\S*|[\w.-]*)[$#] ?$")


def mid_work(line: str) -> str | None:
    """What in `line` says the run stopped in the middle ("a progress bar
    at 38 %", "3 of 8"), None when nothing does."""
    for m in _PERCENT.finditer(line):
        if (bounded_int(m.group(1), 0) or 0) < 100:
            return f"a progress bar at {m.group(1)} %"
    for m in _COUNT.finditer(line):
        done, total = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        d, t = bounded_int(done, 0), bounded_int(total, 1)
        if d is not None and t is not None and d < t:
            return f"a count at {d} of {t}"
    return None


# what a run that ended on its own says last: a bar at 100 % (tqdm closes at
# its total), the trainers' words for the end
_ENDED_BAR = re.compile(r"(?<![\d.])100%\||\|\s*(\d{1,12})/\1\s*\[")
_ENDED_WORDS = re.compile(
    r"\b(?:training (?:is )?(?:completed?|finished|done)|finished training|all done|done\b"
    r"|finished\b|complete[d]?\b|success(?:fully)?\b|saved\b|saving model|train_runtime"
    r"|bye\b)|`Trainer\.fit` stopped",
    re.I,
)


def ended_saying(line: str) -> str | None:
    """How `line` says a run's end ("with a bar at 100 %", "saying
    “Training completed”"), None when it does not."""
    if _ENDED_BAR.search(line):
        return "with a progress bar at 100 %"
    m = _ENDED_WORDS.search(line)
    return f"saying “{m.group(0)}”" if m is not None else None


def _last_output(ctx: Context) -> list[tuple[str, str]]:
    """(where, line): the pane's last line of output (its prompt cut off;
    a progress bar the kill cut without a newline is only there, the log
    never gets it) and the log's last line."""
    out = []
    pane = [ln.rstrip() for ln in ctx.snap.pane_tail or [] if ln and ln.strip()]
    while pane:
        last = pane.pop()
        cut = _PROMPT.sub("", last).rstrip()
        if cut.strip():
            out.append(("the pane", cut))
            break
    log = [ln for ln in ctx.snap.log_tail or [] if ln and ln.strip()]
    if log:
        out.append(("the log", log[-1]))
    return out


def _ended_quietly(ctx: Context) -> bool:
    """The watched pane is back at its shell (no Python process left in it)
    or dead with no status but tee's, and the output holds no error."""
    s = ctx.session
    if not ctx.ct_usable or s is None:
        return False
    if ctx.session_dead:
        pane = s.main_pane
        piped = pane is not None and "|" in (pane.start_command or "")
        if pane is None or pane.dead_signal or pane.dead_status not in (None, 0):
            return False
        if pane.dead_status == 0 and not piped:
            return False  # Python's own 0: finished (session.py says so)
    elif not ctx.procs or any(p.is_python for p in ctx.procs) or ctx.waiting_input:
        return False
    pane_tail, log_tail = list(ctx.snap.pane_tail or []), list(ctx.snap.log_tail or [])
    return last_error_line(pane_tail) is None and last_error_line(log_tail) is None


def _ended_whole(ctx: Context, name: str, tail: list[str]) -> Finding:
    """No Python process left, the output whole: a note that it finished
    when its last lines say an end (a bar at 100 %, "Training completed",
    "`Trainer.fit` stopped", "done"); else the honest WARNING that it ended
    — finished, or killed: nothing tells them apart (never dark, issue 44)."""
    shell = ", ".join(f"PID {p.pid} {short(p.command, 40)}" for p in ctx.procs[:3])
    ev = [f"the pane still runs: {shell}" if shell else "the pane is dead"]
    ev.append("its exit status is not known here: behind `| tee` the shell keeps tee's")
    ev += kernel_log_words(ctx.snap.kernel_oom)
    end = next((ln for ln in reversed(tail[-3:]) if ended_saying(ln)), None)
    if end is None:
        return Finding(
            kind="run_ended",
            severity=Severity.WARNING,
            title=(
                f"no Python process left in session {name}; its output ends without an error "
                "— finished, or killed (OOM?)"
            ),
            evidence=[*ev, f"last lines of the log {ctx.log.path}:", *quote_tail(tail)],
            action="relaunch",
            action_label="relaunch",
        )
    return Finding(
        kind="run_finished",
        severity=Severity.INFO,
        title=f"the run in session {name} finished: its output ends {ended_saying(end)}",
        evidence=[
            *ev,
            f"the end: {short(one_line(end, 300), 160)}",
            "last lines of the log:",
            *quote_tail(tail),
        ],
        action="relaunch",
        action_label="relaunch",
    )


@rule(
    Kind(
        "run_killed",
        specificity=51,
        cause="run_killed",
        alerts=True,
        gone=True,
        host_word="dead",
        # it says how the run ended: the dead pane's "finished"/"ended" do not;
        # the cgroup's counted OOM kill says it better still
        supersedes=("session_dead", "run_finished", "run_ended"),
        defers_to=("oom_killed",),
    ),
    names=("run_finished", "run_ended"),
)
def rule_run_killed(ctx: Context) -> Finding | None:
    """The run's process ended without an error line: stopped mid-output
    (a bar or count short of its total) → `run_killed`, an ERROR that says
    what the silence usually is; else, the pane back at its prompt → the
    `run_finished` note (its exit status is tee's)."""
    if not _ended_quietly(ctx):
        return None
    ends = _last_output(ctx)
    if not ends:
        return None  # a shell that never ran anything here
    name = ctx.snap.session_name or "the run"
    sign = next(((where, ln, w) for where, ln in ends if (w := mid_work(ln))), None)
    tail = list(ctx.snap.log_tail or [])
    if sign is None:
        if ctx.session_dead or not ctx.snap.log_tail:
            return None  # session.py's dead-pane words say it; no run wrote a log
        return _ended_whole(ctx, name, tail)
    where, line, what = sign
    ev = [
        f"{where} stops in the middle: {what} — {short(one_line(line, 300), 160)}",
        "no error line in its output, and no Python process left"
        + ("; the pane is back at its shell prompt" if not ctx.session_dead else ""),
        "behind `| tee` the shell prints no “Killed”: the pipeline's status is tee's",
    ]
    oom = ctx.snap.oom
    if oom is not None and oom[1] > 0:
        ev.append(f"the run's cgroup counts {oom[1]} OOM kill(s) (memory.events oom_kill)")
    ev += kernel_log_words(ctx.snap.kernel_oom)
    return Finding(
        kind="run_killed",
        severity=Severity.ERROR,
        title=(
            f"the run in session {name} ended without a word, in the middle of its output — "
            "killed by a signal? (SIGKILL: the OOM killer, a scheduler, kill -9)"
        ),
        evidence=[*ev, "last lines of the log:", *quote_tail(tail)],
        action="relaunch",
        action_label="relaunch",
        fix=(
            "look for the kill: `dmesg -T | grep -i -E 'killed process|out of memory'` on the "
            "host, the container's memory.events (oom_kill), the scheduler's log; out of host "
            "memory: fewer DataLoader workers, a smaller batch, low_cpu_mem_usage=True when "
            "loading, or more memory for the container"
        ),
    )
