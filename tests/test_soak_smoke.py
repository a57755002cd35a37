"""bench/soak.py at CI size (--short): every fault once, back to back, on the
real-sshd test bed, with `gputui watch` and the dashboard (in tmux) watching
a run at 40 lines/s. What must hold however loaded the machine is: nothing
crashed, every fault was recovered from (a line written after it reached the
history), no line is in the history twice, every missing line lies beside a
fault, and the measurements were taken. Figures belong in bench/RESULTS.md
(the long soak), not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(420)
def test_the_short_soak_loses_nothing_silently_and_crashes_nowhere(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "soak.py"),
            "--short",
            "--ct",
            "979",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    res = json.loads(out.read_text())
    said = f"faults {res['faults']}; lines {res['lines']}"
    assert res["crashes"] == [], said
    assert [f["fault"] for f in res["faults"]] == res["args"]["faults"], said
    assert len(res["faults"]) == 11, said
    late = [f["fault"] for f in res["faults"] if f["recovery_s"] is None]
    assert not late, f"no line written after {late} reached the history; {said}"
    lines = res["lines"]
    assert lines["recorded"] > 0 and lines["doubled"] == 0, said
    alone = [g for g in lines["missing_unexplained"] if not g.get("near")]
    assert not alone, f"lines missing away from any fault: {alone}"
    roles = {r for s in res["samples"] for r in s["roles"]}
    assert {"watch", "dashboard", "host-helpers"} <= roles, roles
    assert res["history_reader"]["opens"] > 0 and not res["history_reader"]["errors"]
    tab = next(f for f in res["faults"] if f["fault"] == "serve_tab")
    assert tab.get("serve_children_after_10s", 0) == 0, tab
