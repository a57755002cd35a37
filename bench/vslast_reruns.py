"""Reruns of the same code: how often does gputui call one slower? (issue 49)

    .venv/bin/python bench/vslast_reruns.py                  # 20 reruns, rate printed by the model
    .venv/bin/python bench/vslast_reruns.py --rate wall      # the rate measured from the clock
    .venv/bin/python bench/vslast_reruns.py --reruns 20 --slower 0.9   # and 20 deploys 10 % slower

On a real test bed (tests/testbed.py: OpenSSH sshd on 127.0.0.1, a stand-in
CT with its own PID and mount namespace, real tmux, real python3 runs writing
their log through `| tee`), `gputui watch`'s recorder follows one run; the
run is relaunched with gputui's own relaunch (`r`, `y`) N times without a
change to its code, and each new run's verdict against the last one is read
once 20 matched readings of each tell (the alert's bar). `--slower F`
then deploys N times code running at F × the rate (F = 0.9: 10 % slower) and
counts how many of those are told "slower".

`--rate model`: each step prints tok/s drawn around the code's rate (4 %
noise): the pipeline's own false-slower rate. `--rate wall`: tok/s measured
from the clock over each step's sleep (what a trainer prints), so the
machine's load is in the readings too — on a shared 2-core machine that
noise is the machine's, and a rerun that really ran slower is told so.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from gputui.actions import execute, plan_relaunch  # noqa: E402
from gputui.cli.watch import Watch  # noqa: E402
from gputui.config import Settings  # noqa: E402
from gputui.model import VsLast  # noqa: E402
from gputui.remote.target import Target  # noqa: E402
from testbed import Testbed  # noqa: E402
from ui_scenarios import settings_for, tmux_in_ct  # noqa: E402

CT = 200
SESSION = "rerun"
STEPS_BEFORE_RELAUNCH = 45  # each run's steps before the next relaunch
TRAIN = """\
import random, sys, time
RATE = {rate}
WALL = {wall}
rnd = random.Random()
step, t = 0, time.monotonic()
while True:
    step += 1
    time.sleep(0.05)
    now = time.monotonic()
    tok = (RATE * 0.05 / (now - t)) if WALL else RATE * (1 + rnd.gauss(0, 0.04))
    t = now
    print("step %d loss %.4f | %.1f tok/s" % (step, 3.0 * 0.995 ** step + rnd.gauss(0, 0.01), tok), flush=True)
"""


async def until(cond: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def one(watch: Watch, target: Target, script: Path, rate: float, wall: bool) -> VsLast:
    """Deploy `rate` (the same as before: a rerun), relaunch, wait for the
    new run's verdict with 20 matched readings, then for its steps."""
    rec = watch.watched[0].recorder
    snap = watch.watched[0].monitor.snapshot
    before = rec._run.id if rec._run is not None else None
    script.write_text(TRAIN.format(rate=rate, wall=wall))
    plan = await plan_relaunch(target, Settings(), SESSION)
    result = await execute(target, plan)
    if not result.ok:
        raise SystemExit(f"relaunch failed: {result.summary}")
    await until(
        lambda: rec.vs_last is not None and rec.vs_last.this_run != before and rec.vs_last.enough,
        120,
        "a verdict",
    )
    vs = rec.vs_last
    assert vs is not None
    await until(lambda: (snap.metrics.last_step or 0) >= STEPS_BEFORE_RELAUNCH, 60, "steps")
    return vs


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    wall = args.rate == "wall"
    bed = Testbed().start()
    state = tempfile.mkdtemp(prefix="gputui-vslast-")
    os.environ["XDG_STATE_HOME"] = state  # the audit log, the history
    try:
        bed.ct_create(CT, running=True)
        work = Path(bed.workspace) / "vslast"
        work.mkdir(parents=True, exist_ok=True)
        work.chmod(0o777)
        script, log = work / "train.py", work / "train.log"
        script.write_text(TRAIN.format(rate=1000.0, wall=wall))
        tmux_in_ct(
            bed,
            CT,
            "new",
            "-d",
            "-s",
            SESSION,
            "-c",
            str(work),
            f"python3 -u train.py 2>&1 | tee {log}",
        )
        settings = settings_for(
            bed, CT, session=SESSION, log=str(log), history_path=f"{state}/h.sqlite",
            history_log_every=1.0,
        )  # fmt: skip
        watch = Watch([settings], out=io.StringIO())
        task = asyncio.create_task(watch.run())
        tr = bed.transport()
        await tr.connect()
        target = Target(tr, CT)
        snap = watch.watched[0].monitor.snapshot
        out: dict[str, Any] = {"rate": args.rate, "reruns": [], "slower_deploys": []}
        try:
            await until(lambda: (snap.metrics.last_step or 0) >= 100, 90, "the first run")
            for i in range(args.reruns):
                vs = await one(watch, target, script, 1000.0, wall)
                out["reruns"].append(_row(vs))
                print(f"rerun {i + 1:2}: {vs.verdict:6} {_row(vs)['change']:+6.1f} %  {vs.test}")
            for i in range(args.reruns if args.slower else 0):
                # each deploy F slower than the run it replaces: the rate goes down each time
                rate = 1000.0 * args.slower ** (i + 1)
                vs = await one(watch, target, script, rate, wall)
                out["slower_deploys"].append(_row(vs))
                print(
                    f"deploy {i + 1:2} ({args.slower:g}×): {vs.verdict:6} {_row(vs)['change']:+6.1f} %"
                )
        finally:
            await tr.close()
            watch.stop()
            await asyncio.wait_for(task, 60)
        return out
    finally:
        bed.stop()


def _row(vs: VsLast) -> dict[str, Any]:
    change = (
        vs.rate.percent if vs.rate is not None and vs.rate.percent is not None else float("nan")
    )
    return {
        "verdict": vs.verdict,
        "change": change,
        "readings": [vs.n_new, vs.n_old],
        "test": vs.test,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=20)
    ap.add_argument("--rate", choices=("model", "wall"), default="model")
    ap.add_argument("--slower", type=float, default=0.0, help="also N deploys at F × the rate")
    args = ap.parse_args()
    t0 = time.monotonic()
    res = asyncio.run(main_async(args))
    words = [r["verdict"] for r in res["reruns"]]
    print(
        f"\n{len(words)} reruns of the same code (rate {args.rate}): "
        + ", ".join(f"{w} {words.count(w)}" for w in ("same", "slower", "faster"))
        + f" — false slower {words.count('slower')}/{len(words)}"
    )
    if res["slower_deploys"]:
        got = [r["verdict"] for r in res["slower_deploys"]]
        print(
            f"{len(got)} deploys {args.slower:g}× the rate: slower {got.count('slower')}/{len(got)}"
        )
    print(f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
