"""The words real logs need (issue 47), each beside the lookalike that must
stay quiet: a run killed without a word vs one that finished behind tee;
torchrun's "failed (exitcode: -9)" line with no summary; JAX's, XLA's and
TensorFlow's out-of-memory vs XLA's "not a failure" note; cuDNN errors and
a kernel's bare assertion lines; a NaN gradient norm vs a running mean's
"(nan)"; a collapsed fp16 loss scale vs the first steps' overflows; a
write that found no room vs /dev/shm's; a NaN's step from its line; a run
stopped at a prompt after its error. The corpus (test_corpus.py) holds the
real texts; these hold each rule's edges."""

from __future__ import annotations

from gputui.collect.metrics import MetricParser
from gputui.diagnose import diagnose
from gputui.model import Finding, Metrics, Proc, Severity, Snapshot
from test_diagnose import GIB, NOW, run

BAR = "Loading checkpoint shards:  38%|███▊      | 3/8 [00:02<00:03,  1.28it/s]"


def ended(log: tuple[str, ...], pane: tuple[str, ...] | None = None, **kw: object) -> Snapshot:
    """The pane back at its shell prompt, no Python process left."""
    snap = run(
        gpus=0,
        proc=False,
        steps=False,
        silent=30.0,
        log_tail=log,
        pane_tail=pane if pane is not None else (*log, "$ "),
        **kw,
    )  # type: ignore[arg-type]
    snap.procs = [Proc(pid=10, cmdline=["bash"], state="S")]
    return snap


def word(snap: Snapshot) -> Finding | None:
    return next((f for f in diagnose(snap, NOW) if f.severity != Severity.INFO), None)


def kinds(snap: Snapshot) -> list[str]:
    return [f.kind for f in diagnose(snap, NOW)]


def test_a_run_killed_mid_bar_behind_tee_is_named_with_the_bar_only_the_pane_holds() -> None:
    log = ("Explicitly passing a `revision` is encouraged when loading a model",)
    f = word(ended(log, pane=(*log, BAR + "root@ct:~# ")))
    assert f is not None and f.kind == "run_killed" and f.severity == Severity.ERROR, f
    assert "killed by a signal?" in f.title and "SIGKILL" in f.title
    assert any("a progress bar at 38 %" in e for e in f.evidence), f.evidence
    assert "dmesg" in f.fix


def test_a_count_short_of_its_total_in_the_log_is_a_kill_too() -> None:
    line = " iteration     5428/  250000 | consumed samples:  43424 | lm loss: 2.1E+00 |"
    f = word(ended((line,)))
    assert f is not None and f.kind == "run_killed", f
    assert any("a count at 5428 of 250000" in e for e in f.evidence)


def test_a_run_whose_output_says_its_end_gets_a_finished_note_never_an_alarm() -> None:
    for last in (
        "Epoch 9: 100%|██████████| 195/195 [01:58<00:00,  1.64it/s, train/loss_epoch=3.950]",
        "Training completed. Do not forget to share your model on huggingface.co/models =)",
        "`Trainer.fit` stopped: `max_epochs=1` reached.",
        "wandb: Waiting for W&B process to finish... (success).",
    ):
        snap = ended(("step 1", last))
        assert word(snap) is None, (last, word(snap))
        note = next(f for f in diagnose(snap, NOW) if f.kind == "run_finished")
        assert note.severity == Severity.INFO and "finished" in note.title


def test_a_run_whose_output_ends_whole_but_says_no_end_is_ended_finished_or_killed() -> None:
    """Nothing tells a finished run from a killed one there: the honest
    WARNING (never dark, issue 44), not a kill and not a note."""
    f = word(ended(("step 1", "iter 5000: loss 0.8123, time 98.1ms")))
    assert f is not None and f.kind == "run_ended" and f.severity == Severity.WARNING, f
    assert "finished, or killed" in f.title


def test_no_kill_and_no_note_while_python_runs_or_for_a_shell_that_ran_nothing() -> None:
    alive = run(gpus=0, steps=False, log_tail=("x", BAR), pane_tail=(BAR,))
    assert "run_killed" not in kinds(alive) and "run_finished" not in kinds(alive)
    fresh = ended((), pane=("$ ls", "$ "))
    assert "run_killed" not in kinds(fresh) and "run_finished" not in kinds(fresh)


