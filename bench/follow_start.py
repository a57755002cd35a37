"""What choosing the follower's hands costs each log stream start (issue 34).

FOLLOW_SCRIPT first walks the log's path (one `stat` of every directory on
the way, lexical and resolved) and, for a log that is not root's, starts
again as its owner (setpriv). Measured here: the time from starting the
follower to its header line, on this machine, for

- `no owner check`: the same script with $6 empty (the prologue skipped:
  what every start cost before issue 34),
- `root's log`: a root log below root's directories (walked, stays root),
- `a user's log`: a log of uid 65534 (walked, then setpriv + sh again).

    python bench/follow_start.py [--n 40]

Run as root (the prologue runs only as root). Prints medians and ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gputui.monitor.logfollow import follow_argv


def header_ms(argv: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert p.stdout is not None
        line = p.stdout.readline()
        times.append(time.perf_counter() - t0)
        p.kill()
        p.wait()
        assert line.startswith(b"@gputui ok"), line
    return statistics.median(times) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=40)
    n = ap.parse_args().n
    if os.geteuid() != 0:
        raise SystemExit("run as root: the owner check runs only as root")
    d = Path(tempfile.mkdtemp(prefix="gfs-", dir="/var/tmp"))
    d.chmod(0o755)  # the user passes through to its own directory
    try:
        root_log = d / "root" / "train.log"
        root_log.parent.mkdir()
        root_log.write_text("step 1\n")
        user_log = d / "user" / "train.log"
        user_log.parent.mkdir()
        user_log.write_text("step 1\n")
        shutil.chown(user_log.parent, 65534, 65534)
        shutil.chown(user_log, 65534, 65534)
        skipped = follow_argv(str(root_log), None, None)
        skipped[-1] = ""  # $6 empty: no owner check
        rows = [
            ("no owner check", header_ms(skipped, n)),
            ("root's log", header_ms(follow_argv(str(root_log), None, None), n)),
            ("a user's log", header_ms(follow_argv(str(user_log), None, None), n)),
        ]
    finally:
        shutil.rmtree(d, ignore_errors=True)
    base = rows[0][1]
    print(f"follower start → header, median of {n}")
    for name, ms in rows:
        print(f"  {name:<15} {ms:6.1f} ms  ({ms / base:.2f}× no owner check)")


if __name__ == "__main__":
    main()
