"""doctor's run against its last one (issue 49), from what can be read now:
the history's points of the run, then the lines of its log the history has
not read yet, then doctor's own watch's.

The history reads a run's log once a minute (`[history] log_every`), and a
watch's rings hold a run's last 600 points: 35 s into a redeploy on an H100
(its log ~1,760 steps, the history holding the new run's first read, made
before its first step) the steps both runs reached were in neither, and
doctor said "no step of this run matched the last one's yet", readings 0 and
0, while `watch` had said "slower". The lines past the run's cursor are read
here with the recorder's own script (one command, at most READ_CHUNK bytes)
and parsed as the recorder parses them; the history is not written (the
recorder that owns the run does that).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from gputui.collect.metrics import MetricParser
from gputui.diagnose.compare import RunPoint
from gputui.errors import GputuiError
from gputui.model import Program, Snapshot, VsLast
from gputui.record.history import read_pair
from gputui.record.query import HistoryReader
from gputui.record.recorder import READ_CHUNK, parse_read, read_argv
from gputui.record.runlog import parse_chunk_off_loop
from gputui.record.vslast import newest_run, vs_of
from gputui.remote.target import Target

READ_TIMEOUT_S = 60.0  # the command's; the script's own limit is under it
SAME_START_S = 2.0  # one process's start time, read twice (whole seconds, two clocks)


async def unread_points(
    target: Target,
    path: str,
    cursor: int,
    inode: int,
    regexes: Sequence[str] = (),
    now: float | None = None,
) -> list[RunPoint]:
    """The points of the run's log `path` past the history's `cursor`,
    stamped `now` (not timed: when each line came is not known). None of
    them when the file is another (another inode: rotated away with nothing
    unread) or started over (shorter than the cursor, or its steps going
    back: a newer run the history has not seen) — they are not this run's."""
    try:
        res = await target.run(
            read_argv(path, cursor, READ_CHUNK, inode=inode), timeout=READ_TIMEOUT_S
        )
    except GputuiError:
        return []
    got = parse_read(res.stdout)
    if got is None:
        return []
    size, ino, data = got
    if ino != inode or size < cursor:
        return []
    found, _ = await parse_chunk_off_loop(data, cursor, MetricParser(list(regexes)))
    t = time.time() if now is None else now
    return [
        RunPoint(p.step, t, p.loss, p.throughput, timed=False) for p in found if p.step is not None
    ]


def _same_run(program: Program | None, snap: Snapshot) -> bool:
    """Whether the run doctor sees is the one the history recorded: its
    Python started when the recorded one did (no recorder running, the log
    may hold a newer run the history never saw: neither its lines nor
    doctor's watch's are the recorded run's). Not known: taken as the same."""
    proc = snap.training_proc
    if program is None or not program.started or proc is None or proc.start_time is None:
        return True
    return abs(proc.start_time - program.started) <= SAME_START_S


def _went_back(stored: Sequence[RunPoint], unread: Sequence[RunPoint]) -> bool:
    last = max((p.step for p in stored if p.step is not None), default=None)
    first = next((p.step for p in unread if p.step is not None), None)
    return last is not None and first is not None and first <= last


async def vs_last_now(
    history: Path | str | None, target: Target, snap: Snapshot, regexes: Sequence[str] = ()
) -> VsLast | None:
    """doctor's comparison: the newest run of the watched log on `target`
    in the history (a dashboard or `watch` records it), its steps the
    history has not read yet and those of doctor's own watch, against its
    last run. None when there is no history, no such run, or no last run:
    doctor says nothing then."""
    try:
        reader = HistoryReader(history)
    except GputuiError:
        return None
    try:
        found = newest_run(reader.conn, target.label, snap.log.path or "")
        pair = read_pair(reader.conn, found[0]) if found is not None else None
    finally:
        reader.close()
    if found is None or pair is None or pair.last is None:
        return None
    _, cursor, inode = found
    if not _same_run(pair.this.program, snap):
        return vs_of(pair, snap.metrics.throughput_unit)  # the log holds a newer run now
    unread: list[RunPoint] = []
    if snap.log.path:
        unread = await unread_points(target, snap.log.path, cursor, inode, regexes, snap.time)
        if _went_back(pair.this.points, unread):
            unread = []  # a newer run's steps, the history has not seen it start
    return vs_of(pair, snap.metrics.throughput_unit, snap, unread)
