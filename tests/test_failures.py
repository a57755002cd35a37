"""The run's own failures named from what it prints and does (issue 31):
CUDA OOM, NCCL watchdog timeout / NCCL error, NaN loss, a loss spike, a
data-loader-bound run — each a word with its evidence, fix and key; and
the kind declarations (issue 35) the recorder and the host view derive
their sets from. Each fails on the old code (no such rule: no finding)."""

from __future__ import annotations

import math
from pathlib import Path

from gputui.diagnose import KINDS, diagnose
from gputui.host.view import health_word
from gputui.model import (
    Finding,
    GpuOwners,
    GpuProcess,
    MetricPoint,
    Pane,
    Proc,
    Session,
    Severity,
    Snapshot,
    StdoutTarget,
)
from gputui.record import recorder
from test_diagnose import NOW, UUID, _readings, run

OOM_NEW = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 139.81 GiB of which 1.23 GiB is free. Including non-PyTorch memory, "
    "this process has 138.56 GiB memory in use. Of the allocated memory 121.10 GiB is "
    "allocated by PyTorch, and 16.20 GiB is reserved by PyTorch but unallocated. If reserved "
    "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
OOM_OLD = (
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
    "capacity; 14.50 GiB already allocated; 3.75 MiB free; 14.52 GiB reserved in total by PyTorch)"
)
NCCL_TIMEOUT = (
    "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4021, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600031 milliseconds before timing out."
)
NCCL_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
    "NCCL version 2.19.3"
)


def _first(findings: list[Finding]) -> Finding:
    serious = [f for f in findings if f.severity != Severity.INFO]
    assert serious, [f.kind for f in findings]
    return serious[0]


def test_cuda_oom_names_the_size_tried_and_fragmentation() -> None:
    snap = run(session="dead", dead_status=1, log_tail=("step 41 | loss 2.1", OOM_NEW))
    f = _first(diagnose(snap, NOW))
    assert f.kind == "cuda_oom" and f.severity == Severity.ERROR, f
    assert "tried to allocate 2.00 GiB on GPU 0" in f.title and "at step 100" in f.title
    assert any("reserved but unallocated 16.20 GiB" in e for e in f.evidence), f.evidence
    assert "expandable_segments:True" in f.fix and "batch size" in f.fix


def test_cuda_oom_ending_a_traceback_is_an_error_before_the_session_dies() -> None:
    tail = ("Traceback (most recent call last):", '  File "train.py", line 33', OOM_NEW)
    f = _first(diagnose(run(log_tail=tail), NOW))
    assert f.kind == "cuda_oom" and f.severity == Severity.ERROR, f
    assert "goes on" not in f.title
    caught = _first(diagnose(run(log_tail=(OOM_NEW, "retrying with batch 16")), NOW))
    assert caught.severity == Severity.WARNING and "goes on" in caught.title


def test_cuda_oom_old_message_and_no_fragmentation_fix_when_reserved_is_small() -> None:
    snap = run(session="dead", dead_status=1, log_tail=(OOM_OLD,))
    f = _first(diagnose(snap, NOW))
    assert f.kind == "cuda_oom" and "20.00 MiB" in f.title
    assert "expandable_segments" not in f.fix and "activation checkpointing" in f.fix


def test_an_old_oom_far_up_the_log_of_a_healthy_run_is_not_news() -> None:
    tail = (OOM_NEW, *[f"step {n} | loss 2.0" for n in range(100)])
    assert not [f for f in diagnose(run(log_tail=tail), NOW) if f.kind == "cuda_oom"]


def test_nccl_watchdog_timeout_names_the_collective_rank_and_timeout() -> None:
    snap = run(log_tail=("step 4020 | loss 2.0", NCCL_TIMEOUT))
    f = _first(diagnose(snap, NOW))
    assert f.kind == "nccl_timeout" and f.severity == Severity.ERROR
    for words in ("rank 1", "ALLREDUCE", "SeqNum 4021", "10 min"):
        assert words in f.title, f.title
    assert f.action == "dump" and "every rank" in f.action_label


def test_nccl_error_is_named() -> None:
    f = _first(diagnose(run(session="dead", dead_status=1, log_tail=(NCCL_ERROR,)), NOW))
    assert f.kind == "nccl_error" and "unhandled system error" in f.title
    assert "NCCL_DEBUG=INFO" in f.fix


