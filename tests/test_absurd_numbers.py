"""Numbers in remote text are read with bounds, by one helper
(text/numbers.py `bounded_int` / `bounded_float`), issue 44: one
5,000-digit number after torchrun's "Root Cause" header, in a port line or
in an exit-status line made int() raise inside a rule, and the banner went
dark. Every rule is run here, on its own (not through diagnose's
isolation), over log and pane lines that carry absurd numbers where each
rule reads one: huge, 64 KiB of digits, negative, NaN, inf, non-ASCII."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.collect.metrics import MetricParser
from gputui.diagnose import diagnose
from gputui.diagnose.context import Context
from gputui.diagnose.registry import ENTRIES
from gputui.diagnose.thresholds import DEFAULT_THRESHOLDS
from gputui.diagnose.torchrun import root_cause
from gputui.model import Finding, Pane, Session, Severity
from gputui.record.history import HistoryWriter
from gputui.record.recorder import RunRecorder
from gputui.text.numbers import bounded_float, bounded_int
from test_diagnose import NOW, run
from test_history import LogOnlyMonitor

ABSURD = (
    "9" * 5000,
    "1" * 65536,
    "-" + "9" * 5000,
    "-5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "٣٠",  # Arabic-Indic digits: \\d matches them, int() reads them
    "²",
    "0",
)

TEMPLATES = (
    # torchrun's summary
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2023-08-01_01:06:47",
    "  host      : node7",
    "  rank      : {n} (local_rank: {n})",
    "  exitcode  : {n} (pid: {n})",
    "  error_file: <N/A>",
    "  traceback : Signal {n} (SIGKILL) received by PID {n}",
    "[rank{n}]: RuntimeError: CUDA error: an illegal memory access was encountered",
    # ports
    "RuntimeError: The server socket has failed to listen on any local network address. "
    "port: {n}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
    "OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', {n}): "
    "address already in use",
    "[W socket.cpp:464] [c10d] failed to bind to 0.0.0.0:{n} (errno: 98 - Address already in use)",
    # the launch wrapper's exit line
    "[gputui] exit {n}",
    # NCCL's watchdog
    "[rank{n}]:[E ProcessGroupNCCL.cpp:563] [Rank {n}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={n}) "
    "ran for {n} milliseconds before timing out.",
    # CUDA OOM
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} GiB. GPU {n} has a "
    "total capacity of 79.10 GiB of which {n} GiB is free. Of the allocated memory {n} GiB is "
    "allocated by PyTorch, and {n} GiB is reserved by PyTorch but unallocated.",
    "RuntimeError: DataLoader worker (pid(s) {n}) is killed by signal: Killed.",
    # Megatron's straggler detector, twice; a rank's own speed
    " MnRtt/Rnk: {n}ms/{n} | MxRtt/Rnk: {n}ms/{n} | MnClk/Rnk: {n}MHz/{n} | MnPwr/Rnk: {n}W/{n}",
    " MnRtt/Rnk: {n}ms/{n} | MxRtt/Rnk: {n}ms/{n} | MnUtl/Rnk: {n}%/{n} | MxTmp/Rnk: {n}C/{n}",
    "[rank{n}] step time: {n} ms, {n} tok/s",
    "rank {n}: elapsed time per iteration (ms): {n}",
    # metrics
    "step {n} loss {n} lr 3e-4 | {n} tok/s",
    " 50%|#####     | {n}/100 [00:01<00:01, {n}it/s, loss={n}]",
    "Traceback (most recent call last):",
    "ValueError: {n}",
)


def lines_with(n: str) -> list[str]:
    return [t.format(n=n) for t in TEMPLATES]


SHAPES = (
    {},  # alive and well
    {"util": 0.0, "silent": 300.0, "last_step_ago": 300.0, "cpu": 0.0},  # hung
    {"session": "dead"},
    {"session": "gone"},
    {"session": "missing"},
    {"proc": False},  # the pane's shell alone: the run exited
)


def every_rule_on(snap_kw: dict[str, object], lines: list[str]) -> None:
    snap = run(**snap_kw, log_tail=tuple(lines), pane_tail=tuple(lines))  # type: ignore[arg-type]
    ctx = Context(snap, NOW, 30.0, DEFAULT_THRESHOLDS)
    for e in ENTRIES:  # each rule on its own: a raise fails the test, naming the rule
        try:
            e.func(ctx)
        except Exception as err:  # pragma: no cover - the failure's words
            raise AssertionError(f"{e.func.__name__} raised {type(err).__name__}") from err
    found = diagnose(snap, NOW)
    assert "rule_failed" not in {f.kind for f in found}, [f.title for f in found]


@pytest.mark.parametrize("n", ABSURD, ids=lambda n: n[:8] + (f"…{len(n)}" if len(n) > 8 else ""))
@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_every_rule_reads_absurd_numbers_without_raising(n: str, shape: int) -> None:
    every_rule_on(SHAPES[shape], lines_with(n))


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(st.characters(categories=["Nd"]), min_size=1, max_size=8),
        st.integers(min_value=4000, max_value=9000).map(lambda k: "7" * k),
    ),
    st.sampled_from(range(len(SHAPES))),
)
def test_every_rule_reads_any_number_without_raising(n: str, shape: int) -> None:
    every_rule_on(SHAPES[shape], lines_with(n))


def test_torchrun_names_no_rank_from_an_absurd_number() -> None:
    block = [
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : " + "9" * 5000 + " (local_rank: 1)",
    ]
    assert root_cause(block) is None
    block[2] = "  rank      : 3 (local_rank: " + "9" * 5000 + ")"
    rc = root_cause([*block, "  exitcode  : -9 (pid: " + "1" * 5000 + ")"])
    assert rc is not None and rc.rank == 3 and rc.local_rank is None
    assert rc.exitcode == -9 and rc.pid is None


def test_a_huge_step_keeps_the_lines_loss() -> None:
    p = MetricParser()
    point = p.parse("step " + "9" * 5000 + " loss 0.25", 0.0)
    assert point is not None and point.step is None and point.loss == 0.25


@pytest.mark.parametrize(
    ("text", "lo", "hi", "want"),
    [
        ("42", None, None, 42),
        (" -7 ", None, None, -7),
        ("-7", 0, None, None),
        ("70000", 1, 65535, None),
        ("9" * 5000, None, None, None),
        ("1" * 65536, None, None, None),
        ("٣٠", None, None, None),
        ("1e3", None, None, None),
        ("", None, None, None),
        (None, None, None, None),
    ],
)
def test_bounded_int(text: str | None, lo: int | None, hi: int | None, want: int | None) -> None:
    assert bounded_int(text, lo, hi) == want


def test_bounded_float() -> None:
    assert bounded_float("3.5e-2") == 0.035
    assert bounded_float("-1", 0.0) is None
    for bad in ("nan", "inf", "-inf", "1e999", "9" * 5000, "1_0", "٣", "", None):
        assert bounded_float(bad) is None, bad
    nan = bounded_float("nan", finite=False)
    assert nan is not None and math.isnan(nan)
    assert bounded_float("1e999", finite=False) == math.inf


@given(st.text(max_size=80))
def test_the_helpers_never_raise(text: str) -> None:
    bounded_int(text)
    bounded_float(text)
    bounded_float(text, finite=False)


async def test_the_banners_news_filter_reads_a_quoted_huge_pid(tmp_path: Path) -> None:
    """The banner leaves out what the user's own relaunch caused, reading the
    PIDs its findings name — and the findings quote the run's own lines. A
    5,000-digit "PID" there raised in int(), and the dashboard's banner and
    watch's alerts went dark (the whole tick failed)."""
    log = tmp_path / "train.log"
    log.write_text("")
    mon = LogOnlyMonitor(log)
    mon.snapshot.session_name = "dflash"
    mon.snapshot.sessions = [Session("dflash", panes=[Pane("dflash", 0, 0, 999)])]
    audit = tmp_path / "audit.jsonl"
    rec = RunRecorder(
        mon,  # type: ignore[arg-type]
        HistoryWriter(tmp_path / "h.sqlite"),
        diagnose=lambda s, n: [],
        audit_file=audit,
        tick_s=3600,
    )
    now = time.time()
    line = {"target": rec.name, "action": "relaunch", "plan": round(now - 5, 3), "pids": [4242]}
    audit.write_text(json.dumps({**line, "epoch": now - 4}) + "\n")
    f = Finding(
        "rank_failed",
        Severity.ERROR,
        "rank 0 failed",
        evidence=["  traceback : Signal 9 (SIGKILL) received by PID " + "9" * 5000],
    )
    assert rec.is_news(f, now) is True
    await rec.stop()


@pytest.mark.parametrize("n", ["9" * 5000, "nan", "inf", "-5", "٣٠"])
def test_the_collectors_read_absurd_numbers_as_no_number(n: str) -> None:
    """nvidia-smi pmon's SM %, tmux's numbers and the kernel log's Xid go
    through the same bounded reading: NaN was an SM % (idle, by every
    comparison), 5,000 digits raised, `٣٠` was 30."""
    from gputui.collect.gpuhealth import parse_kernel_line
    from gputui.collect.nvidiasmi import parse_pmon
    from gputui.collect.tmux import _int

    assert parse_pmon([f"    0   {n}     C    50     3     -     -   python3"]) == {}
    assert parse_pmon([f"    0   1234     C    {n}     3     -     -   python3"]) == {}
    assert parse_pmon(["    0   1234     C    50     3     -     -   python3"]) == {1234: 50.0}
    assert _int(n) is None
    line = f"[ 12.5] NVRM: Xid (PCI:0000:41:00): {n}, pid=1234, name=python3, Ch 00000008"
    got = parse_kernel_line(line, 0.0, None)
    assert got is None or got.event is None or got.event.xid is None
