"""Metric points from a byte range of a log, each keyed by its byte offset.

Pure: bytes in, points out. The history reads the log from where it last
stopped (its cursor) and stores each point under the offset of the line it
came from, so reading the same bytes again (after a restart, a reconnect or
a second gputui) adds nothing twice. Lines end at `\\n` or `\\r` (tqdm
redraws its bar with `\\r`); only complete lines are consumed, so a line cut
by the end of a read is parsed whole on the next one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputui.collect.metrics import MetricParser

MAX_LINE = 64 * 1024  # a longer run of bytes without a line end is consumed unparsed
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
    `at_eof` is False but one line outgrew MAX_LINE (it is skipped)."""
    points: list[LogPoint] = []
    start = 0
    n = len(data)
    consumed = 0
    while start < n:
        nl = data.find(b"\n", start)
        cr = data.find(b"\r", start)
        ends = [e for e in (nl, cr) if e >= 0]
        if not ends:
            if at_eof or n - start > MAX_LINE:
                consumed = n
            break
        end = min(ends)
        if end > start:
            _parse_line(data[start:end], base_offset + start, parser, points)
        start = end + 1
        consumed = start
    return points, consumed


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
