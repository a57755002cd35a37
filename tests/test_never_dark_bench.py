"""bench/never_dark.py runs (one crash try, gputui started with the run):
the figures in bench/RESULTS.md come from a bench that works. No timing
is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.timeout(120)
def test_one_crash_try_gets_a_banner(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(BENCH))
    import never_dark

    assert never_dark.main(["--only", "crash", "--tries", "1", "--starts", "0"]) == 0
    out = capsys.readouterr().out
    assert "crash: 1/1 with a banner (all)" in out, out
