"""On a real GPU: read NVML (through gputui's NvmlReader) and nvidia-smi
(through gputui's CSV parser) back to back, N times, and print the
differences as JSON — memory, utilization, power.

    python3 bench/gpu/compare_readers.py --samples 10 --label busy
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time

from gputui.collect.nvidiasmi import parse_gpu_line, query_gpu_argv
from gputui.collect.nvml import NvmlReader
from gputui.model import GpuSample


def smi_samples(now: float) -> list[GpuSample]:
    out = subprocess.run(query_gpu_argv(None), capture_output=True, text=True, check=True).stdout
    rows = [parse_gpu_line(line, now) for line in out.splitlines()]
    return [r for r in rows if isinstance(r, GpuSample)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    diffs: dict[str, list[float]] = {"mem_mib": [], "util_pct": [], "power_w": []}
    pairs = []
    with NvmlReader() as nvml:
        for _ in range(args.samples):
            now = time.time()
            a = {s.index: s for s in nvml.read(now)}
            b = {s.index: s for s in smi_samples(now)}
            for i, sa in a.items():
                sb = b.get(i)
                if sb is None:
                    continue
                pairs.append(
                    {
                        "gpu": i,
                        "nvml": [sa.mem_used_mib, sa.util_pct, sa.power_w, sa.sm_clock_mhz],
                        "smi": [sb.mem_used_mib, sb.util_pct, sb.power_w, sb.sm_clock_mhz],
                    }
                )
                for key, x, y in (
                    ("mem_mib", sa.mem_used_mib, sb.mem_used_mib),
                    ("util_pct", sa.util_pct, sb.util_pct),
                    ("power_w", sa.power_w, sb.power_w),
                ):
                    if x is not None and y is not None:
                        diffs[key].append(abs(x - y))
            time.sleep(1.0)
        memory_version = nvml.memory_version
    summary = {
        k: {"median_abs_diff": statistics.median(v), "max_abs_diff": max(v)} if v else None
        for k, v in diffs.items()
    }
    print(
        json.dumps(
            {
                "label": args.label,
                "memory_version": memory_version,
                "summary": summary,
                "pairs": pairs[:6],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
