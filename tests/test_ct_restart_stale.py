"""A container stopped and started again under a watched run, on the SSH
test bed (real sshd, the stand-in pct, real tmux and python3, the real
Monitor): what the dashboard and the banner say meanwhile.

Before, the snapshot kept the old run's processes until gputui's agent
came back (10.7 s after the start, measured): the run panel showed the
old Python's PID, state and CPU as live through the stop and after the
start, during a deploy ("watch, kill, relaunch, confirm it runs") read as
"the old run still runs". Now, once a poll could not read the run, what is
shown of it is "not read since …" (greyed), the rules that judge the run's
processes do not run, and a stopped container's processes are cleared —
a fresh CT's PIDs count from 1 again, so the relaunched run may well get
the old one's PID: only its start time tells them apart."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import pytest

import scenarios as sc
from gputui.config import Settings
from gputui.diagnose import KINDS, diagnose
from gputui.model import CtStatus, Snapshot
from gputui.monitor.engine import Monitor
from gputui.monitor.supervisor import CT_STOPPED_RETRY_S
from gputui.remote.target import Target
from gputui.ui.widgets.runinfo import proc_text
from helpers import until


@dataclass
class Seen:
    """One publish of the monitor, as the dashboard would draw it."""

    poll: int
    ct: CtStatus
    agent: bool
    pids: list[tuple[int, float | None]]  # (pid, start time) of the run's processes
    unread: str
    run_panel: str
    kinds: list[str]


def _watch(mon: Monitor) -> list[Seen]:
    seen: list[Seen] = []

    def note(snap: Snapshot, _news: object) -> None:
        found = diagnose(snap, time.time())
        seen.append(
            Seen(
                mon.polls,
                snap.ct_status,
                mon.agent is not None,
                [(p.pid, p.start_time) for p in snap.procs if p.is_python],
                snap.run_unread,
                proc_text(snap).plain,
                [f.kind for f in found],
            )
        )

    mon.subscribe(note)
    return seen


def _live(s: Seen, pid: int) -> bool:
    """The run panel shows `pid` as a live process (its state and CPU)."""
    return f"pid {pid} " in s.run_panel and "CPU" in s.run_panel


@pytest.mark.timeout(120)
async def test_a_restarted_container_never_shows_the_old_run_as_live(testbed: Any, ct: int) -> None:
    run = sc.prepare(testbed, ct, "restart", "train")
    command = sc.tee_command("start_healthy.sh", str(run.log))
    sc.launch(testbed, run, command)
    tr = testbed.transport()
    await tr.connect()
    settings = Settings(interval=0.5, session=run.session, log=str(run.log), gpu_source="host")
    mon = Monitor(Target(tr, run.ct), settings)
    try:
        seen = _watch(mon)
        await mon.start()
        snap = mon.snapshot
        old = await until(lambda: snap.training_proc, timeout=20, what="the run's Python")
        assert _live(seen[-1], old.pid) or await until(lambda: _live(seen[-1], old.pid))

        testbed.ct_stop(ct)
        stop_poll = mon.polls
        await until(lambda: snap.ct_status == CtStatus.STOPPED, timeout=20, what="CT stopped")
        # within a poll or two of the stop the old Python is no longer shown live
        first = next(i for i, s in enumerate(seen) if s.poll > stop_poll and not s.agent)
        await asyncio.sleep(2)  # a few more polls while it is stopped
        late = [s for s in seen[first:] if _live(s, old.pid)]
        assert not late, late[0]
        stopped = next(s for s in seen[first:] if s.ct == CtStatus.STOPPED)
        assert stopped.pids == [] and "nothing to watch: CT" in stopped.run_panel, stopped
        # the banner judges no process of the run while it is not read
        for s in seen[first:]:
            judged = [k for k in s.kinds if not KINDS[k].host_level and k != "tools_missing"]
            assert not judged, s
        assert "ct_stopped" in seen[-1].kinds
        # a stopped CT is looked at again every few seconds, not after the
        # doubling wait (the banner said "stopped" 12 s after a start)
        await until(lambda: mon.agents.backoff > CT_STOPPED_RETRY_S, timeout=30, what="backoff")
        assert mon.agents.retry_at - mon.clock() <= CT_STOPPED_RETRY_S

        testbed.ct_start(ct)
        # back: the banner says the session went with the CT, from a fresh listing
        await until(lambda: snap.session_gone, timeout=30, what="the session said gone")
        assert snap.ct_status == CtStatus.RUNNING and not snap.run_unread and not snap.procs
        gone = next(f for f in diagnose(snap, time.time()) if f.kind == "session_dead")
        assert "was stopped and started again" in gone.title, gone.title
        sc.launch(testbed, run, command)  # the deploy's relaunch, in the fresh CT
        new = await until(
            lambda: (p := snap.training_proc) is not None and p.start_time != old.start_time and p,
            timeout=30,
            what="the relaunched run's Python",
        )
        assert snap.ct_status == CtStatus.RUNNING and not snap.run_unread
        await until(lambda: _live(seen[-1], new.pid), what="the new run shown live")
        # never, meanwhile, the old process as live: by its start time (its
        # PID may be the new one's)
        stale = [s for s in seen[first:] if (old.pid, old.start_time) in s.pids and not s.unread]
        assert not stale, stale[0]
    finally:
        await mon.stop()
        await tr.close()


@pytest.mark.timeout(90)
async def test_a_lost_agent_greys_the_run_and_the_banner_says_why(testbed: Any, ct: int) -> None:
    """The agent killed in a running CT: until it answers again the run
    panel shows the run as last read, and the banner says the run is not
    read now — no word judged from the old processes."""
    run = sc.prepare(testbed, ct, "agentlost", "train")
    sc.launch(testbed, run, sc.tee_command("start_healthy.sh", str(run.log)))
    tr = testbed.transport()
    await tr.connect()
    settings = Settings(interval=0.5, session=run.session, log=str(run.log), gpu_source="host")
    mon = Monitor(Target(tr, run.ct), settings)
    try:
        seen = _watch(mon)
        await mon.start()
        snap = mon.snapshot
        proc = await until(lambda: snap.training_proc, timeout=20, what="the run's Python")
        ps = testbed.ct_exec(ct, ["pgrep", "-f", "gputui-agent"]).stdout.split()
        assert ps, "no agent in the CT"
        testbed.ct_exec(ct, ["kill", "-9", *ps])
        unread = await until(
            lambda: next((s for s in seen if s.unread), None), timeout=20, what="said unread"
        )
        assert not _live(unread, proc.pid) and "not read since" in unread.run_panel, unread
        assert f"pid {proc.pid} " in unread.run_panel  # as last read
        assert "run_unread" in unread.kinds, unread.kinds
        assert all(KINDS[k].host_level for k in unread.kinds), unread.kinds  # none judged
        await until(lambda: not snap.run_unread and mon.agent is not None, timeout=30, what="back")
        await until(lambda: _live(seen[-1], proc.pid), what="the run live again")
    finally:
        await mon.stop()
        await tr.close()
