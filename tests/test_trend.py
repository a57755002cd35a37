"""Sparklines you can read: fixed time buckets, stable scales, trend words,
and the GPU rows built from them (pure functions, no Textual app)."""

from __future__ import annotations

import random

import pytest

from gputui.model import GpuEvent, GpuSample, GpuState, Ring
from gputui.ui.trend import (
    pick_span,
    recent,
    robust_top,
    series_buckets,
    series_spark,
    series_values,
    spark,
    time_buckets,
    trend_pct,
    trend_word,
    window_label,
)
from gputui.ui.widgets.gpus import gpu_lines, gpu_rows

T = 1_800_000_000.0  # a multiple of every bucket width


@pytest.mark.parametrize(
    ("cells", "span", "label"),
    [(6, 60.0, "last 6 m"), (28, 15.0, "last 7 m"), (79, 5.0, "last 7 m"), (300, 1.0, "last 5 m")],
)
def test_a_row_of_any_width_covers_at_least_five_minutes(
    cells: int, span: float, label: str
) -> None:
    assert pick_span(cells) == span
    assert cells * span >= 300
    assert window_label(cells, span) == label


def test_buckets_are_aligned_to_the_clock_so_old_cells_never_shift() -> None:
    pts = [(T - 10 + k, float(k)) for k in range(10)]  # values 0..9 at T-10..T-1
    a = time_buckets(pts, T - 0.5, 5.0, 3)
    b = time_buckets(pts, T - 0.1, 5.0, 3)  # a moment later, same bucket: same cells
    assert a == b == [None, 2.0, 7.0]  # means of 0..4 and of 5..9 (the bucket now is in)
    c = time_buckets([*pts, (T + 1, 20.0)], T + 1, 5.0, 3)
    assert c == [2.0, 7.0, 20.0]  # a new bucket begins at the right; the others only move left


def test_unknown_readings_are_gaps_and_a_sample_ahead_of_now_counts_as_now() -> None:
    pts = [(T - 3, None), (T - 2, None), (T + 0.4, 50.0)]
    assert time_buckets(pts, T, 1.0, 3) == [None, None, 50.0]


def test_recent_walks_back_only_as_far_as_needed() -> None:
    pts = [(float(t), 1.0) for t in range(100)]
    assert recent(pts, 97.0) == pts[97:]
    assert recent(pts, -1.0) == pts
    assert recent([], 5.0) == []


def test_a_fixed_scale_keeps_a_small_wobble_small() -> None:
    """±5 % around 95 % util is near full height, never a collapse to the bottom."""
    line = spark([95.0, 100.0, 90.0, 97.0], 100.0)
    assert set(line) <= {"▇", "█"}
    assert spark([0.0, None, 100.0, 150.0], 100.0) == "▁ ██"


def test_robust_top_ignores_one_spike() -> None:
    vals: list[float | None] = [100.0] * 40 + [10_000.0, None]
    top = robust_top(vals)
    assert 100 < top < 200  # the spike just draws a full block
    assert spark([100.0, 10_000.0], top) == "▇█"
    assert robust_top([]) == 1.0
    assert robust_top([0.0, 0.0]) == 1.0


@pytest.mark.parametrize(
    ("values", "word"),
    [
        ([100.0, 100.0, 101.0, 102.0], "→"),
        ([100.0, 100.0, 120.0, 120.0], "↑20%"),
        ([4.0, 3.0, 2.0, 1.0], "↓75%"),
        ([1.0, None, 2.0], ""),
        ([0.0, 0.0, 1.0, 1.0], ""),
    ],
)
def test_trend_word(values: list[float | None], word: str) -> None:
    assert trend_word(trend_pct(values)) == word


def _gpus(n: int, *, seconds: int = 30, stalled: int | None = None) -> GpuState:
    g = GpuState(source="nvidia-smi (host)")
    for k in range(seconds):
        for i in range(n):
            if stalled == i and k > 10:
                continue  # this GPU's readings stopped
            g.add(
                GpuSample(
                    index=i,
                    time=T - seconds + k + 1,
                    name="NVIDIA H200",
                    mem_used_mib=70_000.0,
                    mem_total_mib=143_771.0,
                    util_pct=99.0,
                    temp_c=60.0,
                    power_w=650.0,
                    power_limit_w=700.0,
                )
            )
    return g


