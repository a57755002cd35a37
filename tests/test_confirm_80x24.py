"""Every confirm box at 80×24 keeps its question, its [y] Run and [n] Cancel
in view; a long plan scrolls inside the box (issue 46: the relaunch box on a
real run showed no buttons at 80×24).

The plans are real ones: what the planners made for a block-buffered run on
the test bed (tests/fixtures/confirm_plans.json: paths and address made
generic), and the docker restart box as actions/restart.py words it. The
reading state (before the plan) and a y pressed in it are boxes too.

Regenerate after an intended change: pytest tests/test_confirm_80x24.py --snapshot-update
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gputui.actions import ActionPlan
from gputui.demo.scenes import SCENES, T0
from gputui.model import Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.screens.confirm import EARLY_Y, READING_LABEL, ConfirmScreen
from scene_fakes import SceneMonitor
from terminal import attach

PLANS = json.loads((Path(__file__).parent / "fixtures" / "confirm_plans.json").read_text())
SMALL = (80, 24)
BOXES = {  # test name: (key, the plan the box shows)
    "relaunch": ("r", "relaunch"),
    "kill": ("k", "kill"),
    "force_kill": ("K", "force_kill"),
    "flush": ("f", "flush"),
    "restart": ("r", "restart"),
}


class FixturePlans:
    """Plans the real planners made, by name; `reading` never answers."""

    progress = None

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.executed: list[ActionPlan] = []

    async def plan(self, verb: str, snap: Snapshot, options: object = None) -> ActionPlan:
        if self.name is None:
            await asyncio.sleep(3600)
        return ActionPlan(**PLANS[self.name or verb])

    async def execute(self, plan: ActionPlan) -> Any:
        self.executed.append(plan)
        raise AssertionError("nothing runs in these tests")


def box_app(name: str | None) -> GputuiApp:
    snap, lines, findings = SCENES["buffered"](T0)
    return GputuiApp(
        SceneMonitor(snap, lines),
        actions=FixturePlans(name),  # type: ignore[arg-type]
        diagnose=lambda s, now: list(findings),
        clock=lambda: T0,
        live=False,
    )


async def shown(pilot: Any, key: str) -> ConfirmScreen:
    await pilot.press(key)
    for _ in range(200):
        box = pilot.app.screen
        if isinstance(box, ConfirmScreen) and box.state == "shown":
            await pilot.pause()
            return box
        await asyncio.sleep(0.02)
    raise AssertionError(f"{key}: no plan in the box")


@pytest.mark.parametrize("name", sorted(BOXES))
async def test_the_box_keeps_its_question_and_buttons_at_80x24(name: str) -> None:
    key, plan = BOXES[name]
    app = box_app(plan)
    async with app.run_test(size=SMALL) as pilot:
        term = attach(app)
        await shown(pilot, key)
        await pilot.pause(0.2)
        text = term.text()
        title = PLANS[plan]["title"]
        assert title[:60] in text, text  # the question, in the box's top line
        assert "[y] Run" in text and "[n] Cancel" in text, text
        assert "will run:" not in text or text.index("will run:") < text.index("[n] Cancel")


@pytest.mark.parametrize("name", sorted(BOXES))
def test_confirm_80x24(name: str, snap_compare: Any) -> None:
    key, plan = BOXES[name]

    async def run_before(pilot: Any) -> None:
        await shown(pilot, key)

    assert snap_compare(box_app(plan), run_before=run_before, terminal_size=SMALL)


def test_confirm_reading_early_y_80x24(snap_compare: Any) -> None:
    """f, then y before the plan came: 'reading…' in place of Run, and the line."""

    async def run_before(pilot: Any) -> None:
        await pilot.press("f")
        await pilot.press("y")
        await pilot.pause()
        box = pilot.app.screen
        assert isinstance(box, ConfirmScreen) and box.state == "reading" and box.early_y == 1
        text = str(box.query_one("#confirm-early").render())
        assert EARLY_Y in text and str(box.query_one("#yes").label) == READING_LABEL

    assert snap_compare(box_app(None), run_before=run_before, terminal_size=SMALL)


async def test_a_long_plan_scrolls_to_its_last_command_by_key() -> None:
    """At 80×24 the kill box's script is longer than the box: ↓ / PgDn bring
    its end into view, the buttons stay."""
    app = box_app("kill")
    async with app.run_test(size=SMALL) as pilot:
        term = attach(app)
        await shown(pilot, "k")
        last = PLANS["kill"]["commands"][0][2].strip().splitlines()[-1].strip()  # `exit 1`
        for _ in range(30):
            await pilot.press("pagedown")
        await pilot.pause(0.2)
        text = term.text()
        assert last in text and "[n] Cancel" in text, text
