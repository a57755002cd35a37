"""End to end (issue 26): the GPU shared by two Docker containers on the
test bed, their processes in the cgroups Docker gives them
(`/system.slice/docker-<id>.scope`, the stand-in's with cgroups on). Watching
the run in container trainer1, `gputui doctor --docker trainer1` names the
other GPU holder by its container's name from `docker ps` — 'held by
container trainer2 (PID N)', N the host's PID, as nvidia-smi on the host
lists it — as it names 'CT 201', and advises no kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import scenarios as sc

PY = os.path.realpath(sys.executable)
STEPS = "import time\nwhile True:\n    print('step', flush=True)\n    time.sleep(0.2)\n"


def _host_pid(testbed: Any, name: str, pid_inside: int) -> int:
    """The host PID of process `pid_inside` of container `name` (its NSpid)."""
    cid = testbed._tool("docker", "inspect", "-f", "{{.Id}}", name).stdout.strip()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            try:
                cg = Path(f"/proc/{entry}/cgroup").read_text()
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            nspid = [ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")]
            if cid in cg and nspid and nspid[0][-1] == str(pid_inside) and len(nspid[0]) > 1:
                return int(entry)
        time.sleep(0.1)
    raise AssertionError(f"no process {pid_inside} in container {name}")


@pytest.mark.timeout(150)
def test_a_gpu_held_by_another_docker_container_is_named_by_its_name(
    testbed: Any, tmp_path: Path
) -> None:
    testbed.use_cgroups()
    mine, other = f"trainer1-{os.getpid()}", f"trainer2-{os.getpid()}"
    try:
        testbed.container_create("docker", mine)
        testbed.container_create("docker", other, PY, "-c", STEPS)  # its main process holds GPU 0
    finally:
        testbed.use_cgroups(False)
    try:
        cg = Path(f"/proc/{_host_pid(testbed, other, 1)}/cgroup").read_text()
        if "/docker-" not in cg:
            pytest.skip("no writable cgroup2 here: the stand-in's containers have no cgroups")
        work = Path(testbed.workspace) / f"holder-{tmp_path.name}"
        work.mkdir()
        (work / "train.py").write_text(STEPS)
        log = work / "train.log"
        start = ["tmux", "new-session", "-d", "-s", "train", "-c", str(work)]
        r = testbed.container_exec("docker", mine, [*start, f"{PY} train.py > {log} 2>&1"])
        assert r.returncode == 0, r.stderr
        other_pid = _host_pid(testbed, other, 1)
        my_pid = 0
        deadline = time.monotonic() + 20
        while not my_pid and time.monotonic() < deadline:
            ps = testbed.container_exec("docker", mine, ["pgrep", "-fx", f"{PY} train.py"]).stdout
            my_pid = _host_pid(testbed, mine, int(ps.split()[0])) if ps.split() else 0
        testbed.set_gpus(
            {
                "gpus": [sc.gpu(0, 16_500, 98)],
                "apps": [
                    {**sc.app(my_pid, 0, 10_900), "sm": 60},
                    {**sc.app(other_pid, 0, 5_200), "sm": 38},
                ],
            }
        )
        flags = ["--docker", mine, "--session", "train", "--log", str(log), "--stale-after", "60"]
        argv = [
            sys.executable, "-m", "gputui", "doctor", "--host", "gpuhost",
            "--config", str(sc.config_file(testbed)), *flags,
        ]  # fmt: skip
        env = sc.doctor_env(testbed)
        done = subprocess.run(
            [*argv, "--json"], env=env, capture_output=True, text=True, timeout=90, cwd="/"
        )
        doc = json.loads(done.stdout)
        held = {p["host_pid"]: p for p in doc["snapshot"]["gpus"]["processes"]}
        assert held[other_pid]["held_by"] == f"held by container {other} (PID {other_pid})", held
        assert held[my_pid]["held_by"] == "the watched run", held
        said = " ".join(f"{f['title']} {f.get('fix') or ''}" for f in doc["findings"])
        assert "kill" not in said, said
        text = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, cwd="/")
        assert f"held by container {other} (PID {other_pid})" in text.stdout, text.stdout
    finally:
        testbed.container_stop("docker", mine)
        testbed.container_stop("docker", other)
