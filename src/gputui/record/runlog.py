"""Metric points from a byte range of a log, each keyed by its byte offset.

Pure: bytes in, points out (`parse_chunk_off_loop` runs it in a worker
thread). The history reads the log from where it last stopped (its cursor)
and stores each point under the offset of the line it came from, so
reading the same bytes again (after a restart, a reconnect or a second
gputui) adds nothing twice. Lines end at `\\n` or `\\r` (tqdm
redraws its bar with `\\r`); only complete lines are consumed, so a line cut
by the end of a read is parsed whole on the next one.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from gputui.collect.metrics import MetricParser

MAX_LINE = 64 * 1024  # a longer run of bytes without a line end is consumed unparsed
OFF_LOOP_BYTES = 64 * 1024  # a larger chunk is parsed in a worker thread
_LR_RE = re.compile(
    r"(?:^|[\s,{'\"|])(?:learning_rate|lr)['\"]?\s*[:=]?\s*"
    r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
)


@dataclass(frozen=True)
class LogPoint:
    offset: int  # byte offset of the line in the log
    step: int | None
    loss: float | None
    throughput: float | None
    unit: str
    lr: float | None


def learning_rate(line: str) -> float | None:
    """`lr=3e-4`, `'learning_rate': 0.0003`, `lr: 1.5e-05` -> the value."""
    m = _LR_RE.search(line)
    if not m:
        return None
    try:
        return float(m.group(1))
    except ValueError:
        return None


def parse_chunk(
    data: bytes, base_offset: int, parser: MetricParser, *, at_eof: bool = False
) -> tuple[list[LogPoint], int]:
    """Points in `data` (which starts at byte `base_offset` of the log) and
    how many bytes were consumed: up to the last line end, or everything when
    `at_eof` is False but one line outgrew MAX_LINE (it is skipped).

    Linear in len(data): one pass to find the last line end, one split."""
    points: list[LogPoint] = []
    n = len(data)
    last = max(data.rfind(b"\n"), data.rfind(b"\r"))
    if last < 0:
        return points, (n if at_eof or n > MAX_LINE else 0)
    body = data[:last]  # without the last line end: split gives no empty tail
    if b"\r" in body:
        body = body.replace(b"\r", b"\n")  # same length: offsets hold
    start = base_offset
    for raw in body.split(b"\n"):
        if raw:
            _parse_line(raw, start, parser, points)
        start += len(raw) + 1
    tail = n - (last + 1)
    return points, (n if at_eof or tail > MAX_LINE else last + 1)


async def parse_chunk_off_loop(
    data: bytes, base_offset: int, parser: MetricParser
) -> tuple[list[LogPoint], int]:
    """parse_chunk, in a worker thread when `data` is large: the event loop
    (the dashboard's keys, watch's ticks) keeps its turn during a catch-up."""
    if len(data) <= OFF_LOOP_BYTES:
        return parse_chunk(data, base_offset, parser)
    return await asyncio.to_thread(parse_chunk, data, base_offset, parser)


def _parse_line(raw: bytes, offset: int, parser: MetricParser, out: list[LogPoint]) -> None:
    if len(raw) > MAX_LINE:
        return
    line = raw.decode("utf-8", "replace")
    hit = parser.parse_found(line)
    if hit is None:
        return
    _name, (step, loss, thr, unit) = hit
    if thr is not None and thr != thr:  # NaN
        thr = None
    out.append(
        LogPoint(offset, step, loss, thr, unit if thr is not None else "", learning_rate(line))
    )
