"""Notifications' place: the header's right end and a list behind a key —
never over the banner or the log (80×24)."""

from __future__ import annotations

from gputui.ui.screens.notices import NoticesScreen
from gputui.ui.widgets.status import StatusLine
from test_ui_snapshots import scene_app
from ui_scenarios import screen_text


async def test_notices_take_the_header_and_cover_nothing() -> None:
    app = scene_app("buffered")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        before = screen_text(app).splitlines()
        status = app._q(StatusLine)
        status.show_notice("paused", "log paused", "information", now=1.0)
        status.show_notice("hung", "GPUs idle with memory held: the run is hung", "error", now=2.0)
        await pilot.pause()
        after = screen_text(app).splitlines()
        assert "✖ GPUs idle" in after[0] and "(+1, n: all)" in after[0], after[0]
        assert after[1:] == before[1:]  # banner, GPUs, log: every other row as it was
        app.push_screen(NoticesScreen(list(status.notices.values())))
        await pilot.pause()
        listed = screen_text(app)
        assert listed.index("GPUs idle with memory held") < listed.index("log paused")
        await pilot.press("escape")
        status.clear_notice("hung")
        status.clear_notice("paused")
        await pilot.pause()
        assert screen_text(app).splitlines()[0] == before[0]
