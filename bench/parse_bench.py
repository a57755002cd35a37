"""Parse throughput: metric presets (gputui.collect.metrics) and LineSplitter."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gputui.collect.logtail import LineSplitter
from gputui.collect.metrics import MetricParser

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "logs"
NOISE = [
    "Downloading shards: 100%",
    "[rank0]: NCCL INFO Channel 00/32 : 0[0] -> 1[1] via P2P/IPC",
    "wandb: Syncing run dainty-sun-42",
    "Saving model checkpoint to /workspace/out/checkpoint-500",
    "  warnings.warn(",
]


def real_lines() -> list[str]:
    """Lines from the real-world log fixtures (most of them metric lines)."""
    lines: list[str] = []
    for p in sorted(FIXTURES.glob("*.log")):
        if p.name == "binary.log":
            continue
        lines += LineSplitter().feed(p.read_bytes() + b"\n")
    return [x for x in lines if x.strip()]


def _rate(fn: Any, items: list[Any], seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        fn(items)
        n += len(items)
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return n / dt


def parse_throughput(seconds: float = 1.0) -> dict[str, float]:
    mixed = real_lines() + NOISE
    parser = MetricParser()

    def parse_all(lines: list[str]) -> None:
        p = parser.parse
        for line in lines:
            p(line, 0.0)

    data = (
        b"".join(
            b"step %d loss 1.234 tok/s 12000 \x1b[32mok\x1b[0m " % i + b"x" * 40 + b"\n"
            for i in range(2000)
        )
        + b"10%|#   | 10/100 [00:01<00:09, 9.1it/s]\r" * 200
    )
    n_lines = len(LineSplitter().feed(data))

    def split(chunks: list[bytes]) -> None:
        s = LineSplitter()
        for c in chunks:
            s.feed(c)

    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    t0 = time.perf_counter()
    rounds = 0
    while time.perf_counter() - t0 < seconds:
        split(chunks)
        rounds += 1
    dt = time.perf_counter() - t0
    return {
        "metrics_mixed": _rate(parse_all, mixed, seconds),
        "metrics_noise": _rate(parse_all, NOISE * 20, seconds),
        "metrics_lines": len(mixed),
        "splitter_lines": rounds * n_lines / dt,
        "splitter_mb": rounds * len(data) / dt / 1e6,
    }
