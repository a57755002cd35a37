"""One corpus case replayed as a real process (bench/corpus.py, tests/test_corpus.py):

    python3 -u corpus_replay.py TEXT END HOLD_S

writes TEXT's bytes to stdout line by line (a few ms apart, the last line as
it is: a progress bar the kill cut has no newline), touches TEXT.done, stays
alive until TEXT.go appears (the doctor asked "during"; HOLD_S at most), then
ends as END says:
`exit N` (134: an abort, as "Aborted (core dumped)"), `kill` (a SIGKILL of
its own: the OOM killer, a scheduler, kill -9), `prompt` (reads a key from
its terminal, as a start script's "press any key"), `alive` (sleeps on)."""

from __future__ import annotations

import os
import signal
import sys
import time


def main() -> None:
    path, end, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with open(path, "rb") as f:
        data = f.read()
    out = sys.stdout.buffer
    for chunk in data.splitlines(keepends=True):
        out.write(chunk)
        out.flush()
        time.sleep(0.005)
    with open(path + ".done", "w"):
        pass
    if end == "prompt":
        sys.stdin.readline()  # the run waits at its prompt, reading the terminal
        return
    deadline = time.monotonic() + hold
    while not os.path.exists(path + ".go") and time.monotonic() < deadline:
        time.sleep(0.05)
    if end == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if end.startswith("exit"):
        code = int(end.split()[1])
        if code == 134:
            os.abort()
        sys.exit(code)
    time.sleep(3600)  # alive


if __name__ == "__main__":
    main()
