"""A scripted training run for the diagnosis benchmark (bench/diagnosis.py).

    python3 [-u] diag_run.py MODE STEP_S PRE_S PAUSE_S [RANK]

Prints `step N | loss X | T tok/s` every STEP_S seconds; MODE decides what
happens after PRE_S seconds. Each phase change is appended to `phases.log`
next to this file as `TIME PHASE` (epoch seconds), so the benchmark's stand-in
GPU readings follow the real process and the event time is the process's own.
Runs without -u behind a pipe are block-buffered, as in the field.

modes: train (forever) · hang · loading (PAUSE_S of loading first) ·
checkpoint · eval · crash (a CUDA error) · finish (exit 0) · import
(ImportError at start) · rank (one of 4 ranks; rank 2 hangs, the others wait
in a "collective" and rank 0 times out after PAUSE_S like NCCL's watchdog) ·
loader (a data-loader stall: PAUSE_S of CPU work with no step, then steps) ·
nccl (hangs in NCCL-style init: a few init lines, never a step) · oom
(allocates host memory until the kernel's OOM killer kills it).
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def phase(name: str) -> None:
    with open(os.path.join(HERE, "phases.log"), "a") as f:
        f.write(f"{time.time():.3f} {name}\n")


def steps(step_s: float, seconds: float, start: int = 0) -> int:
    """Print steps for `seconds` (forever when < 0); the last step number."""
    n = start
    t_end = time.monotonic() + seconds
    while seconds < 0 or time.monotonic() < t_end:
        n += 1
        print(f"step {n} | loss {8.0 / (1 + n * 0.01):.4f} | {48000 + n % 97} tok/s")
        time.sleep(step_s)
    return n


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


if __name__ == "__main__":
    main()