def _with_losses(losses: list[float]) -> object:
    snap = run()
    m = snap.metrics
    start = NOW - len(losses)
    for i, loss in enumerate(losses):
        m.add(MetricPoint(time=start + i, step=200 + i, loss=loss))
    return snap


def test_nan_loss_is_named_with_the_step_it_began() -> None:
    snap = _with_losses([2.0] * 20 + [math.nan] * 5)
    f = _first(diagnose(snap, NOW))  # type: ignore[arg-type]
    assert f.kind == "loss_nan" and f.severity == Severity.ERROR
    assert "loss is NaN since step 220" in f.title, f.title
    assert any("last finite loss: 2" in e for e in f.evidence)


def test_a_nan_with_no_finite_loss_before_it_may_have_begun_earlier() -> None:
    """Every loss gputui has is NaN (the log was read from its tail, or the
    ring moved on): the step of the oldest is not when it began. On an H100,
    a NaN from step 20 was said "since step 110"."""
    snap = _with_losses([math.nan] * 30)
    f = _first(diagnose(snap, NOW))  # type: ignore[arg-type]
    assert f.kind == "loss_nan"
    assert "loss is NaN since step 200 or earlier (no finite loss among the 30" in f.title, f.title


def test_loss_spike_is_a_multiple_of_the_recent_median() -> None:
    f = _first(diagnose(_with_losses([2.0] * 30 + [9.0]), NOW))  # type: ignore[arg-type]
    assert f.kind == "loss_spike" and "4.5× the recent median 2" in f.title, f.title
    quiet = diagnose(_with_losses([2.0] * 30 + [2.5]), NOW)  # type: ignore[arg-type]
    assert not [x for x in quiet if x.kind in ("loss_spike", "loss_nan")]


def test_a_loader_bound_run_is_named_from_gpu_util_and_worker_cpu() -> None:
    worker = Proc(
        pid=30,
        ppid=12,
        cmdline=["python", "train.py"],
        state="R",
        cpu_pct=99.0,
        is_python=True,
        stdout=StdoutTarget(kind="pipe"),
    )
    f = _first(diagnose(run(util=35.0, extra_procs=(worker,)), NOW))
    assert f.kind == "loader_bound" and "loader worker" in f.title, f
    assert "num_workers" in f.fix
    # the same GPUs at 96 %: not loader bound; no busy worker: not either
    assert not [x for x in diagnose(run(extra_procs=(worker,)), NOW) if x.kind == "loader_bound"]
    assert not [x for x in diagnose(run(util=35.0), NOW) if x.kind == "loader_bound"]


# ---------------------------------------------------- issue 35: declarations


def test_the_recorder_and_host_view_sets_come_from_the_kinds_declarations() -> None:
    assert (
        recorder.SILENCE_KINDS
        == {n for n, k in KINDS.items() if k.silence}
        >= {"busy_but_silent", "progress_stalled", "held_but_idle", "log_missing", "loading"}
    )
    assert (
        recorder.GONE_KINDS
        == {n for n, k in KINDS.items() if k.gone}
        >= {"session_missing", "session_dead", "run_exited", "run_ended", "log_missing"}
    )
    src = Path(recorder.__file__).read_text() + Path(health_word.__code__.co_filename).read_text()
    assert "_WORD_KINDS" not in src and '"busy_but_silent", "progress_stalled"' not in src
    snap = run(session="dead", dead_status=1, log_tail=(OOM_NEW,))
    assert health_word(diagnose(snap, NOW), snap)[0] == "dead"  # cuda_oom declares "dead"
    assert {n for n, k in KINDS.items() if k.host_level} >= {"connection", "ct_stopped"}


