"""A run in another user's tmux server (started as `ubuntu` in the CT, not
root): root's `tmux ls` does not show it, and gputui said "no tmux
session" while the run went on. Now the agent finds every tmux server's
socket, the session is listed with its owner, watched (pane, processes,
log), and the actions reach it through its socket. Real tmux, run as an
unprivileged user (uid 65534) with setpriv; real processes, no mocks."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers
from gputui.actions.backend import ActionBackend
from gputui.doctor import run as doctor_run
from gputui.doctor.report import render_text
from gputui.errors import GputuiError
from gputui.monitor.engine import Monitor
from gputui.monitor.gpufeed import SimulatedGpus
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
    hostile_server: dict[str, Path],
) -> None:
    """Watched (as the monitor and doctor do), planned and stopped: every
    tmux command on that server runs as its owner (the server's hooks open
    files as nobody, never as root)."""
    other_server = hostile_server["socket"].parent.parent
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
        assert_nothing_done_as_root(hostile_server)  # the monitor's polls (doctor's too)
        socket = str(other_server / f"tmux-{UID}" / "default")
        drop = ["--reuid=65534", "--regid=65534", "--init-groups", "--"]
        assert session.tmux[0].endswith("setpriv") and session.tmux[1:] == [
            *drop,
            "tmux",
            "-S",
            socket,
        ]
        await helpers.until(lambda: snap.log.path == str(other_server / "job.log"), 10, "log")
        python = next(p for p in snap.procs if p.is_python)

        backend = ActionBackend(target, settings, mon, mon.run_facts)  # as the dashboard wires it
        attach = await backend.plan("attach", snap)
        assert attach.commands[0][:8] == session.tmux
        assert_nothing_done_as_root(hostile_server)
        with contextlib.suppress(GputuiError):  # its hooks fail as nobody: list-panes exits 1
            await backend.plan("kill", snap)
        assert_nothing_done_as_root(hostile_server)
        for event in ("after-list-panes", "after-capture-pane", "after-list-sessions"):
            as_user(socket, "set-hook", "-gu", event)
        await helpers.until(lambda: any("step" in line for line in snap.pane_tail), 10, "pane")
        kill = await backend.plan("kill", snap)
        assert python.pid in kill.pids
        assert kill.commands  # the run is stopped by signals (as root), not through tmux
        result = await backend.execute(kill)
        assert result.ok, result.summary
        await helpers.until(lambda: not os.path.exists(f"/proc/{python.pid}"), 10, "run gone")
    finally:
        await mon.stop()
        await tr.close()


# ------------------------------------------------ a hostile tmux server (issue 21)
# A tmux server makes its client open files for it: a hook on the commands
# gputui runs (`list-panes` each poll, `capture-pane` for the pane's tail)
# saves a buffer to a path or loads a file into a buffer. The client is the
# one who opens the file — so a root client writes where root may and reads
# what only root may. gputui reaches another user's server as that user.

SECRET = b"root-only-secret-0600"


@pytest.fixture
def hostile_server(other_server: Path) -> Iterator[dict[str, Path]]:
    """`other_server` with hooks after list-panes and capture-pane: [0] save
    a buffer into a directory anyone may write (`fired`: proves the hook ran,
    and as whom), [1] load a 0600 root file into buffer `s`, [2] save a
    buffer into a root-only directory (`pwned`)."""
    root_dir = Path(tempfile.mkdtemp(prefix="gtt-root-", dir="/var/tmp"))
    root_dir.chmod(0o700)
    secret = root_dir / "secret"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    paths = {"fired": other_server / "fired", "secret": secret, "pwned": root_dir / "pwned"}
    sock = str(other_server / f"tmux-{UID}" / "default")
    hooks = [f"save-buffer -b p {paths['fired']}", f"load-buffer -b s {secret}"]
    hooks.append(f"save-buffer -b p {paths['pwned']}")
    as_user(sock, "set-buffer", "-b", "p", "the user's text")
    for event in ("after-list-panes", "after-capture-pane", "after-list-sessions"):
        for i, hook in enumerate(hooks):
            as_user(sock, "set-hook", "-g", f"{event}[{i}]", hook)
    try:
        yield {**paths, "socket": Path(sock)}
    finally:
        shutil.rmtree(root_dir, ignore_errors=True)


def as_user(sock: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    drop = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
    return subprocess.run(
        [*drop, "tmux", "-S", sock, *args], capture_output=True, text=True, check=check
    )


def assert_nothing_done_as_root(paths: dict[str, Path]) -> None:
    """The hooks ran (`fired` exists) as the server's owner, not as root:
    root's directory got no file, root's secret is not in the user's buffer."""
    fired = paths["fired"]
    helpers.wait_for(fired.exists, 10, "the hook to run")
    assert fired.stat().st_uid == UID, "the hook's file was written by root"
    assert not paths["pwned"].exists(), "root wrote a file the tmux server chose"
    buffers = as_user(str(paths["socket"]), "show-buffer", "-b", "s", check=False)
    assert SECRET.decode() not in buffers.stdout, "root read its 0600 file into the user's buffer"


