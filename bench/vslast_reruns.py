"""Reruns of the same code: how often does gputui call one slower? (issue 49)

    .venv/bin/python bench/vslast_reruns.py                  # 20 reruns, rate printed by the model
    .venv/bin/python bench/vslast_reruns.py --rate wall      # the rate measured from the clock
    .venv/bin/python bench/vslast_reruns.py --reruns 20 --slower 0.9,0.8 --deploys 10 --between 0.025

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

`--between B`: each run, rerun or deploy, runs at (1 + N(0, B)) × its
code's rate — the machine's between-run spread (on a lent H100 two reruns
of one command read +3.5 %, another pair −5.8 %); the reruns leave the
script alone (the run reads the machine's factor from a file), so the
history holds them as reruns with nothing changed. Each deploy then
modifies the script (rate F × the base) and is followed by the base script
put back with its old mtime, so the next deploy's last run has the reruns
as its own.

    .venv/bin/python bench/vslast_reruns.py --sim 400      # no test bed: the pure comparison

`--sim N`: N generated trials per case, no test bed: K earlier reruns of
one program (the machine's spread B between runs, tok/s moving in
stretches of ±15–20 % within a run as on the H100, or calm: 3 % a step),
then a rerun, a deploy 10 % slower and one 20 % slower, each judged
without the reruns (today's verdict) and with them.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
import os
import random
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
from gputui.diagnose.compare import RunPoint, compare  # noqa: E402
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
try:
    RATE *= float(open("machine.txt").read())  # the machine's factor for this run
except OSError:
    pass
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


async def one(
    watch: Watch, target: Target, script: Path, code: str | None, machine: float
) -> VsLast:
    """Deploy `code` (None: the script left alone — a rerun) on a machine
    running it at `machine` × its rate, relaunch, wait for the new run's
    verdict with 20 matched readings, then for its steps."""
    rec = watch.watched[0].recorder
    snap = watch.watched[0].monitor.snapshot
    before = rec._run.id if rec._run is not None else None
    (script.parent / "machine.txt").write_text(f"{machine:.6f}")
    if code is not None:
        script.write_text(code)
    plan = await plan_relaunch(target, Settings(), SESSION)
    result = await execute(target, plan)
    if not result.ok:
        raise SystemExit(f"relaunch failed: {result.summary}")
    await until(
        lambda: (
            rec.vs_last is not None
            and rec.vs_last.this_run != before
            and rec.vs_last.enough
            and bool(rec.vs_last.verdict)
        ),
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
            rnd = random.Random(args.seed)

            def machine() -> float:
                return 1 + rnd.gauss(0, args.between)

            base, mtime = script.read_text(), script.stat().st_mtime
            for i in range(args.reruns):
                vs = await one(watch, target, script, None, machine())
                out["reruns"].append(_row(vs))
                print(f"rerun {i + 1:2}: {vs.verdict:6} {_row(vs)['change']:+6.1f} %  {vs.test}")
            for f in args.slower:
                for i in range(args.deploys):
                    slower = TRAIN.format(rate=1000.0 * f, wall=wall)
                    vs = await one(watch, target, script, slower, machine())
                    out["slower_deploys"].append({**_row(vs), "factor": f})
                    print(
                        f"deploy {i + 1:2} ({f:g}×): {vs.verdict:6} {_row(vs)['change']:+6.1f} %  {vs.test}"
                    )
                    script.write_text(base)  # undone: the base code, its mtime as before
                    os.utime(script, (mtime, mtime))
                    await one(watch, target, script, None, machine())
        finally:
            await tr.close()
            watch.stop()
            await asyncio.wait_for(task, 60)
        return out
    finally:
        bed.stop()


# ------------------------------------------------------------------ --sim

SIM_STEPS = 600  # a run's points (tok/s lines)
SIM_RATE = 150_000.0  # batch 4 on the H100: 154.7k and 149.4k
STRETCH_SD, STRETCH_KEEP = 0.06, 0.98  # within a run: ±15-20 % stretches of ~50 steps
LOSS_BETWEEN = 0.001  # the loss of a rerun at the same steps: ±0.1 %


def sim_run(factor: float, rnd: random.Random, stretch: bool, loss_shift: float) -> list[RunPoint]:
    """A run's lines as train_torch.py prints them on an H100: tok/s around
    `factor` × SIM_RATE, its first 10 steps at half (warm-up), moving in
    stretches (`stretch`) or 3 % a step alone; a loss on its plateau."""
    pts, t, drift = [], 1000.0, 0.0
    for s in range(SIM_STEPS):
        if stretch:
            drift = STRETCH_KEEP * drift + rnd.gauss(0, STRETCH_SD * math.sqrt(1 - STRETCH_KEEP**2))
        r = SIM_RATE * factor * (1 + drift) * (1 + rnd.gauss(0, 0.03)) * (0.5 if s < 10 else 1)
        t += 8192 / r
        loss = 10.384 * (1 + loss_shift) + rnd.gauss(0, 0.006)
        pts.append(RunPoint(s, t, round(loss, 4), round(r)))
    return pts


def sim_case(trials: int, reruns: int, between: float, stretch: bool, seed: int) -> dict[str, Any]:
    """`trials` times: `reruns` + 1 runs of one program, then a rerun and
    deploys at 0.9 and 0.8 × the rate, each judged against the last run
    without the reruns' spread (before) and with it (after)."""
    from gputui.diagnose.reruns import spread_of  # not in the code before issue 49's reruns

    rnd = random.Random(seed)
    counts: dict[str, dict[str, int]] = {}

    def run(f: float) -> list[RunPoint]:
        shift = rnd.gauss(0, LOSS_BETWEEN)
        return sim_run(f * (1 + rnd.gauss(0, between)), rnd, stretch, shift)

    for _ in range(trials):
        base = [(i + 1, run(1.0)) for i in range(reruns + 1)]
        spread = spread_of(base)
        last = base[-1][1]
        for name, f in (("rerun", 1.0), ("0.9x", 0.9), ("0.8x", 0.8)):
            new = run(f)
            for when, sp in (("before", None), ("after", spread)):
                vs = compare(last, new, reruns=sp)
                c = counts.setdefault(f"{name} {when}", {})
                c[vs.verdict or "-"] = c.get(vs.verdict or "-", 0) + 1
                if vs.loss_out:
                    c["loss_out"] = c.get("loss_out", 0) + 1
    return counts


