"""A `--session NAME` gputui cannot see while its agent never answers
(issue 44): no tmux listing comes, so nothing reads the session, its panes
or the run's processes — and the banner said nothing of it. Now a WARNING
names what is unknown and why: the monitor marks the listing late
(`Snapshot.listing_late_since`, the failed ask's words), the rule says it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gputui.config import Settings
from gputui.diagnose import diagnose
from gputui.model import ConnectionState, Severity
from gputui.monitor.engine import Monitor
from gputui.monitor.gpufeed import SimulatedGpus
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from helpers import until
from test_diagnose import NOW, run

PROBLEM = "first poll failed: AgentError: the gputui agent in CT 200 did not answer within 20 s"


def test_a_session_no_listing_shows_is_said_unknown_and_why() -> None:
    snap = run()
    snap.sessions, snap.procs, snap.pane_tail = [], [], []
    snap.listing_late_since, snap.listing_problem = NOW - 95.0, PROBLEM
    f = next(f for f in diagnose(snap, NOW) if f.kind == "session_unknown")
    assert f.severity == Severity.WARNING
    assert f.title.startswith(f"session {snap.session_name} is not known: CT 200"), f.title
    assert "for 2 min (gputui's agent there does not answer)" in f.title, f.title
    assert any(PROBLEM in e for e in f.evidence), f.evidence
    assert any(e.startswith("not known: whether the session exists") for e in f.evidence)
    assert "pct exec 200 -- tmux ls" in f.fix, f.fix


def test_listed_lately_or_a_connection_down_says_nothing_of_it() -> None:
    snap = run()
    assert "session_unknown" not in [f.kind for f in diagnose(snap, NOW)]
    snap.listing_late_since = NOW - 95.0
    snap.connection = ConnectionState.RECONNECTING  # the connection's words say it
    assert "session_unknown" not in [f.kind for f in diagnose(snap, NOW)]


async def test_a_monitor_whose_agent_never_answers_marks_the_listing_late(tmp_path: Path) -> None:
    """A real monitor on this machine whose agent dies at every start (a
    Python that crashes): no listing ever comes; once LISTING_LATE_S has
    passed (the monitor's clock moved on) the snapshot says so, with the
    agent's failure, and diagnose names the session unknown."""
    broken = tmp_path / "python3-crashing"
    broken.write_text("#!/bin/sh\necho 'Segmentation fault (core dumped)' >&2\nexit 139\n")
    broken.chmod(0o755)
    shift = [0.0]
    mon = Monitor(
        Target(LocalTransport()),
        Settings(local=True, session="train", interval=0.1),
        SimulatedGpus(1, lambda: 0.0),
        clock=lambda: time.time() + shift[0],
        agent_python=str(broken),
    )
    await mon.start()
    try:
        snap = mon.snapshot
        assert snap.listing_late_since is None  # not yet: a start may be slow
        shift[0] = 20.0
        await until(lambda: snap.listing_late_since is not None, what="the listing said late")
        assert snap.listing_problem, snap.listing_problem
        found = diagnose(snap, time.time() + shift[0])
        f = next(f for f in found if f.kind == "session_unknown")
        assert "session train is not known" in f.title, f.title
        assert any(snap.listing_problem[:40] in e for e in f.evidence), f.evidence
    finally:
        await mon.stop()
    assert os.path.exists(broken)
