"""Notifications' place: the header's right end and a list behind a key —
never over the banner or the log (80×24)."""

from __future__ import annotations

from textual.widgets._toast import ToastRack

from gputui.ui.screens.notices import NoticesScreen
from gputui.ui.widgets.status import StatusLine
from helpers import yes_once_shown
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


def log_box(screen: str) -> list[str]:
    """The rows inside the log panel's border."""
    rows = screen.splitlines()
    top = next(i for i, r in enumerate(rows) if r.startswith("╭─ log"))
    bottom = next(i for i in range(top + 1, len(rows)) if rows[i].startswith("╰"))
    return rows[top + 1 : bottom]


async def test_right_after_a_relaunch_the_log_is_not_covered() -> None:
    """80×24 after `r`, `y`: what the relaunch says is in the header; the
    banner, the GPU rows and 8+ log rows stay in view, and n lists it."""
    app = scene_app("buffered")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        log_rows = log_box(screen_text(app))
        assert len(log_rows) >= 8
        await pilot.press("r")
        await pilot.pause()
        await yes_once_shown(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        after = screen_text(app).splitlines()
        assert app._notifications, "the relaunch said nothing"
        assert after[0].rstrip().endswith(")"), after[0]  # the notice, at the header's end
        assert log_box("\n".join(after)) == log_rows  # no log row covered
        assert not any(r.display for r in app.screen.query(ToastRack))  # no toast over it
        assert after[1].startswith("█ ✖ GPUs are busy")  # nor the banner
        await pilot.press("n")
        await pilot.pause()
        assert "notifications (" in screen_text(app)


async def test_a_notification_while_the_dashboard_closes_is_dropped() -> None:
    """A worker's last word (a relaunch's report) can arrive while the app
    exits and the dashboard's widgets are already gone: it was an uncaught
    NoMatches that took the exit down (found by a loaded CI run). Now the
    word has nowhere to go and is dropped; the app ends cleanly."""
    app = scene_app("buffered")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await app._q(StatusLine).remove()
        app.notify("relaunched: new log 120 bytes after 3 s")
        await pilot.pause()
        assert app._exception is None, app._exception
