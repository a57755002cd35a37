"""The dashboard on a GPU shared by two runs (issue 22), on the test bed.

Real tmux sessions "dflash" (watched) and "eval" in the stand-in CT, real
python3 processes, the stand-in nvidia-smi listing both on GPU 0 with their
own SM utilization, the real app over real ssh: the GPU row says who holds
what ('held by this run (10.6 GiB) · session eval (PID N root, 5.1 GiB)',
its user as the agent in the CT reads it), the training-process panel says
the GPU is shared, and no word anywhere advises killing the other run.
"""

from __future__ import annotations

from typing import Any

import pytest

import scenarios as sc
from gputui.diagnose import Thresholds
from ui_scenarios import make_app, screen_text, settings_for, until


def _line(text: str, needle: str) -> str:
    return next((x for x in text.splitlines() if needle in x), "")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
async def test_a_gpu_shared_by_two_runs_names_the_other_session_and_no_kill(
    testbed: Any, ct: int, size: tuple[int, int]
) -> None:
    train = sc.prepare(testbed, ct, "ui-shared-train", "dflash")
    other = sc.prepare(testbed, ct, "ui-shared-eval", "eval")
    sc.launch(testbed, train, sc.tee_command(train.path("start_training.sh"), str(train.log)))
    sc.launch(testbed, other, sc.tee_command(other.path("start_training.sh"), str(other.log)))
    pid = sc.wait_python(train, "train.py")
    eval_pid = sc.wait_python(other, "train.py")
    testbed.set_gpus(
        {
            "gpus": [sc.gpu(0, 16_100, 98), sc.gpu(1, 0, 0)],
            "apps": [
                {**sc.app(pid, 0, 10_900), "sm": 60},
                {**sc.app(eval_pid, 0, 5_200), "sm": 38},
            ],
        }
    )
    settings = settings_for(
        testbed,
        ct,
        session="dflash",
        log=str(train.log),
        interval=0.5,
        diagnosis=Thresholds(stale_after=60.0),
    )
    app, parts = make_app(settings)
    snap = parts.monitor.snapshot
    try:
        async with app.run_test(size=size) as pilot:
            await until(
                lambda: "session eval (PID" in screen_text(app),
                60,
                "the GPU row to name the other run's session",
                lambda: f"{screen_text(app)}\nprocesses: {snap.gpus.processes}",
            )
            eval_ct_pid = next(p.ct_pid for p in snap.gpus.processes if p.host_pid == eval_pid)
            assert eval_ct_pid is not None and eval_ct_pid != eval_pid
            # the host's `pct list`, read once at start, names the CTs
            await until(lambda: f"lxc:{ct}" in snap.container_names, 15, "the CTs' names")
            # whose it is, as the agent in the CT reads it: root's (the
            # stand-in CT's processes are the test's, root's), not marked
            await until(
                lambda: f"session eval (PID {eval_ct_pid} root" in screen_text(app),
                30,
                "the GPU row to name the other run's user",
                lambda: f"{screen_text(app)}\nowners: {snap.gpu_owners}",
            )
            text = screen_text(app)
            print(text)  # shown with -s: how the rows read at this size
            row = _line(text, "held by").strip("│ ")
            assert row.startswith("0 held by this run (10.6 GiB)"), text
            if size[0] >= 100:  # 80 columns: the row may end in an ellipsis
                assert f"session eval (PID {eval_ct_pid} root, 5.1 GiB)" in row, text
            if size[1] >= 30:  # the training-process panel is shown
                # it names the run's GPU share once the poll has found the run's
                # Python process (the GPU row can name the run before, from the
                # GPU process's parents: a loaded CI run saw "no Python process")
                await until(
                    lambda: "GPU 0 10.6G, shared with sess" in screen_text(app),
                    30,
                    "the run panel to name who shares its GPU",
                    lambda: (
                        f"{screen_text(app)}\nprocs: {[(p.pid, p.is_python) for p in snap.procs]}"
                        f" agent error: {parts.monitor.agent_error!r}"
                    ),
                )
            await pilot.pause(1.5)  # a few diagnoses with both holders listed
            said = " ".join(f"{f.title} {f.fix or ''} {' '.join(f.evidence)}" for f in app.findings)
            assert "kill" not in said.lower(), said
            above_keys = "\n".join(screen_text(app).splitlines()[:-1])  # the footer has `k kill`
            assert "kill" not in above_keys.lower(), above_keys
            await pilot.press("q")
            await until(lambda: not app.is_running, 15, "the app to quit")
    finally:
        await parts.on_exit()
