"""Charts that read: the GPU zoom's heatmap (labelled GPUs, one scale, a
clock-time axis) and the whole-run view (the axis fits the run, its panels
draw from the first point, whole-number step ticks)."""

from __future__ import annotations

import time
from pathlib import Path

from gputui.model import GpuSample, GpuState, Metrics
from gputui.record.history import GpuRow, HistoryWriter
from gputui.record.query import MetricRow
from gputui.ui.heatmap import clock, heatmap
from gputui.ui.screens.wholerun import (
    WholeRun,
    gpu_text,
    int_ticks,
    load,
    merge_recent,
    rows_from_metrics,
)
from gputui.ui.screens.zoom import panels

NOW = 1_800_000_000.0


def eight_gpus(seconds: int = 600) -> GpuState:
    g = GpuState()
    for k in range(seconds):
        for i in range(8):
            util = 50.0 if i == 3 else 100.0
            g.add(
                GpuSample(
                    i,
                    NOW - seconds + k,
                    mem_used_mib=70000.0,
                    mem_total_mib=143771.0,
                    util_pct=util,
                    power_w=300.0 + 50 * i,
                    power_limit_w=700.0,
                )
            )
    return g


def test_zoom_heatmap_rows_are_labelled_gpus_on_one_scale() -> None:
    text = heatmap(panels(eight_gpus()), NOW, 120).plain
    rows = text.splitlines()
    for i in range(8):
        assert any(r.startswith(f"GPU {i} ") for r in rows), text
    assert "power W (of 700)" in text and " 650W" in text  # power per GPU, GPU 7 at 650 W
    full = next(r for r in rows if r.startswith("GPU 0 "))
    half = next(r for r in rows if r.startswith("GPU 3 "))
    assert full[7:20] != half[7:20]  # 50 % and 100 % are different cells: one scale
    assert "minutes ago" not in text and "-0." not in text
    axis = rows[-2]
    assert "now" in axis and clock(NOW - 600, False)[:4] in axis, axis


def test_whole_run_axis_fits_a_one_minute_run(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    now = time.time()
    w = HistoryWriter(db)
    tid = w.target_id("box").result()
    w.add_gpu(
        tid,
        [
            GpuRow(g, now - 60 + s, 95.0, 70000.0, 143771.0, 60.0, 600.0)
            for s in range(60)
            for g in range(8)
        ],
    )
    w.flush().result()
    w.new_run("box", "/w/train.log", 7, now - 60).result()
    w.close()
    data = load(db, "box", None, now)  # no metric point stored yet
    assert abs((data.now - data.since) - 60) < 1, data.now - data.since  # not a 1-hour axis
    axis = gpu_text(data, 100).plain.splitlines()[-2]
    # The columns sit on whole multiples of their span (under 2 s here), so the
    # left edge is the run's start give or take a column or two.
    left = axis.split()[0]
    assert any(left == clock(now - 60 + k, True) for k in range(-4, 5)), (left, axis)
    assert "now" in axis, axis


def test_whole_run_panels_draw_from_the_first_point() -> None:
    m = Metrics()
    from gputui.model import MetricPoint

    m.add(MetricPoint(NOW - 2, step=1, loss=2.5, throughput=1000.0))
    m.add(MetricPoint(NOW - 1, step=2, loss=2.4, throughput=1010.0))
    recent = rows_from_metrics(m)
    assert [(r.step, r.loss) for r in recent] == [(1, 2.5), (2, 2.4)]
    assert merge_recent([], recent) == recent  # nothing stored: the live points
    stored = [MetricRow(NOW - 5, 1, 0, 1, 2.5, 1000.0, None)]
    assert [r.step for r in merge_recent(stored, recent)] == [1, 2]  # no step twice


def test_step_ticks_are_whole_numbers() -> None:
    ticks = int_ticks(5120.3, 5130.9)
    assert ticks and all(isinstance(t, int) for t in ticks)
    assert ticks[0] >= 5120 and ticks[-1] <= 5131 and len(ticks) >= 3


def test_whole_run_heatmap_marks_events() -> None:
    from gputui.record.query import EventOut

    data = WholeRun(NOW, NOW - 3600, util={0: [(NOW - 3600 + s, 90.0) for s in range(0, 3600, 60)]})
    data.events = [EventOut(NOW - 1800, "finding", "held_but_idle", "appear", "error", "hung")]
    assert "▲" in gpu_text(data, 100).plain