def test_eight_gpus_at_100_columns_one_readable_row_each() -> None:
    rows = gpu_rows(_gpus(8), 96, T)  # 100 columns less the box's border and padding
    assert len(rows) == 8
    for i, row in enumerate(rows):
        text = row.plain
        assert len(text) <= 96
        assert text.startswith(f"{i} ")
        assert " 99%" in text and "68.4/140G" in text and "60°C" in text and "650/700 W" in text
        assert "█" in text  # the util history is drawn
        # busy is not trouble: nothing on a healthy row is red
        assert not any("red" in str(span.style) for span in row.spans)


def test_a_gpu_whose_readings_stopped_is_red_and_says_so() -> None:
    rows = gpu_rows(_gpus(4, stalled=2), 96, T)
    assert "no reading for 19 s" in rows[2].plain
    assert any("red" in str(span.style) for span in rows[2].spans)
    assert "no reading" not in rows[1].plain


def test_all_gpus_lost_after_an_event_are_red() -> None:
    g = _gpus(2)
    g.events.append(GpuEvent(time=T, text="Unable to determine the device handle", lost=True))
    rows = gpu_rows(g, 96, T + 10)
    assert all("no reading for 10 s" in r.plain for r in rows)


def test_short_terminals_put_two_gpus_on_a_line() -> None:
    assert gpu_lines(8, compact=True) == 4
    assert gpu_lines(3, compact=True) == 3  # few GPUs: one a line still fits
    assert gpu_lines(8, compact=False) == 8
    rows = gpu_rows(_gpus(8), 76, T, compact=True)  # 80 columns less border and padding
    assert len(rows) == 4
    assert all(len(r.plain) <= 76 for r in rows)
    assert rows[0].plain.startswith("0 ") and "  1 " in rows[0].plain
    assert "68/140G" in rows[3].plain


def test_reused_buckets_equal_a_fresh_count_as_time_passes() -> None:
    ring = Ring(600)
    for k in range(400):
        now = T + k
        ring.append(now - 0.3, None if k % 37 == 0 else float(k % 10))
        if k % 7 == 0:
            assert series_buckets(ring, now, 5.0, 30) == time_buckets(ring.points(), now, 5.0, 30)
    assert series_buckets(ring, T + 400, 15.0, 20) == time_buckets(ring.points(), T + 400, 15.0, 20)


def test_a_kept_spark_equals_a_fresh_one_second_after_second() -> None:
    """series_spark keeps the finished buckets' blocks and counts each new
    point into the newest two: the row reads as a fresh count would, with
    gaps, samples stamped a little ahead of the clock, several points a
    second or none for a while, and a window that changes its bucket width."""
    rng = random.Random(48)
    ring = Ring(600)
    t = T - 300.0
    for k in range(700):
        now = T + k * 0.7
        while t < now + 0.3:  # the newest may be stamped ahead of `now`
            ring.append(t, None if rng.random() < 0.05 else rng.uniform(0, 100))
            t += rng.choice([0.25, 1.0, 1.0, 2.0, 9.0])
        span, cells = (5.0, 30) if k < 400 else (10.0, 40)
        expected = spark(time_buckets(ring.points(), now, span, cells), 100.0)
        assert series_spark(ring, now, span, cells, 100.0) == expected, k


def test_kept_bucket_values_equal_a_fresh_count_second_after_second() -> None:
    """series_values (a metric row's buckets, issue 48) keeps the finished
    buckets and counts each new point into the newest two: the values equal
    a fresh count's, with gaps, points ahead of the clock, bursts of many
    points a second (a log at 40 lines/s) and a change of bucket width."""
    rng = random.Random(4848)
    ring = Ring(600)
    t = T - 200.0
    for k in range(600):
        now = T + k * 0.7
        while t < now + 0.3:
            ring.append(t, None if rng.random() < 0.05 else rng.uniform(0, 3))
            t += rng.choice([0.025, 0.025, 0.5, 1.0, 7.0])
        span, cells = (5.0, 77) if k < 350 else (10.0, 40)
        expected = time_buckets(ring.points(), now, span, cells)
        assert series_values(ring, now, span, cells) == expected, k
