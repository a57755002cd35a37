"""gputui's once-a-second baseline: its CPU while a block-buffered run logs
nothing new for seconds at a time (issue 24's buffered case) — or, with
--rate, while the run's log streams that many lines a second:

    python bench/baseline_cost.py [--seconds 40] [--runs 3] [--rate N] [--src DIR ...]

One stand-in run (bench/hf_writer.py --buffered, behind `| tee`) in a tmux
session `train0` of a private tmux server; `gputui --local --session train0
--log FILE --interval 1` in a 120×36 pane beside it (stand-in `nvidia-smi`
with 8 GPUs where there is no real one, as bench/stream_cost.py). Each window
sums the pane's process tree's CPU from /proc after an 8 s start-up, by part:
gputui's main process, its agent (with, unlike bench/gpu/cpu_cost.py, the
children it reaped: its `tmux` commands) and the rest (the log relay, the
GPU feed's commands — here the stand-in nvidia-smi, a Python start-up every
few seconds: noise that is no part of the H200's NVML reads).

Each --src (a source tree holding gputui/, default this checkout's src/) is
measured --runs times, the trees taking turns window by window, so a busy
machine weighs on all of them alike; prints each window and the medians,
and each tree's main thread (issue 48's measure, from the scheduler's
nanoseconds), main process and main+agent against the first tree's.
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
sys.path.insert(0, str(HERE))

from stream_cost import CLI, GPUS, pane, tmux, writer_cmd  # noqa: E402

sys.path.insert(0, str(HERE / "gpu"))
from cpu_cost import tree  # type: ignore[import-not-found]  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _is_agent(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"gputui-agent" in f.read()
    except OSError:
        return False


def parts(root: int) -> dict[str, float]:
    """CPU seconds so far of gputui's main process, its agent (with the
    `tmux` commands it ran and reaped) and the rest of its tree (the log
    relay, the GPU feed's commands: the stand-in nvidia-smi here); and
    `thread`, the main process's main thread alone."""
    out = {"main": 0.0, "agent": 0.0, "rest": 0.0}
    for pid in tree(root):
        f = _stat(pid)
        if f is None:
            continue
        if pid == root:
            out["main"] += int(f[11]) + int(f[12])
        elif _is_agent(pid):
            out["agent"] += sum(int(x) for x in f[11:15])
        else:
            out["rest"] += int(f[11]) + int(f[12])
    res = {k: v / TICK for k, v in out.items()}
    res["thread"] = _thread_s(root)
    return res


def _thread_s(pid: int) -> float:
    """CPU seconds of the process's main thread alone (the issue's measure),
    in nanoseconds from the scheduler (/proc/PID/task/PID/schedstat), not
    in clock ticks: a 30-s window at 1 % of a core is 30 ticks."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


def window(src: Path, log: Path, seconds: float) -> dict[str, float]:
    """% of a core gputui from `src` uses over one window, by part."""
    # `src` first; the rest of the caller's path stays (the GPU machine's
    # wheels are a PYTHONPATH site)
    path = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = f"PYTHONPATH={shlex.quote(path)}"
    cfg = os.environ.get("GPUTUI_BENCH_CONFIG")
    conf = f" --config {shlex.quote(cfg)}" if cfg else ""
    cmd = (
        f"env {env} {shlex.quote(sys.executable)} -c {shlex.quote(CLI)} --local "
        f"--session train0 --log {shlex.quote(str(log))} --interval 1{conf}"
    )
    pid = pane("cpu-gputui", cmd, (120, 36))
    try:
        time.sleep(8.0)
        start = parts(pid)
        t0 = time.monotonic()
        time.sleep(seconds)
        end = parts(pid)
        wall = time.monotonic() - t0
        out = {k: round(100 * (end[k] - start[k]) / wall, 3) for k in end}
        out["main+agent"] = round(out["main"] + out["agent"], 3)
        return out
    finally:
        tmux("kill-session", "-t", "cpu-gputui", check=False)
        time.sleep(1.0)


def setup(state: Path) -> None:
    os.environ["TMUX_TMPDIR"] = str(state)
    os.environ["XDG_STATE_HOME"] = str(state)
    if not shutil.which("nvidia-smi"):
        (state / "gpus.json").write_text(json.dumps(GPUS))
        (state / "gputui.toml").write_text('[gpu]\nsource = "host"\n')
        os.environ["GPUTUI_BENCH_CONFIG"] = str(state / "gputui.toml")
        os.environ["GPUTUI_STANDIN_STATE"] = str(state)
        os.environ["PATH"] = f"{ROOT / 'tests' / 'standins'}:{os.environ['PATH']}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=40.0, help="each window (default 40)")
    ap.add_argument("--runs", type=int, default=3, help="windows per source tree (default 3)")
    ap.add_argument("--src", action="append", help="a source tree (default: src/)")
    ap.add_argument(
        "--rate",
        type=float,
        help="the run streams this many lines a second, each written at once "
        "(default: block-buffered, the baseline)",
    )
    args = ap.parse_args()
    srcs = [Path(s).resolve() for s in args.src or [str(ROOT / "src")]]
    for s in srcs:
        if not (s / "gputui").is_dir():
            print(f"--src {s}: no gputui/ in it; name a tree holding gputui/ (e.g. src/)")
            return 2
    state = Path(tempfile.mkdtemp(prefix="gputui-base-"))
    saved = dict(os.environ)
    setup(state)
    figures: dict[Path, list[dict[str, float]]] = {s: [] for s in srcs}
    try:
        log = state / "train.log"
        writer = writer_cmd(args.rate) if args.rate else writer_cmd(40, buffered=True)
        tmux("new", "-d", "-s", "train0", f"{writer} 2>&1 | tee {shlex.quote(str(log))}")
        time.sleep(2.0)
        for i in range(args.runs):
            for s in srcs:
                figures[s].append(window(s, log, args.seconds))
                print(f"run {i + 1} {s}: {figures[s][-1]}", flush=True)
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)
    print(report(srcs, figures))
    return 0


def report(srcs: list[Path], figures: dict[Path, list[dict[str, float]]]) -> str:
    """Medians by part, % of a core, and each tree against the first."""
    keys = ["thread", "main", "agent", "main+agent", "rest"]
    rows = [
        [
            "tree",
            *[f"{k} %" for k in keys],
            "thread vs first",
            "main vs first",
            "main+agent vs first",
        ]
    ]
    first = {k: statistics.median(f[k] for f in figures[srcs[0]]) for k in keys}
    for s in srcs:
        med = {k: statistics.median(f[k] for f in figures[s]) for k in keys}
        rows.append(
            [
                str(s),
                *[f"{med[k]:.3f}" for k in keys],
                f"{med['thread'] / first['thread']:.2f}×",
                f"{med['main'] / first['main']:.2f}×",
                f"{med['main+agent'] / first['main+agent']:.2f}×",
            ]
        )
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows)


if __name__ == "__main__":
    sys.exit(main())
