"""The banner never goes dark (issue 44): the two shapes that went dark,
each repeated, half of the tries with busy loops beside them.

    .venv/bin/python bench/never_dark.py                    # 20 tries of each shape
    .venv/bin/python bench/never_dark.py --tries 6 --only crash
    .venv/bin/python bench/never_dark.py --src /tmp/old/src # another tree's gputui

- `crash`: a run that dies of a CUDA error ~3 s after launch, started as
  `tmux new -d -s train '… | tee train.log'` with no remain-on-exit, so the
  CT's tmux server ends with it; gputui (the real Monitor, over real ssh,
  `--session train --log …`) starts before, with, or after the launch;
- `hang`: a run of 4 ranks (GPUs 0-3) hung at step 50 beside another live
  run on GPU 0, in another tmux session of the same CT, `--stale-after 10`:
  GPUs 1-3 idle with memory held, GPU 0 kept busy by the other run.

With --orphan, the audit log holds a relaunch of the session begun 30 s
before by a gputui that was quit mid-action (no end line), as an earlier
scenario of an acceptance pass leaves it: the banner's filter of the user's
own doing (the dashboard's and watch's recorder) hid every new incident for
5 minutes.

Each try runs on its own test bed (tests/testbed.py: real sshd on
127.0.0.1, stand-in `pct` and `nvidia-smi`, real tmux and python3), reusing
bench/diagnosis.py's runs. "Banner": a finding of WARNING or above, and
news by the dashboard's filter (record/recorder.py is_news), shown at the
end of the watch (the crash: 20 s after the launch; the hang: 45 s
after it hung). A loaded try runs 2 busy loops (one per core of this
machine) beside it, as `stress -c 2` would.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent


def _src_first() -> None:
    """--src DIR: import gputui from that tree (the code before a fix)."""
    if "--src" in sys.argv:
        sys.path.insert(0, sys.argv[sys.argv.index("--src") + 1])
        import gputui  # noqa: F401  (imported first: diagnosis.py puts this tree's src first)


_src_first()
sys.path.insert(1, str(HERE))
import diagnosis as dg  # noqa: E402
from gputui.diagnose import Thresholds, diagnose  # noqa: E402
from gputui.model import Severity  # noqa: E402
from gputui.monitor.engine import Monitor  # noqa: E402
from gputui.record.recorder import RunRecorder  # noqa: E402
from gputui.remote.target import Target  # noqa: E402

CRASH = dg.Scenario(
    "crash",
    "CUDA error ~3 s in, no remain-on-exit: the tmux server ends with the run",
    "crash",
    frozenset({"session_dead", "session_missing", "cuda_error"}),
    "crashed",
    20,
    pre_s=3.0,
    step_s=0.3,
    gpu=dg._exit_gpu,
)
HANG = dg.Scenario(
    "hang",
    "hung at step 50 beside another live run on GPU 0, --stale-after 10",
    "hang",
    frozenset({"held_but_idle", "progress_stalled"}),
    "hang",
    25 + 45,
    stale_after=10,
    pre_s=25.0,
    step_s=0.5,
    gpu=dg._hang_gpu,
    other="session",
    ranks=4,  # 4 ranks on GPUs 0-3; the other run keeps GPU 0 busy
)
SHAPES = {"crash": CRASH, "hang": HANG}
# when gputui starts, seconds after the launch (the crash: before, with, after)
STARTS = {"crash": (-2.0, 0.0, 1.5, 4.0, 8.0), "hang": (0.0, 3.0)}


@dataclass
class Try:
    shape: str
    n: int
    loaded: bool
    start_at: float
    banner: bool = False
    first_s: float | None = None  # first WARNING+ after the event (since the event)
    last: str = ""  # what the banner said at the end
    error: str = ""


ORPHAN = False  # --orphan: a relaunch "begun" 30 s before, by a gputui since gone


def _orphan_line(audit: Path, target: str) -> None:
    """The audit log's "begun" line of a relaunch of session `train` whose
    gputui was quit mid-action (no end line): an earlier scenario's."""
    p = subprocess.Popen(["true"])
    p.wait()
    t = time.time() - 30
    line = {
        "epoch": round(t, 3),
        "phase": "begun",
        "plan": round(t - 0.5, 3),
        "target": target,
        "begins": "relaunch",
        "session": "train",
        "pids": [4242],
        "by": p.pid,
    }
    audit.write_text(json.dumps(line) + "\n")


def _busy() -> None:
    while True:
        pass


async def watch(run: dg.Run, t: Try) -> None:
    sc = run.sc
    tr = run.bed.transport()
    await tr.connect()
    settings = SimpleNamespace(
        interval=1.0,
        session="train",
        log=str(run.log),
        gpu_source="host",
        metric_regexes=[],
        local=False,
        run=None,
    )
    mon = Monitor(Target(tr, dg.CT), settings)
    # the dashboard's banner leaves out what the user's own action caused
    # (the audit log): the same filter here
    audit = Path(run.bed.root) / "audit.jsonl"
    if ORPHAN:
        _orphan_line(audit, mon.target.label)
    rec = RunRecorder(mon, None, diagnose=lambda s, n: [], audit_file=audit, tick_s=3600)
    end = run.t0 + sc.duration
    gpus = asyncio.create_task(dg.drive_gpus(run))
    try:
        await mon.start()
        while time.time() < end:
            now = time.time()
            found = diagnose(mon.snapshot, now, Thresholds(stale_after=sc.stale_after))
            loud = [f for f in found if f.severity != Severity.INFO and rec.is_news(f, now)]
            event = run.event_time()
            if loud and event is not None and t.first_s is None and now - run.t0 >= event:
                t.first_s = now - run.t0 - event
            t.banner = bool(loud)
            t.last = f"{loud[0].kind}: {loud[0].title[:90]}" if loud else "(nothing)"
            await asyncio.sleep(dg.SAMPLE_S)
    finally:
        gpus.cancel()
        await mon.stop()
        await tr.close()


