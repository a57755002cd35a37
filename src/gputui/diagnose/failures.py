"""Rules about the run's own failures, named from what it prints and does:
CUDA out of memory and the run's other CUDA errors (what each means),
data-loader workers out of shared memory, an NCCL
watchdog timeout or NCCL error, a loss that turned NaN/inf or spiked, a run
bound by its data loader (a port the run could not listen on: ports.py).

Each rule registers itself with `@rule(...)` (see registry.py). Pure: the
lines are the log's and the pane's tails, the numbers the parsed metrics,
the GPU readings and the processes' CPU."""

from __future__ import annotations

import math
import re
import statistics

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.holders import (
    Holder,
    gpu_holders,
    holder_line,
    leftover_is_mine,
    leftover_words,
)
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.numbers import bounded_float, bounded_int
from gputui.text.untrusted import one_line
from gputui.text.words import dur, gib

RECENT_LINES = 60  # a failure line counts while it is among the last this many lines

# torch >= 2.1: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate
# 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.23 GiB is
# free. ... Of the allocated memory 130.10 GiB is allocated by PyTorch, and
# 7.20 GiB is reserved by PyTorch but unallocated. ..."; older: "RuntimeError:
# CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total
# capacity; 14.50 GiB already allocated; 3.75 MiB free; 14.70 GiB reserved
# in total by PyTorch)"
# A size begins where no digit stands before it and holds at most 12 digits:
# searched from every position, `\d+` took time quadratic (cubic after a
# `.*?`) in a run of digits — 23 s a tick for one line of 8 KiB of digits.
_SIZE = r"(?<![\d.])(\d{1,12}(?:\.\d{1,6})?\s{0,4}[KMGT]iB)"
_OOM = re.compile(r"CUDA out of memory\. Tried to allocate " + _SIZE)
_OOM_WORDS = ("CUDA out of memory. Tried to allocate ",)  # in every _OOM match
_OOM_GPU = re.compile(r"GPU (\d{1,4})\b")
_OOM_ALLOC = re.compile(_SIZE + r" is allocated by PyTorch, and " + _SIZE + r" is reserved")
_OOM_ALLOC_OLD = re.compile(_SIZE + r" already allocated;.*?" + _SIZE + r" reserved in total")
_OOM_FREE = re.compile(r"of which " + _SIZE + r" is free|" + _SIZE + r" free\b")
_UNITS = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}
# Out of GPU memory in other frameworks' words: JAX/XLA ("XlaRuntimeError:
# RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232
# bytes.", "Out of memory allocating N bytes", the async allocator's
# "cuMemAllocAsync failed to allocate N bytes: RESOURCE_EXHAUSTED: :
# CUDA_ERROR_OUT_OF_MEMORY"), TensorFlow ("Resource exhausted: OOM when
# allocating tensor with shape[16,112,112,147] and type float on
# /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc").
# Not TF's and XLA's "ran out of memory trying to allocate 2.5GiB ... The
# caller indicates that this is not a failure": a note, the run goes on.
_OTHER_OOM = re.compile(
    r"(?P<xla>Out of memory (?:while trying to allocate|allocating) (?P<bytes>\d{1,20}) bytes)"
    r"|(?P<async>failed to allocate (?P<abytes>\d{1,20}) bytes: RESOURCE_EXHAUSTED"
    r".*CUDA_ERROR_OUT_OF_MEMORY)"
    r"|(?P<tf>OOM when allocating tensor with shape ?(?P<shape>\[[\d,]*\])"
    r"(?:.*?on (?P<device>[/:\w]*device:(?P<dev>[A-Z]+:\d+)))?)",
    re.IGNORECASE,
)
_OTHER_OOM_WORDS = ("Out of memory", "out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "OOM when")

# "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective
# operation timeout: WorkNCCL(SeqNum=4021, OpType=ALLREDUCE, NumelIn=1,
# NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)"
    r".*?Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds"
)
_NCCL_TIMEOUT_WORDS = ("Watchdog caught collective operation timeout: WorkNCCL(",)
_RANK = re.compile(r"\[Rank (\d+)\]|\[rank(\d+)\]")
# "torch.distributed.DistBackendError: NCCL error in: .../ProcessGroupNCCL.cpp:1970,
# unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3"
_NCCL_ERROR = re.compile(r"NCCL error in: \S+, ([^(\n]+?)(?: \(|,|$)|\bnccl(\w+Error)\b")
_NCCL_ERROR_WORDS = ("NCCL error in: ", "nccl")

