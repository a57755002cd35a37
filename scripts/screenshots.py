"""Regenerate screenshots/*.svg of the dashboard, headless and stable.

Uses the demo package's fixed scenes (gputui.demo.scenes) and the test fakes (tests/scene_fakes.py): the same
snapshots, frozen clock and fixed log lines every run, so the SVGs only
change when the UI does.

    python scripts/screenshots.py [--out screenshots] [--size 120x36] [--live]

`--live` also runs the real `gputui --demo` headless (local tmux, the
block-buffered demo script behind `| tee`, simulated GPUs) and saves it as
the user sees it: `demo-live-buffered.svg` when the banner explains the
buffering, `demo-live-relaunched.svg` after `r`, `y` and a few steps. Those
two show live data, so they differ from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from gputui.actions import ActionResult
from gputui.demo.scenes import PY_SPY_OUTPUT, SCENES, T0
from gputui.ui.app import GputuiApp

# The fake monitor and action backend are test code (tests/scene_fakes.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from scene_fakes import RecordingActions, SceneMonitor

Steps = Callable[[Pilot[int]], Awaitable[None]]


async def _nothing(pilot: Pilot[int]) -> None:
    await pilot.pause()


async def _confirm(pilot: Pilot[int]) -> None:
    await pilot.press("r")
    await pilot.pause()


async def _dump(pilot: Pilot[int]) -> None:
    await pilot.press("d")
    await pilot.pause()
    await pilot.press("y")
    await pilot.app.workers.wait_for_complete()
    pilot.app.clear_notifications()
    await pilot.pause()


DUMP = ActionResult(
    True,
    "py-spy dump of pid 4242: 2 threads",
    output=PY_SPY_OUTPUT,
    saved_path="~/.local/state/gputui/dumps/dflash-4242.txt",
)


async def _graphs(pilot: Pilot[int]) -> None:
    await pilot.press("g")
    await pilot.pause()


# name, scene, steps, action outcome, terminal size (None: --size)
SHOTS: list[tuple[str, str, Steps, ActionResult | None, tuple[int, int] | None]] = [
    ("healthy", "healthy", _nothing, None, None),
    ("buffered-banner", "buffered", _nothing, None, None),
    ("dead-session", "dead", _nothing, None, None),
    ("confirm-relaunch", "buffered", _confirm, None, None),
    ("py-spy-dump", "healthy", _dump, DUMP, None),
    ("gpu-graphs", "healthy", _graphs, None, None),
    ("layout-80x24", "buffered", _nothing, None, (80, 24)),
    ("shared-gpus", "shared", _nothing, None, None),
    ("layout-200x60", "healthy", _nothing, None, (200, 60)),
    ("vs-last", "vs_last", _nothing, None, None),
]


# scenes whose run has the config's [run] command: their banner offers l
LAUNCHABLE = {"dead"}


async def shoot(out: Path, size: tuple[int, int]) -> list[Path]:
    written = []
    for name, scene, steps, outcome, fixed_size in SHOTS:
        snap, lines, findings = SCENES[scene](T0)
        app = GputuiApp(
            SceneMonitor(snap, lines),
            actions=RecordingActions(outcome),
            diagnose=lambda s, now, f=findings: list(f),
            clock=lambda: T0,
            live=False,
            can_launch=scene in LAUNCHABLE,
        )
        async with app.run_test(size=fixed_size or size) as pilot:
            await steps(pilot)
            path = app.save_screenshot(filename=f"{name}.svg", path=str(out))
            written.append(Path(path))
    return written


async def shoot_live(out: Path, size: tuple[int, int]) -> list[Path]:
    import os
    import tempfile
    import time

    from gputui.config import Settings
    from gputui.ui.widgets.banner import Banner
    from gputui.ui.wiring import build

    async def until(cond: Callable[[], bool], timeout: float) -> None:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                raise SystemExit("the live demo did not reach the expected state in time")
            await asyncio.sleep(0.25)

    async def steady_rtt() -> None:
        """The header's round trip measured again in the steady state: the
        one taken at connect, while the demo starts on a loaded machine, can
        read 'connected 2963 ms' (issue 27)."""
        measure = getattr(parts.monitor.target.transport, "measure_rtt", None)
        if measure is not None:
            snap.rtt_ms = await measure(5)
            await asyncio.sleep(1.2)  # the next 1 Hz tick draws it

    written = []
    with tempfile.TemporaryDirectory() as state:
        os.environ["XDG_STATE_HOME"] = state  # the demo's files and tmux server
        parts = build(Settings(demo=True))
        app = GputuiApp(
            parts.monitor,
            actions=parts.actions,
            can_launch=parts.can_launch,
            thresholds=parts.settings.diagnosis,
            on_exit=parts.on_exit,
            start=parts.start,
        )
        snap = parts.monitor.snapshot
        try:
            async with app.run_test(size=size) as pilot:
                banner = app.query_one(Banner)
                await until(lambda: bool(banner.finding), 60)
                await steady_rtt()
                written.append(Path(app.save_screenshot("demo-live-buffered.svg", str(out))))
                old = snap.training_proc
                await pilot.press("r")
                await until(lambda: getattr(app.screen, "plan", None) is not None, 30)  # filled in
                await pilot.press("y")
                await app.workers.wait_for_complete()
                await pilot.press("escape")

                # the old log is moved aside: wait for the new run's process and its steps
                def new_run_stepping() -> bool:
                    p = snap.training_proc
                    fresh = p is not None and (old is None or p.pid != old.pid)
                    return fresh and (snap.metrics.last_step or 0) >= 12

                await until(new_run_stepping, 90)
                # the relaunched run against the buffered one, at the same steps (issue 49)
                await until(lambda: snap.vs_last is not None and bool(snap.vs_last.verdict), 120)
                await pilot.pause(1.5)
                await steady_rtt()
                app.clear_notifications()
                written.append(Path(app.save_screenshot("demo-live-relaunched.svg", str(out))))
                await pilot.press("q")
        finally:
            await parts.on_exit()
    return written


async def shoot_history(out: Path, size: tuple[int, int]) -> list[Path]:
    """The whole-run view over a synthetic 6 h run with a hang and a relaunch
    (gputui.demo.history), drawn at the frozen clock T0: stable SVG."""
    import tempfile

    from textual.app import App

    from gputui.demo.history import fill
    from gputui.record.history import HistoryWriter
    from gputui.ui.screens.wholerun import WholeRunScreen

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "history.sqlite"
        w = HistoryWriter(db, clock=lambda: T0)
        fill(w, "root@10.1.2.6 ct 200", T0, hours=6.0, gpus=8)
        w.close()

        class Host(App[None]):
            def on_mount(self) -> None:
                self.push_screen(
                    WholeRunScreen(db, "root@10.1.2.6 ct 200", live=False, clock=lambda: T0)
                )

        app = Host()
        async with app.run_test(size=size) as pilot:
            screen = app.screen
            while getattr(screen, "loads", 0) < 1:
                await pilot.pause(0.1)
            await pilot.pause()
            path = app.save_screenshot(filename="whole-run.svg", path=str(out))
    return [Path(path), await shoot_overlay(out, size)]


async def shoot_overlay(out: Path, size: tuple[int, int]) -> Path:
    """The whole-run view of a relaunched run over its last run's curves
    (gputui.demo.history.fill_pair), with the comparison's line (issue 49)."""
    import tempfile

    from textual.app import App

    from gputui.demo.history import fill_pair
    from gputui.record.history import HistoryWriter, read_pair
    from gputui.record.vslast import vs_of
    from gputui.ui.screens.wholerun import WholeRunScreen

    target = "root@10.1.2.6 ct 200"
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "history.sqlite"
        w = HistoryWriter(db, clock=lambda: T0)
        _, this = fill_pair(w, target, T0)
        vs = vs_of(read_pair(w.conn, this))
        w.close()

        class Host(App[None]):
            def on_mount(self) -> None:
                self.push_screen(
                    WholeRunScreen(db, target, live=False, clock=lambda: T0, vs_last=lambda: vs)
                )

        app = Host()
        async with app.run_test(size=size) as pilot:
            while getattr(app.screen, "loads", 0) < 1:
                await pilot.pause(0.1)
            await pilot.pause()
            return Path(app.save_screenshot(filename="whole-run-vs-last.svg", path=str(out)))


async def shoot_hosts(out: Path, size: tuple[int, int]) -> list[Path]:
    """The host view over gputui.demo.hosts' fixed views: a Proxmox host with
    four containers on 8 GPUs, and a second host that is down (stable SVG)."""
    from gputui.demo.hosts import FixedHostWatch, down_view, proxmox_view
    from gputui.ui.hostapp import HostApp

    app = HostApp([FixedHostWatch(proxmox_view()), FixedHostWatch(down_view())], live=False)
    async with app.run_test(size=(max(size[0], 150), size[1])) as pilot:
        await pilot.pause()
        path = app.save_screenshot(filename="host-view.svg", path=str(out))
    return [Path(path)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "screenshots"))
    ap.add_argument("--size", default="120x36", help="COLSxROWS")
    ap.add_argument("--live", action="store_true", help="also capture the live demo")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for p in asyncio.run(shoot(out, (cols, rows))):
        print(p)
    for p in asyncio.run(shoot_history(out, (cols, rows))):
        print(p)
    for p in asyncio.run(shoot_hosts(out, (cols, rows))):
        print(p)
    if args.live:
        for p in asyncio.run(shoot_live(out, (cols, rows))):
            print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