async def one(t: Try) -> Try:
    sc = SHAPES[t.shape]
    run = dg.Run(sc, 1.0)
    loop = asyncio.get_running_loop()
    busy = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(2 if t.loaded else 0)]
    for p in busy:
        p.start()
    try:
        if t.start_at < 0:  # gputui first: the test bed and the CT, then the launch
            await loop.run_in_executor(None, _bed_only, run)
            launch = asyncio.create_task(_launch_later(run, -t.start_at))
            run.t0 = time.time() - t.start_at  # the launch's time
            await watch(run, t)
            await launch
        else:
            await loop.run_in_executor(None, run.start)
            await asyncio.sleep(max(0.0, t.start_at - (time.time() - run.t0)))
            await watch(run, t)
    except Exception as e:  # a broken try is reported, not a crash of the bench
        t.error = f"{type(e).__name__}: {e}"
    finally:
        for p in busy:
            p.kill()
        await loop.run_in_executor(None, run.stop)
    return t


def _bed_only(run: dg.Run) -> None:
    """What Run.start does before the launch: the test bed, the CT, the paths."""
    bed = run.bed.start()
    bed.set_pct_delay(0.3)
    bed.ct_create(dg.CT, running=True)
    run.dir = Path(bed.workspace) / f"diag-{run.sc.name}"
    run.log = run.dir / "train.log"


async def _launch_later(run: dg.Run, after: float) -> None:
    """Run.start after `after` s, on a test bed already started."""
    await asyncio.sleep(after)
    bed = run.bed
    run.bed = _Started(bed)  # type: ignore[assignment]
    try:
        await asyncio.get_running_loop().run_in_executor(None, run.start)
    finally:
        run.bed = bed


class _Started:
    """A started Testbed whose start() is a no-op (Run.start calls it)."""

    def __init__(self, bed: object) -> None:
        self._bed = bed

    def start(self) -> object:
        return self

    def ct_create(self, *a: object, **kw: object) -> None:
        return None

    def __getattr__(self, name: str) -> object:
        return getattr(self._bed, name)


def plan(shapes: list[str], tries: int) -> list[Try]:
    out = []
    for shape in shapes:
        starts = STARTS[shape]
        for n in range(tries):
            out.append(Try(shape, n, loaded=n % 2 == 1, start_at=starts[(n // 2) % len(starts)]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tries", type=int, default=20)
    ap.add_argument("--only", default="crash,hang")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--src", default="", help="import gputui from this src/ (the code before)")
    ap.add_argument("--starts", default="", help="gputui's start after the launch, s: 0,4,8")
    ap.add_argument(
        "--orphan",
        action="store_true",
        help="an earlier relaunch of the session, begun 30 s before by a gputui since gone",
    )
    a = ap.parse_args(argv)
    global ORPHAN
    ORPHAN = a.orphan
    if a.starts:
        for k in STARTS:
            STARTS[k] = tuple(float(x) for x in a.starts.split(","))
    todo = plan([s for s in a.only.split(",") if s], a.tries)

    async def all_tries() -> list[Try]:
        sem = asyncio.Semaphore(a.parallel)

        async def guarded(t: Try) -> Try:
            async with sem:
                r = await one(t)
                first = "—" if r.first_s is None else f"{r.first_s:.1f} s"
                print(
                    f"{r.shape:<5} #{r.n:<2} {'loaded' if r.loaded else 'quiet '} "
                    f"start {r.start_at:+.1f} s  banner={'yes' if r.banner else 'NO '} "
                    f"first {first:>7}  {r.error or r.last}",
                    flush=True,
                )
                return r

        return list(await asyncio.gather(*(guarded(t) for t in todo)))

    done = asyncio.run(all_tries())
    print()
    import gputui

    print(f"gputui from {Path(gputui.__file__).parent}")
    for shape in dict.fromkeys(t.shape for t in done):
        ts = [t for t in done if t.shape == shape and not t.error]
        for label, sub in (("all", ts), ("quiet", [t for t in ts if not t.loaded])):
            got = sum(t.banner for t in sub)
            print(f"{shape}: {got}/{len(sub)} with a banner ({label})")
        loaded = [t for t in ts if t.loaded]
        print(f"{shape}: {sum(t.banner for t in loaded)}/{len(loaded)} with a banner (loaded)")
        errs = [t for t in done if t.shape == shape and t.error]
        if errs:
            print(f"{shape}: {len(errs)} tries broken: {errs[0].error}")
    return 0 if all(t.banner for t in done if not t.error) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