SPIKE_FACTOR = 3.0  # a loss this many times the recent median is a spike
SPIKE_WINDOW = 50  # ... the median of this many losses before it
LOADER_GPU_PCT = 60.0  # the run's GPUs below this (median) ...
LOADER_CPU_PCT = (
    50.0  # ... while a loader worker of it is at least this busy (a shared core: < 100)
)


def _mib(text: str) -> float:
    """`"20.00 GiB"` -> MiB; a number no GPU has (64 KiB of digits, NaN): 0."""
    num, unit = text[:-3].strip(), text.strip()[-3]
    value = bounded_float(num, 0.0, 1e12)
    return value * _UNITS.get(unit, 1.0) if value is not None else 0.0


def _last_match(
    ctx: Context, pattern: re.Pattern[str], needles: tuple[str, ...], n: int = RECENT_LINES
) -> tuple[str, re.Match[str]] | None:
    """The newest of the last `n` lines that `pattern` matches. `needles`:
    words one of which every match holds, looked for in the tail's text
    before any regex (`Context.recent_hold`)."""
    if not ctx.recent_hold(n, needles):
        return None
    for ln in reversed(ctx.recent_lines(n)):
        if any(word in ln for word in needles):
            m = pattern.search(ln)
            if m is not None:
                return ln, m
    return None


def _step_words(ctx: Context) -> str:
    m = ctx.metrics
    return f" at step {m.last_step}" if m.last_step is not None else ""


OTHERS_SHARE = 0.2  # another process holding this much of a GPU makes room the run lacked


def others_on_the_gpus(ctx: Context) -> list[Holder]:
    """Processes not of the watched run each holding ≥ OTHERS_SHARE of a
    GPU: a leftover of an earlier run, another session's run — the memory a
    new run finds taken. (The OOM line's "GPU 0" is the process's own
    numbering under CUDA_VISIBLE_DEVICES, so every GPU is looked at.)"""
    total = {s.uuid: s.mem_total_mib for s in ctx.gpus.latest.values() if s.uuid}
    return [
        h
        for h in gpu_holders(ctx)
        if h.kind != "run"
        and (h.gp.used_mib or 0) >= OTHERS_SHARE * (total.get(h.gp.gpu_uuid) or float("inf"))
    ]


def _taken_fix(ctx: Context, others: list[Holder]) -> str:
    h = others[0]
    if h.leftover and leftover_is_mine(ctx, h):  # never a live run, nor another user's
        free = f"it is a leftover: `{ctx.in_ct(f'kill {h.pid}')}`, then relaunch (r)"
    elif h.leftover:  # whose it is named, or how to check: never a bare kill (issue 45)
        free = f"it is a leftover: {leftover_words(ctx, h)}; then relaunch (r)"
    elif h.kind == "session":
        free = f"if {h.owner}'s run is done with, stop it (select it, k), then relaunch (r)"
    else:
        free = "free it, or run on another GPU (CUDA_VISIBLE_DEVICES)"
    return f"the GPU memory the run needed is {h.words()}: {free}; else "


def _oom_fix(tried: float, alloc: float | None, reserved: float | None) -> str:
    fix = (
        "lower the batch size (or raise gradient accumulation), or turn on activation checkpointing"
    )
    if reserved is not None and alloc is not None and reserved >= max(tried, 0.1 * alloc):
        fix = (
            "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (reserved but unallocated "
            "memory is large: fragmentation), or " + fix
        )
    return fix


