"""The corpus of real training logs (tests/corpus/, issue 47): every
failure named with its own word, no false alarm on a healthy run.

Fast: each case's text diagnosed purely, as the monitor would hold it (the
log's complete lines read whole, its metrics parsed, the pane's last line
with the shell's prompt after the cut), while its process runs ("during")
and after it ended as the thread's run did. A few cases also replayed for
real: a process behind `| tee` in a tmux session, `gputui doctor --local
--json` asked (bench/corpus.py runs them all)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import corpus_cases as cc
from gputui.collect.metrics import MetricParser
from gputui.diagnose import KINDS, diagnose
from gputui.model import Metrics, Proc, Snapshot
from test_diagnose import NOW, run

READ_AT = NOW - 5.0  # the log read whole, 5 s ago: every line has this time


def _metrics(lines: list[str]) -> Metrics:
    parser, m = MetricParser(), Metrics()
    for ln in lines:
        p = parser.parse(ln, READ_AT)
        if p is not None:
            m.add(p)
    return m


def snapshot(case: cc.Case, phase: str) -> Snapshot:
    """The monitor's snapshot of the case: "during" (its process alive,
    every line written) or "after" (ended as `case.end` says)."""
    text = case.text.decode("utf-8", "replace")
    lines = case.lines
    partial = not text.endswith("\n")
    log_lines = lines[:-1] if partial else lines  # tee's file: the cut line is not a line yet
    ended = phase == "after" and case.end not in ("alive", "prompt")
    pane = list(lines)
    if ended:
        if partial:
            pane[-1] += "$ "
        else:
            pane.append("$ ")
    snap = run(
        gpus=0,
        proc=not ended,
        steps=False,
        silent=3.0 if phase == "during" else 30.0,
        log_tail=tuple(log_lines),
        pane_tail=tuple(pane[-60:]),
        start_command="bash",
    )
    snap.metrics = _metrics(log_lines)
    if ended:
        snap.procs = [Proc(pid=10, cmdline=["bash"], state="S")]
    elif phase == "after" and case.end == "prompt":
        for p in snap.procs:
            if p.is_python:
                p.reads_tty, p.state = "/dev/pts/3", "S"
    return snap


def said(snap: Snapshot) -> cc.Said:
    return cc.said((f.kind, f.severity.value, f.title) for f in diagnose(snap, NOW))


def judge(case: cc.Case) -> tuple[str, str]:
    return cc.verdict(case, said(snapshot(case, "during")), said(snapshot(case, "after")))


CASES = cc.cases()


def test_the_corpus_is_large_and_sourced() -> None:
    healthy = [c for c in CASES if c.healthy]
    assert len(CASES) >= 60 and len(healthy) >= 20, (len(CASES), len(healthy))
    for c in CASES:
        assert c.source.startswith("https://github.com/"), c.name
        assert c.healthy or c.expect in KINDS, (c.name, c.expect)
        assert c.end.split()[0] in ("exit", "kill", "prompt", "alive"), (c.name, c.end)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_case_gets_its_word(case: cc.Case) -> None:
    verdict, word = judge(case)
    ok = (cc.RIGHT, cc.QUIET) + ((cc.MISSED,) if case.known_miss else ())
    assert verdict in ok, f"{case.name}: {verdict} — {word} (expect {case.expect})"


def test_recall_and_false_alarms() -> None:
    s = cc.summary([(c, *judge(c)) for c in CASES])
    assert s["false_alarms"] == 0, s
    assert s["recall"] >= 0.9, s


# -- replayed for real: a process behind tee in tmux, gputui doctor --local


REPLAYED = (
    "killed-chatglm-shards-38pct",  # the kill: only the pane holds the cut bar
    "oom-then-press-any-key",  # a run stopped at its prompt is not one that goes on
    "jax-resource-exhausted-afprofile",
    "hf-trainer-finished-training-completed",  # exit 0: quiet, a note
)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux")
def test_replayed_cases_e2e() -> None:
    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    import corpus as bc  # bench/corpus.py

    bed = bc.Bed()
    try:
        src = Path(__file__).resolve().parent.parent / "src"
        out = [bc.replay(bed, src, c, i) for i, c in enumerate(cc.cases(REPLAYED))]
    finally:
        bed.stop()
    bad = [r for r in out if r["verdict"] not in (cc.RIGHT, cc.QUIET)]
    assert not bad, bad
    finished = next(r for r in out if r["case"] == "hf-trainer-finished-training-completed")
    assert any(k == "run_finished" for k, _, _ in finished["after"]), finished
