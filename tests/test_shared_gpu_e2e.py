"""End to end, on the test bed (issue 22): two runs in one CT on one GPU.

Real tmux sessions "dflash" (watched) and "eval" in the stand-in CT, real
python3 processes, the stand-in nvidia-smi listing both (compute-apps and
`pmon`, each with its own SM utilization) on the host, `gputui doctor` over
real ssh: the other live run is named by its session, never advised to be
killed — the field's 'fix: pct exec 200 -- kill 1732' for a live run.
"""

from __future__ import annotations

from typing import Any

import pytest

import scenarios as sc


@pytest.mark.timeout(90)
def test_two_runs_in_one_ct_the_other_is_named_by_its_session_never_killed(
    testbed: Any, ct: int
) -> None:
    train = sc.prepare(testbed, ct, "shared-train", "dflash")
    other = sc.prepare(testbed, ct, "shared-eval", "eval")
    sc.launch(testbed, train, sc.tee_command(train.path("start_training.sh"), str(train.log)))
    sc.launch(testbed, other, sc.tee_command(other.path("start_training.sh"), str(other.log)))
    pid = sc.wait_python(train, "train.py")
    eval_pid = sc.wait_python(other, "train.py")
    testbed.set_gpus(
        {
            "gpus": [sc.gpu(0, 16_500, 98)],
            "apps": [
                {**sc.app(pid, 0, 10_900), "sm": 60},
                {**sc.app(eval_pid, 0, 5_200), "sm": 38},
            ],
        }
    )
    flags = ["--session", "dflash", "--log", str(train.log), "--stale-after", "60"]
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--json"))
    assert r.doc is not None, r.stdout + r.stderr
    held = {p["host_pid"]: p for p in r.doc["snapshot"]["gpus"]["processes"]}
    eval_ct_pid = held[eval_pid]["ct_pid"]
    assert eval_ct_pid is not None and eval_ct_pid != eval_pid, held  # a CT PID, not the host's
    said = " ".join(f"{f['title']} {f.get('fix') or ''}" for f in r.doc["findings"])
    assert "kill" not in said, said
    assert "gpu_memory_orphaned" not in r.kinds(), r.kinds()
    assert held[eval_pid]["held_by"] == f"held by session eval (PID {eval_ct_pid})", held
    assert held[pid]["held_by"] == "the watched run", held
    assert held[eval_pid]["sm_util"] == 38 and held[eval_pid]["state"], held
    # the text says whose it is after the PID, as the GPU pane: the same user's as the run's
    uid, user = held[eval_pid]["uid"], held[eval_pid]["user"]
    whose = "" if uid is None else f" {user or f'uid {uid}'}"
    text = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags))
    assert f"held by session eval (PID {eval_ct_pid}{whose})" in text.stdout, text.stdout
    assert "not this run's user" not in text.stdout, text.stdout
