"""Real runs for issue 31 on the GPU machine (bench/gpu/words31.sh):

    python3 failures31.py oom     # steps, then asks for more than the GPU has: CUDA OOM
    python3 failures31.py nan     # steps on the GPU; the loss turns NaN at step 15, goes on
    python3 failures31.py flushed # steps on the GPU, no -u, reconfigure(line_buffering=True)

Each prints `step N | loss X | T tok/s` lines; run behind `2>&1 | tee LOG`."""

import sys
import time

import torch

mode = sys.argv[1]
if mode == "flushed":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
dev = torch.device("cuda")
x = torch.randn(4096, 4096, device=dev)
w = torch.randn(4096, 4096, device=dev, requires_grad=True)
hold = []
for n in range(1, 10_000):
    t0 = time.time()
    y = x @ w
    loss = y.float().pow(2).mean() / 4096.0
    if mode == "nan" and n >= 15:
        loss = loss * float("nan")
    loss.backward()
    torch.cuda.synchronize()
    tok = 4096 * 4096 / max(time.time() - t0, 1e-6) / 1e6
    print(f"step {n} | loss {loss.item():.4f} | {tok:.0f} tok/s", flush=(mode != "flushed"))
    if mode == "oom" and n == 8:
        free, total = torch.cuda.mem_get_info()
        hold.append(torch.empty(int(total * 1.2), dtype=torch.uint8, device=dev))
    time.sleep(0.3)
