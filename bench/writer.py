"""A stand-in training run for the benchmarks (stdlib only; runs inside the CT).

Writes log lines to its stdout (the log file, redirected by the tmux command)
with unbuffered `os.write`, so a line is in the file the moment it is stamped:

    t=<unix time> seq=<n> step <n> loss <x> tok/s <y>

The rate and bursts are driven by a small JSON control file, re-read every
20 ms: {"rate": lines per second, "burst": lines, "burst_id": n, "stop": bool}.
A burst writes `burst` lines as fast as the file takes them (10,000 a write),
then one stamped line with "BURST-END <burst_id>".
"""

# ruff: noqa: UP031  (% formatting: the burst loop is hot and this runs on any python3)

import json
import os
import random
import sys
import time

CTL = sys.argv[1]
PAD = "x" * 24


def read_ctl() -> dict:
    try:
        with open(CTL) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def stamped(seq: int, extra: str = "") -> bytes:
    now = time.time()
    loss = 10.0 / (seq + 1)
    line = "t=%.6f seq=%d step %d loss %.4f tok/s %d %s%s\n" % (
        now,
        seq,
        seq,
        loss,
        12000 + seq % 997,
        PAD,
        extra,
    )
    return line.encode()


def burst(n: int, bid: int) -> None:
    chunk = 10000
    done = 0
    while done < n:
        k = min(chunk, n - done)
        data = "".join(
            "burst %d line %d step %d loss 1.5 %s\n" % (bid, done + i, done + i, PAD)
            for i in range(k)
        ).encode()
        while data:
            w = os.write(1, data)
            data = data[w:]
        done += k


def main() -> None:
    seq = 0
    last_burst = 0
    ctl = read_ctl()
    next_ctl = time.monotonic() + 0.02
    next_line = time.monotonic()
    while not ctl.get("stop"):
        now = time.monotonic()
        if now >= next_ctl:
            ctl = read_ctl()
            next_ctl = now + 0.02
            bid = int(ctl.get("burst_id", 0) or 0)
            if bid != last_burst and ctl.get("burst"):
                last_burst = bid
                burst(int(ctl["burst"]), bid)
                seq += 1
                os.write(1, stamped(seq, " BURST-END %d" % bid))
                next_line = time.monotonic()
        rate = float(ctl.get("rate", 0) or 0)
        if rate <= 0:
            time.sleep(0.02)
            next_line = time.monotonic()
            continue
        if now >= next_line:
            seq += 1
            os.write(1, stamped(seq))
            # Poisson arrivals: a steady period would phase-lock with the UI's 10 Hz timer
            next_line += random.expovariate(rate)
            if next_line < now - 1.0:  # fell far behind (paused machine): do not catch up
                next_line = now
            continue
        time.sleep(min(next_line - now, max(0.0, next_ctl - now), 0.02))


if __name__ == "__main__":
    main()
