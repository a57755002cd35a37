"""A scripted training run for the diagnosis benchmark (bench/diagnosis.py).

    python3 [-u] diag_run.py MODE STEP_S PRE_S PAUSE_S [RANK]

Prints `step N | loss X | T tok/s` every STEP_S seconds; MODE decides what
happens after PRE_S seconds. Each phase change is appended to `phases.log`
next to this file as `TIME PHASE` (epoch seconds), so the benchmark's stand-in
GPU readings follow the real process and the event time is the process's own.
Runs without -u behind a pipe are block-buffered, as in the field.

modes: train (forever) · flushed (train, each line flushed) · cudaoom (a
torch CUDA OOM traceback) · nan (the loss turns NaN, the run goes on) ·
loaderbound (a loader worker at 100 % CPU) · hang · loading (PAUSE_S of loading first) ·
checkpoint · eval · crash (a CUDA error) · finish (exit 0) · import
(ImportError at start) · rank (one of 4 ranks; rank 2 hangs, the others wait
in a "collective" and rank 0 times out after PAUSE_S like NCCL's watchdog) ·
loader (a data-loader stall: PAUSE_S of CPU work with no step, then steps) ·
nccl (hangs in NCCL-style init: a few init lines, never a step) · oom
(allocates host memory until the kernel's OOM killer kills it) · prompt
(wandb's "Enter your choice:" on its terminal) · breakpoint (a pdb prompt) · straggler
(one of 4 ranks, each printing `[rankN]:` lines with its own forward/backward
time; after PRE_S rank 2's own time is 1.9× the others').
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def phase(name: str) -> None:
    with open(os.path.join(HERE, "phases.log"), "a") as f:
        f.write(f"{time.time():.3f} {name}\n")


def steps(
    step_s: float, seconds: float, start: int = 0, loss: float | None = None, flush: bool = False
) -> int:
    """Print steps for `seconds` (forever when < 0); the last step number.
    `loss`: print this loss (nan) instead of the falling one; `flush`:
    flush each line (print(..., flush=True), as Megatron's print_rank_0)."""
    n = start
    t_end = time.monotonic() + seconds
    while seconds < 0 or time.monotonic() < t_end:
        n += 1
        value = 8.0 / (1 + n * 0.01) if loss is None else loss
        print(f"step {n} | loss {value:.4f} | {48000 + n % 97} tok/s", flush=flush)
        time.sleep(step_s)
    return n


OOM_TEXT = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 139.81 GiB of which 1.23 GiB is free. Of the allocated memory "
    "121.10 GiB is allocated by PyTorch, and 16.20 GiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)


def main() -> None:
    mode = sys.argv[1]
    step_s, pre_s, pause_s = (float(x) for x in sys.argv[2:5])
    if mode == "import":
        phase("start")
        import gputui_missing_module_xyz  # noqa: F401 (the ImportError is the point)
    phase("start")
    if mode == "train":
        phase("train")
        steps(step_s, -1)
    elif mode == "hang":
        phase("train")
        steps(step_s, pre_s)
        phase("hang")
        threading.Event().wait()  # a collective that never completes
    elif mode == "loading":
        phase("loading")
        print("loading checkpoint shards...", flush=True)
        time.sleep(pause_s)
        phase("train")
        steps(step_s, -1)
    elif mode in ("checkpoint", "eval"):
        phase("train")
        n = steps(step_s, pre_s)
        phase(mode)
        if mode == "checkpoint":
            print(f"step {n}: saving checkpoint to ckpt.pt", flush=True)
            t_end = time.monotonic() + pause_s
            with open(os.path.join(HERE, "ckpt.pt"), "wb") as f:
                while time.monotonic() < t_end:  # the file grows, the CPU works
                    f.write(os.urandom(1 << 16))
                    f.flush()
                    time.sleep(0.05)
        else:
            print(f"step {n}: evaluating on 2000 batches...", flush=True)
            time.sleep(pause_s)
        phase("train")
        steps(step_s, -1, n)
    elif mode == "crash":
        phase("train")
        steps(step_s, pre_s)
        phase("crashed")
        raise RuntimeError(
            "CUDA error: an illegal memory access was encountered\n"
            "CUDA kernel errors might be asynchronously reported at some other API call"
        )
    elif mode == "finish":
        phase("train")
        steps(step_s, pre_s)
        print("training done", flush=True)
        phase("exited")
    elif mode == "rank":
        rank(int(sys.argv[5]), step_s, pre_s, pause_s)
    elif mode == "straggler":
        straggler(int(sys.argv[5]), step_s, pre_s)
    elif mode == "loader":
        phase("train")
        n = steps(step_s, pre_s)
        phase("loader")
        t_end = time.monotonic() + pause_s
        x = 0
        while time.monotonic() < t_end:  # decoding/augmenting on the CPU: no step
            x = (x * 31 + 7) % 1_000_003
        phase("train")
        steps(step_s, -1, n)
    elif mode == "nccl":
        phase("init")
        print("NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>", flush=True)
        print("NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)", flush=True)
        threading.Event().wait()  # waiting for the other ranks that never come
    elif mode == "cudaoom":  # torch's CUDA OOM: a traceback, exit 1
        phase("train")
        steps(step_s, pre_s)
        phase("cudaoom")
        print("Traceback (most recent call last):", flush=True)
        print('  File "train.py", line 88, in <module>', flush=True)
        print(OOM_TEXT, flush=True)
        sys.exit(1)
    elif mode in ("prompt", "breakpoint"):  # it asks its terminal, and waits
        phase("train")
        steps(step_s, pre_s)
        phase("prompt")
        if mode == "breakpoint":
            breakpoint()  # a pdb prompt, as a breakpoint() left in the code
        print("wandb: (1) Create a W&B account", flush=True)
        print("wandb: (2) Use an existing W&B account", flush=True)
        print("wandb: (3) Don't visualize my results", flush=True)
        input("wandb: Enter your choice: ")
        steps(step_s, -1)
    elif mode == "nan":  # the loss turns NaN; the run goes on
        phase("train")
        n = steps(step_s, pre_s)
        phase("nan")
        steps(step_s, -1, n, loss=float("nan"))
    elif mode == "flushed":  # no -u, but every line flushed by the program
        phase("train")
        steps(step_s, -1, flush=True)
    elif mode == "loaderbound":  # a loader worker at 100 % CPU, slow steps
        import subprocess

        worker = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            phase("train")
            steps(step_s, -1)
        finally:
            worker.kill()
    elif mode == "oom":
        phase("train")
        steps(step_s, pre_s)
        phase("oom")
        hoard = []
        while True:  # a leak: the cgroup's limit is reached, the OOM killer ends it
            hoard.append(bytearray(16 << 20))
            time.sleep(0.01)


def rank(r: int, step_s: float, pre_s: float, timeout_s: float) -> None:
    """One rank of four: all step together; after pre_s rank 2 hangs, the
    others wait for it in the all-reduce; rank 0 times out like NCCL."""
    phase(f"rank{r}")
    t_end = time.monotonic() + pre_s
    n = 0
    while time.monotonic() < t_end:
        n += 1
        if r == 0:
            print(f"[rank0] step {n} | loss {8.0 / (1 + n * 0.01):.4f} | 48000 tok/s", flush=True)
        time.sleep(step_s)
    if r == 2:
        phase("hang")
        threading.Event().wait()
    time.sleep(timeout_s)  # waiting in the collective (the GPU spins)
    if r == 0:
        phase("timeout")
        print(
            "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            f"timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            f"Timeout(ms)={int(timeout_s * 1000)}) ran for {int(timeout_s * 1000) + 3} "
            "milliseconds before timing out.",
            flush=True,
        )
        raise RuntimeError("NCCL error: collective operation timeout (ALLREDUCE)")
    sys.exit(1)


def straggler(r: int, step_s: float, pre_s: float) -> None:
    """One rank of four stepping together (the all-reduce makes every
    step as long as the slowest rank's); each prints its own forward/backward
    time, as a program timing its work before the collective does. After
    pre_s rank 2's own time is 1.9× the others' (a throttled GPU, a slow
    loader on its node)."""
    phase(f"rank{r}")
    t_slow = time.monotonic() + pre_s
    slow = False
    n = 0
    while True:
        n += 1
        if r == 2 and not slow and time.monotonic() >= t_slow:
            phase("straggle")
            slow = True
        own = step_s * 0.6 * (1.9 if slow else 1.0) * (1 + 0.01 * r)
        loss = 8.0 / (1 + n * 0.01)
        print(f"[rank{r}]:step {n} | loss {loss:.4f} | fwd_bwd time {own * 1000:.0f}ms", flush=True)
        time.sleep(step_s)


if __name__ == "__main__":
    main()
