"""`gputui kill --yes` names gputui's own scripts instead of printing them:
it printed a 30-line shell script nobody was asked to read (issue 46). The
confirm prompt (no --yes) and the box still show them whole."""

from __future__ import annotations

import json
from pathlib import Path

from gputui.actions import ActionPlan

PLANS = json.loads((Path(__file__).parent / "fixtures" / "confirm_plans.json").read_text())


def test_brief_names_the_kill_script_in_one_line() -> None:
    plan = ActionPlan(**PLANS["kill"])
    full, brief = plan.display, plan.brief
    assert "<script below>" in full and len(full.splitlines()) > 25
    assert len(brief.splitlines()) <= len(plan.notes) + len(plan.commands), brief
    (line,) = [ln for ln in brief.splitlines() if ln.startswith("$ ")]
    n = PLANS["kill"]["commands"][0][2].strip("\n").count("\n") + 1
    assert line.startswith(f"$ sh -c '<gputui's script, {n} lines>' gputui-kill "), line
    assert "waitgone" not in brief


def test_brief_keeps_every_other_command_as_typed() -> None:
    plan = ActionPlan(**PLANS["relaunch"])
    assert "$ tmux kill-session -t =dflash" in plan.brief
    assert "'<gputui's script" in plan.brief and "mv -n" not in plan.brief
