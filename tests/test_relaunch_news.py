"""The user's relaunch into a run that is itself wrong (issues 22 and 27):
what the user did is not news, but what is wrong with the run it started is.

`gputui watch` (the Watch of `gputui watch`, in this process) on real runs
in the real-sshd test bed, alerts to a real JSON webhook on 127.0.0.1; the
relaunch is the product's own (the plan and execute the dashboard's `r`, `y`
run), from the config's [run] section as a user sets it:

- the new run is block-buffered (its start script runs python without -u
  and unsets PYTHONUNBUFFERED; stdout into gputui's `| tee log`): the banner
  names the buffering for the NEW run's PID, and the incident book alerts
  it once — not kept silent as the user's doing, not sent twice;
- the new run writes another file (a start script from last week, its
  log's name then): the watched log never gets a line of the run, and once
  the action window is over the banner names the file the run writes.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.cli.watch import Watch
from gputui.config import RunConfig
from gputui.diagnose import Thresholds
from test_alerts import Hook
from test_incidents_watch import (
    BURSTS,
    HANGS,
    banner,
    gpus,
    posted,
    relaunch_into,
    start,
    state,
    user_does,
)
from ui_scenarios import settings_for, until

# The team's launcher: a clean environment for the job (PYTHONUNBUFFERED
# gone), python without -u — whatever gputui's relaunch exports around it.
BUFFERED_START = "exec env -u PYTHONUNBUFFERED python3 {script} 4\n"
# Stuck before its first step (NCCL init, a dead data node): no line, no CPU.
HANGS_AT_ONCE = "import time\ntime.sleep(3600)\n"
# Written last week: its log's name was the date then.
LAST_WEEK_START = "exec python3 -u {script} 4 > train-1125.log 2>&1\n"


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def watch_with_run(testbed: Any, ct: int, run: Any, hook: Hook, db: Path) -> Watch:
    """`gputui watch --log LOG` with [run] command = "sh start.sh" in the
    run's directory: the defaults a user has (settle time, stale after 5 s)."""
    settings = settings_for(
        testbed,
        ct,
        session=run.session,
        log=str(run.log),
        diagnosis=Thresholds(stale_after=5.0),
        alert_urls=[f"json://127.0.0.1:{hook.port}/alerts"],
        history_path=str(db),
        history_log_every=1.0,
        run=RunConfig(command="sh start.sh", cwd=str(run.dir)),
    )
    return Watch([settings], out=io.StringIO())


def python_pid(rec: Any) -> int | None:
    p = rec.monitor.snapshot.training_proc
    return getattr(p, "pid", None)


@pytest.mark.timeout(180)
async def test_a_relaunch_into_a_block_buffered_run_is_told_once(
    testbed: Any, ct: int, hook: Hook, tmp_path: Path
) -> None:
    testbed.set_gpus(gpus(97))
    run = start(testbed, ct, "rebuf", BURSTS, "python3 -u {script} 4 > {log} 2>&1")
    (run.dir / "start.sh").write_text(BUFFERED_START.format(script=run.script))
    watch = watch_with_run(testbed, ct, run, hook, tmp_path / "history.sqlite")
    task = asyncio.create_task(watch.run())
    rec = watch.watched[0].recorder
    try:
        await until(lambda: rec.monitor.snapshot.metrics.last_step, 60, "steps")
        old = python_pid(rec)
        await asyncio.sleep(2)
        assert hook.got == [], posted(hook)  # a healthy run: nothing to say
        await user_does(watch, "relaunch")
        ended = time.time()
        await until(
            lambda: python_pid(rec) not in (None, old), 30, "the new run", lambda: state(rec)
        )
        new = python_pid(rec)
        shown = await until(
            lambda: [b for b in banner(rec) if "buffer" in b],
            30,
            "the new run's buffering on the banner",
            lambda: f"banner {banner(rec)}; {state(rec)}",
        )
        shown_after = time.time() - ended
        await until(lambda: hook.got, 30, "an alert", lambda: state(rec))
        await asyncio.sleep(15)  # chunk, silence, chunk: nothing new to say
        said = posted(hook)
        first = json.dumps(hook.got[0])
        still = [b for b in banner(rec) if "buffer" in b or "silent" in b]
        offered = buffering_offers(rec)
    finally:
        watch.stop()
        await asyncio.wait_for(task, 60)
    assert shown_after < 15, f"banner said it {shown_after:.1f} s after the relaunch ended"
    assert f"PID {new}" in shown[0] and f"PID {old}" not in shown[0], (old, new, shown)
    assert still, "the buffering left the banner while the run is as buffered as before"
    words = [p.split()[0] for p in said]
    assert words.count("open") == 1 and words[0] == "open", said
    assert "resolved" not in words and words.count("worse") <= 1, said
    assert "block-buffered" in first or "PYTHONUNBUFFERED unset" in first, first
    assert f"PID {new}" in first, first
    assert "session" not in " ".join(said), said  # the relaunch's SIGINT is no news
    assert_no_relaunch_offered(offered)


