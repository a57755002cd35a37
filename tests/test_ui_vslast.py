"""The run against its last one on screen (issue 49): the run panel's
figures and verdict, and the whole-run view's overlay of the last run's
curves with the comparison's line."""

from __future__ import annotations

import tempfile
from pathlib import Path

from textual.app import App

from gputui.demo.history import fill_pair
from gputui.demo.scenes import SCENES, T0
from gputui.record.history import HistoryWriter, read_pair
from gputui.record.vslast import vs_of
from gputui.ui.app import GputuiApp
from gputui.ui.screens.wholerun import MetricChart, WholeRunScreen
from gputui.ui.widgets.runinfo import RunPanel
from scene_fakes import SceneMonitor
from ui_scenarios import screen_text


async def test_run_panel_shows_the_run_against_the_last_one() -> None:
    snap, lines, findings = SCENES["vs_last"](T0)
    app = GputuiApp(
        SceneMonitor(snap, lines),
        diagnose=lambda s, now: list(findings),
        clock=lambda: T0,
        live=False,
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app._tick()
        await pilot.pause()
        panel = app.query_one(RunPanel)
        sub = panel._shown_border_subtitle.plain  # type: ignore[attr-defined]  # as drawn
        assert sub.startswith("faster · 47.") and "tok/s +12 % vs last (42." in sub
        assert sub.endswith("at step 400")
        text = screen_text(app)
        assert "+12 % vs last" in text  # on the tok/s row, beside the current value
        title = panel._shown_border_title.plain  # type: ignore[attr-defined]
        assert title.startswith("training process · vs run 12: --batch-size 32 → 64;")
        # without a last run: the parser's name, no comparison
        snap.vs_last = None
        app._tick()
        await pilot.pause()
        assert panel._shown_border_subtitle.plain == "parser: step | loss | tok/s"  # type: ignore[attr-defined]
        assert panel._shown_border_title.plain == "training process"  # type: ignore[attr-defined]


async def test_whole_run_overlays_the_last_run() -> None:
    target = "root@10.1.2.6 ct 200"
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "history.sqlite"
        w = HistoryWriter(db, clock=lambda: T0)
        last, this = fill_pair(w, target, T0)
        vs = vs_of(read_pair(w.conn, this))
        w.close()
        assert vs is not None and vs.verdict == "faster" and vs.last_run == last

        class Host(App[None]):
            def on_mount(self) -> None:
                self.push_screen(
                    WholeRunScreen(db, target, live=False, clock=lambda: T0, vs_last=lambda: vs)
                )

        app = Host()
        async with app.run_test(size=(120, 36)) as pilot:
            while getattr(app.screen, "loads", 0) < 1:
                await pilot.pause(0.05)
            await pilot.pause()
            chart = app.screen.query_one("#wr-loss", MetricChart)
            assert chart.data is not None and chart.data.last_id == last
            assert len(chart.data.last) > 100  # the last run's points, drawn under this one's
            text = screen_text(app)
            assert f"run {this} against its last run {last}: faster" in text
            assert f"last run {last}" in text and "this run" in text  # the legend
