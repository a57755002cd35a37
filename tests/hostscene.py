"""A Proxmox host with several containers sharing 8 GPUs, in a test bed.

    scene = build(testbed, first_ct=310)

- CT first_ct     "train": a healthy run (python -u, a line every 0.2 s, | tee),
                  holding GPUs 0 and 1 (busy);
- CT first_ct+1   "sft": the field's buffered run (no -u behind | tee), GPUs 2-3 busy;
- CT first_ct+2   "eval": a session whose run died at once (remain-on-exit, exit 1);
- CT first_ct+3   stopped;
- GPU 4 holds 20 GiB for a PID that no longer exists (memory held by no live
  process); GPUs 5-7 idle.

The stand-in nvidia-smi lists the runs' python processes by their real HOST
PIDs, as nvidia-smi on a Proxmox host does; with `testbed.use_cgroups()` the
CTs sit in `/lxc/<n>/ns` cgroups as on Proxmox VE.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import scenarios
from scenarios import Run

GPUS = 8
GONE_PID_START = 4_000_000  # far above any PID this machine hands out soon


@dataclass
class HostScene:
    healthy: Run
    buffered: Run
    dead: Run
    stopped_ct: int
    gone_pid: int
    cts: list[int] = field(default_factory=list)


def gone_pid() -> int:
    pid = GONE_PID_START
    while os.path.exists(f"/proc/{pid}"):
        pid += 1
    return pid


def gpu_state(scene: HostScene) -> dict[str, Any]:
    gpus = [scenarios.gpu(i, 0, 0) for i in range(GPUS)]
    apps = []
    for run, indexes in ((scene.healthy, (0, 1)), (scene.buffered, (2, 3))):
        for i in indexes:
            gpus[i] = scenarios.gpu(i, 61_000, 97)
            assert run.host_pid is not None
            apps.append(scenarios.app(run.host_pid, i, 60_500))
    gpus[4] = scenarios.gpu(4, 20_480, 0)
    apps.append(scenarios.app(scene.gone_pid, 4, 20_000))
    return {"gpus": gpus, "apps": apps}


def build(testbed: Any, first_ct: int) -> HostScene:
    """The scene above, started and with the GPUs set; `teardown` ends it."""
    cts = list(range(first_ct, first_ct + 4))
    for ct in cts[:3]:
        testbed.ct_create(ct, running=True)
    testbed.ct_create(cts[3], running=False)
    healthy = scenarios.prepare(testbed, cts[0], "healthy", "train")
    scenarios.launch(
        testbed,
        healthy,
        scenarios.tee_command(healthy.path("start_healthy.sh"), str(healthy.log)),
    )
    buffered = scenarios.prepare(testbed, cts[1], "buffered", "sft")
    # 100 steps a second: an 8 KiB block every ~2 s, so the log shows the
    # buffer at once (issue 31: argv alone no longer calls it buffered)
    fast = buffered.dir / "start_fast.sh"
    fast.write_text('#!/bin/bash\ncd "$(dirname "$0")"\nexec python3 train.py 0.01\n')
    scenarios.launch(testbed, buffered, scenarios.tee_command(str(fast), str(buffered.log)))
    dead = scenarios.prepare(testbed, cts[2], "dead", "eval", log="crash.log")
    scenarios.launch(
        testbed,
        dead,
        scenarios.tee_command(dead.path("start_crash.sh"), str(dead.log)),
        remain_on_exit=True,
    )
    scenarios.wait_python(healthy, "train.py")
    scenarios.wait_python(buffered, "train.py")
    scene = HostScene(healthy, buffered, dead, cts[3], gone_pid(), cts)
    testbed.set_gpus(gpu_state(scene))
    return scene


def teardown(testbed: Any, scene: HostScene) -> None:
    for ct in scene.cts:
        testbed.ct_destroy(ct)