def _other_oom(ctx: Context) -> Finding | None:
    """Out of GPU memory in JAX's, XLA's or TensorFlow's words: the bytes
    (or the tensor's shape) it tried, on which device."""
    hit = _last_match(ctx, _OTHER_OOM, _OTHER_OOM_WORDS)
    if hit is None:
        return None
    line, m = hit
    if m.group("tf"):
        who, what = "TensorFlow", f"a tensor of shape {m.group('shape')}"
        dev = m.group("dev")
        where = f" on {dev}" if dev else ""
        if dev and dev.upper().startswith("CPU"):
            who = "TensorFlow, host memory"
    else:
        n = bounded_int(m.group("bytes") or m.group("abytes"), 0)
        if n is None:
            return None
        who, what, where = "JAX/XLA", f"{gib(n / (1024 * 1024))}", ""
    lines = ctx.recent_lines(RECENT_LINES)
    ending = lines[-1] == line and any(ln.startswith("Traceback") for ln in lines)
    gone = ctx.run_gone or ending
    title = f"out of GPU memory ({who}){_step_words(ctx)}: tried to allocate {what}{where}"
    if not gone:
        title += " — the run goes on (the program caught it)"
    return Finding(
        kind="cuda_oom",
        severity=Severity.ERROR if gone else Severity.WARNING,
        title=title,
        evidence=[f"the log: {short(one_line(line, 400), 300)}"],
        fix=(
            "lower the batch size (or raise gradient accumulation), or turn on activation "
            "checkpointing (rematerialization); JAX preallocates 75 % of the GPU: "
            "XLA_PYTHON_CLIENT_MEM_FRACTION or XLA_PYTHON_CLIENT_PREALLOCATE=false where "
            "another process shares it; TensorFlow: set_memory_growth"
        ),
    )


@rule(Kind("cuda_oom", specificity=55, cause="cuda_oom", alerts=True, host_word="dead"))
def rule_cuda_oom(ctx: Context) -> Finding | None:
    """torch's "CUDA out of memory. Tried to allocate X": the size tried,
    allocated vs reserved, the step; an ERROR once the run is gone, a
    WARNING while it goes on (caught by the program). JAX's, XLA's and
    TensorFlow's words for it too (`_other_oom`)."""
    hit = _last_match(ctx, _OOM, _OOM_WORDS)
    if hit is None:
        return _other_oom(ctx)
    lines = ctx.recent_lines(RECENT_LINES)
    line, m = hit
    tried = m.group(1)
    gpu = _OOM_GPU.search(line)
    alloc = _OOM_ALLOC.search(line) or _OOM_ALLOC_OLD.search(line)
    ev = [f"the log: {short(one_line(line, 400), 300)}"]
    alloc_mib = reserved_mib = None
    if alloc is not None:
        a, r = alloc.group(1), alloc.group(2)
        alloc_mib = _mib(a)
        # the new message gives reserved-but-unallocated; the old, reserved in all
        reserved_mib = _mib(r) if "unallocated" in line else max(0.0, _mib(r) - alloc_mib)
        ev.append(
            f"allocated by PyTorch {a}, reserved but unallocated {reserved_mib / 1024:.2f} GiB"
        )
    free = _OOM_FREE.search(line)
    if free is not None:
        ev.append(f"free on the GPU then: {free.group(1) or free.group(2)}")
    where = f" on GPU {gpu.group(1)}" if gpu is not None else ""
    # the traceback's last line (the run is ending), or the run is gone
    ending = lines[-1] == line and any(ln.startswith("Traceback") for ln in lines)
    gone = ctx.run_gone or ending
    title = f"CUDA out of memory{_step_words(ctx)}: tried to allocate {tried}{where}"
    if not gone:
        title += " — the run goes on (the program caught it)"
    others = others_on_the_gpus(ctx)
    ev += [holder_line(h, ctx.now, ctx.th.idle_util_pct) for h in others[:3]]
    if others:
        h = others[0]
        who = f"leftover PID {h.pid}" if h.leftover else f"{h.owner} (PID {h.pid})"
        title += f" — {who} holds {gib(h.gp.used_mib)} of GPU memory"
    return Finding(
        kind="cuda_oom",
        severity=Severity.ERROR if gone else Severity.WARNING,
        title=title,
        evidence=ev,
        fix=(_taken_fix(ctx, others) if others else "")
        + _oom_fix(_mib(tried), alloc_mib, reserved_mib),
    )


