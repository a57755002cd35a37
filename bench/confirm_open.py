"""Key → confirm box on screen: the time from a verb's key to the first frame
that shows its box (issue 46: ≤ 100 ms), while the plan is still being read.

The real GputuiApp (headless `run_test`) over a fixed demo scene, an action
backend whose plan never comes (the box stays in its reading state), each
frame the app sends rendered as a terminal would (Textual's `_display`, as
tests/terminal.py does). For r, k and f at 80×24 and 120×36, `--runs` times
each: post the key, stamp the first frame drawn with the box on top; Escape;
settle. Prints median / p90 / max per key and size.

`--testbed`: key → PLAN painted instead (the box's `shown` state: the frame
with the plan drawn, Run live), the real app wired as `gputui --host … --ct N`
on the SSH test bed (real sshd, the stand-in `pct` at its usual 0.3 s a
call, real tmux, a block-buffered python3 run through `| tee`), for f, k, r
and d, `--runs` opens each, interleaved. A plan that cannot be made (d with
no py-spy in the CT) is timed to its answer in the box, and says so.

`--planners`: the planners alone (no UI) on the same test bed, each verb's
plan made `--runs` times by commands and through the agent's one request
(actions/facts.py), interleaved — d (py-spy dump) included, which asks no
confirmation and so has no box to time above.

    python bench/confirm_open.py [--runs 20]
    python bench/confirm_open.py --testbed [--runs 7]
    python bench/confirm_open.py --planners [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from textual import events

from gputui.demo.scenes import SCENES, T0
from gputui.model import Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.verbs import VERB_BY_ID
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


PLAN_KEYS = ("f", "k", "r", "d")
VERB_OF = {"f": "flush", "k": "kill", "r": "relaunch", "d": "dump"}


async def plan_times(runs: int) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Key → the box's plan painted (state `shown`) per key on the test bed."""
    from testbed import Testbed
    from ui_scenarios import make_app, prepare_run, settings_for, start_buffered, until

    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="gputui-confirm-")  # history, audit
    bed = Testbed().start()
    ct = 200
    times: dict[str, list[float]] = {k: [] for k in PLAN_KEYS}
    ended: dict[str, str] = {}
    try:
        bed.ct_create(ct, running=True)
        run = prepare_run(bed, ct, "bench")
        start_buffered(bed, run, count=100000, period=0.2)
        app, parts = make_app(settings_for(bed, ct, interval=0.5, session="bench"))
        snap = parts.monitor.snapshot
        try:
            async with app.run_test(size=(120, 36)) as pilot:
                await until(lambda: snap.training_proc is not None, 60, "the run's process")
                await until(lambda: app.why_not("flush") is None, 30, "f available")
                await pilot.pause(2.0)
                keys = [
                    k
                    for k in PLAN_KEYS
                    if app.why_not(VERB_OF[k]) is None and VERB_BY_ID[VERB_OF[k]].confirm
                ]
                ended.update(
                    {
                        k: f"not offered: {app.why_not(VERB_OF[k]) or 'runs unconfirmed'}"
                        for k in PLAN_KEYS
                        if k not in keys
                    }
                )
                for _ in range(runs):
                    for key in keys:
                        t0 = time.perf_counter()
                        app.post_message(events.Key(key, key))
                        await until(
                            lambda: (
                                isinstance(app.screen, ConfirmScreen)
                                and app.screen.state != "reading"
                            ),
                            60,
                            f"{key}: the plan",
                        )
                        times[key].append((time.perf_counter() - t0) * 1000)
                        box = app.screen
                        assert isinstance(box, ConfirmScreen)
                        ended[key] = box.state
                        await pilot.press("escape")
                        await until(lambda: not isinstance(app.screen, ConfirmScreen), 5, "closed")
                        await pilot.pause(0.5)
                await pilot.press("q")
        finally:
            await parts.on_exit()
    finally:
        bed.stop()
    return times, ended


async def planner_times(runs: int) -> dict[str, list[float]]:
    """Each verb's plan, by commands and through the agent, on the test bed."""
    import shutil

    from gputui.actions import RunSeen, plan
    from gputui.config import Settings
    from gputui.remote.agent_client import AgentClient
    from gputui.remote.target import Target
    from gputui.verbs import DumpOptions
    from helpers import facts_of
    from testbed import Testbed
    from ui_scenarios import prepare_run, start_buffered

    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="gputui-planners-")
    bed = Testbed().start()
    ct = 200
    out: dict[str, list[float]] = {}
    try:
        bed.ct_create(ct, running=True)
        run = prepare_run(bed, ct, "bench")
        start_buffered(bed, run, count=100000, period=0.2)
        spy = Path(bed.root) / "tools" / "py-spy"  # root's alone, where the CT sees it
        spy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(shutil.which("py-spy", path=os.path.dirname(sys.executable)) or "py-spy", spy)
        tr = bed.transport()
        await tr.connect()
        target = Target(tr, ct)
        agent = await AgentClient.start(target, timeout=30)
        await asyncio.sleep(2.0)
        verbs = {"f": "flush", "k": "kill", "r": "relaunch", "d": "dump"}
        options = {"dump": DumpOptions(py_spy=str(spy))}
        for _ in range(runs):
            for key, verb in verbs.items():
                for how, facts in (("commands", None), ("agent", facts_of(agent))):
                    seen = RunSeen("bench", log=str(run.log), facts=facts)
                    t0 = time.perf_counter()
                    await plan(verb, target, Settings(), seen, options.get(verb))
                    out.setdefault(f"{key} {verb}, {how}", []).append(
                        (time.perf_counter() - t0) * 1000
                    )
        await agent.close()
        await tr.close()
    finally:
        bed.stop()
    return out


def row(label: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"| {label} | {statistics.median(ms):.0f} | {p90:.0f} | {ms[-1]:.0f} | {len(ms)} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--testbed", action="store_true", help="key → plan painted on the test bed")
    ap.add_argument("--planners", action="store_true", help="each plan, commands vs the agent")
    args = ap.parse_args()
    if args.planners:
        load0 = os.getloadavg()
        times = asyncio.run(planner_times(args.runs))
        load1 = os.getloadavg()
        print(
            "| plan made | median ms | p90 ms | max ms | plans |\n| --- | --- | --- | --- | --- |"
        )
        for label, ms in times.items():
            print(row(label, ms))
        print(f"load average before {load0[0]:.1f}, after {load1[0]:.1f} (1 min)")
        return
    if args.testbed:
        load0 = os.getloadavg()
        times, ended = asyncio.run(plan_times(args.runs))
        load1 = os.getloadavg()
        print("| key → plan painted | median ms | p90 ms | max ms | opens |")
        print("| --- | --- | --- | --- | --- |")
        for key, ms in times.items():
            if not ms:
                print(f"| {key}: {ended.get(key)} | - | - | - | 0 |")
                continue
            what = "" if ended.get(key) == "shown" else f" (box {ended.get(key)})"
            print(row(f"{key}{what}", ms))
        print(f"load average before {load0[0]:.1f}, after {load1[0]:.1f} (1 min)")
        return
    print("| key, size | median ms | p90 ms | max ms | runs |\n| --- | --- | --- | --- | --- |")
    for size in SIZES:
        times = asyncio.run(one_size(size, args.runs))
        for key, ms in times.items():
            print(row(f"{key} {size[0]}×{size[1]}", ms))


if __name__ == "__main__":
    main()
