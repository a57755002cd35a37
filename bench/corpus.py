"""The corpus of real training logs, replayed: does gputui name each failure
with its own word, and stay quiet on the healthy runs?

    .venv/bin/python bench/corpus.py                      # every case, ~2 min
    .venv/bin/python bench/corpus.py --only apex-loss-scale-collapse
    .venv/bin/python bench/corpus.py --src /tmp/old/src --label before
    .venv/bin/python bench/corpus.py --write              # also bench/RESULTS.md

Each case of tests/corpus/ (a log excerpt from a public issue thread, the
word it should get or "healthy", how its process ends: tests/corpus_cases.py)
is replayed as a real process — `python3 -u corpus_replay.py … 2>&1 | tee
train.log` typed into a real tmux session's shell on this machine — and
`gputui doctor --local --session S --log train.log --json` is asked twice:
while the process is alive with every line written ("during"), and once it
ended as the thread's run did (exit N, its own SIGKILL, a prompt it waits at;
"after"). Scored per case: right / wrong word / missed (nothing, or only "the
run exited" with its last line) / false alarm (a WARNING or ERROR on a
healthy run, during or after). Findings about this machine (no GPU or NVIDIA
driver here, py-spy missing) are left out. `--src` runs another checkout's
code (the numbers before a change: `git archive REV src | tar -x -C DIR`).
--stale-after 600: the replay writes its lines within a second and then
waits, which no stall rule should read as a hang here.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import corpus_cases as cc  # noqa: E402
from results_md import write_block  # noqa: E402

REPLAY = ROOT / "bench" / "corpus_replay.py"
RESULTS_DIR = ROOT / "bench" / "results"
HOLD_S = 30.0  # the replay waits at most this long for the "during" ask
DOCTOR_TIMEOUT_S = 60.0


class Bed:
    """A tmux server of its own (TMUX_TMPDIR) in a temporary directory."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="gputui-corpus-"))
        self.env = {
            **os.environ,
            "TMUX_TMPDIR": str(self.dir),
            "PS1": "$ ",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
        }
        self.env.pop("TMUX", None)
        # a session that stays: a server whose last session ends exits, and a
        # case's new-session racing that exit failed now and then (xdist load)
        self.tmux("new-session", "-d", "-s", "keep", "-x", "80", "-y", "20", "sleep 86400")

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", *args], env=self.env, capture_output=True, text=True, timeout=10
        )

    def stop(self) -> None:
        self.tmux("kill-server")
        shutil.rmtree(self.dir, ignore_errors=True)


