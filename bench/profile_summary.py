"""A short per-function summary of a py-spy profile (``--format raw``).

    python3 bench/profile_summary.py PROFILE [--top N]

py-spy's raw format is one collapsed stack a line, ``frame;frame;… COUNT``,
the first frame naming the process when it was recorded with
``--subprocesses``. Printed: samples per process, then for each process the
functions with the most samples *inclusive* (the function or anything it
called) and *own* (the function itself at the top of the stack), so a
profile explains itself without a flame-graph viewer (issue 24).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
# A process frame quotes its command line, which may hold ';' and newlines
# (python3 -c '…'): it is swapped for a short label before stacks are split.
_PROC = re.compile(r'process (\d+):"(.*?)"(?=;)', re.DOTALL)


def _short(frame: str) -> str:
    """``func (path/to/mod.py:12)`` → ``func (to/mod.py)``: one name a function."""
    m = _FRAME.match(frame)
    if not m:
        return frame[:80]
    parts = m["file"].split("/")
    return f"{m['func']} ({'/'.join(parts[-2:])})"


def _label(m: re.Match[str]) -> str:
    """A process frame's command line → ``process <short label>``."""
    cmd = " ".join(m[2].split())
    if "gputui.cli.main" in cmd or "gputui " in cmd:
        name = "gputui (main)"
    elif "tail" in cmd and "os.read" in cmd:
        name = "log relay (tail -F wrapper)"
    elif "zlib" in cmd and "base64" in cmd:
        name = "gputui agent"
    else:
        name = cmd[:60].replace(";", ",")
    return f"process {name} [{m[1]}]"


_PLUMBING = ("(asyncio/", "(threading.py)", "(<string>)", "(gputui/cli.py)", "run_app (ui/app.py)")


def _plumbing(func: str, count: int, total: int) -> bool:
    """Frames every stack passes through (the event loop, thread start-up,
    the CLI's entry): they say nothing about where the time goes."""
    return count >= total or any(p in func for p in _PLUMBING) or func.startswith("App.run ")


IDLE_PART = "idle (waiting in select, a lock, a queue)"
# The split issue 37 asks for: each sample goes to the first part (in this
# order) whose marker one of its frames carries; the rest is "other".
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("agent", ("process gputui agent",)),
    ("log relay", ("process log relay",)),
    ("other processes", ("process ",)),  # a process frame not gputui's main
    ("garbage collector", ("<gc>", "gc_collect")),
    ("styles cache (widget lines)", ("_styles_cache.py", "render_line (", "render_lines (")),
    (
        "compositor (frame: chops, strips, output)",
        ("_compositor.py", "(textual/strip.py)", "_display (textual/app.py)", "render_segments ("),
    ),
    (
        "log drawing (gputui)",
        ("(widgets/logview.py)", "(ui/logstyle.py)", "_drain_log (ui/app.py)"),
    ),
    ("1 Hz tick (panes, diagnose)", ("_tick (ui/app.py)", "_apply_dirty (ui/app.py)")),
    ("timers, messages (Textual)", ("(textual/timer.py)", "(textual/message_pump.py)")),
    (
        "monitor (log, GPU feed, agent client)",
        ("(monitor/", "(remote/", "(collect/"),
    ),
)


IDLE = ("select (", "wait (threading.py)", "get (queue.py)", "sleep (", "poll (")


def part_of(stack: str) -> str:
    """The part of a raw stack (a `frame;frame;…` line without its count)."""
    main = "process gputui (main)"
    frames = [_short(f) for f in stack.split(";")]
    if any(mark in frames[-1] for mark in IDLE):
        return IDLE_PART
    for name, marks in PARTS:
        for mark in marks:
            if mark.startswith("process ") and mark != "process ":
                if mark in stack:
                    return name
            elif mark == "process ":
                procs = [f for f in stack.split(";") if f.startswith("process ")]
                if procs and not procs[-1].startswith(main):
                    return name
            elif any(mark in f for f in frames):
                return name
    return "other (input thread, event loop, Textual's rest)"


def split(lines: list[str]) -> str:
    """Samples per part (PARTS), % of all samples: the profile's split."""
    parts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in _PROC.sub(_label, "\n".join(lines)).splitlines():
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        parts[part_of(stack)] += int(count)
        total += int(count)
    busy = total - parts[IDLE_PART]
    out = [f"split of {busy} busy samples ({parts[IDLE_PART]} idle left out):"]
    out += [
        f"  {c:6d} {100 * c / max(busy, 1):5.1f}%  {p}"
        for p, c in parts.most_common()
        if p != IDLE_PART
    ]
    return "\n".join(out)


def summarize(lines: list[str], top: int) -> str:
    """The summary text of raw py-spy lines."""
    per_proc: dict[str, int] = collections.Counter()
    incl: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    own: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    total = 0
    for line in _PROC.sub(_label, "\n".join(lines)).splitlines():
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        procs = [i for i, f in enumerate(frames) if f.startswith("process ")]
        start = procs[-1] + 1 if procs else 0
        proc = frames[procs[-1]][len("process ") :] if procs else "main"
        funcs = [_short(f) for f in frames[start:] if f]
        total += n
        per_proc[proc] += n
        for f in set(funcs):
            incl[proc][f] += n
        if funcs:
            own[proc][funcs[-1]] += n
    out = [f"{total} samples"]
    for proc, n in sorted(per_proc.items(), key=lambda kv: -kv[1]):
        out.append(f"\n== {proc}: {n} samples ({100 * n / max(total, 1):.0f} %)")
        out.append("  inclusive:")
        ranked = [(f, c) for f, c in incl[proc].most_common() if not _plumbing(f, c, n)]
        out += [f"  {c:6d} {100 * c / n:5.1f}%  {f}" for f, c in ranked[:top]]
        out.append("  own:")
        out += [f"  {c:6d} {100 * c / n:5.1f}%  {f}" for f, c in own[proc].most_common(top // 2)]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", type=Path)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    try:
        lines = args.profile.read_text(errors="replace").splitlines()
    except OSError as exc:
        print(f"profile_summary: cannot read {args.profile}: {exc.strerror}", file=sys.stderr)
        return 2
    print(split(lines))
    print(summarize(lines, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
