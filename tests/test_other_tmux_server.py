"""A run in another user's tmux server (started as `ubuntu` in the CT, not
root): root's `tmux ls` does not show it, and gputui said "no tmux
session" while the run went on. Now the agent finds every tmux server's
socket, the session is listed with its owner, watched (pane, processes,
log), and the actions reach it through its socket. Real tmux, run as an
unprivileged user (uid 65534) with setpriv; real processes, no mocks."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers
from gputui.actions.backend import ActionBackend
from gputui.gpufeed import SimulatedGpus
from gputui.monitor import Monitor
from gputui.remote.agent import Agent
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

UID = 65534  # nobody
LOOP = "import time\ni = 0\nwhile True:\n    i += 1\n    print(f'step {i} | loss 1.0')\n    time.sleep(0.2)"


@pytest.fixture
def other_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A tmux server of uid 65534 in a fresh TMUX_TMPDIR, its session `job`
    running a Python loop into job.log; the directory is returned."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to start a tmux server as another user")
    d = Path(tempfile.mkdtemp(prefix="gtt-"))  # short: tmux sockets live here
    d.chmod(0o777)
    log = d / "job.log"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(d), "SHELL": "/bin/sh", "TMUX_TMPDIR": str(d)}
    run = f'python3 -u -c "{LOOP}" | tee {log}'
    drop = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
    subprocess.run(
        [*drop, "tmux", "new-session", "-d", "-s", "job", run], env=env, cwd=d, check=True
    )
    monkeypatch.setenv("TMUX_TMPDIR", str(d))  # root's own server would be here too
    try:
        helpers.wait_for(lambda: log.exists() and log.stat().st_size > 0, 10, "the run's log")
        yield d
    finally:
        subprocess.run([*drop, "tmux", "kill-server"], env=env, capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def test_the_agent_lists_another_users_tmux_server(other_server: Path) -> None:
    answer = Agent().op_tmux({"commands": [["list-sessions"]], "other_servers": True})
    assert answer["results"][0]["exit"] != 0  # root has no server of its own here
    (server,) = answer["servers"]
    assert server["socket"] == str(other_server / f"tmux-{UID}" / "default")
    assert server["owner"] == "nobody"
    assert server["results"][0]["stdout"].startswith("job:")
    asked_one = Agent().op_tmux({"commands": [["list-sessions"]], "socket": server["socket"]})
    assert "servers" not in asked_one  # a named socket is asked alone


async def test_a_run_in_another_users_tmux_is_watched_and_can_be_stopped(
    other_server: Path,
) -> None:
    tr = LocalTransport()
    await tr.connect()
    target = Target(tr)
    settings = helpers.monitor_settings()
    mon = Monitor(target, settings, gpu_feed=SimulatedGpus(1, lambda: 1.0))
    await mon.start()
    try:
        snap = mon.snapshot
        await helpers.until(lambda: snap.session is not None and snap.procs, 20, "the run")
        session = snap.session
        assert session is not None and session.name == "job" and session.owner == "nobody"
        socket = str(other_server / f"tmux-{UID}" / "default")
        assert session.tmux == ["tmux", "-S", socket]
        await helpers.until(lambda: snap.log.path == str(other_server / "job.log"), 10, "log")
        await helpers.until(lambda: any("step" in line for line in snap.pane_tail), 10, "pane")
        python = next(p for p in snap.procs if p.is_python)

        backend = ActionBackend(target, settings, mon)
        attach = await backend.plan("attach", snap)
        assert attach.commands[0][:3] == ["tmux", "-S", socket]
        kill = await backend.plan("kill", snap)
        assert python.pid in kill.pids
        result = await backend.execute(kill)
        assert result.ok, result.summary
        await helpers.until(lambda: not os.path.exists(f"/proc/{python.pid}"), 10, "run gone")
    finally:
        await mon.stop()
        await tr.close()
