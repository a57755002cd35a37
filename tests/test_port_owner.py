"""Advice is aimed at the run's owner only (issue 45, MED): a run of uid
65534 whose output says the test bed's sshd port is taken — root's sshd
holds it — is told that uid 0's sshd holds it, not this run's, and to use
another port: no kill advice, and root's command line is in no word of the
finding (what alerts send and history keeps). Real sshd (root's, the test
bed's), real tmux run as uid 65534, the real agent's `listeners` op, --local
monitor; no mocks."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.diagnose import diagnose
from gputui.model import Finding, PortHolder, PortsTaken
from gputui.monitor.engine import Monitor
from gputui.monitor.gpufeed import SimulatedGpus
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from test_diagnose import NOW, run

UID = 65534


@pytest.fixture
def failed_run(testbed: Any) -> Iterator[tuple[Path, int]]:
    """uid 65534's tmux session `job` whose run printed that the test bed's
    sshd port was taken, then ended (the pane stays)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to start a tmux server as another user")
    d = Path(tempfile.mkdtemp(prefix="gtp-"))
    d.chmod(0o777)
    log = d / "job.log"
    line = (
        "OSError: [Errno 98] error while attempting to bind on address "
        f"('127.0.0.1', {testbed.port}): address already in use"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(d), "SHELL": "/bin/sh", "TMUX_TMPDIR": str(d)}
    drop = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
    (d / "fail.sh").write_text(
        f"echo 'Traceback (most recent call last):'\necho \"{line}\"\nexit 1\n"
    )
    subprocess.run(
        [
            *drop,
            "tmux",
            "new-session",
            "-d",
            "-s",
            "job",
            f"sh {d}/fail.sh 2>&1 | tee {log}; sleep 600",
        ],
        env=env,
        cwd=d,
        check=True,
    )
    old = os.environ.get("TMUX_TMPDIR")
    os.environ["TMUX_TMPDIR"] = str(d)
    try:
        helpers.wait_for(lambda: log.exists() and "Errno 98" in log.read_text(), 10, "the line")
        yield log, testbed.port
    finally:
        if old is None:
            os.environ.pop("TMUX_TMPDIR", None)
        else:
            os.environ["TMUX_TMPDIR"] = old
        subprocess.run([*drop, "tmux", "kill-server"], env=env, capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def assert_aimed_at_the_owner(f: Finding) -> None:
    words = " ".join([f.title, *f.evidence, f.fix])
    assert "kill" not in words and "stop it" not in words, words
    assert "uid 0's sshd holds it — not this run's; use another port" in f.title, f.title
    assert "sshd_config" not in words and " -D" not in words and "listener" not in words, words
    assert "MASTER_PORT=" in f.fix


@pytest.mark.timeout(90)
async def test_roots_sshd_holding_the_port_gets_no_kill_advice(
    failed_run: tuple[Path, int],
) -> None:
    log, port = failed_run
    tr = LocalTransport()
    await tr.connect()
    settings = helpers.monitor_settings(session="job", log=str(log))
    mon = Monitor(Target(tr), settings, gpu_feed=SimulatedGpus(1, lambda: 1.0))
    await mon.start()
    try:
        snap = mon.snapshot

        def holders() -> Any:
            t = snap.ports_taken
            return t is not None and any(h.port == port for h in t.holders) and t

        taken = await helpers.until(holders, 30, "the port's holder read")
        assert any(h.uid == 0 and h.program == "sshd" for h in taken.holders), taken
        found = [f for f in diagnose(snap, snap.time) if f.kind == "port_in_use"]
        assert found, [f.kind for f in diagnose(snap, snap.time)]
        assert_aimed_at_the_owner(found[0])
    finally:
        await mon.stop()
        await tr.close()


def test_the_runs_own_holder_outside_tmux_still_gets_the_kill() -> None:
    """A holder of the run owner's own uid keeps the stop advice."""
    snap = run(session="dead", dead_status=1, log_tail=(
        "OSError: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
        "address already in use",
    ))  # fmt: skip
    holder = PortHolder(8000, 812, ["python3", "serve.py"], "nobody", [1], None, UID)
    snap.ports_taken = PortsTaken([8000], [holder], [], NOW, me=UID)
    for p in snap.procs:
        p.uid = UID
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "port_in_use"]
    assert "kill 812" in f.fix
    holder.uid, holder.cmdline, holder.user = 0, ["sshd: /usr/sbin/sshd -D [listener]"], "root"
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "port_in_use"]
    assert_aimed_at_the_owner(f)


async def test_another_users_command_line_is_not_kept_in_history(tmp_path: Path) -> None:
    """A pane of another user's tmux server that ends is an exit event in
    history without its command line; the watched run's own keeps it."""
    import sqlite3

    from gputui.model import Pane, Session
    from gputui.record.history import HistoryWriter
    from gputui.record.recorder import RunRecorder
    from test_history import LogOnlyMonitor

    log = tmp_path / "train.log"
    log.write_text("step 1 loss 1.0\n")
    mon = LogOnlyMonitor(log)
    snap = mon.snapshot
    own = Session("job", panes=[Pane("job", 0, 0, 11, dead=True, dead_status=1)])
    own.panes[0].start_command = "python train.py --mine"
    other = Session("theirs", panes=[Pane("theirs", 0, 0, 12, dead=True, dead_status=0)])
    other.panes[0].start_command = "backup --password hunter2"
    other.socket, other.owner = "/tmp/tmux-1000/default", "alice"
    snap.sessions, snap.session_name = [own, other], "job"
    w = HistoryWriter(tmp_path / "h.sqlite")
    rec = RunRecorder(mon, w, diagnose=lambda s, n: [])
    try:
        await rec.tick()
        w.flush()
    finally:
        w.close()
    with sqlite3.connect(tmp_path / "h.sqlite") as c:
        rows = dict(c.execute("SELECT name, title FROM events WHERE kind='exit'").fetchall())
    assert rows["job"] == "python train.py --mine"
    assert "hunter2" not in rows["theirs"] and rows["theirs"] == ""
