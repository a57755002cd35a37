"""STRESS (CI cost ~40-60 s, the most expensive test here): the log tail under
bursts and CPU contention, through the real dashboard on the test bed.

A python3 run in tmux inside a stand-in CT prints a burst of 200,000 lines
(~110 bytes each, 22 MB), then one line a second; then 1,000,000 lines
(110 MB); then 200,000 again. A busy loop runs on every core throughout. The
app is the real one over the real sshd (`bench/tail_stress.py` is the same
code, run 20+ times per burst size for bench/RESULTS.md).

For every burst: the follower reaches the end of the file within a bounded
time, the burst's last line and the last trickled line reach the Log
widget, shown + skipped + dropped lines == lines written (== the follower's
count), and no "stale"/"silent" word or silence finding appears while the
file grows (with --stale-after 5, so a tail stopped for 5 s would say so).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from tail_stress import run_cycles

# Bounds from burst end. The benchmark here (2 cores, load ~6 before its busy
# loops) took 4.2 s p50 / 11 s max for 200k lines and 17 s / 46 s for 1M; on
# this shared box at load ~17 a 200k burst once took 30 s. A tail that stops
# never gets there, so the bounds are set for a box that busy, not for speed
# (speed is the benchmark's job).
CAUGHT_UP_MAX_S = {200_000: 90.0, 1_000_000: 300.0}
TRICKLE_MAX_S = 10.0  # after the tail caught up; 0.35 s max in the benchmark


@pytest.mark.timeout(900)
@pytest.mark.alone  # its busy loops would load the other workers' tests too
async def test_bursts_then_trickle_under_cpu_contention(testbed: Any, ct: int) -> None:
    bursts = [200_000, 1_000_000, 200_000]
    cycles = await run_cycles(testbed, ct, bursts, trickle=3, busy=True, name="ci", timeout_s=320)
    assert [c.burst for c in cycles] == bursts
    for c in cycles:
        where = f"{c.burst:,}-line burst: {c}"
        assert c.caught_up_s is not None, f"the tail never reached the end of the file; {where}"
        assert c.caught_up_s <= CAUGHT_UP_MAX_S[c.burst], where
        assert c.screen_s is not None, f"the burst's last line never reached the view; {where}"
        assert c.trickle_s is not None and c.trickle_s <= TRICKLE_MAX_S, where
        assert c.followed == c.lines_written, where
        assert c.shown + c.skipped + c.dropped == c.lines_written, where
        assert not c.silent_words, where
        assert not c.silent_findings, where