def test_torchrun_failed_line_without_a_summary_names_the_local_rank_and_signal() -> None:
    line = (
        "[2023-10-13 17:40:02,544] torch.distributed.elastic.multiprocessing.api: [ERROR] "
        "failed (exitcode: -9) local_rank: 3 (pid: 62498) of binary: /usr/bin/python3"
    )
    tail = (
        line,
        "Traceback (most recent call last):",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
    )
    f = word(ended(tail))
    assert f is not None and f.kind == "rank_failed", f
    assert f.title.startswith("local rank 3 failed first (killed by SIGKILL")
    one = word(ended((line.replace("-9", "1"),)))
    assert one is not None and one.kind == "rank_failed" and "exit 1" in one.title


def test_other_frameworks_out_of_memory_and_xla_s_note_that_is_not_one() -> None:
    jax = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes."
    f = word(ended((jax,)))
    assert f is not None and f.kind == "cuda_oom" and "JAX/XLA" in f.title and "4.4 GiB" in f.title
    tf = (
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[16,112,112,147] and type float on /job:localhost/replica:0/task:0/"
        "device:GPU:0 by allocator GPU_0_bfc"
    )
    f = word(ended((tf,)))
    assert f is not None and f.kind == "cuda_oom" and "[16,112,112,147] on GPU:0" in f.title
    note = (
        "W external/xla/xla/tsl/framework/bfc_allocator.cc:291] Allocator (GPU_0_bfc) ran out "
        "of memory trying to allocate 2.50GiB with freed_by_count=0. The caller indicates "
        "that this is not a failure, but this may mean that there could be performance gains"
    )
    assert "cuda_oom" not in kinds(run(gpus=0, steps=False, log_tail=(note, "step 5 loss 2.0")))


def test_cudnn_errors_and_a_kernel_s_bare_assertion_lines() -> None:
    f = word(ended(("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",)))
    assert f is not None and f.kind == "cuda_error" and "CUDNN_STATUS_INTERNAL_ERROR" in f.title
    a = (
        "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [1,0,0], "
        'thread: [121,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out of '
        'bounds"` failed.'
    )
    f = word(ended((a, a)))
    assert f is not None and f.kind == "cuda_error" and "device-side assert" in f.title
    assert any("the kernel's assertion: Assertion `index >= -sizes[i]" in e for e in f.evidence)
    # an assert in Python's own words is no kernel's
    py = "AssertionError: Assertion `x` failed"
    assert "cuda_error" not in kinds(ended((py,)))


def _megatron(it: int, norm: str) -> str:
    return (
        f" iteration {it:>8}/  250000 | learning rate: 2.999E-04 | loss scale: 1.0 | "
        f"grad norm: {norm} | number of skipped iterations:   0 |"
    )


def test_grad_norm_nan_on_every_step_and_its_lookalikes() -> None:
    tail = tuple(_megatron(5424 + i, "0.752" if i == 0 else "nan") for i in range(5))
    f = word(run(gpus=0, steps=False, log_tail=tail))
    assert f is not None and f.kind == "grad_nan" and "since iteration 5425" in f.title, f
    twice = tuple(_megatron(100 + i, "nan" if i in (3, 4) else "1.1") for i in range(5))
    assert "grad_nan" not in kinds(run(gpus=0, steps=False, log_tail=twice))
    healed = (*tail, _megatron(5430, "0.9"))
    assert "grad_nan" not in kinds(run(gpus=0, steps=False, log_tail=healed))
    mean = "Epoch: [115]  [1298/1299]  loss: 6.5993 (6.5971)  grad_norm: 0.3922 (nan)  time: 0.49"
    assert "grad_nan" not in kinds(run(gpus=0, steps=False, log_tail=(mean,) * 4))


