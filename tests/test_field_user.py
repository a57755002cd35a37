"""A new user's first hour with gputui on a Proxmox host, driven as they
would (the CLI in a subprocess, the dashboard's keys) against the test bed:
real sshd, the stand-in pct's CTs in their own namespaces, real tmux, real
python3 runs writing real logs. Each case failed on the code before its fix."""

from __future__ import annotations

from typing import Any

import scenarios as sc
from helpers import wait_for

LOOP = "import time\nwhile True:\n    print('step 1 | loss 1.0', flush=True)\n    time.sleep(0.3)"


def test_a_log_gputui_will_not_follow_is_a_finding_not_nothing_wrong(testbed: Any, ct: int) -> None:
    """root's run tees into a directory every user may write (a shared
    /workspace made 0777, not sticky): gputui refuses to follow that log as
    root — right — but doctor found it from the run's stdout, said the
    refusal on its `log` line only, then "✓ nothing wrong", exit 0: no step,
    no stall, no buffering would ever be seen. Now a WARNING names the log,
    why and the fix."""
    d = "/tmp/shared"  # the CT's own /tmp (sticky); the directory in it is not
    run = f'mkdir -p {d} && chmod 777 {d} && cd {d} && python3 -c "{LOOP}" | tee train.log'
    sc.tmux_in_ct(testbed, ct, "new", "-d", "-s", "train", run)
    wait_for(
        lambda: testbed.ct_exec(ct, ["test", "-s", f"{d}/train.log"]).returncode == 0,
        10,
        "the run's log",
    )
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"), timeout=60)
    assert r.rc == 1, r.stdout + r.stderr
    f = r.finding("log_not_followed")
    assert f["severity"] == "warning"
    assert f"{d}/train.log" in f["title"], f["title"]
    assert any(f"directory {d} on its way may be changed" in e for e in f["evidence"]), f
    assert "keep the log in a directory only its owner can write" in f["fix"], f["fix"]
