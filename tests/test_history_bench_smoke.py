"""The history benchmark at tiny size, so it cannot rot (no timing assertions)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from history_bench import bench_query, bench_write, table  # noqa: E402


def test_history_bench_tiny(tmp_path: Path) -> None:
    r = bench_write(0.05, tmp_path)  # three simulated minutes
    assert r["gpu_rows"] == 1440 and r["metric_points"] > 0 and r["size_bytes"] > 0
    r.update(bench_query(Path(r["path"]), r["t_end"], n=1))
    assert r["points_drawn"] > 0 and r["gpu_points"] > 0
    r.update({"watch_cpu_pct": 0.0, "watch_seconds": 0, "watch_rss_mb": 0.0})
    assert "24 h chart query" in table(r)
