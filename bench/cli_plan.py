"""`gputui kill|relaunch|dump|flush` on the SSH test bed: the time from the
command's start to its plan printed (issue 46's leftover: the CLI verbs
planned by 4–6 `pct exec`s in a row; now in one request to gputui's agent,
started in the CT for it — actions/facts.py, agent_for_plan).

The real sshd, the stand-in `pct` with its start-up delay set per round
(`--pct-delay`, 0.3 s like Perl's on a real host; more for a busy one),
real tmux, a block-buffered python3 run through `| tee` in the CT. Each
command is a fresh `python -m gputui VERB --host gpuhost --ct N --session
bench` with no terminal on stdin, so it prints the plan, then "not run: no
terminal to confirm on" and exits 1 — nothing is ever acted on. Its stdout
is read unbuffered: the plan printed is stamped when that line arrives,
the command's end when it exits. `--old REV` runs REV's src/ (taken out
with `git archive`) beside this checkout's, interleaved verb by verb, so
both see the same load; `--runs` times each. `--without-python`: the CT's
python3 taken away once the run is up (as a minimal template lacks it), so
the new code's agent cannot start and its plans come by the commands (no
flush: its plan checks the run's Python, which went with python3).

    python bench/cli_plan.py --old main --runs 7 --pct-delay 0.3,1.0
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

VERBS = ("kill", "relaunch", "dump", "flush")
NOT_RUN = "not run: no terminal to confirm on"


def old_src(rev: str) -> Path:
    """REV's src/ in a temporary directory (the repository is only read)."""
    where = Path(tempfile.mkdtemp(prefix="gputui-cliplan-old-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True
    ).stdout
    tar = where / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(where, filter="data")
    return where / "src"


def one(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(ms to the plan printed, ms to the exit, what it printed)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd="/",
    )
    assert proc.stdout is not None
    printed, seen = float("inf"), []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(NOT_RUN) and printed == float("inf"):
            printed = time.perf_counter()
    proc.wait(timeout=120)
    ended = time.perf_counter()
    return (printed - t0) * 1000, (ended - t0) * 1000, "".join(seen)


def rounds(
    srcs: dict[str, Path], runs: int, delays: list[float], no_python: bool = False
) -> dict[str, list[float]]:
    from scenarios import config_file, doctor_env, without_commands
    from testbed import Testbed
    from ui_scenarios import prepare_run, start_buffered

    bed = Testbed().start()
    ct = 200
    out: dict[str, list[float]] = {}
    try:
        bed.ct_create(ct, running=True)
        run = prepare_run(bed, ct, "bench")
        start_buffered(bed, run, count=100000, period=0.2)
        if no_python:
            time.sleep(2.0)  # the run's python3 started
            without_commands(bed, ct, "python3*")
        spy = Path(bed.root) / "tools" / "py-spy"  # root's alone, where the CT sees it
        spy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(shutil.which("py-spy", path=os.path.dirname(sys.executable)) or "py-spy", spy)
        where = ["--host", "gpuhost", "--ct", str(ct), "--config", str(config_file(bed))]
        flags = {"dump": ["--py-spy", str(spy)]}
        # flush: gdb, and the run's Python checked root's — gone with python3
        no_flush = no_python or not shutil.which("gdb")
        verbs = [v for v in VERBS if v != "flush" or not no_flush]
        time.sleep(2.0)
        for delay in delays:
            bed.set_pct_delay(delay)
            for _ in range(runs):
                for verb in verbs:
                    for name, src in srcs.items():
                        env = doctor_env(bed)
                        env.update(PYTHONPATH=str(src), PYTHONUNBUFFERED="1")
                        argv = [sys.executable, "-m", "gputui", verb, *where, "--session", "bench"]
                        printed, ended, text = one([*argv, *flags.get(verb, [])], env)
                        if printed == float("inf"):
                            raise SystemExit(f"{name} {verb}: no plan printed:\n{text}")
                        key = f"{delay:g}|{verb}|{name}"
                        out.setdefault(key + "|plan", []).append(printed)
                        out.setdefault(key + "|exit", []).append(ended)
    finally:
        bed.stop()
    return out


def cell(ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"{statistics.median(ms):.0f} ms ({p90:.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--old", metavar="REV", help="also time REV's src/ (e.g. main)")
    ap.add_argument("--pct-delay", default="0.3", help="pct start-up delays, comma-separated")
    ap.add_argument("--without-python", action="store_true", help="no python3 in the CT")
    args = ap.parse_args()
    srcs = {"old": old_src(args.old)} if args.old else {}
    srcs["new"] = ROOT / "src"
    delays = [float(d) for d in args.pct_delay.split(",")]
    load0 = os.getloadavg()
    times = rounds(srcs, args.runs, delays, args.without_python)
    load1 = os.getloadavg()
    names = list(srcs)
    head = " | ".join(f"{n}: plan printed | {n}: exit" for n in names)
    print(f"| pct delay, verb | {head} |")
    print("| --- |" + " --- |" * (2 * len(names)))
    for key in dict.fromkeys(k.rsplit("|", 2)[0] for k in times):
        delay, verb = key.split("|")
        cells = " | ".join(
            f"{cell(times[f'{key}|{n}|plan'])} | {cell(times[f'{key}|{n}|exit'])}" for n in names
        )
        print(f"| {delay} s, {verb} | {cells} |")
    print(f"median (p90) of {args.runs}; load average before {load0[0]:.1f}, after {load1[0]:.1f}")


if __name__ == "__main__":
    main()
