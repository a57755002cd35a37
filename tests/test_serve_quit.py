"""How serve ends a tab's dashboard: a slow quit on a busy machine is waited
for, a stuck one is not. The suite's tab test failed under load with "a
tab's dashboard did not quit: ended by SIGTERM": the quit had 3 s of the
clock, whatever the machine was doing. Now it has 3 s of its own CPU time
(at most 30 s of the clock); a dashboard spinning at 100 % spends that in
about 3 s and is ended as before. Real processes, stand-ins for the three."""

from __future__ import annotations

import asyncio
import sys

from gputui.cli.serve_child import end_process

SLOW_QUIT = "import time; time.sleep(2.5)"  # a quit that waits (on tmux, sqlite, a busy machine)
SPIN = "import signal\nwhile True: pass"  # stuck: round 5's resize loop
SPIN_PAST_TERM = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass"


async def ended(code: str, cpu_grace: float = 0.5) -> str:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, start_new_session=True)
    return await asyncio.wait_for(end_process(proc, cpu_grace, 2.0, quit_wall_max=60.0), 90)


async def test_a_slow_quit_that_spends_little_cpu_is_waited_for() -> None:
    """2.5 s of the clock, a few ms of CPU: longer than the CPU grace in
    seconds of the clock, and still its own quit."""
    assert await ended(SLOW_QUIT) == "quit"


async def test_a_dashboard_that_spins_is_ended_by_sigterm() -> None:
    assert await ended(SPIN) == "SIGTERM"


async def test_one_that_ignores_sigterm_too_is_killed() -> None:
    assert await ended(SPIN_PAST_TERM) == "SIGKILL"