def buffering_offers(rec: Any) -> list[tuple[str | None, str | None]]:
    """(action, fix) of each buffering finding now."""
    return [
        (f.action, f.fix) for f in rec.findings if f.kind in ("buffered_output", "busy_but_silent")
    ]


def assert_no_relaunch_offered(offered: list[tuple[str | None, str | None]]) -> None:
    """gputui's relaunch already ran it with PYTHONUNBUFFERED=1 and `python
    -u` where it could: its start command drops both, and pressing r
    ("relaunch unbuffered") again would start it buffered again. The fix
    names the start command; flushing live still helps."""
    assert offered, "no buffering finding"
    for action, fix in offered:
        assert action != "relaunch", offered
        assert fix and "start command" in fix and "sh start.sh" in fix, offered


@pytest.mark.timeout(180)
async def test_relaunching_a_buffered_run_into_a_buffered_run_is_one_incident(
    testbed: Any, ct: int, hook: Hook, tmp_path: Path
) -> None:
    """The run is block-buffered; the user presses r ("relaunch unbuffered"),
    but the start script drops PYTHONUNBUFFERED: the new run is as buffered
    as the old. One incident: no "resolved", no second "open"; the banner
    names the new PID and no longer offers the relaunch that did not help."""
    testbed.set_gpus(gpus(97))
    run = start(testbed, ct, "rebuf2", BURSTS, "python3 {script} 4 2>&1 | tee {log}")
    (run.dir / "start.sh").write_text(BUFFERED_START.format(script=run.script))
    watch = watch_with_run(testbed, ct, run, hook, tmp_path / "history.sqlite")
    task = asyncio.create_task(watch.run())
    rec = watch.watched[0].recorder
    try:
        await until(lambda: hook.got, 60, "the buffering alert", lambda: state(rec))
        old = python_pid(rec)
        await user_does(watch, "relaunch")
        await until(
            lambda: python_pid(rec) not in (None, old), 30, "the new run", lambda: state(rec)
        )
        new = python_pid(rec)
        shown = await until(
            lambda: [b for b in banner(rec) if f"PID {new}" in b],
            30,
            "the new run's buffering on the banner",
            lambda: f"banner {banner(rec)}; {state(rec)}",
        )
        await asyncio.sleep(rec.settle_s + 10)  # past the window, a chunk and a silence
        said = posted(hook)
        offered = buffering_offers(rec)
    finally:
        watch.stop()
        await asyncio.wait_for(task, 60)
    assert "buffer" in shown[0], shown
    words = [p.split()[0] for p in said]
    assert words.count("open") == 1 and words[0] == "open", said
    assert "resolved" not in words and words.count("worse") <= 1, said
    assert "session" not in " ".join(said), said
    assert_no_relaunch_offered(offered)


