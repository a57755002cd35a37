"""A stand-in trainer that logs like the HF Trainer: one dict line a step.

    python3 bench/hf_writer.py RATE [--buffered]

Writes `{'t': 1764840000.123, 'loss': 1.23, 'grad_norm': 0.4, 'learning_rate':
0.0001, 'epoch': 0.1}` lines to stdout (`t`: when the line was written, Unix
time, so bench/stream_cost.py can read each line's delay off the screen) at RATE lines a second (Poisson arrivals). Line-buffered by
default (as `python -u`); `--buffered` leaves stdout block-buffered (8 KiB
chunks, as a plain `print` into a file or `| tee`). Stdlib only: it also runs
on the GPU machine (bench/gpu/stream_cost.sh).
"""

import random
import sys
import time


def main() -> None:
    rate = float(sys.argv[1])
    buffered = "--buffered" in sys.argv[2:]
    if not buffered:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    step = 0
    nxt = time.monotonic()
    while True:
        step += 1
        loss = 2.5 / (1 + step / 500) + random.random() * 0.05
        print(
            {
                "t": round(time.time(), 3),
                "loss": round(loss, 4),
                "grad_norm": round(0.4 + random.random() * 0.1, 4),
                "learning_rate": 1e-4,
                "epoch": round(step / 10000, 4),
            }
        )
        nxt += random.expovariate(rate)
        time.sleep(max(0.0, nxt - time.monotonic()))


if __name__ == "__main__":
    main()
