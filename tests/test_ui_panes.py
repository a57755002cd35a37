"""The pane contract (ui/widgets/pane.py): a pane is one module plus its line
in GputuiApp.LAYOUT; the dashboard places it and draws it when, and only
when, a snapshot part it names changed."""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputui.demo.scenes import SCENES, T0
from gputui.monitor import (
    UPDATES,
    ConnectionChanged,
    CtChanged,
    GpusRead,
    LogLines,
    ProcsChanged,
    SessionsChanged,
    Update,
)
from gputui.ui import app as app_module
from gputui.ui.app import GputuiApp
from gputui.ui.widgets.pane import Frame, Pane, Row, Tick
from gputui.ui.widgets.quiet import QuietStatic
from scene_fakes import SceneMonitor
from ui_scenarios import screen_text

SIZE = (120, 36)


class SessionCount(Pane, QuietStatic):
    """A pane that shows one part of the snapshot: the number of sessions."""

    ID = "session-count"
    DRAWN_ON = frozenset({SessionsChanged})
    DEFAULT_CSS = "SessionCount { height: 1; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.drawn: list[set[type[Update]]] = []

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        self.drawn.append(set(changed))
        self.show_text(f"{len(frame.snap.sessions)} tmux sessions here")


class Clock(Pane, QuietStatic):
    """A pane that follows the clock only."""

    ID = "clock"
    DRAWN_ON = frozenset({Tick})
    DEFAULT_CSS = "Clock { height: 1; }"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.drawn = 0

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        self.drawn += 1


class WithPanes(GputuiApp):
    CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))  # not next to this file
    LAYOUT = (*GputuiApp.LAYOUT, SessionCount, Clock)  # their one line each


def make_app() -> tuple[WithPanes, SceneMonitor]:
    snap, lines, findings = SCENES["healthy"](T0)
    mon = SceneMonitor(snap, lines)
    app = WithPanes(mon, diagnose=lambda s, now: list(findings), clock=lambda: T0, live=False)
    return app, mon


async def wait_for(pilot: Pilot[int], cond: Callable[[], bool], what: str) -> None:
    for _ in range(200):  # 10 s: the machine may be loaded
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_registered_pane_is_placed_and_drawn_on_its_parts_only() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        count = app.query_one(SessionCount)
        clock = app.query_one(Clock)
        assert count.drawn == [set(UPDATES)]
        n = len(mon.snapshot.sessions)
        assert f"{n} tmux sessions here" in screen_text(app)  # placed: on screen

        # new GPU samples, a connection change: a redraw, not of this pane
        ticks = clock.drawn
        mon.publish({GpusRead})
        await wait_for(pilot, lambda: clock.drawn > ticks, "the redraw the GPU samples bring")
        mon.publish({ConnectionChanged, CtChanged, ProcsChanged})
        await wait_for(pilot, lambda: clock.drawn > ticks + 1, "the redraw a connection brings")
        app._tick()  # the once-a-second redraw, nothing changed
        assert len(count.drawn) == 1

        # sessions change: drawn with the next redraw, once, told what changed
        mon.set(replace(mon.snapshot, sessions=mon.snapshot.sessions[:1]), {SessionsChanged})
        await pilot.pause()
        assert len(count.drawn) == 1  # sessions wait for the GPU samples' frame
        ticks = clock.drawn
        mon.publish({GpusRead})
        await wait_for(pilot, lambda: clock.drawn > ticks, "the redraw the GPU samples bring")
        assert count.drawn[1:] == [{SessionsChanged, GpusRead, Tick}]
        await wait_for(pilot, lambda: "1 tmux sessions here" in screen_text(app), "the new count")
        app._tick()
        assert len(count.drawn) == 2


def test_a_misspelt_part_is_refused_at_once() -> None:
    with pytest.raises(TypeError, match=r"DRAWN_ON names \['LogLines'\]: a pane is drawn on"):

        class Typo(Pane, QuietStatic):
            ID = "typo"
            DRAWN_ON = frozenset({LogLines})  # the log panel's: never handed to a pane


def test_the_dashboard_layout_places_each_widget_once_top_to_bottom() -> None:
    panes = [
        p for slot in GputuiApp.LAYOUT for p in (slot.panes if isinstance(slot, Row) else (slot,))
    ]
    ids = [p.ID for p in panes]
    assert ids == ["status", "banner", "gpus", "runline", "sessions", "run", "logpanel"]
    assert len(set(ids)) == len(ids)


async def test_the_run_panel_follows_who_shares_its_gpus() -> None:
    """The run panel says who shares the run's GPUs ('GPU 0 10.6G, shared
    with session eval'). Who holds a GPU comes with the GPU samples, not with
    a sessions/procs change: a second run that starts on the GPU while the
    run's own processes stay as they were must still reach the panel (under
    load the holders came after the last procs change and the panel kept
    saying nothing)."""
    snap, lines, findings = SCENES["shared"](T0)
    held = list(snap.gpus.processes)
    snap.gpus.processes = []
    mon = SceneMonitor(snap, lines)
    app = GputuiApp(mon, diagnose=lambda s, now: list(findings), clock=lambda: T0, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "shared with" not in screen_text(app)
        snap.gpus.processes = held
        mon.publish({GpusRead})
        await wait_for(pilot, lambda: "shared with CT 201" in screen_text(app), "the panel")
