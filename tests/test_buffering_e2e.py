"""End to end, on the test bed: stdout buffering judged by what the log does
(issue 31), not by the command line.

Three programs that flush their own lines, each started the field's way
(`python3 X.py 2>&1 | tee train.log`: no -u, PYTHONUNBUFFERED unset) —
`print(..., flush=True)` (Megatron's print_rank_0), `logging` to stdout (a
StreamHandler flushes every record), `sys.stdout.reconfigure(
line_buffering=True)` (bench/hf_writer.py) — get no buffering word for
60 s, from the dashboard's monitor (its diagnosis and its process panel) or
from `gputui doctor`. A truly block-buffered run beside them still gets one.
On the old code all four got "block-buffered" at once, from argv alone.
"""

from __future__ import annotations

import asyncio
import shlex
import time
from typing import Any

import pytest

import scenarios as sc
from gputui.config import Settings
from gputui.diagnose import Thresholds, diagnose
from gputui.monitor.engine import Monitor
from gputui.remote.target import Target
from gputui.ui.format import buffering_verdict

STEP = 'f"step {n} | loss {8.0 / (1 + n * 0.01):.4f} | {48000 + n % 97} tok/s"'

WRITERS = {
    "printflush": f"""import time
n = 0
while True:
    n += 1
    print({STEP}, flush=True)
    time.sleep(0.1)
""",
    "logging": f"""import logging, sys, time
logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(message)s")
log = logging.getLogger("train")
n = 0
while True:
    n += 1
    log.info({STEP})
    time.sleep(0.1)
""",
    "reconfig": f"""import sys, time
sys.stdout.reconfigure(line_buffering=True)
n = 0
while True:
    n += 1
    print({STEP})
    time.sleep(0.1)
""",
    # truly block-buffered: ~45-byte lines, 8 KiB every ~2 s
    "buffered": f"""import time
n = 0
while True:
    n += 1
    print({STEP})
    time.sleep(0.01)
""",
}
BUFFER_WORDS = ("buffered_output", "busy_but_silent")
WATCH_S = 60.0


def _start(testbed: Any, ct: int, name: str) -> sc.Run:
    run = sc.prepare(testbed, ct, f"buf-{name}", name)
    (run.dir / f"w_{name}.py").write_text(WRITERS[name])
    cmd = f"python3 w_{name}.py 2>&1 | tee {shlex.quote(str(run.log))}"
    sc.tmux_in_ct(testbed, ct, "new", "-d", "-s", name, "-c", str(run.dir), cmd)
    return run


async def _watch(testbed: Any, ct: int, runs: dict[str, sc.Run]) -> dict[str, list[str]]:
    """Each run watched by its own monitor for WATCH_S; every buffering word
    said (diagnosis kinds, and the process panel's BLOCK-BUFFERED), with the
    second it was first said, per run."""
    mons, links = {}, []
    for name, run in runs.items():
        tr = testbed.transport()  # a link each, as each dashboard has (sshd's MaxSessions)
        await tr.connect()
        links.append(tr)
        settings = Settings(interval=0.5, session=name, log=str(run.log), gpu_source="host")
        mons[name] = Monitor(Target(tr, ct), settings)
    said: dict[str, list[str]] = {name: [] for name in runs}
    try:
        for m in mons.values():
            await m.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < WATCH_S:
            await asyncio.sleep(0.5)
            now = time.time()
            for name, m in mons.items():
                snap = m.snapshot
                t = round(time.monotonic() - t0, 1)
                for f in diagnose(snap, now, Thresholds(stale_after=10.0)):
                    if f.kind in BUFFER_WORDS:
                        said[name].append(f"{t} s {f.kind}: {f.title}")
                p = snap.training_proc
                if p is not None:
                    _, panel = buffering_verdict(p, snap.log, now)
                    if "BLOCK-BUFFERED" in panel:
                        said[name].append(f"{t} s panel: {panel}")
    finally:
        for m in mons.values():
            await m.stop()
        for tr in links:
            await tr.close()
    return said


@pytest.mark.timeout(150)
async def test_runs_that_flush_their_lines_behind_tee_get_no_buffering_word(
    testbed: Any, ct: int
) -> None:
    runs = {name: _start(testbed, ct, name) for name in WRITERS}
    for name in runs:
        sc.wait_python(runs[name], f"w_{name}.py")
    said = await _watch(testbed, ct, runs)
    for name in ("printflush", "logging", "reconfig"):
        assert said[name] == [], (name, said[name][:3])
    # the block-buffered run beside them is still named, from its log's blocks
    words = said["buffered"]
    assert any("buffered_output" in w for w in words), words[:3]
    first = float(words[0].split(" s ")[0])
    assert first <= 15.0, words[:3]
    assert any("a 4 KiB boundary" in w or "BLOCK-BUFFERED" in w for w in words)


@pytest.mark.timeout(90)
def test_doctor_on_a_run_that_flushes_its_lines_behind_tee_says_nothing_of_buffering(
    testbed: Any, ct: int
) -> None:
    run = _start(testbed, ct, "reconfig")
    sc.wait_python(run, "w_reconfig.py")
    time.sleep(3.0)  # a few lines in the log already, as a user's doctor finds it
    flags = ["--session", "reconfig", "--log", str(run.log), "--stale-after", "60"]
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--json"))
    assert r.rc == 0, r.stdout + r.stderr
    assert not set(BUFFER_WORDS) & set(r.kinds()), r.kinds()
    judged = r.doc["snapshot"]["process"]["buffering"]  # type: ignore[index]
    assert judged["verdict"] == "flushes", judged
    assert judged["block_buffered"] is True  # argv/env alone: the suspicion
