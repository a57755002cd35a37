"""The last run, kept in the history (issue 49): what each run ran, the
last run of the same program found (or the user's pick, kept across
restarts), and `gputui history --compare / --runs / --pick-last` on a real
SQLite file through the real command line."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.model import Program
from gputui.record.history import (
    HistoryWriter,
    PairCache,
    PointRow,
    find_last_run,
    read_pair,
)

TARGET = "root@127.0.0.1:2222 ct 200"


def add_run(
    w: HistoryWriter,
    inode: int,
    t0: float,
    argv: tuple[str, ...],
    rate: float,
    *,
    seed: int,
    steps: int = 200,
    mtime: float = 100.0,
    env: tuple[str, ...] = (),
) -> int:
    """A run of `argv` in the history: its program, and `steps` points (its
    line times from its rate, tok/s around it)."""
    run = w.new_run(TARGET, "/w/train.log", inode, t0).result()
    prog = Program(argv, "/w", "", mtime, env, t0)
    assert w.set_program(run.id, prog, "train", t0).result()
    rnd = random.Random(seed)
    t, rows = t0 + 30.0, []
    for s in range(steps):
        r = rate * (1 + rnd.gauss(0, 0.03))
        t += 1024 / r
        rows.append(PointRow(s * 100, t, True, s, 2.0 * 0.995**s, r))
    w.add_points(run.id, rows, steps * 100, t, "tok/s").result()
    return run.id


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "h.sqlite"


def test_the_last_run_is_the_latest_earlier_run_of_the_same_script(db: Path) -> None:
    w = HistoryWriter(db)
    now = time.time() - 3600
    a = add_run(w, 1, now, ("python", "train.py", "--bs", "32"), 42_000, seed=1)
    add_run(w, 2, now + 100, ("python", "eval.py"), 9_000, seed=2)  # another program
    b = add_run(w, 3, now + 200, ("python", "-u", "train.py", "--bs", "64"), 47_000, seed=3)
    assert not w.set_program(b, Program(("python", "x.py")), "s", now).result()  # the first kept
    w.close()
    conn = sqlite3.connect(db)
    assert find_last_run(conn, b) == (a, False)
    assert find_last_run(conn, a) == (None, False)
    pair = read_pair(conn, b)
    assert pair is not None and pair.last is not None
    assert pair.this.program is not None and pair.this.program.argv[-1] == "64"
    assert pair.this.first_step_s is not None and 30.0 < pair.this.first_step_s < 31.0


def test_a_pick_outlasts_a_restart_and_wins(db: Path) -> None:
    w = HistoryWriter(db)
    now = time.time() - 3600
    a = add_run(w, 1, now, ("python", "train.py"), 42_000, seed=1)
    b = add_run(w, 2, now + 100, ("python", "train.py"), 42_000, seed=2)
    c = add_run(w, 3, now + 200, ("python", "train.py"), 42_000, seed=3)
    w.pick_last(c, a, now).result()
    w.close()
    w = HistoryWriter(db)  # gputui started again
    assert find_last_run(w.conn, c) == (a, True) and find_last_run(w.conn, b) == (a, False)
    w.close()


def cli(cfg: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "--config", str(cfg), "history", *words],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, NO_COLOR="1"),
    )


def test_history_compare_as_a_table_csv_and_json(db: Path, tmp_path: Path) -> None:
    w = HistoryWriter(db)
    now = time.time() - 3600
    a = add_run(w, 1, now, ("python", "train.py", "--bs", "32"), 42_400, seed=1, steps=800)
    b = add_run(
        w,
        2,
        now + 900,
        ("python", "train.py", "--bs", "64"),
        47_500,
        seed=2,
        steps=401,
        mtime=400.0,
        env=("PYTHONUNBUFFERED=1",),
    )
    w.close()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[history]\npath = "{db}"\n')

    runs = cli(cfg, TARGET, "--runs", "--since", "2h")
    assert runs.returncode == 0, runs.stderr
    assert f"{a:>5}" in runs.stdout and "python train.py --bs 64" in runs.stdout

    res = cli(cfg, "--compare", str(a), str(b))
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert f"run {b} against run {a}" in text
    assert "step 400" in text and "faster" in text
    assert "--bs 32 → 64" in text and "env PYTHONUNBUFFERED=1 set" in text
    assert "train.py modified (5 min later)" in text

    rows = list(csv.reader(io.StringIO(cli(cfg, "--compare", str(a), str(b), "--csv").stdout)))
    assert rows[0] == ["figure", "last_run", "this_run", "change_pct"]
    tok = next(r for r in rows if r[0] == "tok/s")
    assert 10 < float(tok[3]) < 14 and float(tok[1]) > 40_000

    doc = json.loads(cli(cfg, "--compare", str(b), "--json").stdout)  # one id: its last run
    assert doc["vs_last"]["last_run"] == a and doc["vs_last"]["verdict"] == "faster"
    assert doc["vs_last"]["step"] == 400 and doc["this"]["argv"][-1] == "64"

    bad = cli(cfg, "--compare", "999", str(b))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no run 999" in bad.stderr
    none = cli(cfg, "--compare", str(a))
    assert none.returncode == 2 and "no earlier run of the same program" in none.stderr


def test_pick_last_from_the_command_line(db: Path, tmp_path: Path) -> None:
    w = HistoryWriter(db)
    now = time.time() - 3600
    a = add_run(w, 1, now, ("python", "train.py"), 42_000, seed=1)
    b = add_run(w, 2, now + 100, ("python", "train.py"), 42_000, seed=2)
    c = add_run(w, 3, now + 200, ("python", "train.py"), 42_000, seed=3)
    w.close()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[history]\npath = "{db}"\n')
    res = cli(cfg, "--pick-last", str(a), str(c))
    assert res.returncode == 0 and f"run {c} is compared with run {a}" in res.stdout
    assert find_last_run(sqlite3.connect(db), c) == (a, True)
    assert b != a


async def test_each_point_is_stored_at_the_time_its_line_came(tmp_path: Path) -> None:
    """The history reads the log once a minute; a point is stored at the
    moment the monitor got its line (the live ring), not the read's — s/step
    and the time to the first step of a run against its last come from
    these. Lines of the log's backlog (read at start-up) keep the read's time."""
    from gputui.model import MetricPoint
    from gputui.record.recorder import RunRecorder
    from test_history import LogOnlyMonitor, import_all, write_steps

    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 30, "w")
    mon = LogOnlyMonitor(log)
    mon.snapshot.started = 1000.0
    for i in range(30):  # the monitor saw steps 10.. live, a quarter second apart
        mon.snapshot.metrics.add(MetricPoint(1000.0 + (5.0 if i < 10 else 20 + i / 4), step=i))
    w = HistoryWriter(db)
    rec = RunRecorder(mon, w, diagnose=lambda s, n: [])
    await import_all(rec)
    w.close()
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT step, t, timed FROM metric_points ORDER BY step").fetchall()
    live = {s: (t, timed) for s, t, timed in rows if s >= 10}
    assert live == {i: (1020.0 + i / 4, 1) for i in range(10, 30)}
    assert all(t > 1e9 for s, t, _ in rows if s < 10)  # backlog: the read's time


async def test_a_run_killed_in_its_first_minute_keeps_its_steps(tmp_path: Path) -> None:
    """The history reads the log once a minute; a run whose Python is seen
    gone has its log read at once — its last steps are its own in the
    history before the next run's `| tee` truncates the file (on an H100 a
    35-s run killed and deployed again compared nothing: 'steps –')."""
    from gputui.model import Proc
    from gputui.record.recorder import RunRecorder
    from test_history import LogOnlyMonitor, points, write_steps

    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    write_steps(log, 0, 5, "w")
    mon = LogOnlyMonitor(log)
    python = Proc(4242, 1, ["python3", "-u", "train.py", "--batch", "16"], is_python=True)
    mon.snapshot.procs = [python]
    now = [1000.0]
    w = HistoryWriter(db)
    rec = RunRecorder(mon, w, diagnose=lambda s, n: [], log_every=60.0, clock=lambda: now[0])

    async def tick(t: float) -> None:
        now[0] = t
        mon.snapshot.log.size = log.stat().st_size
        await rec.tick()

    for t in (1000.0, 1001.0, 1002.0):  # first sight, then its first lines
        await tick(t)
    write_steps(log, 5, 30)  # 28 s more of the run: no read before 1062
    for t in range(1003, 1030):
        await tick(float(t))
    mon.snapshot.procs = [Proc(4200, 1, ["bash"])]  # killed: the pane back at its shell
    await tick(1031.0)
    write_steps(log, 0, 3, "w")  # the next run: `python train.py | tee train.log`
    mon.snapshot.log.truncations += 1  # the follower's word of it
    mon.snapshot.procs = [Proc(4300, 4200, ["python3", "-u", "train.py"], is_python=True)]
    for t in range(1032, 1036):
        await tick(float(t))
    w.close()
    by_run: dict[int, list[int]] = {}
    for run_id, _, step in points(db):
        by_run.setdefault(run_id, []).append(step)
    first, *later = sorted(by_run)
    assert by_run[first] == list(range(30)), by_run
    assert later, "the next run was recorded as a run of its own"


def _lines(first: int, last: int, rate: float, seed: int) -> str:
    rnd = random.Random(seed)
    return "".join(
        f"step {s} loss {3.0 * 0.999**s:.4f} | {rate * (1 + rnd.gauss(0, 0.04)):.1f} tok/s\n"
        for s in range(first, last + 1)
    )


async def test_doctor_compares_the_steps_the_history_has_not_read_yet(tmp_path: Path) -> None:
    """On an H100, 35 s into a redeploy 2x slower: the history held the new
    run's first read (before its first step: a model loading), doctor's
    watch the log's last 600 steps (1,160–1,760), the last run steps 1–1,047
    — no step in both, 'no step of this run matched the last one's yet',
    readings 0 and 0. doctor reads the lines past the run's cursor (a real
    file, read through a real target by the recorder's script) and says
    slower."""
    from gputui.collect.metrics import MetricParser
    from gputui.model import LogState, MetricPoint, Proc, Snapshot
    from gputui.record.runlog import parse_chunk
    from gputui.record.unread import vs_last_now
    from gputui.record.vslast import vs_of
    from gputui.remote.local import LocalTransport
    from gputui.remote.target import Target

    log, db = tmp_path / "train.log", tmp_path / "h.sqlite"
    target = Target(LocalTransport())
    w = HistoryWriter(db)
    argv = ("python3", "-u", "train.py")
    prog = Program(argv, "/w", "train.py", 100.0, (), 1049.0)  # started: its Python's start
    log.write_text(_lines(1, 1047, 360_000.0, seed=1))  # the last run, all of it read
    ino, size = log.stat().st_ino, log.stat().st_size
    last = w.new_run(target.label, str(log), ino, 1000.0).result()
    w.set_program(last.id, prog, "train", 1000.0).result()
    found, _ = parse_chunk(log.read_bytes(), 0, MetricParser([]))
    rows = [PointRow(p.offset, 1000.0, False, p.step, p.loss, p.throughput) for p in found]
    w.add_points(last.id, rows, size, 1040.0, "tok/s").result()
    log.write_text("loading the model\n")  # the deploy: `| tee` truncates the log
    this = w.new_run(target.label, str(log), ino, 1050.0, after=last.id).result()
    w.set_program(this.id, prog, "train", 1050.0).result()
    w.add_points(this.id, [], log.stat().st_size, 1051.0, "tok/s").result()  # its first read
    with log.open("a") as f:
        f.write(_lines(1, 1760, 145_000.0, seed=2))  # 35 s later: not read by the history
    w.close()
    snap = Snapshot(time=time.time(), target=target.label)
    snap.log = LogState(path=str(log), exists=True)
    snap.procs = [Proc(4242, 1, list(argv), start_time=1049.0, is_python=True)]
    for p in parse_chunk(log.read_bytes(), 0, MetricParser([]))[0][-600:]:  # doctor's rings
        snap.metrics.add(MetricPoint(snap.time, p.step, p.loss, p.throughput, "tok/s"))

    conn = sqlite3.connect(db)
    try:  # the history and the rings alone: no step in both (the old doctor)
        old = vs_of(read_pair(conn, this.id), "tok/s", snap)
    finally:
        conn.close()
    assert old is not None and old.window is None and (old.n_new, old.n_old) == (0, 0)

    vs = await vs_last_now(db, target, snap)
    assert vs is not None and (vs.this_run, vs.last_run) == (this.id, last.id)
    assert vs.verdict == "slower", vs
    assert vs.window is not None and vs.window[1] == 1047 and vs.n_new > 500, vs
    assert vs.rate is not None and vs.rate.percent is not None and -65 < vs.rate.percent < -55
    assert log.read_text().startswith("loading the model\n")  # read, never written

    # no recorder running: a newer run the history never saw writes the log
    log.write_text(_lines(1, 1300, 145_000.0, seed=3))
    snap.procs = [Proc(4300, 1, list(argv), start_time=1100.0, is_python=True)]
    vs = await vs_last_now(db, target, snap)
    assert vs is not None and vs.this_run == this.id and vs.n_new == 0, vs  # not run 2's steps


def test_the_last_runs_reruns_and_their_spread_come_with_the_pair(db: Path, tmp_path: Path) -> None:
    """Three runs of `train.py --bs 4` (a try of --bs 16 between them, passed
    over), then a deploy: its pair carries the spread of the last run's
    reruns, measured on runs 1, 3, 4; a run whose script was modified is
    not a rerun. `history --compare` says them."""
    w = HistoryWriter(db)
    now = time.time() - 3600
    bs4 = ("python", "train.py", "--bs", "4")
    a = add_run(w, 1, now, bs4, 151_000, seed=1)
    add_run(w, 2, now + 100, ("python", "train.py", "--bs", "16"), 366_000, seed=2)
    b = add_run(w, 3, now + 200, bs4, 146_900, seed=3)
    add_run(w, 4, now + 250, bs4, 160_000, seed=4, mtime=900.0)  # train.py modified
    c = add_run(w, 5, now + 300, bs4, 149_400, seed=5, mtime=100.0)
    d = add_run(w, 6, now + 400, ("python", "train.py", "--bs", "8"), 154_700, seed=6)
    w.close()
    conn = sqlite3.connect(db)
    pair = read_pair(conn, d)
    assert pair is not None and pair.last is not None and pair.last.run_id == c
    assert pair.reruns is not None and pair.reruns.runs == (a, b, c)
    assert pair.reruns.n_rate == 2 and pair.reruns.rate is not None
    assert 0.01 < pair.reruns.rate < 0.06
    cache = PairCache()  # the recorder's: the spread measured once, the reruns' points not kept
    again = [read_pair(conn, d, cache) for _ in range(2)]
    assert again[0] is not None and again[1] is not None
    assert again[0].reruns is again[1].reruns == pair.reruns
    assert set(cache.sides) == {c}
    first = read_pair(conn, b)  # its last run has one rerun before it: no spread
    assert first is not None and first.reruns is None
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[history]\npath = "{db}"\n')
    res = cli(cfg, "--compare", str(d))
    assert res.returncode == 0, res.stderr
    assert f"runs {a}, {b}, {c}: rate ±" in res.stdout, res.stdout
    vs = json.loads(cli(cfg, "--compare", str(d), "--json").stdout)["vs_last"]
    assert vs["reruns"]["runs"] == [a, b, c] and vs["reruns"]["rate_reruns"] == 2