def test_a_relaunched_runs_first_losses_are_not_a_spike_against_the_old_run() -> None:
    """A relaunch starts the step counter again with the loss of an untrained
    model: judged against the old run's last losses it read as a 5.7× spike
    (the relaunch banner test, loaded run of the merged round 4). Only this
    run's losses count; a spike within it still does."""
    snap = _with_losses([0.35] * 30)
    m = snap.metrics
    for i, loss in enumerate([2.0, 1.9, 1.8]):
        m.add(MetricPoint(time=NOW - 0.5 + i * 0.1, step=1 + i, loss=loss))
    found = diagnose(snap, NOW)  # type: ignore[arg-type]
    assert not [x for x in found if x.kind == "loss_spike"], [x.title for x in found]
    for i, loss in enumerate([1.0] * 12 + [5.0]):
        m.add(MetricPoint(time=NOW + i * 0.01, step=10 + i, loss=loss))
    again = diagnose(snap, NOW + 1)  # type: ignore[arg-type]
    assert [x for x in again if x.kind == "loss_spike"], [x.title for x in again]


# ---------------------------------------------------- a straggling rank


# Megatron's straggler detector, as its README_STRAGGLER.md prints it, with
# rank 3 slow: its clock the lowest, its temperature the highest
def _detector(slow_ms: float, slow_rank: int = 3, clk_rank: int = 3) -> str:
    return (
        " 0: INFO:megatron.core.utils:[2024-03-14 23:07:56] | MnRtt/Rnk: 3453.08ms/8 | "
        f"MxRtt/Rnk: {slow_ms}ms/{slow_rank} | MnPwr/Rnk: 601796W/8 | MxPwr/Rnk: 683801W/18 | "
        f"MnTmp/Rnk: 52C/0 | MxTmp/Rnk: 84C/{slow_rank} | MnUtl/Rnk: 97%/8 | MxUtl/Rnk: 100%/6 | "
        f"MnClk/Rnk: 1410MHz/{clk_rank} | MxClk/Rnk: 1980MHz/0 | MnDRtt/Rnk: 14.27ms/23 | "
        "MxDRtt/Rnk: 34.65ms/3 | MnEtpt/Rnk: 296.02TF/0 | MxEtpt/Rnk: 297.32TF/8"
    )


def _iteration(n: int) -> str:
    return f" [2024-03-14 23:07:5{n % 10}] iteration {n}/ 1000 | elapsed time per iteration (ms): 3470.1 | lm loss: 2.1E+00 |"


def test_megatron_straggler_detector_names_the_rank_and_why() -> None:
    tail = (_iteration(10), _detector(5230.5), _iteration(11), _detector(5301.2))
    f = _first(diagnose(run(log_tail=tail), NOW))
    assert f.kind == "straggler" and f.severity == Severity.WARNING, f
    assert "rank 3 is 1.5× slower" in f.title, f.title
    assert any("clock is the lowest of all ranks (1410 MHz)" in e for e in f.evidence), f.evidence
    assert any("temperature is the highest" in e for e in f.evidence), f.evidence
    assert f.action == "dump"
    # one slow report is no news; the ranks even: nothing; another rank slow before: nothing yet
    assert "straggler" not in [x.kind for x in diagnose(run(log_tail=(_detector(5230.5),)), NOW)]
    even = (_detector(3470.0), _detector(3468.2))
    assert "straggler" not in [x.kind for x in diagnose(run(log_tail=even), NOW)]
    moved = (_detector(5230.5, slow_rank=5), _detector(5301.2))
    assert "straggler" not in [x.kind for x in diagnose(run(log_tail=moved), NOW)]


def test_a_rank_tagged_slow_rank_is_named_from_its_own_figures() -> None:
    """torchrun's `[rankN]:` prefix on each rank's own timing: rank 2 takes
    1.9× the others' time in its forward/backward."""
    lines = []
    for step in range(1, 9):
        for rank in range(4):
            ms = 610 if rank == 2 else 320 + rank
            lines.append(f"[rank{rank}]:step {step} | loss 2.{step} | fwd_bwd time {ms}ms")
    f = _first(diagnose(run(log_tail=tuple(lines)), NOW))
    assert f.kind == "straggler" and "rank 2 is 1.9× slower" in f.title, f.title
    assert any("rank 2: 610 ms per step (median of its last 3" in e for e in f.evidence), f.evidence
    # one slow figure (a checkpoint, a GC pause) is no straggler
    blip = [ln.replace("610ms", "321ms") for ln in lines[:-4]] + lines[-4:]
    assert "straggler" not in [x.kind for x in diagnose(run(log_tail=tuple(blip)), NOW)]
    # the same ranks even (a rate this time, torchrun's older `[default]` prefix): nothing
    even = [f"[default{r}]:step {s} 41,200 tok/s" for s in range(8) for r in range(4)]
    assert "straggler" not in [x.kind for x in diagnose(run(log_tail=tuple(even)), NOW)]
    # a rate: the slow rank has the lower figure
    slow = [
        f"[default{r}]:step {s} {20_000 if r == 1 else 41_200} tok/s"
        for s in range(8)
        for r in range(4)
    ]
    f = _first(diagnose(run(log_tail=tuple(slow)), NOW))
    assert f.kind == "straggler" and "rank 1 is 2.1× slower" in f.title, f.title


