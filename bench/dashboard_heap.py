"""Does the dashboard's Python heap grow? (issue 33: its RSS rose 4–9 MiB/h in the soaks)

    .venv/bin/python bench/dashboard_heap.py [MINUTES] [PERIOD_S]

The real dashboard (headless: Textual's run_test, 120×36) follows a log on
this machine (`--local --log`) written at 40 lines/s, history on. After
2 minutes of warm-up, tracemalloc starts; every PERIOD_S the heap is
compared with that start and the six largest growths are printed with
their tracebacks. A bounded cache shows up as a growth that stops (the same
block count from one period to the next); a leak keeps growing. RSS is
printed too, but tracemalloc's own bookkeeping inflates it: read the
"traced" figure. Results: bench/results/dashboard-tracemalloc-20min.txt.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from gputui.config import Settings  # noqa: E402
from ui_scenarios import make_app  # noqa: E402


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_lines(log: Path, stop: threading.Event) -> None:
    n = 0
    with log.open("a") as f:
        while not stop.is_set():
            n += 1
            f.write(f"step {n} | loss {8.0 / (1 + n * 0.01):.4f} | {48000 + n % 97} tok/s\n")
            f.flush()
            time.sleep(0.025)


async def watch(minutes: float, period: float, log: Path) -> None:
    app, _parts = make_app(Settings(local=True, log=str(log), history=True))
    async with app.run_test(size=(120, 36)):
        await asyncio.sleep(120)  # warm-up: caches fill
        gc.collect()
        tracemalloc.start(12)
        base = tracemalloc.take_snapshot()
        t0, r0 = time.time(), rss_mib()
        print(f"start rss {r0:.1f} MiB", flush=True)
        while time.time() - t0 < minutes * 60:
            await asyncio.sleep(period)
            gc.collect()
            snap = tracemalloc.take_snapshot()
            traced, _peak = tracemalloc.get_traced_memory()
            print(
                f"\n== {time.time() - t0:.0f} s rss {rss_mib():.1f} MiB (+{rss_mib() - r0:.1f}) "
                f"traced {traced / 2**20:.1f} MiB",
                flush=True,
            )
            for st in snap.compare_to(base, "traceback")[:6]:
                print(f"{st.size_diff / 1024:+.0f} KiB {st.count_diff:+d} blocks", flush=True)
                for line in st.traceback.format()[-12:]:
                    print("   ", line, flush=True)


def main() -> None:
    minutes = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    period = float(sys.argv[2]) if len(sys.argv) > 2 else 300.0
    with tempfile.TemporaryDirectory(prefix="gputui-heap-") as tmp:
        os.environ["XDG_STATE_HOME"] = tmp
        log = Path(tmp) / "train.log"
        log.touch()
        stop = threading.Event()
        threading.Thread(target=write_lines, args=(log, stop), daemon=True).start()
        try:
            asyncio.run(watch(minutes, period, log))
        finally:
            stop.set()


if __name__ == "__main__":
    main()
