"""`gputui doctor` never says "nothing wrong" while it does not know
(issue 44), end to end on the SSH test bed (real sshd on 127.0.0.1, the
stand-in `pct` and `nvidia-smi`, real tmux and python3 in the CT):

- no tmux server and no run in the CT, `doctor --ct N` as a newcomer types
  it: it says no run was found, exit 1 (it said "session none watched …
  ✓ nothing wrong", exit 0);
- `--session NAME` with no such session: it says so, exit 1;
- a block-buffered run a few seconds in (a pipe into tee, no -u, GPUs at
  100 %, ~150 bytes of stderr in the log, no step): doctor watches the log
  up to --buffer-watch for the verdict, and still unknown says "not yet
  known" with what it saw, exit 1 (it said "✓ nothing wrong", exit 0)."""

from __future__ import annotations

import shlex
import time
from typing import Any

import pytest

import scenarios as sc

# 152 bytes of stderr at start (unbuffered: they reach the log), then steps on
# a block-buffered stdout (nothing reaches the log for minutes)
BUFFERED = """import sys, time
sys.stderr.write("W1207 08:00:00 init.py:12] NCCL_P2P_DISABLE is set; "
                 "world size 1, rank 0, using device cuda:0 (H200) and bf16 mixed precision...\\n")
n = 0
while True:
    n += 1
    print("step %d | loss %.4f | 48000 tok/s" % (n, 8.0 / (1 + n * 0.01)))
    time.sleep(0.5)
"""


@pytest.mark.timeout(60)
def test_no_tmux_server_and_no_run_is_said_exit_1(testbed: Any, ct: int) -> None:
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"))
    assert r.rc == 1, r.stdout + r.stderr
    f = r.finding("no_run")
    assert f["severity"] == "warning"
    assert "no tmux server" in f["title"], f["title"]
    text = sc.finish_doctor(sc.start_doctor(testbed, ct))
    assert text.rc == 1 and "nothing wrong" not in text.stdout, text.stdout
    assert "no run found" in text.stdout, text.stdout


@pytest.mark.timeout(60)
def test_a_session_that_is_not_there_is_said_exit_1(testbed: Any, ct: int) -> None:
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--session", "dflash", "--json"))
    assert r.rc == 1, r.stdout + r.stderr
    f = r.finding("session_missing")
    assert f["severity"] == "warning" and "dflash" in f["title"], f
    text = sc.finish_doctor(sc.start_doctor(testbed, ct, "--session", "dflash"))
    assert text.rc == 1 and "nothing wrong" not in text.stdout, text.stdout


@pytest.mark.timeout(90)
def test_buffering_not_yet_known_while_gpus_busy_is_no_check_mark(testbed: Any, ct: int) -> None:
    run = sc.prepare(testbed, ct, "notknown", "early")
    (run.dir / "early.py").write_text(BUFFERED)
    sc.launch(testbed, run, f"python3 early.py 2>&1 | tee {shlex.quote(str(run.log))}")
    pid = sc.wait_python(run, "early.py")
    own = {**sc.app(pid, 0, 44_800), "sm": 100.0}  # pmon: the run itself keeps it busy
    testbed.set_gpus({"gpus": [sc.gpu(0, 45_000, 100)], "apps": [own]})
    deadline = time.monotonic() + 10
    # the python is up before tee has opened (created) the log: no file yet is 0 bytes
    while time.monotonic() < deadline and (not run.log.exists() or run.log.stat().st_size < 100):
        time.sleep(0.1)
    flags = ["--session", "early", "--log", str(run.log), "--stale-after", "120"]
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--buffer-watch", "3", "--json"))
    assert r.rc == 1, r.stdout + r.stderr
    if "buffering_unknown" not in r.kinds():
        # a host too loaded to show the run's processes within the watch: said
        # so (watch_incomplete), which is no "nothing wrong" either
        assert "watch_incomplete" in r.kinds(), r.stdout
        return
    f = r.finding("buffering_unknown")
    assert f["severity"] == "warning" and "not yet known" in f["title"], f
    assert "no step" in " ".join(f["evidence"]), f["evidence"]
    text = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--buffer-watch", "3"))
    assert text.rc == 1, text.stdout + text.stderr
    assert "nothing wrong" not in text.stdout and "not yet known" in text.stdout, text.stdout