# What a run's CUDA errors mean, and what to do (torch's RuntimeError/
# AcceleratorError texts, the CUDA runtime's error strings): (words in the
# line, what it means, the fix).
CUDA_ERRORS: tuple[tuple[str, str, str], ...] = (
    (
        "device-side assert triggered",
        "an index out of range on the GPU (a label ≥ the number of classes, a token id ≥ "
        "the embedding's size)",
        "rerun with CUDA_LAUNCH_BLOCKING=1 so the traceback names the op; check the labels "
        "against num_classes and the tokenizer's vocabulary against the model's embedding size",
    ),
    (
        "an illegal memory access was encountered",
        "a kernel read or wrote outside its memory: a bug in a custom or compiled kernel "
        "(flash-attn, Triton, a CUDA extension), or a GPU fault",
        "rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel; look for an Xid in the host's "
        "kernel log (a hardware fault)",
    ),
    (
        "misaligned address",
        "a kernel accessed memory at a misaligned address: a bug in a custom or compiled kernel",
        "rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel; try without the custom kernel",
    ),
    (
        "unspecified launch failure",
        "a kernel crashed: often a GPU fault or a driver error",
        "look for an Xid in the host's kernel log; CUDA_LAUNCH_BLOCKING=1 names the kernel",
    ),
    (
        "no kernel image is available for execution on the device",
        "PyTorch or an extension was not built for this GPU's architecture",
        "install a build for this GPU (H100/H200: sm_90, CUDA 12), or rebuild the extension "
        "with TORCH_CUDA_ARCH_LIST set for it",
    ),
    (
        "driver version is insufficient for CUDA runtime version",
        "the run's CUDA is newer than the NVIDIA driver",
        "install a PyTorch built for an older CUDA (cu118, cu121), or update the driver on the "
        "host (a container uses the host's driver)",
    ),
    (
        "The NVIDIA driver on your system is too old",
        "the run's CUDA is newer than the NVIDIA driver",
        "install a PyTorch built for an older CUDA (cu118, cu121), or update the driver on the "
        "host (a container uses the host's driver)",
    ),
    (
        "Driver/library version mismatch",
        "the NVIDIA libraries the run loads are of another version than the driver in the "
        "host's kernel (a driver updated on one side only)",
        "in a container: install the host's exact driver version without its kernel module "
        "(--no-kernel-module); on the host: reboot after a driver update",
    ),
    (
        "CUDA error: out of memory",
        "no GPU memory was left for a CUDA context or a library's workspace",
        "see who holds the GPU's memory (the GPU rows); free it, or lower the batch size",
    ),
)
CUDNN_ERRORS: tuple[tuple[str, str, str], ...] = (
    (
        "CUDNN_STATUS_INTERNAL_ERROR",
        "cuDNN failed inside: most often it could not get GPU memory for its workspace or "
        "handle (another process holds the GPU, or the run is near its memory limit), else "
        "a cuDNN/driver mismatch",
        "see who holds the GPU's memory and lower the batch size; rerun with "
        "CUDA_LAUNCH_BLOCKING=1 to name the op; check that the cuDNN PyTorch bundles matches "
        "the driver (a clean reinstall of the same torch build)",
    ),
    (
        "CUDNN_STATUS_NOT_SUPPORTED",
        "cuDNN has no kernel for this input: a non-contiguous tensor, a shape or batch too "
        "large for it, or a dtype it does not support",
        "make the input contiguous (.contiguous()), try a smaller batch, or set "
        "torch.backends.cudnn.enabled=False for that op",
    ),
    (
        "CUDNN_STATUS_EXECUTION_FAILED",
        "a cuDNN kernel failed on the GPU: often out of memory under it, else a GPU fault",
        "rerun with CUDA_LAUNCH_BLOCKING=1; look for an Xid in the host's kernel log; lower "
        "the batch size",
    ),
    (
        "CUDNN_STATUS_ALLOC_FAILED",
        "cuDNN could not allocate GPU memory",
        "see who holds the GPU's memory (the GPU rows); lower the batch size",
    ),
)
CUDA_ERRORS += CUDNN_ERRORS
_CUDA_WORDS = tuple(words for words, _, _ in CUDA_ERRORS)
_CUDA_ERROR = re.compile("|".join(map(re.escape, _CUDA_WORDS)))
_ASSERTION = re.compile(r"Assertion `[^`]*` failed")
# A kernel's own assertion lines, which may end the output before torch's
# RuntimeError (the process aborted, or its output cut): "/pytorch/aten/src/
# ATen/native/cuda/IndexKernel.cu:93: operator(): block: [1,0,0], thread:
# [121,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out
# of bounds"` failed."
_KERNEL_ASSERT = re.compile(
    r"\.cuh?:\d+: .*block: \[[\d,]+\], thread: \[[\d,]+\] Assertion `[^`]*` failed"
)
_DEVICE_ASSERT = CUDA_ERRORS[0]  # what a device-side assert means


