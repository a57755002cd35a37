"""CPU of gputui watching a run that logs like a real trainer, against anchors
measured in the same run: `python bench/stream_cost.py [--seconds 30]`.

One stand-in run (bench/hf_writer.py: one HF-Trainer dict line a step, behind
`| tee`) per scenario: 20 lines/s, 40 lines/s, and block-buffered (8 KiB
chunks). Each tool follows the same log file in its own tmux pane (a real
terminal, 120×36 by default), all at once, and its whole process tree's CPU
is summed from /proc over one window (bench/gpu/cpu_cost.py's counting):

- gputui: `gputui --local --session train0 --log FILE --interval 1`
  (stand-in `nvidia-smi` with 8 GPUs where there is no real one);
- toolong: Textual's log viewer (`tl FILE`), the same-framework anchor, when
  found (--toolong, $TOOLONG, or `tl` on the PATH; it pins Textual 0.58,
  so it lives in its own venv);
- floor: bench/textual_floor.py, a bare Textual `Log` following the file at
  4 Hz: what Textual itself costs to show the stream;
- tail: `tail -F FILE`, the terminal's floor.

nvitop needs a real GPU: that comparison is bench/gpu/stream_cost.sh's.
Prints a table and, with --json, the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "gpu"))

from cpu_cost import cpu_seconds, parts, parts_delta, tree  # type: ignore[import-not-found]  # noqa: E402

SCENARIOS = [("20 lines/s", 20.0, False), ("40 lines/s", 40.0, False), ("buffered", 40.0, True)]
# the field scene (issue 37): the watched run at 20 lines/s, a second run
# logging beside it (and, on a GPU machine, sharing GPU 0: $FIELD_GPU_CMD),
# a `nvidia-smi` loop in a session of its own, as users have them
FIELD = "two runs 20 lines/s"
SCENARIOS.append((FIELD, 20.0, False))
LATENCY_S = float(os.environ.get("LATENCY_SECONDS", "12"))  # line → screen read-off window
STAMP = re.compile(r"'t': (\d{10}\.\d{1,3})")
PYSPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
# samples a second: py-spy records only busy samples, so at 100 a window of a
# process at 4 % of a core held ~150 samples, too few to rank its functions
PROFILE_RATE = int(os.environ.get("PROFILE_RATE", "250"))
CLI = "import sys; from gputui.cli.main import main; sys.exit(main())"
GPUS = {
    "gpus": [
        {
            "index": i,
            "memory.used": 60000 + 1000 * i,
            "utilization.gpu": 90 + i,
            "power.draw": 600.0,
        }
        for i in range(8)
    ]
}


def tmux(*args: str, check: bool = True) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=check).stdout


def pane(name: str, cmd: str, size: tuple[int, int]) -> int:
    tmux("new", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), cmd)
    return int(tmux("display", "-p", "-t", name, "#{pane_pid}").strip())


EXTRA: dict[str, str] = {}  # name -> command (--extra): nvitop on a GPU machine


def tools(log: Path, toolong: str | None) -> dict[str, str]:
    py = shlex.quote(sys.executable)
    q = shlex.quote(str(log))
    cfg = os.environ.get("GPUTUI_BENCH_CONFIG")
    conf = f" --config {shlex.quote(cfg)}" if cfg else ""
    out = {
        "gputui": f"{py} -c {shlex.quote(CLI)} --local --session train0 --log {q} --interval 1{conf}",
        "floor": f"{py} {shlex.quote(str(HERE / 'textual_floor.py'))} {q}",
        "tail": f"tail -F {q}",
    }
    if toolong:
        out["toolong"] = f"{toolong} {q}"
    return {**out, **EXTRA}


def writer_cmd(rate: float, buffered: bool = False) -> str:
    """The stand-in trainer's command line (bench/hf_writer.py), without the
    caller's PYTHONUNBUFFERED: from this shell it would make the "buffered"
    run line-buffered (bench/gpu/stream_cost.sh unsets it too)."""
    return (
        f"env -u PYTHONUNBUFFERED {shlex.quote(sys.executable)} "
        f"{shlex.quote(str(HERE / 'hf_writer.py'))} {rate:g}" + (" --buffered" if buffered else "")
    )


def field_sessions(d: str) -> list[str]:
    """The field scene's other sessions: a second run logging at 5 lines/s,
    a `nvidia-smi` every second, and $FIELD_GPU_CMD (a second GPU process)."""
    writer = writer_cmd(5)
    eval_log = shlex.quote(str(Path(d) / "eval.log"))
    cmds = {
        "eval": f"{writer} 2>&1 | tee {eval_log}",
        "smi": "while :; do nvidia-smi; sleep 1; done",
    }
    if os.environ.get("FIELD_GPU_CMD"):
        cmds["eval-gpu"] = os.environ["FIELD_GPU_CMD"]
    for name, cmd in cmds.items():
        tmux("new", "-d", "-s", name, "-x", "120", "-y", "36", cmd)
    return list(cmds)


def line_to_screen(session: str, seconds: float, every: float = 0.02) -> dict[str, Any]:
    """Each stamped line's delay from its writing to the first capture of
    the pane that shows it (`tmux capture-pane` every `every` s: the delay
    is over by up to that much, ~every/2 on average)."""
    seen: dict[str, float] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        screen = tmux("capture-pane", "-p", "-t", session, check=False)
        now = time.time()
        for stamp in STAMP.findall(screen):
            seen.setdefault(stamp, now)
        time.sleep(every)
    first = min(seen.values(), default=0.0)
    lat = sorted(at - float(st) for st, at in seen.items() if at > first)  # not those already there
    pick = lambda q: round(1000 * lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else None  # noqa: E731
    return {"n": len(lat), "p50_ms": pick(0.5), "p95_ms": pick(0.95), "max_ms": pick(1.0)}


def scenario(
    rate: float,
    buffered: bool,
    toolong: str | None,
    seconds: float,
    size: tuple[int, int],
    profile: str | None = None,
    field: bool = False,
    windows: int = 1,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gputui-stream-") as d:
        log = Path(d) / "train.log"
        writer = writer_cmd(rate, buffered)
        tmux(
            "new",
            "-d",
            "-s",
            "train0",
            "-x",
            "200",
            "-y",
            "50",
            f"{writer} 2>&1 | tee {shlex.quote(str(log))}",
        )
        others = field_sessions(d) if field else []
        time.sleep(2.0)
        panes = {n: pane(f"cpu-{n}", c, size) for n, c in tools(log, toolong).items()}
        time.sleep(8.0)  # start-up and the first screen are not the steady cost
        start = {n: cpu_seconds(tree(p)) for n, p in panes.items()}
        parts0 = parts(tree(panes["gputui"]))
        t0 = time.monotonic()
        spy = None
        if profile:  # py-spy on gputui's python (the pane's shell execs it)
            spy = subprocess.Popen(
                [
                    PYSPY,
                    "record",
                    "--subprocesses",
                    "--pid",
                    str(panes["gputui"]),
                    "--duration",
                    str(int(seconds)),
                    "--rate",
                    str(PROFILE_RATE),
                    "--format",
                    "raw",
                    "--nonblocking",
                    "-o",
                    f"{profile}-{rate:g}{'-buffered' if buffered else ''}.txt",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        time.sleep(seconds)
        if spy is not None:
            spy.wait(timeout=30)
        wall = time.monotonic() - t0
        res: dict[str, Any] = {}
        # every tool's CPU over the window itself: the read-off below runs 10 s
        # more (run 25 and before divided those 40 s of CPU by the 30 s window)
        for n, p in panes.items():
            res[n] = round(100 * (cpu_seconds(tree(p)) - start[n]) / wall, 2)
        # where gputui's CPU went: user+sys of each process and thread
        res["gputui_parts"] = parts_delta(parts0, parts(tree(panes["gputui"])), wall)
        if windows > 1:  # more windows of the same scene: the median of each tool
            res["windows"] = more_windows(panes, seconds, windows - 1, res)
            for n in panes:
                res[n] = statistics.median(res["windows"][n])
        if not buffered and LATENCY_S > 0:  # after the CPU window: the polling costs CPU
            res["line_to_screen"] = {
                n: line_to_screen(f"cpu-{n}", LATENCY_S) for n in ("gputui", "tail") if n in panes
            }
        for n in panes:
            res[f"{n}_screen"] = tmux("capture-pane", "-p", "-t", f"cpu-{n}").splitlines()
            tmux("kill-session", "-t", f"cpu-{n}", check=False)
        res["lines"] = sum(1 for _ in log.open(errors="replace"))
        for name in ["train0", *others]:
            tmux("kill-session", "-t", name, check=False)
        return res


def more_windows(
    panes: dict[str, int], seconds: float, n: int, first: dict[str, Any]
) -> dict[str, list[float]]:
    """`n` more CPU windows of every tool at once, after the first (whose
    figures `first` holds): {tool: [% of a core, one per window]}. Every
    tool shares each window's load, so the ratio of two tools moves less
    than either figure (this machine swings by ±0.3 % of a core)."""
    out = {name: [first[name]] for name in panes}
    for _ in range(n):
        start = {name: cpu_seconds(tree(p)) for name, p in panes.items()}
        t0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        for name, p in panes.items():
            out[name].append(round(100 * (cpu_seconds(tree(p)) - start[name]) / wall, 2))
    return out


def find_toolong(arg: str | None) -> str | None:
    for c in (arg, os.environ.get("TOOLONG"), shutil.which("tl")):
        if c and shutil.which(c.split()[0]):
            return c
    return None


# gputui / nvitop at most (issue 37)
TARGETS = {"20 lines/s": 1.5, "40 lines/s": 1.5, "buffered": 1.2, FIELD: 1.5}


def table(results: dict[str, dict[str, Any]]) -> str:
    first = next(iter(results.values()))
    order = ["gputui", *EXTRA, "toolong", "floor", "tail"]
    names = [n for n in order if n in first]
    head = ["log", *[f"{n} %" for n in names], *[f"gputui/{n}" for n in names[1:]]]
    rows = [head]
    for label, r in results.items():
        g = r["gputui"]
        ratios = [f"{g / r[n]:.2f}×" if r[n] > 0 else "-" for n in names[1:]]
        rows.append([label, *[f"{r[n]:.2f}" for n in names], *ratios])
    w = [max(len(row[i]) for row in rows) for i in range(len(head))]
    out = ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)) for row in rows]
    if "20 lines/s" in results and "40 lines/s" in results:
        a, b = results["20 lines/s"]["gputui"], results["40 lines/s"]["gputui"]
        out.append(f"gputui at 40 vs 20 lines/s: {b / a:.2f}× (flat: the log is drawn at 2–4 Hz)")
    for label, r in results.items():
        for n, lat in r.get("line_to_screen", {}).items():
            out.append(
                f"{label}: {n} line → screen p50 {lat['p50_ms']} ms, p95 {lat['p95_ms']} ms "
                f"(n={lat['n']}, read off the pane every 20 ms)"
            )
    if "nvitop" in first:
        for label, r in results.items():
            ratio = r["gputui"] / r["nvitop"] if r["nvitop"] > 0 else float("inf")
            ok = "met" if ratio <= TARGETS[label] else "MISSED"
            each = ""
            if "windows" in r:  # window by window: the medians' ratio above
                pairs = zip(r["windows"]["gputui"], r["windows"]["nvitop"], strict=True)
                each = " (windows: " + ", ".join(f"{g / v:.2f}×" for g, v in pairs if v > 0) + ")"
            out.append(
                f"{label}: gputui {ratio:.2f}× nvitop (target ≤ {TARGETS[label]:g}×): {ok}{each}"
            )
    return "\n".join(out)


def measure(
    seconds: float,
    toolong: str | None,
    size: tuple[int, int] = (120, 36),
    profile: str | None = None,
    only: list[str] | None = None,
    windows: int = 1,
) -> dict[str, dict[str, Any]]:
    """Every scenario (or those `only` names, in its order), each tool beside
    the others; {scenario: {tool: % of a core}}."""
    state = Path(tempfile.mkdtemp(prefix="gputui-stream-state-"))
    saved = dict(os.environ)
    os.environ["TMUX_TMPDIR"] = str(state)  # a tmux server of its own
    if not shutil.which("nvidia-smi"):  # 8 stand-in H200s
        (state / "gpus.json").write_text(json.dumps(GPUS))
        (state / "gputui.toml").write_text('[gpu]\nsource = "host"\n')  # nvidia-smi, not NVML
        os.environ["GPUTUI_BENCH_CONFIG"] = str(state / "gputui.toml")
        os.environ["GPUTUI_STANDIN_STATE"] = str(state)
        os.environ["PATH"] = f"{ROOT / 'tests' / 'standins'}:{os.environ['PATH']}"
    os.environ["PYTHONPATH"] = f"{ROOT / 'src'}:{os.environ.get('PYTHONPATH', '')}"
    os.environ["XDG_STATE_HOME"] = str(state)  # its history, not the user's
    results: dict[str, dict[str, Any]] = {}
    try:
        by_label = {label: (rate, buffered) for label, rate, buffered in SCENARIOS}
        for label in only or list(by_label):
            rate, buffered = by_label[label]
            field = label == FIELD
            prof = f"{profile}-field" if profile and field else profile
            results[label] = scenario(rate, buffered, toolong, seconds, size, prof, field, windows)
            shown = {
                k: v for k, v in results[label].items() if "screen" not in k and k != "gputui_parts"
            }
            print(label, shown, flush=True)
            for part, pct in results[label].get("gputui_parts", {}).items():
                print(f"    {part}: {pct}", flush=True)
    finally:
        subprocess.run(["tmux", "kill-server"], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
        os.environ.clear()
        os.environ.update(saved)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0, help="each window (default 30)")
    ap.add_argument("--toolong", help="toolong's command (default: $TOOLONG or `tl` on the PATH)")
    ap.add_argument("--size", default="120x36", help="each pane's columns x rows (default 120x36)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument(
        "--windows",
        type=int,
        default=1,
        help="CPU windows per scene, one after the other (default 1): each tool's median",
    )
    ap.add_argument("--profile", help="py-spy gputui over each window: PREFIX-RATE.txt (collapsed)")
    ap.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME=CMD",
        help="another tool in a pane of its own (bench/gpu: nvitop=python3 -m nvitop --interval 1)",
    )
    ap.add_argument(
        "--only",
        help="these scenarios only, in this order, comma-separated (e.g. 'buffered,20 lines/s')",
    )
    args = ap.parse_args()
    only = [x.strip() for x in args.only.split(",")] if args.only else None
    unknown = [x for x in only or [] if x not in {label for label, _, _ in SCENARIOS}]
    if unknown:
        ap.error(f"no scenario {unknown[0]!r}: choose from {', '.join(s[0] for s in SCENARIOS)}")
    for spec in args.extra:
        name, _, cmd = spec.partition("=")
        EXTRA[name] = cmd
    cols, rows = (int(x) for x in args.size.split("x"))
    toolong = find_toolong(args.toolong)
    results = measure(args.seconds, toolong, (cols, rows), args.profile, only, args.windows)
    print(table(results))
    if not toolong:
        print("toolong not found: pip install toolong in a venv of its own, pass --toolong PATH/tl")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