def test_a_collapsed_loss_scale_and_the_first_steps_overflows() -> None:
    apex = tuple(
        f"Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to {x}"
        for x in ("8.16e-202", "4.08e-202", "2.04e-202")
    )
    f = word(run(gpus=0, steps=False, log_tail=apex))
    assert f is not None and f.kind == "loss_scale_collapsed" and "8.16e-202" not in f.title
    assert "2.04e-202" in f.title
    early = tuple(
        "[INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
        f"Attempted loss scale: {2 * x}, reducing to {x}"
        for x in (32768, 16384, 8192, 4096, 2048, 1024, 512)
    )
    assert "loss_scale_collapsed" not in kinds(run(gpus=0, steps=False, log_tail=early))
    gave_up = (
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. "
        "Exiting run.",
    )
    assert word(ended(gave_up)).kind == "loss_scale_collapsed"  # type: ignore[union-attr]


def test_a_run_dead_of_no_space_is_named_whatever_the_disk_has_now() -> None:
    err = "OSError: [Errno 28] No space left on device"
    f = word(ended(("saving checkpoint", err), fs_free=20 * GIB))
    assert f is not None and f.kind == "out_of_space", f
    assert "20.0 GiB free on the log's disk now" in f.title and "df -h" in f.fix
    quota = word(ended(("OSError: [Errno 122] Disk quota exceeded",)))
    assert quota is not None and quota.kind == "out_of_space" and "quota" in quota.title
    shm = "RuntimeError: unable to write to file </torch_45_2891062353_0>: No space left on device (28)"
    assert "out_of_space" not in kinds(ended((shm,)))
    alive = run(gpus=0, steps=False, log_tail=(err, "retrying"), fs_free=20 * GIB)
    assert "out_of_space" not in kinds(alive)


def test_a_nan_s_step_is_its_line_s_even_when_the_log_is_read_whole() -> None:
    lines = [
        f"2023-03-22 09:31:56 iter {2920 + 10 * i}: loss {3.9 if i < 9 else 'nan'}, time 1096.65ms"
        for i in range(15)
    ]
    snap = run(gpus=0, steps=False, log_tail=tuple(lines))
    parser, m = MetricParser(), Metrics()
    for ln in lines:
        p = parser.parse(ln, NOW - 5)  # one read: every line the same time
        if p is not None:
            m.add(p)
    snap.metrics = m
    f = next(f for f in diagnose(snap, NOW) if f.kind == "loss_nan")
    assert "since step 3010" in f.title, f.title


def test_a_run_stopped_at_a_prompt_after_its_error_does_not_go_on() -> None:
    oom = (
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.55 GiB (GPU 0; 23.99 GiB "
        "total capacity; 20.44 GiB already allocated; 0 bytes free; 22.59 GiB reserved in "
        "total by PyTorch)"
    )
    snap = run(gpus=0, steps=False, silent=30.0, log_tail=(oom, "Press any key to continue . . ."))
    going = word(snap)
    assert going is not None and "goes on" in going.title  # alive, not waiting: caught
    for p in snap.procs:
        if p.is_python:
            p.reads_tty = "/dev/pts/3"
    f = next(f for f in diagnose(snap, NOW) if f.kind == "cuda_oom")
    assert f.severity == Severity.ERROR and "goes on" not in f.title, f


def test_a_dead_pane_whose_zero_is_tee_s_and_whose_bar_was_cut_is_killed() -> None:
    """remain-on-exit: the pane died with tee's status 0; the output stops
    mid-bar — run_killed hides the dead pane's "finished (exit status 0)"."""
    snap = run(
        gpus=0,
        session="dead",
        dead_status=0,
        steps=False,
        start_command="python train.py 2>&1 | tee /workspace/train.log",
        log_tail=("step 1", BAR),
        pane_tail=("step 1", BAR),
    )
    found = diagnose(snap, NOW)
    assert found[0].kind == "run_killed", [(f.kind, f.title) for f in found]
    assert "run_finished" not in [f.kind for f in found]
    plain = run(
        gpus=0,
        session="dead",
        dead_status=0,
        steps=False,
        start_command="python train.py",
        log_tail=("step 1", BAR),
        pane_tail=("step 1", BAR),
    )
    assert "run_killed" not in [f.kind for f in diagnose(plain, NOW)]  # Python's own 0
