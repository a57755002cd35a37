"""Key → confirm box on screen: the time from a verb's key to the first frame
that shows its box (issue 46: ≤ 100 ms), while the plan is still being read.

The real GputuiApp (headless `run_test`) over a fixed demo scene, an action
backend whose plan never comes (the box stays in its reading state), each
frame the app sends rendered as a terminal would (Textual's `_display`, as
tests/terminal.py does). For r, k and f at 80×24 and 120×36, `--runs` times
each: post the key, stamp the first frame drawn with the box on top; Escape;
settle. Prints median / p90 / max per key and size.

    python bench/confirm_open.py [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from textual import events

from gputui.demo.scenes import SCENES, T0
from gputui.model import Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from scene_fakes import SceneMonitor

KEYS = ("r", "k", "f")
SIZES = ((80, 24), (120, 36))


class NeverPlans:
    """An action backend still reading its plan when the run ends."""

    progress = None

    async def plan(self, verb: str, snap: Snapshot, options: object = None) -> Any:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


async def one_size(size: tuple[int, int], runs: int) -> dict[str, list[float]]:
    snap, lines, findings = SCENES["buffered"](T0)
    app = GputuiApp(
        SceneMonitor(snap, lines),
        actions=NeverPlans(),  # type: ignore[arg-type]
        diagnose=lambda s, now: list(findings),
        clock=lambda: T0,
        live=False,
    )
    times: dict[str, list[float]] = {k: [] for k in KEYS}
    async with app.run_test(size=size) as pilot:
        shown: list[float] = []
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            original(screen, renderable)
            if isinstance(screen, ConfirmScreen) and renderable is not None and not shown:
                shown.append(time.perf_counter())

        app._display = display  # type: ignore[method-assign]
        await pilot.pause(0.5)
        for _ in range(runs):
            for key in KEYS:
                shown.clear()
                t0 = time.perf_counter()
                app.post_message(events.Key(key, key))
                while not shown and time.perf_counter() - t0 < 5:
                    await asyncio.sleep(0.001)
                times[key].append((shown[0] - t0) * 1000 if shown else float("inf"))
                await pilot.press("escape")
                await pilot.pause(0.1)
        await pilot.press("q")
    return times


def row(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"| {label} | {statistics.median(ms):.0f} | {p90:.0f} | {ms[-1]:.0f} | {len(ms)} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print("| key, size | median ms | p90 ms | max ms | runs |\n| --- | --- | --- | --- | --- |")
    for size in SIZES:
        times = asyncio.run(one_size(size, args.runs))
        for key, ms in times.items():
            print(row(f"{key} {size[0]}×{size[1]}", ms))


if __name__ == "__main__":
    main()
