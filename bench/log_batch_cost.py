"""What one batch of a streaming log costs gputui's main thread, in process,
old and new trees side by side:

    python bench/log_batch_cost.py [--batches 400] [--rounds 3] [--src DIR ...]

A batch is what the target's batcher sends while a run logs 40 HF Trainer
dict lines a second (bench/hf_writer.py's lines): 8 lines, ~5 a second.
Two halves, each timed per batch in the thread's own CPU time:

- the dashboard: the real `GputuiApp` headless at 120×36 (the demo's
  healthy scene behind `tests/scene_fakes.SceneMonitor`), each batch told
  to it as the monitor tells it (`LogChanged` and `LogLines`), the pacer
  open so that every batch is drawn: the app's hold and drain, the log
  view's rows and its frame (`TailLog._blit`; headless, the terminal write
  is Textual's own no-op);
- the monitor: `LogFollower._consume` of the batch's bytes (splitting,
  the log's state) and the metrics read of its lines (`MetricsRead`).

Each --src (a tree holding gputui/, default this checkout's src/) runs in a
process of its own, the trees taking turns round by round; prints each
round's median and mean per batch, then each tree's medians. In process,
so without the event loop's wakes, the terminal write and the cold caches
of a process that sleeps between batches: a loaded machine's real
process pays ~3× these figures (bench/baseline_cost.py --rate 40 is the
whole thread's measure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import asyncio, json, random, sys, time
sys.path.insert(0, sys.argv[2])
from scene_fakes import SceneMonitor
from gputui.config import Settings
from gputui.demo.scenes import SCENES, T0
from gputui.model import Metrics
from gputui.monitor import LogChanged, news_of
from gputui.monitor.logfollow import LogFollower
from gputui.monitor.metricsread import MetricsRead
from gputui.ui.app import GputuiApp

N = int(sys.argv[1])
random.seed(1)


def hf(step):
    loss = 2.5 / (1 + step / 500) + random.random() * 0.05
    return str({"t": round(time.time(), 3), "loss": round(loss, 4),
                "grad_norm": round(0.4 + random.random() * 0.1, 4),
                "learning_rate": 1e-4, "epoch": round(step / 10000, 4)})


BATCHES = [[hf(8 * b + i) for i in range(8)] for b in range(N + 50)]


def stats(ns):
    ns = sorted(ns[50:])
    return {"median_us": ns[len(ns) // 2] / 1e3, "mean_us": sum(ns) / len(ns) / 1e3}


async def dashboard():
    snap, lines, findings = SCENES["healthy"](T0)
    mon = SceneMonitor(snap, lines)
    app = GputuiApp(mon, diagnose=lambda s, now: list(findings), clock=lambda: T0, live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(20):
            await pilot.pause(0.1)
        app._log_pacer.wait = lambda: 0.0  # every batch drawn as it comes
        times = []
        for batch in BATCHES:
            t0 = time.thread_time_ns()
            for cb in list(mon._listeners):
                cb(mon.snapshot, news_of({LogChanged}, batch))
            times.append(time.thread_time_ns() - t0)
        return stats(times)


def monitor():
    mr, metrics = MetricsRead(Settings()), Metrics()
    f = LogFollower(None, "/w/train.log", lambda ls: mr.read(ls, metrics, f.batch_time, False))
    f.state.exists = True
    times = []
    for batch in BATCHES:
        data = ("\n".join(batch) + "\n").encode()
        t0 = time.thread_time_ns()
        f._consume(data)
        times.append(time.thread_time_ns() - t0)
    return stats(times)


print(json.dumps({"dashboard": asyncio.run(dashboard()), "monitor": monitor()}))
"""


def one(src: Path, batches: int) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(batches), str(ROOT / "tests")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, dict[str, float]] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--batches", type=int, default=400, help="batches a round (default 400)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per tree (default 3)")
    ap.add_argument("--src", action="append", help="a source tree (default: src/)")
    args = ap.parse_args()
    srcs = [Path(s).resolve() for s in args.src or [str(ROOT / "src")]]
    for s in srcs:
        if not (s / "gputui").is_dir():
            print(f"--src {s}: no gputui/ in it; name a tree holding gputui/ (e.g. src/)")
            return 2
    got: dict[Path, list[dict[str, dict[str, float]]]] = {s: [] for s in srcs}
    for r in range(args.rounds):
        for s in srcs:
            got[s].append(one(s, args.batches))
            d, m = got[s][-1]["dashboard"], got[s][-1]["monitor"]
            print(
                f"round {r + 1} {s}: dashboard median {d['median_us']:.1f} µs mean "
                f"{d['mean_us']:.1f}; monitor median {m['median_us']:.1f} µs mean {m['mean_us']:.1f}",
                flush=True,
            )
    first = None
    for s in srcs:
        med = {
            part: {
                k: statistics.median(x[part][k] for x in got[s]) for k in ("median_us", "mean_us")
            }
            for part in ("dashboard", "monitor")
        }
        first = first or med
        vs = med["dashboard"]["median_us"] / first["dashboard"]["median_us"]
        print(
            f"{s}: dashboard {med['dashboard']['median_us']:.1f} µs (mean "
            f"{med['dashboard']['mean_us']:.1f}) {vs:.2f}× the first; monitor "
            f"{med['monitor']['median_us']:.1f} µs (mean {med['monitor']['mean_us']:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