def doctor(bed: Bed, src: Path, session: str, log: Path) -> list[tuple[str, str, str]]:
    env = {**bed.env, "PYTHONPATH": str(src)}
    argv = [sys.executable, "-m", "gputui", "doctor", "--local", "--session", session]
    argv += ["--log", str(log), "--json", "--stale-after", "600"]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=DOCTOR_TIMEOUT_S)
    try:
        data = json.loads(p.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(
            f"doctor said no JSON (exit {p.returncode}): {p.stderr[-400:]}"
        ) from None
    return [(f["kind"], f["severity"], f["title"]) for f in data.get("findings", [])]


def _wait(pred: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def _python_gone(bed: Bed, session: str) -> bool:
    """The pane's shell has no child left but itself (the pipeline ended)."""
    out = bed.tmux("list-panes", "-t", session, "-F", "#{pane_pid}").stdout.split()
    if not out:
        return True
    kids = subprocess.run(["pgrep", "-P", out[0]], capture_output=True, text=True).stdout
    return not kids.strip()


def replay(bed: Bed, src: Path, case: cc.Case, n: int) -> dict[str, Any]:
    """One case: its process in a tmux session, the doctor during and after."""
    work = bed.dir / case.name
    work.mkdir()
    text = work / "text"
    text.write_bytes(case.text)
    log = work / "train.log"
    session = f"c{n}"
    made = bed.tmux(
        "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "bash --norc --noprofile"
    )
    if made.returncode != 0:
        raise RuntimeError(f"{case.name}: tmux new-session failed: {made.stderr.strip()}")
    # the shell at its prompt before it is typed to (keys sent into a shell
    # still starting may reach it before its line editor does)
    _wait(lambda: bed.tmux("capture-pane", "-p", "-t", session).stdout.strip() != "", 30)
    cmd = (
        f"cd {shlex.quote(str(work))} && python3 -u {shlex.quote(str(REPLAY))} text "
        f"{shlex.quote(case.end)} {HOLD_S} 2>&1 | tee {shlex.quote(str(log))}"
    )
    bed.tmux("send-keys", "-t", session, cmd, "Enter")
    if not _wait(lambda: (work / "text.done").exists(), 60):
        pane = bed.tmux("capture-pane", "-p", "-t", session).stdout.strip()[-600:]
        raise RuntimeError(f"{case.name}: the replay did not write its lines; the pane: {pane!r}")
    time.sleep(0.3)  # tee's last write
    during = cc.said(doctor(bed, src, session, log))
    (work / "text.go").touch()
    if case.end not in ("alive", "prompt"):
        _wait(lambda: _python_gone(bed, session), 15)
        time.sleep(0.3)
    after = cc.said(doctor(bed, src, session, log))
    bed.tmux("kill-session", "-t", session)
    verdict, word = cc.verdict(case, during, after)
    return {
        "case": case.name,
        "expect": case.expect,
        "verdict": verdict,
        "word": word,
        "during": during.findings,
        "after": after.findings,
        "source": case.source,
    }


def report(results: list[dict[str, Any]], label: str) -> str:
    by = {c.name: c for c in cc.cases()}
    s = cc.summary([(by[r["case"]], r["verdict"], r["word"]) for r in results])
    lines = [
        f"{label}: {s['right']}/{s['failures']} failures named with their own word "
        f"(recall {100 * s['recall']:.0f} %), {s['wrong']} wrong word, {s['missed']} missed; "
        f"{s['false_alarms']} false alarm(s) on {s['healthy']} healthy runs"
    ]
    for r in sorted(
        results, key=lambda r: (r["verdict"] == cc.RIGHT or r["verdict"] == cc.QUIET, r["case"])
    ):
        lines.append(
            f"  {r['verdict']:<11} {r['case']:<42} expect {r['expect']:<20} {r['word'][:110]}"
        )
    return "\n".join(lines)


def markdown(runs: dict[str, list[dict[str, Any]]]) -> str:
    """The RESULTS.md block: each labelled run's figures, then the cases of the last."""
    by = {c.name: c for c in cc.cases()}
    out = [
        "<!-- corpus:start -->",
        "## Corpus of real logs (bench/corpus.py, issue 47)",
        "",
        f"{len(by)} excerpts of real training logs from public issue threads (tests/corpus/, "
        "each with its source), each replayed as a real process behind `| tee` in a tmux "
        "session on this machine and asked with `gputui doctor --local --json` while it runs "
        "and after it ended. Recall: failures named with their own word; a false alarm: a "
        "WARNING or ERROR on a healthy run. Findings about the machine (no GPU here) left out. "
        "`before`: main's code at 14bf510, before issue 47's words (`--src` of a `git archive` "
        "of it), scored against the same corpus on the same machine; `after`: this checkout. "
        "The in-suite version (tests/test_corpus.py) diagnoses the same texts purely and "
        "agrees case for case.",
        "",
        "| run | failures named | recall | wrong word | missed | false alarms |",
        "|---|---|---|---|---|---|",
    ]
    for label, results in runs.items():
        s = cc.summary(
            [(by[r["case"]], r["verdict"], r["word"]) for r in results if r["case"] in by]
        )
        out.append(
            f"| {label} | {s['right']}/{s['failures']} | {100 * s['recall']:.0f} % | "
            f"{s['wrong']} | {s['missed']} | {s['false_alarms']}/{s['healthy']} |"
        )
    last = list(runs.values())[-1]
    out += ["", "Cases not right or quiet in the last run:", ""]
    bad = [r for r in last if r["verdict"] not in (cc.RIGHT, cc.QUIET)]
    for r in bad:
        why = by[r["case"]].known_miss if r["case"] in by else ""
        out.append(
            f"- {r['case']} ({r['verdict']}, expect {r['expect']}): "
            + (
                r["word"][:140]
                or f"no word (only the finished note) — {why or 'no word for it yet'}"
            )
        )
    if not bad:
        out.append("- none")
    out.append("<!-- corpus:end -->")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="case names, comma-separated")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the gputui source to run")
    ap.add_argument("--label", default="after", help="this run's name in the results")
    ap.add_argument("--parallel", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="write bench/RESULTS.md's block")
    args = ap.parse_args()
    chosen = cc.cases([n for n in args.only.split(",") if n])
    bed = Bed()
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(args.parallel) as pool:
            futs = [pool.submit(replay, bed, Path(args.src), c, i) for i, c in enumerate(chosen)]
            results = [f.result() for f in futs]
    finally:
        bed.stop()
    print(report(results, args.label))
    print(f"({len(chosen)} cases in {time.monotonic() - t0:.0f} s)")
    RESULTS_DIR.mkdir(exist_ok=True)
    if not args.only:
        (RESULTS_DIR / f"corpus-{args.label}.json").write_text(json.dumps(results, indent=1))
    if args.write:
        runs = {}
        for label in ("before", "after"):
            p = RESULTS_DIR / f"corpus-{label}.json"
            if p.exists():
                runs[label] = json.loads(p.read_text())
        write_block(markdown(runs), "<!-- corpus:start -->", "<!-- corpus:end -->")


if __name__ == "__main__":
    main()
