"""`gputui --demo` end to end on this machine: real tmux (private server),
the real buffered demo script behind `| tee`, the real monitor and actions,
simulated GPUs. The banner must explain the buffering and `r` must fix it.

Slow on purpose (~11 s): the run has to stay silent past a stale threshold
(the demo's 20 s, shortened to 5 s as `--stale-after 5` does) before the
diagnosis may call it silent. The demo run's "loading model" pause (6 s, before
and after the relaunch) is shortened to 1 s with its DEMO_LOAD_S: the banner
and the fix do not depend on how long the model loads.
"""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from gputui.config import Settings
from gputui.diagnose import Thresholds
from gputui.ui.app import GputuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.result import ResultScreen
from gputui.ui.widgets.banner import Banner
from gputui.ui.wiring import build
from helpers import yes_once_shown

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="the demo needs tmux")


async def wait_for(cond, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return True
        await asyncio.sleep(0.1)
    return False


def _runs(db):  # type: ignore[no-untyped-def]
    """What the history holds of each run: for a failure's message."""
    import sqlite3

    with sqlite3.connect(db) as c:
        return "; ".join(
            str(x)
            for x in [
                (
                    r[0],
                    c.execute("SELECT argv FROM run_programs WHERE run_id=?", (r[0],)).fetchall(),
                    c.execute(
                        "SELECT COUNT(step), MAX(step) FROM metric_points WHERE run_id=?", (r[0],)
                    ).fetchone(),
                )
                for r in c.execute("SELECT id, log_path, inode, first_seen FROM runs")
            ]
        )


@pytest.mark.timeout(210)
async def test_demo_banner_explains_buffering_and_relaunch_fixes_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path))  # restored after: build() repoints it
    monkeypatch.setenv("PATH", __import__("os").environ["PATH"])
    monkeypatch.setenv("DEMO_LOAD_S", "1")  # the demo's tmux server and its runs inherit it
    # the demo's own 20 s stale threshold, shortened as `--stale-after 5` does
    parts = build(Settings(demo=True, diagnosis=Thresholds(stale_after=5.0)))
    app = GputuiApp(
        parts.monitor,
        actions=parts.actions,
        can_launch=parts.can_launch,
        thresholds=parts.settings.diagnosis,
        on_exit=parts.on_exit,
        start=parts.start,
    )
    banner_kind = lambda: app.query_one(Banner).finding and app.query_one(Banner).finding.kind  # noqa: E731
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            snap = parts.monitor.snapshot
            assert await wait_for(lambda: banner_kind() == "busy_but_silent", 45), (
                f"no buffering banner; findings: {[f.kind for f in app.findings]}"
            )
            assert snap.training_proc is not None and snap.training_proc.block_buffered
            assert len(snap.metrics.throughput) == 0  # nothing reached the log yet
            await pilot.press("r")
            assert await wait_for(
                lambda: isinstance(app.screen, ConfirmScreen) and app.screen.plan, 10
            )
            assert app.executed == []  # the box is open; nothing ran
            await yes_once_shown(pilot)
            await app.workers.wait_for_complete()
            assert [p.action for p in app.executed] == ["relaunch"]
            # the result box says what is true of simulated GPUs (it said "GPU
            # memory unchanged by the stop (1010.1 GiB in use)": a failed kill?)
            assert isinstance(app.screen, ResultScreen), app.screen
            said = " ".join([app.screen.result.summary, *app.screen.result.details])
            assert "unchanged" not in said and "freed 0" not in said, said
            assert "GPUs are simulated" in said, said
            assert await wait_for(lambda: len(snap.metrics.throughput) >= 8, 20)
            assert await wait_for(lambda: banner_kind() is None, 10), [
                (f.kind, f.title) for f in app.findings
            ]
            proc = snap.training_proc
            assert proc is not None and proc.block_buffered is False
            old_logs = list((tmp_path / "gputui" / "demo").glob("train.log.*"))
            assert old_logs, "the relaunch must keep the old log (moved aside)"
            # the demo's actions are the demo's: its own audit log, not the
            # user's, where they landed as `local (vm)` (issue 46)
            demo_audit = tmp_path / "gputui" / "demo" / "audit.log"
            assert demo_audit.exists() and '"relaunch"' in demo_audit.read_text()
            assert not (tmp_path / "gputui" / "audit.log").exists()
            # the demo tells the relaunched run against the buffered one (issue 49):
            # the same code, the same speed — "same", and what changed is gputui's env
            assert await wait_for(lambda: snap.vs_last is not None and snap.vs_last.verdict, 60), (
                parts.recorder.errors if parts.recorder else None,
                _runs(parts.recorder.writer.path)
                if parts.recorder and parts.recorder.writer
                else None,
            )
            vs = snap.vs_last
            assert vs is not None and vs.verdict == "same", vs
            assert "env PYTHONUNBUFFERED=1 set" in vs.changes, vs.changes
            assert vs.this_run != vs.last_run
            await pilot.press("escape")  # close the result box
            await pilot.press("q")
            await pilot.pause()
    finally:
        await parts.on_exit()
