"""A read-only dashboard (`--read-only`, the web page `gputui serve` makes)
offers no key that changes the run in its banner: it offered [r] relaunch
and [f] flush, which the page then refused (issue 46)."""

from __future__ import annotations

from gputui.ui.widgets.banner import Banner
from test_ui_snapshots import scene_app


async def test_the_read_only_banner_offers_no_key_that_changes_the_run() -> None:
    app = scene_app("buffered", read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        text = str(app.query_one(Banner).render())
        assert "block-buffered" in text
        assert "[r]" not in text and "[f]" not in text and "[k]" not in text, text
        assert "read-only here: relaunch unbuffered off" in text, text


async def test_the_banner_offers_its_keys_when_actions_are_on() -> None:
    app = scene_app("buffered")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        text = str(app.query_one(Banner).render())
        assert "[r] relaunch unbuffered" in text and "read-only" not in text, text
