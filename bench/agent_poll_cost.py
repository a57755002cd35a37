"""The agent's CPU per 1 s poll on a quiet run, exactly (issue 24, round 3):

    python bench/agent_poll_cost.py [--polls 30] [--extra 300] [--src DIR ...]

bench/baseline_cost.py counts the agent in clock ticks (1 tick = 0.025 % of
a core over its 40 s window): on a machine with few processes the agent's
0.3 % is a dozen ticks, too coarse to tell two versions apart. Here each
--src tree's agent (gputui.remote.agent imported from it, in its own
process) answers what the monitor asks each poll — one `batch` of the
sessions listing (`tmux`, other_servers, reuse_s 5) and the run's process
tree (`procs`) — once a second, all trees at the same time (a busy machine
weighs on each alike), and its CPU is read with the process clock (plus the
`tmux` commands it ran and reaped).

The run: bench/hf_writer.py --buffered behind `| tee` in a tmux session
`train0` of a private tmux server ($TMUX_TMPDIR in a temporary directory),
and --extra idle processes (`sleep`) beside it, as on a GPU host where
hundreds of processes make each listing of /proc dear. Prints µs of CPU per
poll per tree (median of the polls after the first 3; mean with reaped
children).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

DRIVER = r"""
import json, os, sys, time
from gputui.remote.agent import Agent
root, polls = int(sys.argv[1]), int(sys.argv[2])
agent = Agent()
listing = ["list-panes", "-a", "-F", "#{session_name}\t#{pane_pid}\t#{pane_dead}"]
batch = {"op": "batch", "calls": [
    {"op": "tmux", "commands": [listing], "other_servers": True, "reuse_s": 5.0},
    {"op": "procs", "root_pid": root, "sources": True},
]}
each, t0 = [], os.times()
start = time.monotonic()
for i in range(polls):
    time.sleep(max(0.0, start + i - time.monotonic()))
    c = time.process_time()
    out = agent.answer(batch)
    each.append(time.process_time() - c)
    assert all(r["ok"] for r in out["result"]), out
t1 = os.times()
kids = (t1.children_user + t1.children_system) - (t0.children_user + t0.children_system)
print(json.dumps({"each": each, "children": kids, "runs": agent.listings.runs}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--polls", type=int, default=30, help="polls per tree (default 30)")
    ap.add_argument("--extra", type=int, default=300, help="idle processes beside (default 300)")
    ap.add_argument("--src", action="append", help="a source tree (default: src/)")
    args = ap.parse_args()
    srcs = [Path(s).resolve() for s in args.src or [str(ROOT / "src")]]
    for s in srcs:
        if not (s / "gputui" / "remote" / "agent.py").is_file():
            print(f"--src {s}: no gputui/remote/agent.py in it; name a tree holding gputui/")
            return 2
    state = Path(tempfile.mkdtemp(prefix="gputui-poll-"))
    env = dict(os.environ, TMUX_TMPDIR=str(state))
    extra = [subprocess.Popen(["sleep", "3600"]) for _ in range(args.extra)]
    log = state / "train.log"
    writer = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'hf_writer.py'))} 40"
    cmd = f"{writer} --buffered 2>&1 | tee {shlex.quote(str(log))}"
    tmux = ["tmux", "new", "-d", "-s", "train0", "-P", "-F", "#{pane_pid}", cmd]
    try:
        root = int(subprocess.run(tmux, env=env, capture_output=True, text=True).stdout)
        time.sleep(2.0)
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", DRIVER, str(root), str(args.polls)],
                env=dict(env, PYTHONPATH=str(s)),
                stdout=subprocess.PIPE,
                text=True,
            )
            for s in srcs
        ]
        outs = [json.loads(p.communicate()[0]) for p in runs]
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        for e in extra:
            e.kill()
            e.wait()
        shutil.rmtree(state, ignore_errors=True)
    print(f"{'tree':40} {'µs/poll (median)':>17} {'µs/poll (mean+children)':>24} listings")
    first = None
    for s, out in zip(srcs, outs, strict=True):
        each = out["each"][3:]
        med = statistics.median(each) * 1e6
        mean = (sum(out["each"]) + out["children"]) / len(out["each"]) * 1e6
        first = first or med
        print(f"{s!s:40} {med:17.0f} {mean:24.0f} {out['runs']:>8}  {med / first:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
