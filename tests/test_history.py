"""The run history on a real SQLite file: restart resumes without gaps or
duplicates, pruning keeps the size bound, schema migration, permissions,
and two processes writing the same file at once."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from gputui.collect.metrics import MetricParser
from gputui.diagnose import Thresholds
from gputui.errors import GputuiError
from gputui.model import ConnectionState, Finding, LogState, Severity, Snapshot
from gputui.record.history import (
    SCHEMA_V1,
    SCHEMA_VERSION,
    EventRow,
    GpuRow,
    HistoryWriter,
    default_path,
    incident_key,
    schema_version,
)
from gputui.record.query import HistoryReader, parse_since, render
from gputui.record.recorder import RunRecorder
from gputui.record.runlog import learning_rate, parse_chunk
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target


class LogOnlyMonitor:
    """The public side of a Monitor a recorder uses: target, snapshot,
    settings, subscribe. The log is a real file read through a real target."""

    def __init__(self, path: Path) -> None:
        self.target = Target(LocalTransport())
        self.snapshot = Snapshot(time=0.0, target=self.target.label)
        self.snapshot.log = LogState(path=str(path), exists=True)
        self.snapshot.connection = ConnectionState.CONNECTED
        self.settings = SimpleNamespace(metric_regexes=[])
        self.listeners: list[object] = []

    def subscribe(self, cb: object) -> None:
        self.listeners.append(cb)


def write_steps(path: Path, start: int, stop: int, mode: str = "a") -> None:
    with open(path, mode) as f:
        for i in range(start, stop):
            f.write(f"step {i} loss {1.0 / (i + 1):.4f} lr 3e-4 | 1500 tok/s\n")


async def import_all(rec: RunRecorder) -> None:
    for _ in range(20):  # first sight makes the run; then reads until caught up
        await rec.import_log()
        run = rec._run
        if run is not None and run.cursor == os.path.getsize(rec.monitor.snapshot.log.path):
            return
    raise AssertionError("the recorder never caught up with the log")


def points(db: Path) -> list[tuple[int, int, int]]:
    with sqlite3.connect(db) as c:
        return c.execute(
            "SELECT run_id, offset, step FROM metric_points ORDER BY offset"
        ).fetchall()


async def test_restart_resumes_nothing_lost_nothing_twice(tmp_path: Path) -> None:
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 100, "w")
    with open(log, "a") as f:
        f.write("step 100 loss 0.5")  # a line still being written: not taken yet
    w = HistoryWriter(db)
    rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
    await import_all_partial(rec, log)
    w.close()
    assert [p[2] for p in points(db)] == list(range(100))

    with open(log, "a") as f:
        f.write("0 | 1700 tok/s\n")  # the cut line completes: loss 0.50, 1700 tok/s
    write_steps(log, 101, 150)
    w = HistoryWriter(db)  # a restart: new writer, new recorder, same file
    rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
    await import_all(rec)
    # a reconnect that reads the whole log again from 0 adds nothing
    data = log.read_bytes()
    pts, consumed = parse_chunk(data, 0, MetricParser())
    assert rec._run is not None
    from gputui.record.history import PointRow

    rows = [PointRow(p.offset, 1.0, True, p.step, p.loss, p.throughput, p.lr) for p in pts]
    w.add_points(rec._run.id, rows, consumed, 2.0).result()
    w.close()
    got = points(db)
    steps = [p[2] for p in got]
    assert steps == list(range(150))
    with sqlite3.connect(db) as c:
        assert c.execute(
            "SELECT loss, throughput FROM metric_points WHERE step=100"
        ).fetchall() == [(0.5, 1700.0)]
    assert len({(r, o) for r, o, _ in got}) == len(got)
    assert len({r for r, _, _ in got}) == 1  # one run throughout


async def import_all_partial(rec: RunRecorder, log: Path) -> None:
    """Import until the cursor stops at the start of the unfinished line."""
    for _ in range(20):
        await rec.import_log()
        if rec._run is not None and rec._run.cursor > 0:
            return
    raise AssertionError("nothing imported")


async def test_truncated_log_starts_a_new_run(tmp_path: Path) -> None:
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 50, "w")
    w = HistoryWriter(db)
    rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
    await import_all(rec)
    write_steps(log, 0, 10, "w")  # truncated and rewritten: a new run
    rec.monitor.snapshot.log.truncations += 1
    await import_all(rec)
    w.close()
    got = points(db)
    runs = sorted({r for r, _, _ in got})
    assert len(runs) == 2
    assert [s for r, _, s in got if r == runs[1]] == list(range(10))


async def test_a_replaced_log_is_one_new_run_when_the_followers_word_comes_late(
    tmp_path: Path,
) -> None:
    """The soak's find: the log deleted and made anew (another inode), seen
    by the recorder's read first; the follower's count of it came a read
    later and was taken for a second restart — the new run read again from
    0, every line of it twice in the history."""
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 50, "w")
    w = HistoryWriter(db)
    rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
    await import_all(rec)
    fresh = tmp_path / "fresh.log"
    write_steps(fresh, 50, 100, "w")
    fresh.replace(log)  # another inode at the path
    await import_all(rec)
    rec.monitor.snapshot.log.truncations += 1  # the follower's word of it, late
    rec.monitor.snapshot.log.rotations += 1
    write_steps(log, 100, 120)
    await import_all(rec)
    w.close()
    steps = [s for _, _, s in points(db)]
    assert sorted(steps) == list(range(120)), "a step twice or missing"
    assert len({r for r, _, _ in points(db)}) == 2


async def test_a_rotated_log_keeps_its_last_lines(tmp_path: Path) -> None:
    """Lines written just before the log was renamed away (train.log.1) and
    not read yet: read there, in the old run, then the new log's run (the
    soak lost them: 82 lines at one rotation)."""
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 50, "w")
    w = HistoryWriter(db)
    rec = RunRecorder(LogOnlyMonitor(log), w, diagnose=lambda s, n: [])
    await import_all(rec)
    write_steps(log, 50, 60)  # not read yet
    log.rename(tmp_path / "train.log.1")
    rec.monitor.snapshot.log.rotations += 1  # the follower's word of it
    write_steps(log, 60, 80, "w")
    for _ in range(3):
        await import_all(rec)
    w.close()
    got = points(db)
    assert sorted(s for _, _, s in got) == list(range(80)), "a step lost or twice"
    runs = sorted({r for r, _, _ in got})
    assert [s for r, _, s in got if r == runs[0]] == list(range(60))


async def test_two_recorders_on_one_log_share_one_run(tmp_path: Path) -> None:
    """The dashboard and `watch` see the same log at the same moment: one
    run, each point once."""
    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 300, "w")
    w1, w2 = HistoryWriter(db), HistoryWriter(db)  # two connections, as two processes
    r1 = RunRecorder(LogOnlyMonitor(log), w1, diagnose=lambda s, n: [])
    r2 = RunRecorder(LogOnlyMonitor(log), w2, diagnose=lambda s, n: [])
    await asyncio.gather(import_all(r1), import_all(r2))
    write_steps(log, 300, 350)
    await asyncio.gather(import_all(r1), import_all(r2))
    w1.close()
    w2.close()
    got = points(db)
    assert [s for _, _, s in got] == list(range(350))
    assert len({r for r, _, _ in got}) == 1


def test_parse_chunk_offsets_and_carriage_returns() -> None:
    data = b"step 1 loss 2.0\rstep 2 loss 1.5\nnoise\nstep 3 loss"
    pts, consumed = parse_chunk(data, 1000, MetricParser())
    assert [(p.offset, p.step) for p in pts] == [(1000, 1), (1016, 2)]
    assert consumed == data.index(b"step 3")
    assert learning_rate("{'loss': 1.2, 'learning_rate': 2.5e-05}") == 2.5e-05
    assert learning_rate("step 5 loss 2.0") is None


def test_pruning_keeps_the_size_bound(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    bound = 1024 * 1024
    w = HistoryWriter(db, max_bytes=bound, seconds_kept_s=1e12)  # keep seconds: grow fast
    tid = w.target_id("big").result()
    t0 = 1_700_000_000
    for day in range(6):
        rows = [
            GpuRow(g, t0 + day * 86400 + s, 50.0, 1000.0 * g, 80000.0, 60.0, 300.0)
            for s in range(0, 86400, 20)
            for g in range(8)
        ]
        w.add_gpu(tid, rows)
        w.flush().result()
        w.prune().result()
        w.rollup(t0).result()
    w.prune().result()
    w.close()
    size = db.stat().st_size + (
        Path(f"{db}-wal").stat().st_size if Path(f"{db}-wal").exists() else 0
    )
    assert size <= bound * 1.1, size
    with sqlite3.connect(db) as c:
        lo, hi = c.execute("SELECT MIN(t), MAX(t) FROM gpu_samples").fetchone()
    assert hi == t0 + 5 * 86400 + 86380  # the newest data is kept ...
    assert lo > t0  # ... the oldest went first


def test_rollup_folds_old_seconds_into_minutes(tmp_path: Path) -> None:
    now = 1_700_000_000 // 60 * 60
    w = HistoryWriter(tmp_path / "h.sqlite", seconds_kept_s=3600, clock=lambda: now)
    tid = w.target_id("t").result()
    old = [
        GpuRow(0, now - 7200 + s, float(s % 2) * 100, 10.0, 80.0, 50.0, 100.0) for s in range(60)
    ]
    recent = [GpuRow(0, now - 10 + s, 30.0, 10.0, 80.0, 50.0, 100.0) for s in range(5)]
    w.add_gpu(tid, old + recent)
    w.flush().result()
    w.rollup(now).result()
    w.close()
    with sqlite3.connect(tmp_path / "h.sqlite") as c:
        minutes = c.execute("SELECT t, util, util_max, n FROM gpu_minutes").fetchall()
        seconds = c.execute("SELECT COUNT(*) FROM gpu_samples").fetchone()[0]
    assert minutes == [(now - 7200, 50.0, 100.0, 60)]
    assert seconds == 5


def test_migration_and_newer_file_refused(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as c:  # a file as schema 1 left it
        c.executescript(SCHEMA_V1)
        c.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    w = HistoryWriter(db)
    w.close()
    with sqlite3.connect(db) as c:
        assert schema_version(c) == SCHEMA_VERSION
        cols = [r[1] for r in c.execute("PRAGMA table_info(metric_points)")]
        assert "lr" in cols
        c.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(GputuiError, match="newer gputui"):
        HistoryWriter(db)


def test_state_dir_and_permissions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_path() == tmp_path / "state" / "gputui" / "history.sqlite"
    w = HistoryWriter()
    w.target_id("x").result()
    w.close()
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "gputui").st_mode) == 0o700
    for p in (tmp_path / "state" / "gputui").iterdir():
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p


def test_findings_are_recorded_once_across_restarts(tmp_path: Path) -> None:
    """Incidents (gputui.record.incidents): opened, worse and resolved once, across a
    restart or a second gputui on the target; the open one is read back
    with the finding kind it was at."""
    db = tmp_path / "h.sqlite"
    w = HistoryWriter(db)
    tid = w.target_id("t").result()

    def ev(t: float, state: str, kind: str, sev: str) -> EventRow:
        return EventRow(t, "incident", "hang", state, sev, kind, incident_key(kind, t))

    opened = ev(1.0, "open", "progress_stalled", "warning")
    assert w.add_event(tid, opened).result() is True
    w.close()
    w = HistoryWriter(db)  # restart: the incident is still open
    assert {k: e.name for k, e in w.open_findings("t").result().items()} == {
        "hang": "progress_stalled"
    }
    assert w.add_event(tid, ev(1.5, "open", "progress_stalled", "warning")).result() is False
    assert w.add_event(tid, ev(2.0, "worse", "held_but_idle", "error")).result() is True
    assert w.add_event(tid, ev(2.1, "worse", "held_but_idle", "error")).result() is False
    assert w.open_findings("t").result()["hang"].name == "held_but_idle"
    assert w.add_event(tid, ev(3.0, "resolved", "held_but_idle", "error")).result() is True
    assert w.add_event(tid, ev(3.1, "resolved", "held_but_idle", "error")).result() is False
    assert w.open_findings("t").result() == {}
    w.close()


HUNG_F = Finding("held_but_idle", Severity.ERROR, "hung")


async def test_recorder_records_findings_and_actions(tmp_path: Path) -> None:
    db, audit = tmp_path / "h.sqlite", tmp_path / "audit.log"
    log = tmp_path / "train.log"
    write_steps(log, 0, 3, "w")
    mon = LogOnlyMonitor(log)
    audit.write_text(
        f'{{"epoch": 10.5, "target": "{mon.target.label}", "action": "relaunch", "ok": true,'
        ' "outcome": "relaunched"}\n{"epoch": 11, "target": "other", "action": "kill"}\n'
    )
    found: list[list[Finding]] = [[]]
    w = HistoryWriter(db)
    clock = [1000.0]
    rec = RunRecorder(
        mon,
        w,
        diagnose=lambda s, n: found[0],
        audit_file=audit,
        tick_s=3600,
        clock=lambda: clock[0],
    )
    await rec.start()
    for step in ([HUNG_F], [HUNG_F], [], []):
        found[0] = step
        clock[0] += 10
        await rec.tick()
    await rec.stop()
    w.close()
    r = HistoryReader(db)
    ev = [(e.kind, e.name, e.state) for e in r.events(mon.target.label, 0, 1e12)]
    r.close()
    assert ("action", "relaunch", "ok") in ev
    assert not any(e[1] == "kill" for e in ev)
    assert [e for e in ev if e[0] == "incident"] == [
        ("incident", "hang", "open"),
        ("incident", "hang", "resolved"),
    ]


WRITER_CHILD = textwrap.dedent(
    """
    import sys, time
    from gputui.record.history import GpuRow, HistoryWriter
    w = HistoryWriter(sys.argv[1])
    tid = w.target_id("child").result()
    t0 = int(time.time()) - 3100  # inside the hour kept at 1 s
    for batch in range(30):
        w.add_gpu(tid, [GpuRow(0, t0 + batch * 100 + s, 1.0, 2.0, 3.0, 4.0, 5.0) for s in range(100)])
        w.flush().result()
    w.close()
    print("ok")
    """
)


async def test_two_processes_write_the_same_file_at_once(tmp_path: Path) -> None:
    """A dashboard and `gputui watch` share the history file: both write,
    neither fails on a lock, a reader sees both."""
    db = tmp_path / "h.sqlite"
    w = HistoryWriter(db)
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER_CHILD, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    tid = w.target_id("parent").result()
    t0 = int(time.time()) - 3100
    for batch in range(30):
        w.add_gpu(
            tid, [GpuRow(1, t0 + batch * 100 + s, 1.0, 2.0, 3.0, 4.0, 5.0) for s in range(100)]
        )
        w.flush().result()
        reader = HistoryReader(db)  # a reader meanwhile (the whole-run view)
        reader.targets()
        reader.close()
        await asyncio.sleep(0)
    out, _ = child.communicate(timeout=60)
    w.close()
    assert child.returncode == 0 and out.strip() == "ok", out
    r = HistoryReader(db)
    assert len(r.gpu("parent", 0, 2e9)) == 3000
    assert len(r.gpu("child", 0, 2e9)) == 3000
    r.close()


def test_history_output_formats(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    w = HistoryWriter(db)
    tid = w.target_id("root@h ct 200").result()
    w.add_gpu(tid, [GpuRow(0, 1000.0, 40.0, 1.0, 2.0, 3.0, 4.0)])
    w.add_event(
        tid, EventRow(1000.0, "finding", "x", "appear", "error", "=cmd\x1b]0;t\x07")
    ).result()
    w.close()
    r = HistoryReader(db)
    text = render(r, "h ct", 0, 2000, "text")
    assert "1 of 1 GPU" in text and "\x1b" not in text and "\x07" not in text
    assert "'=cmd" in render(r, "root@h ct 200", 0, 2000, "csv")
    with pytest.raises(GputuiError, match="no history for target"):
        r.target_id("nope")
    r.close()
    assert parse_since("6h") == 21600 and parse_since("90s") == 90
    with pytest.raises(GputuiError, match="not a duration"):
        parse_since("yesterday")


def test_the_dashboards_recorder_takes_the_users_settings(tmp_path: Path) -> None:
    """wiring.build_recorder: the history file and alert timings of the
    config; a history file that cannot be opened leaves the dashboard
    running with alerts only, and says why."""
    from gputui.config import Settings
    from gputui.monitor.engine import Monitor
    from gputui.monitor.gpufeed import SimulatedGpus
    from gputui.remote.local import LocalTransport
    from gputui.remote.target import Target
    from gputui.ui.wiring import build_recorder

    settings = Settings(
        history_path=str(tmp_path / "h.sqlite"),
        alert_quiet_period=42.0,
        alert_connection_down_after=7.0,
        history_log_every=5.0,
        diagnosis=Thresholds(stale_after=9.0),
    )
    mon = Monitor(Target(LocalTransport()), settings, SimulatedGpus(1, lambda: 0.0))
    recorder, why = build_recorder(mon, settings)
    try:
        assert why is None and recorder.writer is not None
        assert recorder.writer.path == tmp_path / "h.sqlite"
        assert recorder.gate.quiet_s == 42.0 and recorder.gate.holds == {"connection": 7.0}
        assert recorder.log_every == 5.0
    finally:
        assert recorder.writer is not None
        recorder.writer.close()
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    settings.history_path = str(blocked / "h.sqlite")
    recorder, why = build_recorder(mon, settings)
    assert recorder.writer is None and why is not None and why.startswith("no history this time")
    settings.history = False
    recorder, why = build_recorder(mon, settings)
    assert recorder.writer is None and why is None


async def test_the_whole_run_view_asks_for_the_logs_new_lines_at_once(tmp_path: Path) -> None:
    """The recorder reads the log once a minute; while the whole-run view is
    open it asks (read_log_soon) and the next tick reads what came since."""
    db, log = tmp_path / "h.sqlite", tmp_path / "train.log"
    write_steps(log, 0, 10, "w")
    mon = LogOnlyMonitor(log)
    w = HistoryWriter(db)
    rec = RunRecorder(mon, w, diagnose=lambda s, n: [], tick_s=3600, log_every=600.0)
    await rec.start()
    for _ in range(5):
        await rec.tick()  # first sight: the run, then its lines
    w.flush().result()
    assert [p[2] for p in points(db)] == list(range(10))
    write_steps(log, 10, 20)
    mon.snapshot.log.size = os.path.getsize(log)
    await rec.tick()
    w.flush().result()
    assert len(points(db)) == 10  # not due for another ten minutes
    rec.read_log_soon()
    await rec.tick()
    await rec.stop()
    w.close()
    assert [p[2] for p in points(db)] == list(range(20))
