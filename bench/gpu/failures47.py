"""Real failures on the GPU for issue 47's words (bench/gpu/deploy_words.sh):

    python3 failures47.py progress  # steps on the GPU with a tqdm-like bar; killed from outside (kill -9)
    python3 failures47.py assert    # steps, then an embedding index out of range: a real device-side assert
    python3 failures47.py gradnan   # steps; from step 20 the gradients are NaN: 'grad norm: nan' every step

Each prints `step N | loss X | grad norm G | T tok/s`; run behind `2>&1 | tee LOG`."""

import sys
import time

import torch

mode = sys.argv[1]
dev = torch.device("cuda")
emb = torch.nn.Embedding(1000, 512).to(dev)
w = torch.nn.Linear(512, 512).to(dev)
opt = torch.optim.SGD(list(emb.parameters()) + list(w.parameters()), lr=1e-3)
for n in range(1, 100_000):
    t0 = time.time()
    hi = 5000 if (mode == "assert" and n >= 25) else 1000  # 5000 >= 1000 rows: out of range
    idx = torch.randint(0, hi, (64, 256), device=dev)
    loss = w(emb(idx)).float().pow(2).mean()
    if mode == "gradnan" and n >= 20:
        loss = loss * float("nan")
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(list(emb.parameters()) + list(w.parameters()), 1.0)
    opt.step()
    torch.cuda.synchronize()
    tok = 64 * 256 / max(time.time() - t0, 1e-6)
    print(
        f"step {n} | loss {loss.item():.4f} | grad norm: {norm.item():.4f} | {tok:.0f} tok/s",
        flush=True,
    )
    if mode == "progress":
        sys.stdout.write(f"\rEpoch 0: {n % 100:3d}%|{'#' * (n % 100 // 10):<10}| {n}/100000")
        sys.stdout.flush()
    time.sleep(0.05)
