"""A small but real PyTorch training loop for checking gputui on a real GPU.

Prints `step N | loss X | tok/s Y` with plain print() — so when stdout is a
pipe (`| tee log`) Python block-buffers it, exactly the failure gputui
exists to explain. `--hang-after N` allocates, trains N steps, then waits
forever holding its GPU memory (a stand-in for an NCCL deadlock).
"""

from __future__ import annotations

import argparse
import threading
import time

import torch
import torch.nn as nn


def build_model(d_model: int, layers: int, vocab: int) -> nn.Module:
    layer = nn.TransformerEncoderLayer(
        d_model=d_model, nhead=16, dim_feedforward=4 * d_model, batch_first=True
    )
    return nn.Sequential(
        nn.Embedding(vocab, d_model),
        nn.TransformerEncoder(layer, num_layers=layers),
        nn.Linear(d_model, vocab),
    )


def train_step(model: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor) -> float:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1)
        )
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return float(loss.item())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10**9)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--hang-after", type=int, default=-1)
    args = ap.parse_args()

    dev = torch.device("cuda")
    model = build_model(args.d_model, args.layers, args.vocab).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens_per_step = args.batch * args.seq
    t_last = time.time()
    for step in range(1, args.steps + 1):
        batch = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=dev)
        loss = train_step(model, opt, batch)
        now = time.time()
        print(f"step {step} | loss {loss:.4f} | tok/s {tokens_per_step / (now - t_last):.0f}")
        t_last = now
        if step == args.hang_after:
            threading.Event().wait()  # hold the GPU memory, print nothing, forever


if __name__ == "__main__":
    main()