def sim_main(trials: int, between: float) -> None:
    print(f"{trials} trials a case; between-run spread ±{between * 100:g} % (1 sd of a run's rate)")
    print(
        "| within a run | earlier reruns | reruns told slower / faster (loss out) | 0.9× told slower | 0.8× told slower |"
    )
    print("| --- | --- | --- | --- | --- |")
    for stretch in (True, False):
        for k in (2, 3, 5):
            c = sim_case(trials, k, between, stretch, seed=1000 * k + stretch)
            cells = []
            for name in ("rerun", "0.9x", "0.8x"):
                b, a = c.get(f"{name} before", {}), c.get(f"{name} after", {})
                if name == "rerun":
                    cells.append(
                        f"{_pct(b, 'slower', trials)} / {_pct(b, 'faster', trials)} ({_pct(b, 'loss_out', trials)})"
                        f" → **{_pct(a, 'slower', trials)} / {_pct(a, 'faster', trials)}** ({_pct(a, 'loss_out', trials)})"
                    )
                else:
                    cells.append(f"{_pct(b, 'slower', trials)} → **{_pct(a, 'slower', trials)}**")
            where = "±15–20 % stretches" if stretch else "3 % a step"
            print(f"| {where} | {k} | " + " | ".join(cells) + " |", flush=True)


def _pct(c: dict[str, int], key: str, n: int) -> str:
    return f"{100 * c.get(key, 0) / n:.1f} %"


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
    ap.add_argument(
        "--slower",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[],
        help="F[,F…]: deploys of code at F × the rate, each undone after",
    )
    ap.add_argument("--deploys", type=int, default=10, help="deploys of each F")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--between", type=float, default=0.0, help="the machine's spread between runs")
    ap.add_argument("--sim", type=int, default=0, help="N generated trials a case, no test bed")
    args = ap.parse_args()
    if args.sim:
        sim_main(args.sim, args.between or 0.025)
        return 0
    t0 = time.monotonic()
    res = asyncio.run(main_async(args))
    words = [r["verdict"] for r in res["reruns"]]
    print(
        f"\n{len(words)} reruns of the same code (rate {args.rate}): "
        + ", ".join(f"{w} {words.count(w)}" for w in ("same", "slower", "faster"))
        + f" — false slower {words.count('slower')}/{len(words)}"
    )
    for f in args.slower:
        got = [r["verdict"] for r in res["slower_deploys"] if r["factor"] == f]
        print(f"{len(got)} deploys {f:g}× the rate: slower {got.count('slower')}/{len(got)}")
    print(f"{time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
