"""A synthetic run history, written through the real HistoryWriter the way a
recorder writes it: GPU rows every second (flushed in batches), metric
points read from the log every `log_every` seconds, the 1-minute rollup
every simulated minute. Used by the history benchmark (bench/history_bench.py)
and the whole-run screenshot. A hang in the middle makes the charts worth
looking at: utilization drops, the loss stops, a finding appears and clears
after a relaunch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gputui.model import Program
from gputui.record.history import EventRow, GpuRow, HistoryWriter, PointRow

BYTES_PER_LINE = 96  # about what "step N loss X | T tok/s" lines take


def fill(
    w: HistoryWriter,
    target: str,
    t_end: float,
    *,
    hours: float = 24.0,
    gpus: int = 8,
    lines_per_s: float = 1.0,
    log_every: float = 10.0,
    on_second: Callable[[int], None] | None = None,
) -> int:
    """Write `hours` of history ending at t_end; returns metric points written."""
    seconds = int(hours * 3600)
    t0 = t_end - seconds
    tid = w.target_id(target).result()
    run = w.new_run(target, "/workspace/train.log", 1234, t0).result()
    hang = (int(seconds * 0.55), int(seconds * 0.6))  # GPUs idle, no steps
    step = 0
    offset = 0
    pending: list[PointRow] = []
    acc = 0.0
    written = 0
    for s in range(seconds):
        t = t0 + s
        hung = hang[0] <= s < hang[1]
        util = 3.0 if hung else 96.0 - 4.0 * math.sin(s / 97.0)
        w.add_gpu(
            tid,
            [
                GpuRow(g, t, util - g * 0.5, 101_000.0 + 500.0 * g, 143_771.0, 62.0, 650.0)
                for g in range(gpus)
            ],
        )
        if not hung:
            acc += lines_per_s
            while acc >= 1.0:
                acc -= 1.0
                step += 1
                loss = 2.0 + 8.0 / math.sqrt(step + 10) + 0.05 * math.sin(step / 7.0)
                pending.append(
                    PointRow(offset, t, True, step, loss, 5200.0 + 150.0 * math.sin(step / 4000.0))
                )
                offset += BYTES_PER_LINE
        if s % 2 == 1:
            w.flush()  # what the recorder's batching does: one transaction per ~2 s
        if s % int(log_every) == 0 and pending:
            w.add_points(run.id, pending, offset, t, "tok/s")
            written += len(pending)
            pending = []
        if s % 60 == 59:
            w.rollup(t)
        _story_event(w, tid, s, t, hang)
        if on_second is not None:
            on_second(s)
    if pending:
        w.add_points(run.id, pending, offset, t_end, "tok/s")
        written += len(pending)
    w.flush().result()
    return written


def _story_event(w: HistoryWriter, tid: int, s: int, t: float, hang: tuple[int, int]) -> None:
    """The hang's story at second `s`: the finding appears two minutes into
    the hang, the user relaunches, the finding clears."""
    if s == hang[0] + 120:
        w.add_event(
            tid,
            EventRow(
                t,
                "finding",
                "held_but_idle",
                "appear",
                "error",
                "GPUs idle with memory held: the run is hung",
            ),
        )
    if s == hang[1] - 30:
        w.add_event(
            tid,
            EventRow(t, "action", "relaunch", "ok", "", "relaunched unbuffered", f"{t}:relaunch"),
        )
    if s == hang[1] + 5:
        w.add_event(
            tid,
            EventRow(
                t,
                "finding",
                "held_but_idle",
                "clear",
                "error",
                "GPUs idle with memory held: the run is hung",
            ),
        )


def fill_pair(w: HistoryWriter, target: str, t_end: float, *, gpus: int = 8) -> tuple[int, int]:
    """Two runs of train.py on `target` (issue 49): the last one, 800 steps
    at ~42.4k tok/s with --batch-size 32, then the relaunch with
    --batch-size 64 --compile, 400 steps in at ~47.5k tok/s and ending at
    `t_end`; each with its program. Returns (last run, this run)."""
    from gputui.demo.scenes import LAST_ARGV, THIS_ARGV

    tid = w.target_id(target).result()
    ids = []
    spans = (
        (LAST_ARGV, 42_400.0, 800, t_end - 1500.0, 0.0),
        (THIS_ARGV, 47_500.0, 400, t_end, 0.03),
    )
    for i, (argv, rate, steps, end, worse) in enumerate(spans):
        t = end - steps * 2048 * 16 / rate
        run = w.new_run(target, "/workspace/train.log", 2000 + i, t - 40).result()
        env = ("PYTHONUNBUFFERED=1",) if i else ()
        w.set_program(
            run.id,
            Program(argv, "/workspace", "train.py", t - 3000 + 2400 * i, env, t - 40),
            "dflash",
            t,
        )
        rows = []
        for k in range(1, steps + 1):
            r = rate * (1 + 0.02 * math.sin(k * (1.3 + 0.4 * i)) + 0.01 * math.cos(k * 0.41))
            t += 2048 * 16 / r
            loss = 4.0 * math.exp(-k / 150) + 1.1 + worse + 0.02 * math.sin(k * 0.9 + i)
            rows.append(PointRow(k * BYTES_PER_LINE, t, True, k, loss, r))
            if k % 60 == 0 or k == steps:
                w.add_points(run.id, rows, k * BYTES_PER_LINE, t, "tok/s")
                rows = []
            if k % 3 == 0:
                w.add_gpu(
                    tid,
                    [
                        GpuRow(g, t, 95.0 - g * 0.5, 101_000.0 + 500.0 * g, 143_771.0, 62.0, 650.0)
                        for g in range(gpus)
                    ],
                )
        ids.append(run.id)
    w.flush().result()
    return ids[0], ids[1]
