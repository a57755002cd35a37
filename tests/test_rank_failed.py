"""The rank that failed first, from torchrun's summary (`rank_failed`): a
torchrun job's last error line is torchrun's own, an empty
`ChildFailedError:`, and the session's death said only that. Now the rank,
how it ended (exit code, or the signal and what it usually means), its host
and its own error (its `[rankN]:` traceback, or the last traceback before
torchrun's) are named — and the session's death no longer quotes the empty
wrapper. End to end: a stand-in torchrun (real rank processes, one killed
by a real SIGKILL or failing with a tagged traceback, torchrun's summary
field for field) in a tmux session of a CT, `gputui doctor`. Each fails on
the old code (no such kind; the wrapper quoted)."""

from __future__ import annotations

from typing import Any

import pytest

import scenarios as sc
from gputui.diagnose import KINDS, diagnose
from gputui.diagnose.evidence import last_error_line
from gputui.diagnose.torchrun import rank_error, root_cause
from gputui.model import Finding, Severity, Snapshot
from helpers import wait_for
from test_diagnose import NOW, run

TORCHRUN_TB = [
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    "    sys.exit(main())",
    "    raise ChildFailedError(",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
]


def summary(
    rank: int, exitcode: int, pid: int, traceback: str, local: int | None = None
) -> list[str]:
    local = rank if local is None else local
    return [
        *TORCHRUN_TB,
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Failures:",
        "[1]:",
        "  time      : 2024-04-12_14:58:30",
        "  host      : gpu-node-3",
        "  rank      : 3 (local_rank: 3)",
        "  exitcode  : 1 (pid: 386091)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "-" * 60,
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-04-12_14:58:30",
        "  host      : gpu-node-3",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : {exitcode} (pid: {pid})",
        "  error_file: <N/A>",
        f"  traceback : {traceback}",
        "=" * 60,
    ]


ELASTIC_DOCS = "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"


def _rank_failed(snap: Snapshot) -> Finding | None:
    return next((f for f in diagnose(snap, NOW) if f.kind == "rank_failed"), None)


def test_the_root_cause_block_is_read_not_the_other_failures() -> None:
    rc = root_cause(summary(2, 1, 386090, ELASTIC_DOCS, local=0))
    assert rc is not None and (rc.rank, rc.local_rank, rc.exitcode, rc.pid) == (2, 0, 1, 386090)
    assert rc.host == "gpu-node-3" and rc.signal is None
    rc = root_cause(summary(4, -9, 208585, "Signal 9 (SIGKILL) received by PID 208585"))
    assert rc is not None and (rc.signal, rc.signal_name, rc.exitcode) == (9, "SIGKILL", -9)
    assert root_cause(TORCHRUN_TB) is None


def test_a_killed_rank_is_named_with_the_signal_and_the_oom_killer_as_the_likely_cause() -> None:
    tail = (
        "[rank4]: step 99 | loss 2.0",
        *summary(4, -9, 208585, "Signal 9 (SIGKILL) received by PID 208585"),
    )
    snap = run(session="dead", dead_status=1, log_tail=tail)
    first = next(f for f in diagnose(snap, NOW) if f.severity != Severity.INFO)
    assert first.kind == "rank_failed" and first.severity == Severity.ERROR, first
    assert first.title == "rank 4 failed first (killed by SIGKILL: OOM killer?)"
    assert "rank 4 on gpu-node-3, PID 208585, exit code -9, SIGKILL" in first.evidence[0]
    assert "OOM killer" in first.fix
    assert KINDS["rank_failed"].alerts and KINDS["rank_failed"].host_word == "dead"


def test_a_ranks_tagged_traceback_is_its_error() -> None:
    tail = (
        "[rank6]: Traceback (most recent call last):",
        '[rank6]:   File "train.py", line 9, in <module>',
        "[rank6]: RuntimeError: CUDA error: misaligned address",
        "[rank2]: RuntimeError: something else on another rank",
        "[rank6]: For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        *summary(6, -6, 1246013, "Signal 6 (SIGABRT) received by PID 1246013"),
    )
    f = _rank_failed(run(session="dead", dead_status=1, log_tail=tail))
    assert f is not None, "no rank_failed"
    assert f.title.startswith("rank 6 failed first (killed by SIGABRT")
    assert f.title.endswith(": RuntimeError: CUDA error: misaligned address"), f.title
    assert "CUDA_LAUNCH_BLOCKING=1" in f.fix


def test_an_untagged_error_before_torchruns_traceback_is_the_ranks() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "ModuleNotFoundError: No module named 'flash_attn'",
        *summary(0, 1, 23273, ELASTIC_DOCS),
    ]
    assert rank_error(lines, 0) == "ModuleNotFoundError: No module named 'flash_attn'"
    f = _rank_failed(run(session="dead", dead_status=1, log_tail=tuple(lines)))
    assert f is not None and f.title == (
        "rank 0 failed first (exit 1): ModuleNotFoundError: No module named 'flash_attn'"
    )
    assert "torchrun stopped the other ranks" in f.fix
    assert rank_error(summary(0, 1, 23273, ELASTIC_DOCS), 0) is None  # nothing but torchrun's


def test_the_sessions_death_no_longer_quotes_torchruns_empty_wrapper() -> None:
    lines = [
        "Traceback (most recent call last):",
        "ModuleNotFoundError: No module named 'flash_attn'",
        *summary(0, 1, 23273, ELASTIC_DOCS),
    ]
    assert last_error_line(lines) == "ModuleNotFoundError: No module named 'flash_attn'"
    assert last_error_line(summary(0, 1, 23273, ELASTIC_DOCS)) is None
    dead = next(
        f
        for f in diagnose(run(session="dead", dead_status=1, log_tail=tuple(lines)), NOW)
        if f.kind == "session_dead"
    )
    assert "ChildFailedError" not in dead.title and "flash_attn" in dead.title


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("kill", "failed first (killed by SIGKILL: OOM killer?)"),
        ("raise", "(exit 1): RuntimeError: CUDA error: an illegal memory access"),
    ],
)
def test_doctor_names_the_failed_rank_of_a_real_launch(
    testbed: Any, ct: int, how: str, words: str
) -> None:
    """Two real rank processes under a stand-in torchrun in a CT session;
    rank 1 dies (a real SIGKILL, or a tagged CUDA error traceback); doctor
    names it with its real PID — first, or right after cuda_error, which
    says what the rank's error means."""
    r = sc.prepare(testbed, ct, f"ranks-{how}", "ddp")
    sc.launch(
        testbed, r, f"python3 -u launch_ranks.py 2 1 {how} 2>&1 | tee {r.log}", remain_on_exit=True
    )
    wait_for(
        lambda: r.log.exists() and "=" * 60 + "\n" in r.log.read_text()[-100:], 30, "the summary"
    )
    pid = (
        next(ln for ln in r.log.read_text().splitlines() if "exitcode" in ln)
        .split("pid: ")[1]
        .rstrip(")")
    )
    flags = ("--json", "--session", "ddp", "--log", str(r.log))
    doc = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags), timeout=60)
    f = doc.finding("rank_failed")
    # first: the rank's failure, or — its error being a CUDA error — what that error means
    first = "cuda_error" if how == "raise" else "rank_failed"
    assert doc.kinds()[0] == first and f["severity"] == "error", doc.kinds()
    assert f["title"].startswith("rank 1 failed first") and words in f["title"], f["title"]
    assert f"PID {pid}" in f["evidence"][0]
