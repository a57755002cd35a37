"""Host view benchmark: 2 hosts × 3 running containers (+ 1 stopped) × 8 GPUs.

Two real-sshd test beds (tests/testbed.py) stand in for two Proxmox hosts,
each with tests/hostscene.py's scene (a healthy run, a buffered one, a dead
session, a stopped CT; 8 stand-in H200s listing the runs' host PIDs), `pct`
with a real host's 0.4 s start-up. The host view (`HostApp` over two
`HostWatch`es, headless `run_test`, 150×40) runs in this process.

Measured:
- first complete host view: from start (connect included) until every GPU,
  every container and a word for each are there, per host; `--runs` times;
- steady state over `--window` s after that: `pct exec` and `pct list` calls
  per minute on each host (the stand-in's call log), ssh channels held,
  host CPU (the sshd process tree: sshd, relay, pct, agents, tail,
  nvidia-smi), and this process's CPU (the UI, asyncssh, both watches).

    .venv/bin/python bench/hosts.py [--runs 3] [--window 60] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import hostscene  # noqa: E402
from gputui.config import Settings  # noqa: E402
from gputui.hostwatch import HostWatch  # noqa: E402
from gputui.ui.hostapp import HostApp  # noqa: E402
from harness import PCT_DELAY_S, remote_cpu_s  # noqa: E402
from testbed import Testbed  # noqa: E402

FIRST_CTS = (360, 370)


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def first_complete(beds: list[Testbed]) -> list[float]:
    """Start a host view over both hosts; seconds until each host's view is complete."""
    watches = [HostWatch(Settings(**tb.transport_kwargs())) for tb in beds]
    app = HostApp(watches)
    try:
        async with app.run_test(size=(150, 40)) as pilot:
            t0 = time.monotonic()
            for w in watches:
                await w.start()
            while not all(w.first_complete_s is not None for w in watches):
                if time.monotonic() - t0 > 60:
                    raise SystemExit("no complete host view within 60 s")
                await pilot.pause(0.05)
            return [w.first_complete_s or 0.0 for w in watches]
    finally:
        for w in watches:
            await w.stop()


async def steady(beds: list[Testbed], window: float) -> dict[str, Any]:
    watches = [HostWatch(Settings(**tb.transport_kwargs())) for tb in beds]
    app = HostApp(watches)
    out: dict[str, Any] = {}
    try:
        async with app.run_test(size=(150, 40)) as pilot:
            for w in watches:
                await w.start()
            while not all(w.view.complete for w in watches):
                await pilot.pause(0.1)
            await pilot.pause(5.0)  # let the start-up settle (log backlogs, first polls)
            for tb in beds:
                tb.count_pct_calls()
                (tb.state_dir / "pct-calls.log").write_text("")
            host0 = [remote_cpu_s(tb.sshd_pid or 0) for tb in beds]
            ui0, t0 = cpu_s(), time.monotonic()
            await pilot.pause(window)
            wall = time.monotonic() - t0
            ui = cpu_s() - ui0
            host = [remote_cpu_s(tb.sshd_pid or 0) - h for tb, h in zip(beds, host0, strict=True)]
            calls = [tb.pct_calls() for tb in beds]
            out = {
                "window_s": round(wall, 1),
                "pct_exec_per_min": [
                    round(sum(c.startswith("exec") for c in cs) * 60 / wall, 2) for cs in calls
                ],
                "pct_list_per_min": [
                    round(sum(c.startswith("list") for c in cs) * 60 / wall, 2) for cs in calls
                ],
                "ssh_channels": [w.channels for w in watches],
                "relay_commands": [w.relay.commands for w in watches],
                "host_cpu_s_per_min": [round(h * 60 / wall, 2) for h in host],
                "ui_cpu_pct_of_a_core": round(100 * ui / wall, 1),
                "words": [{str(c.id): c.health for c in w.view.containers} for w in watches],
            }
    finally:
        for w in watches:
            await w.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    beds = [Testbed().start() for _ in FIRST_CTS]
    try:
        for tb, first in zip(beds, FIRST_CTS, strict=True):
            tb.use_cgroups()
            hostscene.build(tb, first)
            tb.set_pct_delay(PCT_DELAY_S)
        load_before = os.getloadavg()
        firsts = [asyncio.run(first_complete(beds)) for _ in range(args.runs)]
        result = asyncio.run(steady(beds, args.window))
        per_host = [[r[i] for r in firsts] for i in range(len(beds))]
        result.update(
            {
                "first_complete_s": [[round(x, 2) for x in xs] for xs in per_host],
                "first_complete_median_s": [round(statistics.median(xs), 2) for xs in per_host],
                "load_before": [round(x, 2) for x in load_before],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                "cores": os.cpu_count(),
                "pct_delay_s": PCT_DELAY_S,
            }
        )
    finally:
        for tb in beds:
            tb.stop()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
