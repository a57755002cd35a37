"""The rank that failed first, read from torchrun's summary (`rank_failed`).
Pure.

When a worker of `torchrun` (and `accelerate launch`, `deepspeed`, anything
on torch.distributed.elastic) dies, torchrun stops the others and ends with
its own traceback, `torch.distributed.elastic.multiprocessing.errors.
ChildFailedError:`, and a summary whose "Root Cause (first observed
failure)" block names the rank that failed first:

    Root Cause (first observed failure):
    [0]:
      time      : 2023-08-01_01:06:47
      host      : node7
      rank      : 4 (local_rank: 4)
      exitcode  : -9 (pid: 208585)
      error_file: <N/A>
      traceback : Signal 9 (SIGKILL) received by PID 208585

The last error line of the output is then torchrun's own (an empty
ChildFailedError), and the session's death said nothing. This rule names
the rank, how it ended (its exit code, or the signal and what that usually
means) and its own error: the last exception among its `[rankN]:` lines
(torch ≥ 2.2 tags a rank's traceback), else the last traceback before
torchrun's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import SIGNAL_HINTS, last_error_line, short, signal_name
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.numbers import bounded_int
from gputui.text.untrusted import one_line

MAX_RANK = 1 << 20  # no run has more ranks
MAX_PID = 1 << 22  # the kernel's pid_max

ROOT_CAUSE = "Root Cause (first observed failure):"
CHILD_FAILED = "ChildFailedError"
_FIELD = re.compile(r"^\s*(rank|exitcode|traceback|host)\s*:\s*(.*?)\s*$")
_RANK = re.compile(r"^(\d+)(?: \(local_rank: (\d+)\))?")
_EXIT = re.compile(r"^(-?\d+)(?: \(pid: (\d+)\))?")
_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\) received by PID")
_TAG = re.compile(r"^\s*\[(?:rank|default)(\d+)\]:\s?")
# torchrun's own line when a worker dies, before (or without) the summary:
# "torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode:
# -9) local_rank: 0 (pid: 62498) of binary: /usr/bin/python3". Where the
# output ends before the summary, or its Root Cause block is empty (a
# "<NO_OTHER_FAILURES>" list and no block), this line names the rank.
FAILED = "failed (exitcode: "
_FAILED = re.compile(
    r"failed \(exitcode: (-?\d{1,20})\) local_rank: (\d{1,20}) \(pid: (\d{1,20})\)"
)
SIGNAL_FIXES = {
    9: (
        "a SIGKILL with no error of its own is most often the kernel's OOM killer (host or "
        "container memory): see the kernel log and the memory limit, or who killed it"
    ),
    6: (
        "an abort in native code (a CUDA or NCCL assert, a C++ exception): rerun with "
        "CUDA_LAUNCH_BLOCKING=1 and TORCH_SHOW_CPP_STACKTRACES=1 to see where"
    ),
    11: "a crash in native code (an extension, a driver): rerun that rank under gdb or faulthandler",
}


@dataclass(frozen=True)
class RootCause:
    """torchrun's first failed rank: its rank, local rank, host, exit code,
    PID and the signal that ended it (None where the summary says none)."""

    rank: int
    local_rank: int | None = None
    host: str | None = None
    exitcode: int | None = None
    pid: int | None = None
    signal: int | None = None
    signal_name: str | None = None


def root_cause(lines: list[str]) -> RootCause | None:
    """The last "Root Cause (first observed failure)" block of `lines`."""
    start = next((i for i in range(len(lines) - 1, -1, -1) if ROOT_CAUSE in lines[i]), None)
    if start is None:
        return None
    fields: dict[str, str] = {}
    for ln in lines[start + 1 : start + 12]:
        if ln.startswith("=") or (fields and ln.lstrip().startswith("[")):
            break
        m = _FIELD.match(ln)
        if m is not None:
            fields.setdefault(m.group(1), m.group(2))
    rank = _RANK.match(fields.get("rank", ""))
    rank_n = bounded_int(rank.group(1), 0, MAX_RANK) if rank is not None else None
    if rank is None or rank_n is None:
        return None  # no rank, or none a run has (5,000 digits, -1)
    code = _EXIT.match(fields.get("exitcode", ""))
    sig = _SIGNAL.search(fields.get("traceback", ""))
    signal = bounded_int(sig.group(1), 1, 64) if sig is not None else None
    return RootCause(
        rank=rank_n,
        local_rank=bounded_int(rank.group(2), 0, MAX_RANK),
        host=fields.get("host") or None,
        exitcode=bounded_int(code.group(1), -255, 255) if code is not None else None,
        pid=bounded_int(code.group(2), 1, MAX_PID) if code is not None else None,
        signal=signal,
        signal_name=sig.group(2) if sig is not None and signal is not None else None,
    )


def failed_line(lines: list[str]) -> RootCause | None:
    """The first rank torchrun's "failed (exitcode: N) local_rank: R (pid:
    P)" line names: its local rank (the global one is not said), exit code,
    PID and, for a negative exit code, the signal that ended it."""
    for ln in lines:
        if FAILED not in ln:
            continue
        m = _FAILED.search(ln)
        if m is None:
            continue
        code = bounded_int(m.group(1), -255, 255)
        local = bounded_int(m.group(2), 0, MAX_RANK)
        if local is None:
            continue
        sig = -code if code is not None and -64 <= code < 0 else None
        name = signal_name(sig) if sig is not None else None
        return RootCause(local, local, None, code, bounded_int(m.group(3), 1, MAX_PID), sig, name)
    return None


def rank_error(lines: list[str], rank: int) -> str | None:
    """The failed rank's own error: the last exception among its tagged
    lines (`[rank3]: RuntimeError: …`), else the last error of the output
    before torchrun's own traceback (its ChildFailedError)."""
    tagged = []
    for ln in lines:
        m = _TAG.match(ln)
        if m is not None and bounded_int(m.group(1), 0, MAX_RANK) == rank:
            tagged.append(ln[m.end() :])
    found = last_error_line(tagged) if tagged else None
    if found:
        return found
    failed = next((i for i, ln in enumerate(lines) if CHILD_FAILED in ln), len(lines))
    own = max(
        (i for i in range(failed) if lines[i].lstrip().startswith("Traceback (most recent")),
        default=failed,
    )  # torchrun's own traceback, ending in the ChildFailedError
    found = last_error_line(lines[:own])
    return found if found and CHILD_FAILED not in found else None