def test_a_straggler_is_not_named_for_a_stalled_or_gone_run() -> None:
    tail = (_detector(5230.5), _detector(5301.2))
    assert "straggler" not in [
        x.kind for x in diagnose(run(session="dead", dead_status=1, log_tail=tail), NOW)
    ]


def _taken_by(holder: GpuProcess) -> Snapshot:
    """A new run that died of CUDA OOM at start, its GPU held by `holder`."""
    snap = run(
        session="dead",
        dead_status=1,
        steps=False,
        log_tail=("Traceback (most recent call last):", OOM_NEW),
    )
    snap.gpus.processes = [holder]
    return snap


def test_an_oom_on_a_gpu_a_leftover_holds_says_so_before_the_batch_size() -> None:
    """The deploy loop: the old run's worker outlived its tmux session and
    holds 120 GiB; the relaunched run dies of CUDA OOM at start. "Lower the
    batch size" was the only advice."""
    left = GpuProcess(UUID + "0", 5777, 120_000, "python", ct_pid=777, in_container=True)
    left.ancestors, left.state = [], "S"  # its parent is gone
    left.util = _readings(0.0, 120.0)  # idle on its GPU for two minutes: a leftover
    snap = _taken_by(left)
    snap.gpu_owners = GpuOwners({777: (0, "root")}, me=0)  # root's, as gputui's own tmux server
    f = next(f for f in diagnose(snap, NOW) if f.kind == "cuda_oom")
    assert f.title.endswith("— leftover PID 777 holds 117.2 GiB of GPU memory"), f.title
    assert f.fix.startswith("the GPU memory the run needed is held by"), f.fix
    assert "`pct exec 200 -- kill 777`" in f.fix and "batch size" in f.fix
    assert any("PID 777" in e for e in f.evidence), f.evidence


def test_an_oom_beside_a_live_run_whose_parent_is_gone_gives_no_kill_advice() -> None:
    """A `nohup` run whose shell exited still works on the GPU: named by
    what it is, never "leftover", never a kill."""
    live = GpuProcess(UUID + "0", 5777, 120_000, "python", ct_pid=777, in_container=True)
    live.ancestors, live.state, live.util = [], "R", _readings(97.0, 0.0)
    f = next(f for f in diagnose(_taken_by(live), NOW) if f.kind == "cuda_oom")
    assert "— no live owner (its parent is gone) (PID 777) holds" in f.title, f.title
    assert "leftover" not in f.title and "kill" not in f.fix, f.fix


def test_an_oom_beside_another_sessions_run_names_it_without_kill_advice() -> None:
    other = GpuProcess(UUID + "0", 5491, 100_000, "python", ct_pid=491, in_container=True)
    other.ancestors, other.state = [120, 99], "R"
    snap = _taken_by(other)
    snap.sessions[0].panes[0].pid = 10  # the watched pane; session "other" has pane 99
    snap.sessions.append(Session("other", panes=[Pane("other", 0, 0, pid=99)]))
    f = next(f for f in diagnose(snap, NOW) if f.kind == "cuda_oom")
    assert "— session other (PID 491) holds 97.7 GiB of GPU memory" in f.title, f.title
    assert "select it, k" in f.fix and "kill" not in f.fix.replace("(select it, k)", "")
    small = GpuProcess(UUID + "0", 5491, 2_000, "python", ct_pid=491, in_container=True)
    small.ancestors = [120, 99]
    g = next(f for f in diagnose(_taken_by(small), NOW) if f.kind == "cuda_oom")
    assert "holds" not in g.title and not g.fix.startswith("the GPU memory")  # 2 GB is not it
