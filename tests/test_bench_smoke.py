"""Smoke test of the bench harness at tiny size, so bench code cannot rot.
No timing assertions: it checks that each piece runs and measures something."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from harness import BenchBed, baseline_loop, baseline_model, parse_stamp, pct_calls  # noqa: E402
from parse_bench import parse_throughput  # noqa: E402
from run import child, rows  # noqa: E402


def test_parse_stamp() -> None:
    assert parse_stamp("t=12.5 seq=3 step 3 loss 1") == (12.5, 3)
    assert parse_stamp("noise t=1 seq=2") is None
    assert parse_stamp("t=x seq=2") is None


def test_parse_throughput_runs() -> None:
    p = parse_throughput(0.02)
    assert p["metrics_mixed"] > 0 and p["splitter_lines"] > 0 and p["metrics_lines"] > 10


def test_harness_end_to_end_tiny() -> None:
    bed = BenchBed(ct=991, pct_delay=0.05).start()
    try:
        bed.control(rate=20)
        # two checks however long each takes here (on a loaded box one took > 1 s)
        base = baseline_loop(bed, 0.2, 1.0, min_checks=2)
        assert base["checks"] >= 2
        assert base["latency_s"]["n"] > 0, "the baseline loop saw none of the writer's lines"
        assert pct_calls(bed.pct_log) >= base["checks"]
        assert baseline_model(base["call_samples"], 30.0)["p50"] > 10.0
        live = child(
            bed,
            [
                {"rate": 20, "seconds": 1.0, "warmup": 0.5, "slice_s": 0.5, "gpu_markers": True},
                {"burst": 2000},
            ],
            timeout=120,
        )
        assert live["first_screen"]["ok"], live["first_screen"]
        ph = live["phases"][0]
        assert ph["latency_s"]["n"] > 0, "no stamped line reached the UI's log widget"
        assert live["burst"]["drain_s"] is not None, "the burst's last line never reached the UI"
        res = {
            "live": live,
            "baseline": [base],
            "baseline_model": {
                str(i): baseline_model(base["call_samples"], i) for i in (1.0, 5.0, 30.0)
            },
            "startups": [live["first_screen"]],
            "parse": parse_throughput(0.01),
        }
        table = rows(res)
        assert any(r[0].startswith("line → screen p50") for r in table)
    finally:
        bed.stop()