@pytest.mark.timeout(180)
async def test_a_relaunch_whose_run_writes_last_weeks_log_is_named(
    testbed: Any, ct: int, hook: Hook, tmp_path: Path
) -> None:
    testbed.set_gpus(gpus(97))
    run = start(testbed, ct, "relast", BURSTS, "python3 -u {script} 4 > {log} 2>&1")
    (run.dir / "start.sh").write_text(LAST_WEEK_START.format(script=run.script))
    watch = watch_with_run(testbed, ct, run, hook, tmp_path / "history.sqlite")
    task = asyncio.create_task(watch.run())
    rec = watch.watched[0].recorder
    try:
        await until(lambda: rec.monitor.snapshot.metrics.last_step, 60, "steps")
        await asyncio.sleep(2)
        await user_does(watch, "relaunch")
        ended = time.time()
        window_ends = ended + rec.settle_s
        named = await until(
            lambda: [b for b in banner(rec) if "train-1125.log" in b],
            40,
            "the file the new run writes, on the banner",
            lambda: f"banner {banner(rec)}; {state(rec)}",
        )
        shown_after = time.time() - ended
        await asyncio.sleep(max(0.0, window_ends - time.time()) + 5)  # past the window
        after_window = [b for b in banner(rec) if "train-1125.log" in b]
        new_lines = [ln for ln in run.log.read_text().splitlines() if not ln.startswith("[gputui]")]
        said = posted(hook)
    finally:
        watch.stop()
        await asyncio.wait_for(task, 60)
    assert new_lines == [], new_lines  # the shape: the watched log gets no line of the run
    assert shown_after < rec.settle_s + 10, f"named {shown_after:.1f} s after the relaunch"
    assert after_window, f"gone from the banner after the action window: {named}"
    assert re.search(r"PID \d+ writes \S*train-1125\.log", named[0]), named
    assert "session" not in " ".join(said), said


@pytest.mark.timeout(240)
async def test_a_relaunch_into_a_run_that_hangs_at_once_is_told(
    testbed: Any, ct: int, hook: Hook, tmp_path: Path
) -> None:
    """Relaunched, the new run hangs before its first step (NCCL init, a
    dead data node): its GPU idle, memory held, no line. The user's action
    is over; the hang is the new run's — stalled, then probably hung, on
    the banner and alerted, not kept silent as the relaunch's own gap."""
    testbed.set_gpus(gpus(97))
    run = start(testbed, ct, "rehang", HANGS, "python3 -u {script} > {log} 2>&1")
    settings = settings_for(
        testbed,
        ct,
        session=run.session,
        alert_urls=[f"json://127.0.0.1:{hook.port}/alerts"],
        history_path=str(tmp_path / "history.sqlite"),
        history_log_every=1.0,
        diagnosis=Thresholds(hang_after_s=20.0, stale_after=10.0),
    )
    watch = Watch([settings], out=io.StringIO())
    task = asyncio.create_task(watch.run())
    rec = watch.watched[0].recorder
    try:
        await until(lambda: rec.monitor.snapshot.metrics.last_step, 60, "steps")
        await asyncio.sleep(2)
        assert hook.got == [], posted(hook)
        ended = await relaunch_into(watch, run, HANGS_AT_ONCE)
        testbed.set_gpus(gpus(0))
        await until(
            lambda: any("probably hung" in p for p in posted(hook)),
            90,
            "probably hung, alerted",
            lambda: f"said {posted(hook)}; banner {banner(rec)}; {state(rec)}",
        )
        hung_after = time.time() - ended
        await asyncio.sleep(3)
        said = posted(hook)
        shown = [b for b in banner(rec) if b.startswith(("held_but_idle", "progress_stalled"))]
    finally:
        watch.stop()
        await asyncio.wait_for(task, 60)
    words = [p.split()[0] for p in said]
    assert words[0] == "open" and words.count("open") == 1 and "resolved" not in words, said
    assert "session" not in " ".join(said), said
    assert hung_after < 10 + 20 + 15, f"probably hung {hung_after:.0f} s after the relaunch"
    assert shown and "probably hung" in shown[0], shown
