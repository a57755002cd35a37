"""The history writer keeps its SQLite locks while others read the file.

SQLite's POSIX locks on a file are dropped when *any* descriptor of that
file is closed in the process ("How To Corrupt An SQLite Database File",
section 2.2). `connect()` once opened and closed plain descriptors of the db
and its -shm after SQLite had opened them: the next reader found no live
connection, reset -shm, and the writer died of SIGBUS on its mapping of it
(`gputui watch` exited -7 with `gputui history` or `sqlite3` reading
beside it). These tests run a real writer process and real readers."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gputui.errors import GputuiError
from gputui.record.history import HistoryWriter, connect

SRC = str(Path(__file__).resolve().parents[1] / "src")

LOCK_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    path, how = sys.argv[1], sys.argv[2]
    fd = os.open(path, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)  # a POSIX lock, as SQLite's
    flags = os.O_PATH if how == "o_path" else os.O_RDONLY
    os.close(os.open(path, flags | os.O_NOFOLLOW))
    print("ready", flush=True)
    sys.stdin.readline()
    """
)


def other_process_can_lock(path: Path) -> bool:
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # this process holds no other lock on it
    return True


@pytest.mark.parametrize(("how", "lock_kept"), [("o_path", True), ("plain", False)])
def test_closing_an_o_path_fd_keeps_the_processs_posix_locks(
    tmp_path: Path, how: str, lock_kept: bool
) -> None:
    """What the fix rests on, on this kernel: an O_PATH fd opened and closed
    beside a lock leaves the lock; a plain fd drops it (the old bug)."""
    f = tmp_path / "f"
    f.write_bytes(b"x" * 16)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(f), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        assert other_process_can_lock(f) is not lock_kept
    finally:
        holder.communicate("\n", timeout=10)


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gputui.record.history import HistoryWriter, PointRow
    db, stop = Path(sys.argv[1]), Path(sys.argv[2])
    w = HistoryWriter(db)
    tid = w.target_id("root@127.0.0.1").result()
    run = w.new_run("root@127.0.0.1", "/w/train.log", 7, time.time()).result()
    print("ready", flush=True)
    n = 0
    while not stop.exists():
        pts = [PointRow(n + i, time.time(), True, n + i, 1.0, 2.0) for i in range(20)]
        n += 20
        w.add_points(run.id, pts, n, time.time()).result()
        time.sleep(0.002)
    w.close()
    print(n, flush=True)
    """
)


def read_once(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT count(*) FROM metric_points").fetchone()[0])
    finally:
        conn.close()


def test_a_reader_opening_the_history_1000_times_never_hurts_the_writer(tmp_path: Path) -> None:
    db, stop = tmp_path / "h.sqlite", tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": SRC}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert writer.stdout is not None
    assert writer.stdout.readline() == "ready\n", writer.communicate(timeout=30)
    seen = []
    cli = shutil.which("sqlite3")
    for i in range(1000):
        seen.append(read_once(db))
        if cli and i % 10 == 0:  # the plain CLI reader too, as a user would
            out = subprocess.run(
                [cli, "-readonly", str(db), "SELECT count(*) FROM metric_points;"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
        if writer.poll() is not None:
            break
    alive = writer.poll() is None
    stop.touch()
    out, err = writer.communicate(timeout=60)
    assert alive and writer.returncode == 0, (
        f"the writer exited {writer.returncode} after {len(seen)} reader opens; {err[-2000:]}"
    )
    assert len(seen) == 1000 and seen == sorted(seen)  # the readers saw it grow, never shrink
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM metric_points").fetchone()[0] == int(out)
    conn.close()


def test_a_second_connection_and_readers_in_the_writers_process_keep_its_locks(
    tmp_path: Path,
) -> None:
    """Everything the dashboard does in one process — a second writer
    connect(), a reader for `h` and the whole-run chart, prune and its
    vacuum, size checks — then another process finds the writer's lock on
    -shm still held (it cannot take the exclusive 'first connection' lock)."""
    db = tmp_path / "h.sqlite"
    w = HistoryWriter(db, max_bytes=1)
    tid = w.target_id("t").result()
    assert tid
    connect(db).close()
    for _ in range(5):
        connect(db, readonly=True).close()
    w.prune().result()
    assert w.size_bytes() > 0
    shm = Path(f"{db}-shm")
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR)\n"
            # SQLite's DMS byte: a live connection holds it shared
            "try:\n fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)\n"
            "except OSError: print('held')\nelse: print('free')\n",
            str(shm),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert probe.stdout.strip() == "held", probe
    w.close()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_a_history_file_owned_by_another_user_is_refused_in_one_line(
    tmp_path: Path, suffix: str
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    if suffix:
        HistoryWriter(shared / "x.sqlite").close()  # the user's own db
    planted = shared / f"x.sqlite{suffix}"
    planted.write_bytes(b"")
    planted.chmod(0o666)
    os.chown(planted, 65534, 65534)  # tests run as root (TEAM.md)
    with pytest.raises(GputuiError) as err:
        HistoryWriter(shared / "x.sqlite").close()
    assert "belongs to uid 65534" in str(err.value) and "\n" not in str(err.value)
    assert planted.stat().st_size == 0 and planted.stat().st_mode & 0o777 == 0o666
    if suffix:  # a reader of the user's file refuses a third party's -wal/-shm too
        with pytest.raises(GputuiError, match="belongs to uid 65534"):
            connect(shared / "x.sqlite", readonly=True)


def test_a_new_history_file_is_private_from_its_first_byte(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        w = HistoryWriter(tmp_path / "h.sqlite")
        w.target_id("t").result()
        for p in tmp_path.glob("h.sqlite*"):
            assert p.stat().st_mode & 0o777 == 0o600, p
        w.close()
    finally:
        os.umask(old)
