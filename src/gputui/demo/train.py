"""gputui demo training run: stdlib only, no GPU.

Prints `step N | loss X | tok/s Y` lines like a real trainer. Run behind a
pipe (`python3 train.py 2>&1 | tee -a train.log`) its stdout is block-buffered
(8 KiB), so the log stays empty for about a minute while "the GPUs are busy":
the failure gputui's banner explains. With `-u` or PYTHONUNBUFFERED=1 every
line reaches the log at once.

It also writes `phase.json` next to itself (loading / training / stopped and
its pid) so the demo's simulated GPUs can follow it.
"""

import json
import math
import os
import random
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PHASE_FILE = os.path.join(HERE, "phase.json")
LOAD_S = float(os.environ.get("DEMO_LOAD_S", "6"))
STEP_S = float(os.environ.get("DEMO_STEP_S", "0.25"))
STEPS = int(os.environ.get("DEMO_STEPS", "1000000"))


def phase(name):
    tmp = PHASE_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"pid": os.getpid(), "phase": name, "time": time.time()}, f)
    os.replace(tmp, PHASE_FILE)


def stop(signum, frame):
    phase("stopped")
    sys.exit(128 + signum)  # SystemExit flushes stdout on the way out


def main():
    signal.signal(signal.SIGTERM, stop)
    rng = random.Random(0)
    phase("loading")
    print(f"loading model (demo, {LOAD_S:.0f} s)...")
    time.sleep(LOAD_S)
    phase("training")
    # the model's summary, as HF/torch runs print it after loading: ~10 KB,
    # so the first 8 KiB block reaches the log at once and shows the buffer
    # (gputui judges buffering by what the log does; issue 31)
    print("LlamaForCausalLM(")
    for i in range(80):
        print(
            f"  (layers.{i}): LlamaDecoderLayer(self_attn=LlamaAttention(4096, 32 heads), "
            "mlp=LlamaMLP(4096 -> 14336), norms=2 × LlamaRMSNorm(4096))"
        )
    print(")")
    print("training")
    try:
        for step in range(1, STEPS + 1):
            time.sleep(STEP_S)
            loss = 4.0 * math.exp(-step / 300) + 1.2 + rng.uniform(-0.05, 0.05)
            tok_s = 48000 + 2500 * math.sin(step / 20) + rng.uniform(-800, 800)
            print(f"step {step} | loss {loss:.4f} | tok/s {tok_s:.0f}")
    except KeyboardInterrupt:
        print("interrupted: saving nothing, bye")
    finally:
        phase("stopped")


if __name__ == "__main__":
    main()
