"""The shared words: durations, sizes, program names, as gputui writes them
everywhere (diagnosis, the dashboard, doctor, the log follower). Pure."""

from __future__ import annotations

import os
import shlex


def dur(seconds: float, short: bool = False) -> str:
    """45 s, 4 min, 2 h 5 min, 3 d 4 h — every duration gputui shows, in a
    sentence or (`short`, for a table column) as 45 s, 4 m, 2 h 05 m, 3 d 4 h."""
    s = max(0.0, seconds)
    minute = " m" if short else " min"
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        return f"{s / 60:.0f}{minute}"
    if s < 48 * 3600:
        h, m = divmod(round(s / 60), 60)
        if short:
            return f"{h} h {m:02d} m"
        return f"{h} h {m}{minute}" if m else f"{h} h"
    d, h = divmod(round(s / 3600), 24)
    return f"{d} d {h} h" if h else f"{d} d"


def secs(seconds: float) -> str:
    """0.5 s, 12 s, 4 min: a step time, finer than `dur` below 10 s."""
    if seconds < 0.1:
        return f"{seconds:.2f} s"
    if seconds < 10:
        return f"{seconds:.1f} s".replace(".0 s", " s")
    return dur(seconds)


def gib(mib: float | None) -> str:
    if mib is None:
        return "? GiB"
    return f"{mib / 1024:.1f} GiB"


def size_words(n: float | None) -> str:
    """Bytes as a person reads them: 0 B, 512 KiB, 87 MiB, 31.9 GiB, 1.8 TiB."""
    if n is None:
        return "? B"
    x = max(0.0, float(n))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024:
            return (
                f"{x:.0f} {unit}" if unit in ("B", "KiB", "MiB") or x >= 100 else f"{x:.1f} {unit}"
            )
        x /= 1024
    return f"{x:.1f} TiB"


def program_name(cmd: str) -> str:
    """'tee -a /x.log' -> 'tee'; '/usr/bin/python3 t.py' -> 'python3'."""
    words = (cmd or "").split()
    return os.path.basename(words[0]) if words else "a process"


def unreadable_fix(path: str) -> str:
    """What to do about a log this user may not read (named or found)."""
    return (
        f"check its owner and mode (ls -l {shlex.quote(path)}); in an unprivileged CT "
        "root cannot read files owned by the host's root"
    )
