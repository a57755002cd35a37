"""Evidence lines the rules (and doctor's report) share: the last error of
a traceback, signal names, where a process's stdout goes and why it is
buffered, quoted tails. Pure."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable

from gputui.diagnose.thresholds import TAIL_LINES
from gputui.model import Proc
from gputui.text.words import program_name

SIGNAL_HINTS = {
    9: "OOM killer?",
    15: "stopped on purpose?",
    11: "segmentation fault in native code",
    6: "aborted (C++ exception, NCCL or CUDA assert?)",
    2: "interrupted (Ctrl-C)",
}


_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b"
    r"|CUDA out of memory|NCCL error|Segmentation fault|^Killed\b|core dumped"
    r"|No space left on device",
)


def _wrapper(line: str) -> bool:
    """torchrun's own exception, empty: the rank's error is elsewhere
    (torchrun.py reads its summary)."""
    return line.rstrip().endswith("ChildFailedError:")


def last_error_line(lines: Iterable[str]) -> str | None:
    """The line that says what went wrong: the exception line of the last
    Python traceback, else the last line that looks like an error — never
    torchrun's empty ChildFailedError, which only says a rank failed."""
    xs = [ln.rstrip() for ln in lines if ln is not None]
    starts = [
        i for i, ln in enumerate(xs) if ln.lstrip().startswith("Traceback (most recent call last)")
    ]
    for tb in reversed(starts):
        found = None
        for ln in xs[tb + 1 :]:
            if not ln or ln[0] in " \t" or ln.startswith("Traceback"):
                continue
            if ln.startswith("During handling") or ln.startswith("The above exception"):
                continue
            found = ln
            break
        if found and not _wrapper(found):
            return found.strip()
    for ln in reversed(xs):
        if _ERROR_LINE.search(ln.strip()) and not _wrapper(ln):
            return ln.strip()
    return None


def signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except (ValueError, TypeError):
        return f"signal {n}"


def stdout_words(proc: Proc) -> str:
    """Where stdout goes, in words: 'the file /x.log', 'a pipe into tee (PID 13)
    writing /workspace/train.log', 'the terminal /dev/pts/3'."""
    out = proc.stdout
    if out is None:
        return "an unknown target"
    if out.kind == "file":
        return f"the file {out.path}"
    if out.kind == "pipe":
        readers = ", ".join(f"{program_name(cmd)} (PID {pid})" for pid, cmd in (out.readers or []))
        s = f"a pipe into {readers}" if readers else f"a pipe ({out.path or 'reader unknown'})"
        files = list(out.reader_files or [])
        if files:
            s += " writing " + ", ".join(files)
        return s
    if out.kind == "tty":
        return f"the terminal {out.path or ''}".rstrip()
    if out.kind == "null":
        return "/dev/null"
    return f"a {out.kind} {out.path or ''}".rstrip()


def buffering_words(proc: Proc) -> list[str]:
    """Why Python does (or does not) block-buffer this process's stdout."""
    out: list[str] = []
    out.append("started with -u" if proc.python_u_flag else "no -u on its command line")
    if proc.env_pythonunbuffered is None:
        out.append("PYTHONUNBUFFERED unknown (environ unreadable)")
    else:
        out.append(
            "PYTHONUNBUFFERED set" if proc.env_pythonunbuffered else "PYTHONUNBUFFERED unset"
        )
    kind = proc.stdout.kind if proc.stdout is not None else "unknown"
    out.append("stdout is a tty" if kind == "tty" else f"stdout is not a tty ({kind})")
    return out


def short(cmd: str, n: int = 60) -> str:
    cmd = (cmd or "").strip()
    return cmd if len(cmd) <= n else cmd[: n - 1] + "…"


def quote_tail(lines: list[str]) -> list[str]:
    xs = [ln.rstrip() for ln in lines if ln and ln.strip()]
    return ["  │ " + (ln if len(ln) <= 160 else ln[:159] + "…") for ln in xs[-TAIL_LINES:]]


def stdout_evidence(p: Proc) -> str:
    """The evidence line naming a process and where its stdout goes."""
    return f"PID {p.pid} ({short(p.command, 80)}): stdout is {stdout_words(p)}"