def test_the_agent_reaches_a_hostile_server_as_its_owner(hostile_server: dict[str, Path]) -> None:
    from gputui.collect import tmux

    agent = Agent()
    answer = agent.op_tmux({"commands": [tmux.list_panes_argv()[1:]], "other_servers": True})
    (server,) = answer["servers"]
    assert server["owner"] == "nobody"
    assert "job" in server["results"][0]["stdout"]  # exit 1: its hooks failed, as nobody
    assert_nothing_done_as_root(hostile_server)
    hostile_server["fired"].unlink()
    sock = str(hostile_server["socket"])
    tail = agent.op_capture({"target": "=job:0.0", "lines": 10, "socket": sock})
    assert "step" in tail["stdout"]
    assert_nothing_done_as_root(hostile_server)


def test_a_server_in_a_directory_others_may_write_is_not_used(
    hostile_server: dict[str, Path],
) -> None:
    """Its socket could be swapped for another user's between the check and
    the connect: the server is skipped, with a reason, and nothing runs."""
    from gputui.collect import tmux

    hostile_server["socket"].parent.chmod(0o770)
    answer = Agent().op_tmux({"commands": [tmux.list_panes_argv()[1:]], "other_servers": True})
    (server,) = answer["servers"]
    assert "results" not in server
    assert "nobody" in server["skipped"] and "chmod 700" in server["skipped"]
    sock = str(hostile_server["socket"])
    with pytest.raises(ValueError, match="can be written by others"):
        Agent().op_capture({"target": "=job:0.0", "lines": 10, "socket": sock})
    assert not hostile_server["fired"].exists() and not hostile_server["pwned"].exists()


async def test_a_server_whose_owner_has_no_name_is_skipped_with_a_reason(
    hostile_server: dict[str, Path],
) -> None:
    """uid 4242 has no passwd entry: it cannot be reached as its owner, so it
    is not reached at all (root never connects); the reason names the uid,
    and doctor says it — while it watches nobody's hostile server as nobody."""
    other_server = hostile_server["socket"].parent.parent
    from gputui.collect import tmux

    env = {"PATH": "/usr/bin:/bin", "HOME": str(other_server), "TMUX_TMPDIR": str(other_server)}
    drop = ["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups"]
    subprocess.run(
        [*drop, "tmux", "new-session", "-d", "-s", "ghost", "sleep 600"], env=env, check=True
    )
    sock = str(other_server / "tmux-4242" / "default")
    fired = other_server / "ghost-fired"
    try:
        subprocess.run([*drop, "tmux", "-S", sock, "set-buffer", "-b", "p", "x"], check=True)
        hook = f"save-buffer -b p {fired}"
        subprocess.run(
            [*drop, "tmux", "-S", sock, "set-hook", "-g", "after-list-panes", hook], check=True
        )
        answer = Agent().op_tmux({"commands": [tmux.list_panes_argv()[1:]], "other_servers": True})
        ghost = next(s for s in answer["servers"] if s["socket"] == sock)
        assert "results" not in ghost and "no user has uid 4242" in ghost["skipped"]
        settings = helpers.monitor_settings(local=True, session="job")
        facts, snap, findings, _ = await doctor_run.inspect(settings, settle_s=0.5)
        (why,) = facts["tmux_skipped"]
        assert why.startswith(f"tmux server of 4242 ({sock}) not used: no user has uid 4242")
        text = render_text(facts, snap, findings)
        assert any(line.startswith("skipped ") and why in line for line in text.splitlines())
        assert snap is not None and snap.session is not None and snap.session.owner == "nobody"
        assert not fired.exists()
        assert_nothing_done_as_root(hostile_server)
    finally:
        subprocess.run([*drop, "tmux", "-S", sock, "kill-server"], capture_output=True)