def _how(rc: RootCause) -> str:
    if rc.signal is not None:
        hint = SIGNAL_HINTS.get(rc.signal)
        name = rc.signal_name or f"signal {rc.signal}"
        return f"killed by {name}" + (f": {hint}" if hint else "")
    if rc.exitcode is not None:
        return f"exit {rc.exitcode}"
    return "failed"


@rule(Kind("rank_failed", specificity=59, cause="rank_failed", alerts=True, host_word="dead"))
def rule_rank_failed(ctx: Context) -> Finding | None:
    """torchrun's summary names the rank that failed first: which, how
    (exit code or signal), on which host, and its own error line."""
    lines = ctx.recent_lines(200)
    if not ctx.recent_hold(200, (ROOT_CAUSE, FAILED)):
        return None
    rc = root_cause(lines)
    who = "rank"
    if rc is None:  # no summary, or an empty one: torchrun's "failed" line
        rc = failed_line(lines)
        who = "local rank"
    if rc is None:
        return None
    local = f" (local rank {rc.local_rank})" if rc.local_rank not in (None, rc.rank) else ""
    error = rank_error(lines, rc.rank) if who == "rank" else rank_error(lines, -1)
    title = f"{who} {rc.rank}{local} failed first ({_how(rc)})"
    title += f": {short(one_line(error), 160)}" if error else ""
    ev = [
        ("torchrun's summary: rank " if who == "rank" else "torchrun's line: local rank ")
        + f"{rc.rank}{local}"
        + (f" on {rc.host}" if rc.host else "")
        + (f", PID {rc.pid}" if rc.pid is not None else "")
        + (f", exit code {rc.exitcode}" if rc.exitcode is not None else "")
        + (f", {rc.signal_name}" if rc.signal_name else "")
    ]
    if error:
        ev.append(f"its error: {short(one_line(error, 400), 300)}")
    fix = SIGNAL_FIXES.get(rc.signal or 0) or (
        f"rank {rc.rank}'s error above is the cause: torchrun stopped the other ranks because of it"
        if error
        else f"rank {rc.rank}'s own output holds its error (with torchrun --redirects or --tee, "
        "its log file under --log-dir)"
    )
    gone = ctx.run_gone
    return Finding(
        kind="rank_failed",
        severity=Severity.ERROR if gone else Severity.WARNING,
        title=title,
        evidence=ev,
        fix=fix,
    )
