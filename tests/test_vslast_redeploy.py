"""Did the deploy help, asked early (issue 49, found on an H100): a run
recorded by `gputui watch`, relaunched with code 2x slower, and `gputui
doctor` asked before the history's once-a-minute read of the new run's log
(here `[history] log_every` is 600 s: the minute never comes). On the H100
doctor said "no step of this run matched the last one's yet" 35 s in
(readings 0 and 0) while watch had said "slower" 13 s earlier.

Why both were 0: the history held the new run's first read only (its first
step came after it: a model loading), and the monitor's rings hold a run's
last 600 steps. Once the new run was 600 steps past the last run's end, the
steps the two runs share were in neither: no matched window at all. Watch
lost its verdict the same way. Both now read the log's lines the history
has not read before comparing.

On the SSH test bed: the run in tmux in a stand-in CT writing through
`| tee`, watch recording over real ssh, gputui's own relaunch."""

from __future__ import annotations

import asyncio
import io
import sqlite3
import time
from pathlib import Path
from typing import Any

from gputui.cli.watch import Watch
from gputui.doctor.report import doctor_dict
from gputui.doctor.run import inspect
from gputui.record.recorder import COMPARE_EVERY_S
from gputui.remote.target import Target
from helpers import until
from test_vslast_e2e import relaunch
from ui_scenarios import settings_for, tmux_in_ct

SESSION = "deploy"  # test_vslast_e2e's relaunch() restarts this session
LAST_STEPS = 900  # the first run's steps before the deploy
# the run's own tok/s (drawn around RATE, 4 % noise), not the machine's: a
# loaded test bed does not make one run slower than the other
TRAIN = """\
import random, time
RATE = {rate}
time.sleep({load})  # loading the model: no step yet
rnd = random.Random()
step = 0
while True:
    step += 1
    time.sleep(0.004)
    tok = RATE * (1 + rnd.gauss(0, 0.04))
    print("step %d loss %.4f | %.1f tok/s" % (step, 3.0 * 0.999 ** step, tok), flush=True)
"""


def max_step(db: Path, run_id: int | None) -> int:
    with sqlite3.connect(db) as c:
        row = c.execute("SELECT MAX(step) FROM metric_points WHERE run_id=?", (run_id,)).fetchone()
    return int(row[0] or 0)


async def test_doctor_and_watch_tell_slower_before_the_history_reads_the_new_run(
    testbed: Any, ct: int, tmp_path: Path
) -> None:
    work = Path(testbed.workspace) / f"redeploy-{tmp_path.name}"
    work.mkdir(parents=True)
    work.chmod(0o777)
    script, log = work / "train.py", work / "train.log"
    script.write_text(TRAIN.format(rate=2000.0, load=0))
    tmux_in_ct(
        testbed, ct, "new", "-d", "-s", SESSION, "-c", str(work),
        f"python3 -u train.py 2>&1 | tee {log}",
    )  # fmt: skip
    db = tmp_path / "history.sqlite"
    settings = settings_for(
        testbed,
        ct,
        session=SESSION,
        log=str(log),
        history_path=str(db),
        history_log_every=600.0,
    )
    watch = Watch([settings], out=io.StringIO())
    task = asyncio.create_task(watch.run())
    transport = testbed.transport()
    await transport.connect()
    try:
        rec, snap = watch.watched[0].recorder, watch.watched[0].monitor.snapshot
        await until(lambda: (snap.metrics.last_step or 0) >= LAST_STEPS, 60, "the first run")
        await until(lambda: rec._run is not None and rec._program_run == rec._run.id, 30, "prog")
        first = rec._run.id if rec._run is not None else None

        script.write_text(TRAIN.format(rate=1000.0, load=5))  # half the tok/s
        await relaunch(Target(transport, ct))
        await until(lambda: rec._run is not None and rec._run.id != first, 30, "the new run")
        last_end = max_step(db, first)  # read when its Python was seen gone (7a113a0)
        assert last_end >= LAST_STEPS

        def rings_past_it() -> bool:  # the rings hold none of the steps both runs reached
            m = snap.metrics
            steps = [s for t, s in m.step.points() if t >= (m.restarted_at or 0.0)]
            return bool(m.restarts and steps and min(steps) > last_end)

        await until(rings_past_it, 60, "the new run past the last run's end by a ring")
        past = time.time()
        facts, dsnap, findings, _ = await inspect(settings, settle_s=2.0)
        assert dsnap is not None and dsnap.vs_last is not None
        doc = doctor_dict(facts, dsnap, findings, now=dsnap.time)["snapshot"]["vs_last"]
        assert doc["last_run"] == first and doc["this_run"] != first, doc
        assert doc["verdict"] == "slower", doc
        assert doc["readings"]["this"] > 0 and doc["readings"]["last"] > 0, doc
        assert -60 < doc["rate"]["change_pct"] < -40, doc

        def watch_says_slower() -> bool:
            vs = rec.vs_last
            return vs is not None and vs.last_run == first and vs.verdict == "slower"

        await until(lambda: rec._compare_due > past + COMPARE_EVERY_S, 30, "watch's next check")
        vs = rec.vs_last  # its figures are the check's own (only its words wait)
        assert vs is not None and vs.window is not None and vs.n_new > 0, vs
        await until(watch_says_slower, 60, "watch's verdict: slower")
    finally:
        await transport.close()
        watch.stop()
        await asyncio.wait_for(task, 60)
        tmux_in_ct(testbed, ct, "kill-session", "-t", f"={SESSION}")