@rule(Kind("cuda_error", specificity=52, cause="cuda_error", alerts=True, host_word="dead"))
def rule_cuda_error(ctx: Context) -> Finding | None:
    """A CUDA error the run printed (device-side assert, illegal memory
    access, no kernel image for this GPU, a driver too old or mismatched):
    what it means and what to do (`CUDA_ERRORS`). The device-side assert's
    own line (`Assertion `t >= 0 && t < n_classes` failed`) is quoted."""
    hit = _last_match(ctx, _CUDA_ERROR, _CUDA_WORDS)
    if hit is not None:
        line, m = hit
        words, meaning, fix = next(e for e in CUDA_ERRORS if e[0] == m.group(0))
    else:  # only the kernel's assertion lines: torch's RuntimeError never came
        hit = _last_match(ctx, _KERNEL_ASSERT, ("Assertion `",))
        if hit is None:
            return None
        line = hit[0]
        words, meaning, fix = _DEVICE_ASSERT
    ev = [f"the log: {short(one_line(line, 400), 300)}"]
    asserted = _last_match(ctx, _ASSERTION, ("Assertion `",))
    if asserted is not None:
        ev.append(f"the kernel's assertion: {asserted[1].group(0)}")
    gone = ctx.run_gone
    return Finding(
        kind="cuda_error",
        severity=Severity.ERROR if gone else Severity.WARNING,
        title=f"CUDA error{_step_words(ctx)}: {words} — {meaning}",
        evidence=ev,
        fix=fix,
    )


# torch's DataLoader when /dev/shm is too small (Docker's and a pod's 64 MB
# default, a CT's memory limit): the worker's SIGBUS handler prints "ERROR:
# Unexpected bus error encountered in worker. This might be caused by
# insufficient shared memory (shm)."; the main process raises "RuntimeError:
# DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible
# that dataloader's workers are out of shared memory. Please try to raise
# your shared memory limit."; a tensor passed through a full /dev/shm:
# "RuntimeError: unable to write to file </torch_45_2891062353_0>: No space
# left on device (28)".
_SHM = re.compile(
    r"insufficient shared memory \(shm\)|dataloader's workers are out of shared memory"
    r"|unable to write to file </torch_[^>]*>: No space left on device"
)
_SHM_WORDS = ("shared memory", "</torch_")
_WORKER_KILLED = re.compile(
    r"DataLoader worker \(pid\(?s?\)? ?([\d, ]+)\) is killed by signal: ([^.]+)"
)


@rule(Kind("shm_exhausted", specificity=54, cause="shm_exhausted", alerts=True, host_word="dead"))
def rule_shm_exhausted(ctx: Context) -> Finding | None:
    """The run's DataLoader workers ran out of shared memory (/dev/shm): a
    worker's bus error, or a tensor that could not be written there. Its
    "No space left on device" is /dev/shm's, not the log's disk (host.py's
    disk rules leave such a line alone). The fix is the container kind's
    way to a larger /dev/shm (`Container.more_shm_hint`)."""
    hit = _last_match(ctx, _SHM, _SHM_WORDS)
    if hit is None:
        return None
    line = hit[0]
    found = _last_match(ctx, _WORKER_KILLED, ("DataLoader worker",))
    killed = found[1] if found is not None else None
    ev = [f"the log: {short(one_line(line, 400), 300)}"]
    what = "a tensor could not be written to /dev/shm"
    if killed is not None:
        pids, sig = killed.group(1).strip(), killed.group(2).strip()
        what = f"worker PID {pids} killed by signal: {sig}"
        if killed.group(0) not in line:
            ev.append(f"the log: {short(one_line(killed.group(0), 400), 200)}")
    elif "bus error" in line.lower():
        what = "a worker died of a bus error"
    gone = ctx.run_gone
    c = ctx.snap.container
    hint = c.more_shm_hint() if c is not None else ""
    bigger = hint or (
        f"remount it larger as root: `{ctx.in_ct('mount -o remount,size=32G /dev/shm')}`"
    )
    return Finding(
        kind="shm_exhausted",
        severity=Severity.ERROR if gone else Severity.WARNING,
        title=(f"DataLoader workers ran out of shared memory (/dev/shm){_step_words(ctx)}: {what}"),
        evidence=ev,
        fix=(
            f"see how large it is: `{ctx.in_ct('df -h /dev/shm')}`; {bigger}; until then, "
            "fewer DataLoader workers (num_workers) or a smaller prefetch_factor"
        ),
    )


