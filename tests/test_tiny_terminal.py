"""A terminal a few cells wide (a tmux pane squeezed, a web tab closing):
the banner's wrap divided by its width (Rich's fold: `range() arg 3 must
not be zero`), raised inside the monitor's publication, and the listeners
after the dashboard's — the recorder among them — missed that turn's news.
Found by sweeping the demo dashboard over terminal sizes (round 5)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from gputui.config import Settings
from gputui.model import Snapshot
from gputui.monitor import GpusRead, News, Update, kinds_of
from gputui.monitor.engine import Monitor
from gputui.monitor.gpufeed import SimulatedGpus
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from gputui.ui.widgets.banner import Banner
from test_monitor import settings
from ui_scenarios import make_app, until


class Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.mark.timeout(120)
async def test_the_dashboard_draws_in_a_terminal_a_few_cells_wide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: loop_errors.append(ctx))
    caught = Caught()
    logging.getLogger("gputui").addHandler(caught)
    try:
        app, _parts = make_app(Settings(demo=True))
        async with app.run_test(size=(120, 36)) as pilot:
            banner = app.query_one(Banner)
            await until(lambda: banner._text, 60, "the demo's banner to have words")
            for height in (36, 20, 5):
                for width in (1, 2, 3, 4, 5, 6, 8, 12):
                    await pilot.resize_terminal(width, height)
                    await pilot.pause(0.2)
            await pilot.resize_terminal(120, 36)
            await pilot.pause(1.0)
            assert app.is_running
    finally:
        logging.getLogger("gputui").removeHandler(caught)
    said = [str(c.get("exception") or c.get("message")) for c in loop_errors]
    said += [r.getMessage() + f" {r.exc_info[1]!r}" if r.exc_info else "" for r in caught.records]
    assert not said, said


async def test_one_listener_that_fails_does_not_starve_the_others() -> None:
    mon = Monitor(Target(LocalTransport()), settings(), gpu_feed=SimulatedGpus(1, lambda: 0.0))
    heard: list[set[type[Update]]] = []

    def broken(_snap: Snapshot, _news: News) -> None:
        raise ValueError("range() arg 3 must not be zero")

    mon.subscribe(broken)
    mon.subscribe(lambda _snap, news: heard.append(kinds_of(news)))
    mon._changed(GpusRead)
    await asyncio.sleep(0)  # the publication runs on the next turn
    await asyncio.sleep(0)
    assert heard == [{GpusRead}]


@pytest.mark.timeout(120)
async def test_under_serve_an_end_is_bounded_but_back_to_the_host_view_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `gputui serve` the dashboard's end arms the 2 s last resort
    (a page's quit during its first resize never finished Textual's
    teardown); Esc back to the host view, in the same process, must not."""
    from gputui.ui import app as app_module
    from gputui.ui.app import BACK, WEB_EXIT_S, GputuiApp

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    armed: list[tuple[int, float]] = []
    monkeypatch.setattr(
        app_module, "exit_at_the_latest", lambda c, after=0.0: armed.append((c, after))
    )
    monkeypatch.setattr(GputuiApp, "is_web", property(lambda _self: True))
    app, _parts = make_app(Settings(demo=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.5)
        app.exit(BACK)
    assert armed == []
    app, _parts = make_app(Settings(demo=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("q")
        await pilot.pause(0.5)
    assert armed == [(0, WEB_EXIT_S)]
