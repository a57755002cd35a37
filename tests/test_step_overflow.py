"""A step number past what the history holds (issue 34, LOW): `step
99999999999999999999 loss nan` raised OverflowError in the history's insert
on every tick and that run's history stopped. The step is dropped at the
parser (the loss stays); the lines around it are recorded as ever. A real
log file, a real recorder and SQLite history."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gputui.collect.metrics import MetricParser
from gputui.record.history import HistoryWriter
from gputui.record.recorder import RunRecorder
from test_history import LogOnlyMonitor, import_all


def test_a_step_past_2_63_is_no_step() -> None:
    from gputui.collect.metrics import MAX_STEP

    p = MetricParser()
    for line in ("step 99999999999999999999 loss nan", f"step {MAX_STEP + 1} loss 0.5"):
        point = p.parse(line, 0.0)
        assert point is not None and point.step is None, line
    point = p.parse(f"step {MAX_STEP} loss 0.5", 0.0)
    assert point is not None and point.step == MAX_STEP


async def test_the_history_goes_on_past_a_huge_step(tmp_path: Path) -> None:
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    log.write_text("step 1 loss 0.5\nstep 99999999999999999999 loss nan\nstep 2 loss 0.4\n")
    w = HistoryWriter(db)
    try:
        rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
        await import_all(rec)
    finally:
        w.close()
    with sqlite3.connect(db) as c:
        steps = [r[0] for r in c.execute("SELECT step FROM metric_points ORDER BY offset")]
    assert steps == [1, None, 2]
