"""Every confirm box is on screen at once after its key, on the test bed
with the facts slowed (issue 37: `k` read the processes' identity before
drawing anything, 1.8 s on a Proxmox-like host).

The real app on the real sshd, a real run in tmux in the stand-in CT; no
`pct` call then ends before 2 s after the key (a busy Proxmox host:
testbed.hold_pct), and the plans are read by commands (as with no agent in
the CT), so reading what a verb would act on takes seconds. The box must
be on the terminal (read off the app's real output, tests/terminal.py)
before the first of those reads could have answered — within half the
hold, stretched by the load this machine measured meanwhile
(tests/slowdown.py) — saying what was asked and that it is reading; the
plan fills it in when it arrives; y before that runs nothing; n cancels.
(The issue's ≤ 200 ms is a speed figure: bench/RESULTS.md has the measured
times; a timed unit test on a shared 2-core machine
would only measure the machine.)
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from textual import events

from gputui.ui.screens.confirm import ConfirmScreen
from slowdown import SlowdownProbe, stretched
from terminal import attach
from ui_scenarios import SIZE, make_app, prepare_run, settings_for, start_unbuffered, until

FACTS_DELAY_S = 2.0  # no `pct` call through ssh ends before this long after the key
BOX_S = FACTS_DELAY_S / 2  # on screen before any fact could be read, on a free CPU


@pytest.mark.timeout(120)
async def test_kill_and_relaunch_boxes_open_before_the_facts_arrive(testbed: Any, ct: int) -> None:
    run = prepare_run(testbed, ct, "train")
    start_unbuffered(testbed, run, count=100000, period=0.2)
    app, parts = make_app(settings_for(testbed, ct, interval=0.5))
    snap = parts.monitor.snapshot
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: snap.training_proc is not None, 30, "the run's process")
            await until(lambda: app.why_not("kill") is None, 10, "k available")
            # the plans read by the planners' commands, no `pct` answering
            # before 2 s after the key (through the monitor's agent a plan
            # takes a fraction of a second: facts.py)
            app.actions.facts = None
            term = attach(app)
            for key, asked in (("k", "Kill session 'train'?"), ("r", "Relaunch session 'train'?")):
                with SlowdownProbe(period=0.05, burst=0.002) as probe:  # a few in 0.2 s
                    t0 = time.monotonic()
                    testbed.hold_pct(FACTS_DELAY_S)  # no fact before t0 + FACTS_DELAY_S
                    app.post_message(events.Key(key, key))  # not pilot.press: it waits for idle
                    while "[n] Cancel" not in term.text() and time.monotonic() - t0 < 10:
                        await asyncio.sleep(0.005)
                    shown = time.monotonic() - t0
                    bound = stretched(BOX_S, 0.0, probe.between(t0, t0 + shown))
                screen = term.text()
                assert "[n] Cancel" in screen, screen  # the box, whatever it says yet
                print(f"{key}: the box on screen after {1000 * shown:.0f} ms")  # -s shows it
                assert shown <= bound, f"{key}: the box took {shown:.3f} s (bound {bound:.3f} s)"
                box = app.screen
                assert isinstance(box, ConfirmScreen) and box.plan is None  # the facts: not yet
                assert asked in screen and "reading what it would act on" in screen, screen
                await pilot.press("y")  # nothing to run yet: nothing runs
                await pilot.pause(0.2)
                assert app.screen is box and app.executed == []
                await until(lambda b=box: b.plan is not None, 60, "the plan in the box")
                await until(lambda: "will run:" in term.text(), 5, "the plan on the screen")
                assert str(snap.training_proc.pid) in term.text() or key == "r"
                await pilot.press("n")
                await until(lambda b=box: app.screen is not b, 5, "the box to close")
                assert app.executed == []
            testbed.hold_pct(0)
            await pilot.press("q")
            await until(lambda: not app.is_running, 15, "the app to quit")
    finally:
        testbed.hold_pct(0)
        await parts.on_exit()