@rule(
    Kind("nccl_timeout", specificity=56, cause="nccl_timeout", alerts=True, host_word="hung"),
    Kind("nccl_error", specificity=57, cause="nccl_error", alerts=True, host_word="dead"),
)
def rule_nccl(ctx: Context) -> Finding | None:
    """NCCL's watchdog timed a collective out (the collective, its sequence
    number, the rank, the timeout), or an NCCL error: one rank is stuck or
    gone and the others waited for it. `d` dumps every rank's stacks."""
    hit = _last_match(ctx, _NCCL_TIMEOUT, _NCCL_TIMEOUT_WORDS)
    if hit is not None:
        line, m = hit
        seq, op = m.group(1), m.group(2)
        timeout_ms = bounded_int(m.group(3), 0) or 0
        ran_ms = bounded_int(m.group(4), 0) or 0
        r = _RANK.search(line)
        rank = f"rank {r.group(1) or r.group(2)}" if r is not None else "a rank"
        return Finding(
            kind="nccl_timeout",
            severity=Severity.ERROR,
            title=(
                f"NCCL timeout{_step_words(ctx)}: {rank}'s {op} (SeqNum {seq}) ran "
                f"{dur(ran_ms / 1000)}, past its {dur(timeout_ms / 1000)} timeout — "
                "another rank never joined it"
            ),
            evidence=[f"the log: {short(one_line(line, 400), 300)}"],
            action="dump",
            action_label="py-spy dump every rank",
            fix="the rank whose stack is not in the collective is the stuck one",
        )
    hit = _last_match(ctx, _NCCL_ERROR, _NCCL_ERROR_WORDS)
    if hit is None:
        return None
    line, m = hit
    what = (m.group(1) or f"nccl{m.group(2)}").strip()
    return Finding(
        kind="nccl_error",
        severity=Severity.ERROR,
        title=f"NCCL error{_step_words(ctx)}: {short(what, 80)}",
        evidence=[f"the log: {short(one_line(line, 400), 300)}"],
        action="dump" if ctx.proc_alive else "",
        action_label="py-spy dump every rank" if ctx.proc_alive else "",
        fix="run with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) to see which link failed",
    )


def _losses(ctx: Context, newest: int | None = None) -> list[tuple[float, float]]:
    """The losses of this run: since the step counter last went back (a
    relaunch's first steps are not a spike against the old run's last ones);
    only the `newest` so many, when given (the rules run twice a second, the
    ring holds thousands)."""
    since = ctx.metrics.restarted_at
    out: list[tuple[float, float]] = []
    for t, v in reversed(ctx.metrics.loss.held()):
        if since is not None and t < since:
            break  # the ring is in time order
        if v is not None:
            out.append((t, v))
            if newest is not None and len(out) >= newest:
                break
    out.reverse()
    return out


def _step_of_loss(ctx: Context, back: int) -> int | None:
    """The step printed with the loss `back` places from the newest (1:
    the newest), when the metrics kept it beside the loss."""
    m = ctx.metrics
    if len(m.loss_step) != len(m.loss) or back > len(m.loss):
        return None
    losses, steps = m.loss.values(), m.loss_step.values()
    found = 0
    for i in range(len(losses) - 1, -1, -1):
        if losses[i] is None:
            continue
        found += 1
        if found == back:
            s = steps[i]
            return int(s) if s is not None else None
    return None


@rule(Kind("loss_nan", specificity=58, cause="loss", stage=1, alerts=True))
def rule_loss_nan(ctx: Context) -> Finding | None:
    """The latest loss is NaN or inf: since which step, for how long."""
    last = ctx.metrics.loss.last()
    if last is not None and math.isfinite(last):
        return None  # the newest point is a finite loss: nothing to walk
    pts = _losses(ctx)
    if not pts or math.isfinite(pts[-1][1]):
        return None
    first = len(pts) - 1
    while first > 0 and not math.isfinite(pts[first - 1][1]):
        first -= 1
    since_t = pts[first][0]
    since_step = _step_of_loss(ctx, len(pts) - first)
    if since_step is None:
        steps = [(t, s) for t, s in ctx.metrics.step.points() if s is not None]
        since_step = next((int(s) for t, s in steps if t >= since_t), None)
    last_ok = pts[first - 1][1] if first > 0 else None
    bad = "NaN" if math.isnan(pts[-1][1]) else "inf"
    where = f"since step {since_step}" if since_step is not None else "in its last lines"
    if since_step is not None and first == 0:
        # no finite loss among those kept: the NaN may have begun before the
        # oldest (a log read from its tail, a ring that moved on) — on an H100
        # a NaN from step 20 was said "since step 110", the oldest kept
        where += f" or earlier (no finite loss among the {len(pts)} gputui has)"
    ev = [f"{len(pts) - first} losses in a row not finite, the first {dur(ctx.now - since_t)} ago"]
    if last_ok is not None:
        ev.append(f"the last finite loss: {last_ok:.4g}")
    return Finding(
        kind="loss_nan",
        severity=Severity.ERROR,
        title=f"loss is {bad} {where}: the run goes on, learning nothing",
        evidence=ev,
        fix=(
            "stop it and resume from the last checkpoint before that step with a lower "
            "learning rate or gradient clipping (bf16/fp16 overflow? check the loss scale)"
        ),
    )


