"""The host view on a Docker host (issue 26): no `pct`, a `docker` that
answers. `gputui --host H` lists its containers with `docker ps -a` and
which GPUs each holds (the GPU processes' host PIDs mapped into each
container by its agent's PID namespace), beside the host's own row."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import scenarios
from gputui.config import Settings
from gputui.host.hostwatch import HostWatch
from helpers import until
from testbed import Testbed

TRAIN = "import time\nwhile True:\n    print('step', flush=True)\n    time.sleep(0.5)\n"


@pytest.fixture(scope="module")
def docker_host() -> Iterator[tuple[Testbed, int]]:
    tb = Testbed(container_tool=False, docker=True).start()
    try:
        tb.container_create("docker", "trainer")
        tb.container_create("docker", "idle")
        tb.container_stop("docker", "idle")
        work = Path(tb.workspace) / "dockerhost"
        work.mkdir()
        (work / "train.py").write_text(TRAIN)
        py = os.path.realpath(sys.executable)
        cmd = f"{py} train.py > train.log 2>&1"
        r = tb.container_exec(
            "docker", "trainer", ["tmux", "new-session", "-d", "-s", "train", "-c", str(work), cmd]
        )
        assert r.returncode == 0, r.stderr
        pid = _host_pid(work)
        tb.set_gpus(
            {
                "gpus": [scenarios.gpu(0, 30_000, 96), scenarios.gpu(1, 0, 0)],
                "apps": [scenarios.app(pid, 0, 29_500)],
            }
        )
        yield tb, pid
    finally:
        tb.stop()


def _host_pid(work: Path) -> int:
    """The run's python3, as the host sees it (its cwd is the work dir)."""

    def find() -> int | None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if (
                    os.readlink(f"/proc/{entry}/cwd") == str(work)
                    and b"train.py" in Path(f"/proc/{entry}/cmdline").read_bytes()
                    and not Path(f"/proc/{entry}/cmdline").read_bytes().startswith(b"tmux")
                ):
                    return int(entry)
            except OSError:
                continue
        return None

    import time

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pid = find()
        if pid:
            return pid
        time.sleep(0.05)
    raise AssertionError("the run did not start")


async def test_a_docker_host_lists_its_containers_and_their_gpus(
    docker_host: tuple[Testbed, int],
) -> None:
    tb, pid = docker_host
    watch = HostWatch(Settings(**tb.transport_kwargs()), list_period_s=1.0)
    await watch.start()
    try:
        await until(
            lambda: watch.view.complete and len(watch.view.containers) == 3,
            timeout=60,
            what="a complete host view",
        )
        rows = {c.id: c for c in watch.view.containers}
        assert list(rows) == [None, "docker:idle", "docker:trainer"]
        assert watch.view.containers_known is True
        assert rows["docker:idle"].status == "exited"
        assert rows["docker:trainer"].status == "running"
        await until(
            lambda: [h.place for h in watch.view.gpus[0].holders] == ["docker:trainer"],
            timeout=30,
            what="GPU 0 held by the trainer container",
        )
        (h,) = watch.view.gpus[0].holders
        assert h.host_pid == pid and h.ct_pid is not None and h.ct_pid != pid  # its PID inside
        await until(
            lambda: {c.id: c for c in watch.view.containers}["docker:trainer"].gpus == [0],
            timeout=30,
            what="the trainer's GPUs",
        )
        assert {c.id: c for c in watch.view.containers}["docker:trainer"].sessions == ["train"]
        assert not watch.view.gpus[1].holders
    finally:
        await watch.stop()


def test_doctor_on_a_docker_host_is_its_host_view(
    docker_host: tuple[Testbed, int], tmp_path: Path
) -> None:
    """`gputui doctor --host H` (no container named) on a Docker host: each
    container, its state and GPUs (it crashed sorting 'docker:…' among CT numbers)."""
    import json
    import subprocess

    tb, _ = docker_host
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env["HOME"] = str(tmp_path)
    where = ["127.0.0.1", "-o", f"Port={tb.port}", "-l", "root", "-i", str(tb.key_path)]
    where += ["--known-hosts", str(tb.known_hosts_path)]
    argv = [sys.executable, "-m", "gputui", "doctor", *where]
    done = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    rows = {c["id"]: c for c in json.loads(done.stdout)["host"]["containers"]}
    assert set(rows) == {None, "docker:trainer", "docker:idle"}, rows
    assert rows["docker:idle"]["status"] == "exited"
    text = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert "host        Docker: 3 containers" in text.stdout, text.stdout
    assert "docker trainer" in text.stdout and "internal error" not in text.stderr
