"""Turning model values into short strings for the dashboard (pure, no Textual)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from gputui.diagnose.buffering import BUFFERED, FLUSHES, judge, panel_words
from gputui.model import CtStatus, LogState, Proc, Snapshot
from gputui.text.words import program_name


def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def bar(frac: float | None, width: int) -> str:
    """A fixed-width bar of eighth blocks; blank when unknown."""
    if frac is None:
        return "·" * width
    frac = min(1.0, max(0.0, frac))
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    s = "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")
    return s.ljust(width, " ")[:width]


def number(v: float | None, digits: int = 0) -> str:
    if v is None:
        return "–"
    if abs(v) >= 1000 and digits == 0:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def median(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return statistics.median(xs) if xs else None


def stdout_route(proc: Proc) -> str:
    """Where fd 1 goes, in words: 'pipe:[123] → tee (77) → /w/train.log'."""
    out = proc.stdout
    if out.kind == "file":
        return f"file {out.path}"
    if out.kind == "pipe":
        parts = [out.path or "pipe"]
        parts += [f"{program_name(cmd)} ({pid})" for pid, cmd in out.readers[:2]]
        if out.reader_files:
            parts.append(", ".join(out.reader_files[:2]))
        return " → ".join(parts)
    if out.kind == "tty":
        return f"terminal {out.path or ''}".strip()
    return out.kind


def buffering_verdict(
    proc: Proc, log: LogState | None = None, now: float | None = None
) -> tuple[str, str]:
    """(style, sentence) saying whether this process's prints reach the log:
    judged by what `log` shows (diagnose/buffering.py); argv and environment
    alone make it "not yet known"."""
    b = judge(proc, log, time.time() if now is None else now)
    if b.suspected:
        style = {BUFFERED: "bold red", FLUSHES: "green"}.get(b.state, "yellow")
        return style, panel_words(b)
    bb = proc.block_buffered
    if bb is None:
        if not proc.is_python:
            return "dim", "not Python: buffering not checked"
        return "yellow", "buffering unknown (environ unreadable)"
    why = "-u" if proc.python_u_flag else "PYTHONUNBUFFERED" if proc.env_pythonunbuffered else "tty"
    return "green", f"line-buffered ({why}): lines reach the log at once"


def nothing_to_watch(snap: Snapshot) -> str | None:
    """Why there is no run to pick, when the sessions list is empty for a
    reason (the CT is down, no tmux): said on the run line and the log view
    instead of "pick one" / "select a session" with nothing to select."""
    c = snap.container if snap.container is not None and snap.container.kind else None
    if c is not None and snap.ct_status in (CtStatus.STOPPED, CtStatus.MISSING):
        return f"nothing to watch: {c.words} is {snap.ct_status.value}"
    if snap.session is None and not snap.sessions and snap.tools.probed:
        where = f" in {c.words}" if c is not None else ""
        return ("no tmux session" if snap.tools.tmux else "tmux is not installed") + where
    if snap.session is None and not snap.sessions:
        return "looking for tmux sessions…"
    return None
