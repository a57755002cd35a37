"""The dashboard's light-on-CPU habits: live data repaints, it does not reflow
the screen; lines still arrive in order, none lost."""

from __future__ import annotations

from typing import Any

from textual.widgets import Log

from gputui.demo.scenes import SCENES, T0, SceneMonitor
from gputui.ui.app import GputuiApp
from gputui.ui.widgets.logview import TailLog

SIZE = (120, 36)


def make_app(scene: str = "healthy") -> tuple[GputuiApp, SceneMonitor]:
    snap, lines, findings = SCENES[scene](T0)
    mon = SceneMonitor(snap, lines)
    app = GputuiApp(mon, diagnose=lambda s, now: list(findings), clock=lambda: T0, live=False)
    return app, mon


def count_layouts(app: GputuiApp) -> list[int]:
    """Counts full layout passes of the dashboard screen."""
    screen: Any = app.screen
    n = [0]
    orig = screen._refresh_layout

    def counted(*a: Any, **kw: Any) -> None:
        n[0] += 1
        orig(*a, **kw)

    screen._refresh_layout = counted
    return n


async def test_log_writes_and_unchanged_ticks_do_not_reflow_the_screen() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        log = app.query_one("#log", TailLog)
        layouts = count_layouts(app)
        lines_before = log.line_count
        for i in range(30):
            mon.push_lines([f"step {1000 + i} | loss 0.5 | tok/s 100 " + "x" * i])
            app._drain_log()
            app._tick()
            await pilot.pause()
        assert log.line_count == lines_before + 30
        assert log.lines[-1].startswith("step 1029")
        assert log.virtual_size.height == log.line_count
        assert log.virtual_size.width >= len(log.lines[-1])
        assert log.is_vertical_scroll_end  # still pinned to the end
        assert layouts[0] == 0


async def test_log_view_stays_where_the_user_scrolled() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", Log)
        mon.push_lines([f"line {i}" for i in range(200)])
        app._drain_log()
        await pilot.pause()
        assert log.is_vertical_scroll_end
        log.scroll_to(y=10, animate=False, immediate=True)
        mon.push_lines(["line 200"])
        app._drain_log()
        await pilot.pause()
        assert log.scroll_y == 10
        assert log.lines[-1] == "line 200"


async def test_log_lines_show_on_arrival_then_at_most_one_write_per_interval() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", Log)
        writes: list[list[str]] = []
        orig = log.write_lines

        def counted(lines: Any, scroll_end: bool | None = None) -> Any:
            writes.append(list(lines))
            return orig(writes[-1], scroll_end)

        log.write_lines = counted  # type: ignore[method-assign]
        await pilot.pause(0.2)
        mon.push_lines(["first"])
        mon.publish({"log"})
        assert log.lines[-1] == "first"  # at once: no timer in the way
        for i in range(5):  # a flood right after: held, then one batch
            mon.push_lines([f"more {i}"])
            mon.publish({"log"})
        assert log.lines[-1] == "first"
        await pilot.pause(0.25)
        assert log.lines[-5:] == [f"more {i}" for i in range(5)]
        assert writes == [["first"], [f"more {i}" for i in range(5)]]
