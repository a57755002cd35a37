"""A run killed in its first minute, then deployed again (issue 49): does the
history keep the short run's steps, and does the new run get compared to it?

    .venv/bin/python bench/short_deploy.py                   # this checkout
    .venv/bin/python bench/short_deploy.py --src /tmp/old/src --seconds 25

On this machine, as bench/gpu/deploy_words.sh does it on a GPU: `gputui
watch --local` records a run started as a tmux session's command (`python3
-u train.py --batch 16 2>&1 | tee train.log`); after --seconds it is killed
with `gputui kill --yes`, and the same command with `--batch 4` is started
in a new session (tee truncates the log: the old run's unread lines go with
it). After --seconds more: each run's steps in `gputui history --runs`, and
doctor's `snapshot.vs_last`. The history reads the log every
`[history] log_every` (60 s): a run shorter than that had "steps –" and the
deploy was compared with nothing (an H100 attempt with 35-s runs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TRAIN = r"""import random, sys, time
batch = int(sys.argv[sys.argv.index("--batch") + 1])
time.sleep(2.0)  # the model loads
rate = 40000.0 * batch / 16
for step in range(1, 100000):
    t = 0.1 * (1 + random.gauss(0, 0.03))
    time.sleep(t)
    print(f"step {step} | loss {10.38 + random.gauss(0, 0.01):.4f} | tok/s {rate * 0.1 / t:.0f}")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=str(ROOT / "src"), help="the gputui source to run")
    ap.add_argument("--seconds", type=float, default=25.0, help="how long each run runs")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("short_deploy: tmux is not installed", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="gputui-short-deploy-"))
    env = {
        **os.environ,
        "PYTHONPATH": args.src,
        "XDG_STATE_HOME": str(work / "state"),
        "XDG_CONFIG_HOME": str(work / "config"),
        "TMUX_TMPDIR": str(work),
    }
    env.pop("TMUX", None)
    (work / "train.py").write_text(TRAIN)
    log = work / "train.log"
    g = [sys.executable, "-m", "gputui"]

    def tmux(*a: str) -> None:
        subprocess.run(["tmux", *a], env=env, check=True, timeout=10)

    def start(batch: int) -> None:
        cmd = f"python3 -u train.py --batch {batch} 2>&1 | tee {log}"
        tmux("new-session", "-d", "-s", "train", "-c", str(work), cmd)

    tmux("new-session", "-d", "-s", "keep", "sleep 86400")  # the server stays between runs
    watch = None
    try:
        start(16)
        watch = subprocess.Popen(
            [*g, "watch", "--local", "--session", "train", "--log", str(log), "--interval", "1"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(args.seconds)
        subprocess.run([*g, "kill", "--local", "--session", "train", "--yes"], env=env,
                       capture_output=True, timeout=60)  # fmt: skip
        time.sleep(3)
        start(4)
        time.sleep(args.seconds)
        doc = subprocess.run(
            [*g, "doctor", "--local", "--session", "train", "--log", str(log), "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        runs = subprocess.run(
            [*g, "history", "local", "--runs"], env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        if watch is not None:
            watch.terminate()
            watch.wait(timeout=30)
        subprocess.run(["tmux", "kill-server"], env=env, timeout=10, check=False)
    print(f"src {args.src}, runs of {args.seconds:g} s each")
    print(runs.stdout.strip() or runs.stderr.strip())
    try:
        vs = (json.loads(doc.stdout).get("snapshot") or {}).get("vs_last")
    except json.JSONDecodeError:
        vs = None
    if vs:
        print(f"doctor vs last: run {vs.get('this_run')} against {vs.get('last_run')}: "
              f"{vs.get('verdict') or 'no verdict'} — {vs.get('headline')}")  # fmt: skip
    else:
        print("doctor vs last: none (no earlier run with steps to compare with)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
