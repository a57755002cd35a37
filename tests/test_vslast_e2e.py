"""Did the deploy help? (issue 49) End to end on the SSH test bed: a real run
in tmux in a stand-in CT, `gputui watch` recording it over real ssh, and
three deploys — the script edited to a slower rate, then a faster one, then
the same code again — each started with gputui's own relaunch (`r`, `y`).
Each new run is compared with its last run at the same steps; the verdict
must be right in each: slower (and the alert says "the deploy made it
slower"), faster, and "same" for the rerun of unchanged code.

The rate a run prints is its own (tok/s drawn around the RATE its code
holds, 4 % noise each step), not the machine's: a loaded test bed does not
make a rerun slower. The lines come ~20 a second, so each phase takes a few
seconds of steps."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path
from typing import Any

from gputui.actions import execute, plan_relaunch
from gputui.cli.watch import Watch
from gputui.config import Settings
from gputui.model import VsLast
from gputui.remote.target import Target
from helpers import until
from ui_scenarios import settings_for, tmux_in_ct

SESSION = "deploy"
TRAIN = """\
import random, sys, time
RATE = {rate}  # tok/s this code runs at: the deploy edits it
print("started", file=sys.stderr, flush=True)
rnd = random.Random()
step = 0
while True:
    step += 1
    time.sleep(0.05)
    tok = RATE * (1 + rnd.gauss(0, 0.04))
    loss = 3.0 * 0.995 ** step + rnd.gauss(0, 0.01)
    print("step %d loss %.4f | %.1f tok/s" % (step, loss, tok), flush=True)
"""


def deploy(script: Path, rate: float) -> None:
    """A new version of the code: the same script, another rate."""
    script.write_text(TRAIN.format(rate=rate))


async def relaunch(target: Target) -> None:
    """What `r`, `y` does: the plan, then its execution."""
    plan = await plan_relaunch(target, Settings(), SESSION)
    result = await execute(target, plan)
    assert result.ok, (result.summary, result.details)


async def verdict_of_new_run(watch: Watch, after: int | None) -> VsLast:
    """The comparison of the run after `after` (a history run id), once
    enough matched steps tell."""
    rec = watch.watched[0].recorder

    def told() -> bool:
        vs = rec.vs_last
        return vs is not None and vs.this_run != after and vs.enough and bool(vs.verdict)

    await until(told, 90, f"a verdict for the run after {after}")
    assert rec.vs_last is not None
    return rec.vs_last


async def test_deploys_slower_faster_and_the_same_code_again(
    testbed: Any, ct: int, tmp_path: Path
) -> None:
    work = Path(testbed.workspace) / f"vslast-{tmp_path.name}"
    work.mkdir(parents=True)
    work.chmod(0o777)
    script, log = work / "train.py", work / "train.log"
    deploy(script, 1000.0)
    tmux_in_ct(
        testbed, ct, "new", "-d", "-s", SESSION, "-c", str(work),
        f"python3 -u train.py 2>&1 | tee {log}",
    )  # fmt: skip
    db = tmp_path / "history.sqlite"
    settings = settings_for(
        testbed, ct, session=SESSION, log=str(log), history_path=str(db), history_log_every=1.0
    )
    out = io.StringIO()
    watch = Watch([settings], out=out)
    task = asyncio.create_task(watch.run())
    transport = testbed.transport()
    await transport.connect()
    target = Target(transport, ct)
    try:
        rec = watch.watched[0].recorder
        snap = watch.watched[0].monitor.snapshot
        await until(lambda: (snap.metrics.last_step or 0) >= 150, 60, "the first run's steps")
        await until(
            lambda: rec._run is not None and rec._program_run == rec._run.id, 30, "its program"
        )
        first = rec._run.id if rec._run is not None else None

        deploy(script, 800.0)  # 20 % slower
        await relaunch(target)
        slower = await verdict_of_new_run(watch, first)
        assert slower.verdict == "slower", slower
        assert slower.last_run == first and not slower.picked
        assert slower.rate is not None and slower.rate.percent is not None
        assert -26 < slower.rate.percent < -14, slower.rate
        assert "env PYTHONUNBUFFERED=1 set" in slower.changes, slower.changes
        assert any(c.startswith("train.py modified") for c in slower.changes), slower.changes
        await until(
            lambda: "slower_than_last" in {f.kind for f in rec.findings}, 30, "the alert's finding"
        )
        await until(lambda: "the deploy made it slower" in out.getvalue(), 30, "watch's alert")
        assert "against its last run" in out.getvalue()  # watch's line of the verdict

        deploy(script, 1250.0)  # faster than the slower one it replaces
        await relaunch(target)
        faster = await verdict_of_new_run(watch, slower.this_run)
        assert faster.verdict == "faster", faster
        assert faster.last_run == slower.this_run  # the last run: the one it replaced
        await until(lambda: (snap.metrics.last_step or 0) >= 60, 60, "the faster run's steps")

        await relaunch(target)  # the same code again: a rerun
        same = await verdict_of_new_run(watch, faster.this_run)
        assert same.verdict == "same", same
        assert same.last_run == faster.this_run
        assert not [c for c in same.changes if "modified" in c or "→" in c], same.changes
        assert "slower_than_last" not in {f.kind for f in rec.findings}
        # doctor reads the same comparison from the history watch records
        from gputui.doctor.report import doctor_dict
        from gputui.doctor.run import inspect

        facts, dsnap, findings, _ = await inspect(settings, settle_s=2.0)
        assert dsnap is not None and dsnap.vs_last is not None
        assert dsnap.vs_last.this_run == same.this_run and dsnap.vs_last.last_run == same.last_run
        doc = doctor_dict(facts, dsnap, findings, now=dsnap.time)["snapshot"]["vs_last"]
        assert doc["verdict"] in ("same", ""), doc  # few steps yet: too early, never "slower"
        print("\n".join(ln for ln in out.getvalue().splitlines() if "against" in ln))
    finally:
        await transport.close()
        watch.stop()
        await asyncio.wait_for(task, 60)
        tmux_in_ct(testbed, ct, "kill-session", "-t", f"={SESSION}")
    # the history tells the same afterwards: `gputui history --compare`
    from gputui.record.query import HistoryReader
    from gputui.record.vslast import pair_of, vs_of

    r = HistoryReader(db)
    try:
        again = vs_of(pair_of(r, None, slower.this_run or 0))
        assert again is not None and again.verdict == "slower" and again.last_run == first
    finally:
        r.close()