@rule(Kind("loss_spike", specificity=195, cause="loss"))
def rule_loss_spike(ctx: Context) -> Finding | None:
    """The latest loss is SPIKE_FACTOR × the median of the ones before it."""
    vals = [v for _, v in _losses(ctx, newest=SPIKE_WINDOW + 1)]
    if len(vals) < 10 or not all(math.isfinite(v) for v in vals[-SPIKE_WINDOW - 1 :]):
        return None
    last, before = vals[-1], vals[-SPIKE_WINDOW - 1 : -1]
    med = statistics.median(before)
    if med <= 0 or last < SPIKE_FACTOR * med:
        return None
    return Finding(
        kind="loss_spike",
        severity=Severity.WARNING,
        title=f"loss spiked{_step_words(ctx)}: {last:.4g}, {last / med:.1f}× the recent median {med:.4g}",
        evidence=[
            f"median of the {len(before)} losses before it: {med:.4g}; the latest {last:.4g}"
        ],
        fix="watch the next steps; if it does not come back, lower the learning rate or clip gradients",
    )


@rule(Kind("loader_bound", specificity=205, cause="loader_bound"))
def rule_loader_bound(ctx: Context) -> Finding | None:
    """Steps advance, the run's GPUs are mostly idle (median utilization
    low, or a sawtooth), and a data-loader worker (a Python child of the run)
    is at ~100 % CPU: the GPUs wait for data."""
    if not ctx.proc_alive or ctx.loading or ctx.stalled or ctx.hung or not ctx.gpu_views:
        return None
    if ctx.metrics.last_step_time is None or ctx.step_overdue:
        return None
    meds = [g.util_median for g in ctx.gpu_views if g.util_median is not None]
    if not meds or max(meds) >= LOADER_GPU_PCT:
        return None
    main = ctx.proc
    workers = [
        p
        for p in ctx.procs
        if p.is_python
        and main is not None
        and p.ppid == main.pid
        # at the CPU now (R), or busy over the last poll: a shared core keeps
        # a busy worker's share below 100 % and between polls it flickers
        and (p.state == "R" or (p.cpu_pct or 0) >= LOADER_CPU_PCT)
    ]
    if not workers:
        return None
    lows = [min(g.recent_util) for g in ctx.gpu_views if g.recent_util]
    highs = [max(g.recent_util) for g in ctx.gpu_views if g.recent_util]
    ev = [g.line() + f", median {g.util_median or 0:.0f} %" for g in ctx.gpu_views]
    if lows and highs:
        ev.append(f"utilization between {min(lows):.0f} % and {max(highs):.0f} % (the last 30 s)")
    top = max(p.cpu_pct or 0.0 for p in workers)
    ev.append(
        f"{len(workers)} loader worker(s) busy on CPU: "
        + ", ".join(f"PID {p.pid} {p.cpu_pct or 0:.0f} %" for p in workers[:4])
    )
    return Finding(
        kind="loader_bound",
        severity=Severity.WARNING,
        title=(
            f"data-loader bound: GPUs at {max(meds):.0f} % (median) while {len(workers)} "
            f"loader worker(s) are busy on CPU{f' (up to {top:.0f} %)' if top > 0 else ''} "
            "— the GPUs wait for data"
        ),
        evidence=ev,
        fix=(
            "raise DataLoader num_workers (and pin_memory=True, persistent_workers=True), "
            "or move decoding/augmentation off the critical path (pre-tokenize, cache)"
        ),
    )
