"""End to end, on the test bed: the disk holding the log fills up.

The CT's own mount namespace gets a 1 MiB tmpfs (`mount -t tmpfs -o size=1m`,
inside the CT, so this machine never sees it and it goes with the CT). A
real run in real tmux writes its log there through `| tee`, then a
"checkpoint" fills the disk: Python's write fails with ENOSPC, tee's next
write fails ("tee: …/train.log: No space left on device") and the log stops
growing while the process stays alive and its GPU busy. `gputui doctor
--json` must name the disk (free/total from the agent's statvfs, or from the
plain-command loop's `stat -f` in a CT without python3), and no buffered,
silent or stalled finding may stand in its place.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

import pytest

import scenarios as sc

DISK_BYTES = 1 << 20

# Block-buffered (no -u, no PYTHONUNBUFFERED): without the disk rule the
# silent log would be blamed on the buffer.
FILL = """import os, sys, time
# exactly two pages of log: no room left in its last page once the disk is full
for i in range(64):
    print(("step %d loss %.4f " % (i, 1.0 / (i + 1))).ljust(127, "x"))
sys.stdout.flush()
time.sleep(0.3)
try:
    with open("disk/ckpt.pt", "wb") as f:
        f.write(b"\\0" * (4 << 20))
except OSError as e:  # tee's write of this line fails: its error is the pane's last line
    print("checkpoint failed: %s" % e, file=sys.stderr)
sys.stderr.flush()
time.sleep(0.3)
open("filled", "w").close()
i = 64
while True:  # busy on its GPU, a short line now and then (into the buffer)
    i += 1
    print("step %d loss %.4f" % (i, 1.0 / (i + 1)))
    time.sleep(0.5)
"""

SHELL_FILL = """i=0
while [ $i -lt 100 ]; do echo "step $i loss 0.5"; i=$((i+1)); done
sleep 0.3
head -c 4194304 /dev/zero > disk/ckpt.pt 2>/dev/null
: > filled
while :; do echo "step $i loss 0.5"; i=$((i+1)); sleep 0.01; done
"""


def mount_tiny_disk(testbed: Any, ct: int, where: Path) -> None:
    """A 1 MiB tmpfs at `where`, in the CT's mount namespace only."""
    r = testbed.ct_exec(
        ct,
        [
            "/bin/sh",
            "-c",
            f"mkdir -p {shlex.quote(str(where))} && "
            f"mount -t tmpfs -o size=1m,mode=0777 tmpfs {shlex.quote(str(where))}",
        ],
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in the CT: {r.stderr.strip()}")


def slow_tmux(testbed: Any, ct: int, seconds: float) -> None:
    """The CT's tmux answers `seconds` late (a loaded container), in the CT's
    own /usr/bin of links left by `sc.without_commands`."""
    script = (
        "set -e; real=$(readlink /usr/bin/tmux); rm /usr/bin/tmux; "
        f'printf \'#!/bin/sh\\nsleep {seconds:g}\\nexec %s "$@"\\n\' "$real" > /usr/bin/tmux; '
        "chmod 0755 /usr/bin/tmux"
    )
    r = testbed.ct_exec(ct, ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stderr


def wait_filled(run: sc.Run, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not (run.dir / "filled").exists():
        assert time.monotonic() < deadline, "the run never filled its disk"
        time.sleep(0.05)


def log_in_ct(testbed: Any, ct: int, log: Path) -> int:
    r = testbed.ct_exec(ct, ["stat", "-c", "%s", str(log)])
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def assert_names_the_disk(r: sc.DoctorResult, log: Path) -> dict[str, Any]:
    assert r.rc == 1, r.stdout + r.stderr
    kinds = r.kinds()
    assert kinds[0] == "disk_full", kinds
    f = r.finding("disk_full")
    assert f["severity"] == "error"
    assert f["title"].startswith(f"the disk holding {log} is full: ")
    assert "free of 1 MiB" in f["title"], f["title"]
    assert "pct resize" in f["fix"] and "du -xsh" in f["fix"]
    for wrong in ("busy_but_silent", "buffered_output", "progress_stalled", "held_but_idle"):
        assert wrong not in kinds, kinds
    st = r.doc["snapshot"]["log"]  # type: ignore[index]
    assert st["fs_total"] == DISK_BYTES and st["fs_free"] < 100 << 20, st
    return f


@pytest.mark.timeout(90)
def test_a_full_disk_under_a_tee_run_is_named_not_called_buffered(testbed: Any, ct: int) -> None:
    run = sc.prepare(testbed, ct, "diskfull", "fill")
    (run.dir / "fill.py").write_text(FILL)
    mount_tiny_disk(testbed, ct, run.dir / "disk")
    log = run.dir / "disk" / "train.log"
    sc.launch(testbed, run, f"python3 fill.py 2>&1 | tee {shlex.quote(str(log))}")
    pid = sc.wait_python(run, "fill.py")
    testbed.set_gpus({"gpus": [sc.gpu(0, 45_000, 98)], "apps": [sc.app(pid, 0, 44_800)]})
    wait_filled(run)
    time.sleep(1.0)  # the log has been silent past the 1 s stale threshold
    assert log_in_ct(testbed, ct, log) == 8192  # the 64 lines before the disk filled
    flags = ["--session", "fill", "--log", str(log), "--stale-after", "1"]
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--json"))
    f = assert_names_the_disk(r, log)
    evidence = "\n".join(f["evidence"])
    assert f"the pane says: tee: {log}: No space left on device" in evidence, evidence
    assert "last written" in evidence
    assert log_in_ct(testbed, ct, log) == 8192  # the log really stopped
    assert r.doc["snapshot"]["process"]["pid"]  # type: ignore[index]  # the run lives on


@pytest.mark.timeout(90)
def test_without_python3_the_plain_commands_stat_the_disk_too(testbed: Any, ct: int) -> None:
    run = sc.prepare(testbed, ct, "diskfullsh", "fillsh")
    (run.dir / "fill.sh").write_text(SHELL_FILL)
    mount_tiny_disk(testbed, ct, run.dir / "disk")
    sc.without_commands(testbed, ct, "python3*")
    log = run.dir / "disk" / "train.log"
    sc.launch(testbed, run, f"sh fill.sh 2>&1 | tee {shlex.quote(str(log))}")
    wait_filled(run)
    slow_tmux(testbed, ct, seconds=3)  # a loaded CT: the plain loop answers after the settle
    flags = ["--session", "fillsh", "--log", str(log), "--stale-after", "1"]
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--json"))
    assert_names_the_disk(r, log)
