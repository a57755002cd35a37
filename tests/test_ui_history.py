"""The dashboard records the history and shows the whole run (key h), while
`gputui watch` records the same target into the same file at once."""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from gputui.config import Settings
from gputui.record.alerts import Alert
from gputui.record.history import EventRow, GpuRow, HistoryWriter
from gputui.ui.app import GputuiApp
from gputui.ui.screens.wholerun import WholeRunScreen
from gputui.ui.widgets.status import StatusLine
from gputui.ui.wiring import build
from helpers import until
from ui_scenarios import screen_text


def step_lines(start: int, stop: int) -> str:
    return "".join(
        f"step {i} loss {3.0 - i / 100:.3f} | {800 + i} tok/s\n" for i in range(start, stop)
    )


def steps_in(db: Path) -> list[int]:
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("SELECT step FROM metric_points ORDER BY offset")]


async def test_dashboard_and_watch_share_the_history(tmp_path: Path) -> None:
    log, db = tmp_path / "train.log", tmp_path / "history.sqlite"
    log.write_text(step_lines(0, 40))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[history]\npath = "{db}"\nlog_every = 1\n')
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "watch",
            "local",
            "--log",
            str(log),
            "--config",
            str(cfg),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    settings = Settings(local=True, log=str(log), history_path=str(db), history_log_every=1.0)
    parts = build(settings)
    assert parts.recorder is not None and parts.history_error is None
    app = GputuiApp(
        parts.monitor, start=parts.start, on_exit=parts.on_exit, recorder=parts.recorder
    )
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(lambda: steps_in(db) == list(range(40)), 30, "the first 40 points")
            with open(log, "a") as f:
                f.write(step_lines(40, 60))
            await until(lambda: steps_in(db) == list(range(60)), 30, "60 points, none twice")
            await pilot.press("h")
            await until(lambda: isinstance(app.screen, WholeRunScreen), 5, "the whole-run view")
            screen = app.screen
            assert isinstance(screen, WholeRunScreen)
            await until(lambda: screen.loads >= 1, 10, "the whole-run view loaded")
            await pilot.pause()
            shot = screen_text(app)
            assert "60 metric points drawn" in shot, shot
            assert "loss" in shot and "throughput (tok/s)" in shot
            await pilot.press("escape")
            await until(lambda: not isinstance(app.screen, WholeRunScreen), 5, "back")
            assert parts.recorder.errors == []
            # an alert: the incident's notification with the text as typed
            # (never markup, no escapes); one per incident, gone when it goes quiet
            status = app.query_one(StatusLine)
            hung = Alert(
                "box", "held_but_idle", "firing", "error", "hung [red]x[/]\x1b]0;t\x07", 1.0
            )
            app._alert(hung)
            app._alert(dataclasses.replace(hung, state="escalated", title="hung [red]x[/] worse"))
            await pilot.pause()
            notes = [n for n in status.notices.values() if "[red]x[/]" in n.text]
            assert len(notes) == 1 and "worse" in notes[0].text, status.notices
            assert "\x1b" not in notes[0].text and "\x07" not in notes[0].text
            app._alert(dataclasses.replace(hung, state="quiet"))
            await pilot.pause()
            assert not [n for n in status.notices.values() if "[red]x[/]" in n.text]
            await pilot.press("q")
    finally:
        watch.send_signal(signal.SIGTERM)
        out, _ = watch.communicate(timeout=30)
    assert watch.returncode == 0, out
    assert steps_in(db) == list(range(60))


async def test_whole_run_view_marks_findings_and_actions(tmp_path: Path) -> None:
    import time

    db = tmp_path / "h.sqlite"
    now = time.time()
    w = HistoryWriter(db)
    tid = w.target_id("root@gpu1 ct 200").result()
    w.add_gpu(
        tid,
        [
            GpuRow(g, now - 600 + s, 90.0 - g, 40000.0, 81920.0, 60.0, 600.0)
            for s in range(0, 600, 5)
            for g in range(2)
        ],
    )
    w.flush().result()
    run = w.new_run("root@gpu1 ct 200", "/w/train.log", 7, now - 600).result()
    from gputui.record.history import PointRow

    w.add_points(
        run.id,
        [
            PointRow(i * 50, now - 600 + i, True, i, 3.0 - i / 100, 1000.0 + i, None)
            for i in range(200)
        ],
        10_000,
        now,
        "tok/s",
    ).result()
    w.add_event(
        tid,
        EventRow(
            now - 300, "finding", "held_but_idle", "appear", "error", "GPUs idle\x1b[2J [red]x[/]"
        ),
    ).result()
    w.add_event(
        tid, EventRow(now - 200, "action", "relaunch", "ok", "", "relaunched", "k1")
    ).result()
    w.close()

    from textual.app import App

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(WholeRunScreen(db, "gpu1", live=False))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, WholeRunScreen)
        await until(lambda: screen.loads >= 1, 10, "loaded")
        await pilot.pause()
        shot = screen_text(app)
        assert "200 metric points drawn" in shot
        assert "finding held_but_idle appear" in shot
        assert "[red]x[/]" in shot  # remote text shown as typed, not as markup
        assert "action relaunch ok" in shot
        await pilot.press("1")
        await until(lambda: screen.loads >= 2, 10, "reloaded for 1 h")
        assert "GPUs over 1 h" in screen_text(app)


def test_the_run_range_shows_the_relaunch_that_began_the_run(tmp_path: Path) -> None:
    """`h` a minute after a relaunch: the run range starts at the new run's
    first line, seconds after the relaunch and the old run's exit — it said
    'no findings, actions or exits recorded in this range' (issue 46)."""
    import time

    from gputui.record.history import PointRow
    from gputui.ui.screens.wholerun import load

    db = tmp_path / "h.sqlite"
    now = time.time()
    w = HistoryWriter(db)
    tid = w.target_id("root@gpu1 ct 200").result()
    w.add_event(tid, EventRow(now - 70, "exit", "train", "exit", "info", "exited 130")).result()
    w.add_event(
        tid, EventRow(now - 68, "action", "relaunch", "ok", "", "relaunched", "k1")
    ).result()
    run = w.new_run("root@gpu1 ct 200", "/w/train.log", 7, now - 60).result()
    w.add_points(
        run.id,
        [PointRow(i, now - 60 + i, True, i, 3.0, 1000.0, None) for i in range(60)],
        10_000,
        now,
        "tok/s",
    ).result()
    w.close()
    data = load(db, "root@gpu1 ct 200", None, now)  # the "run" range
    assert abs(data.since - (now - 60)) < 1
    assert [(e.kind, e.name) for e in data.events] == [("exit", "train"), ("action", "relaunch")]


def test_alerts_without_history(tmp_path: Path) -> None:
    """[history] enabled = false: no file is written, alerts still work."""
    settings = Settings(local=True, history=False, history_path=str(tmp_path / "h.sqlite"))
    parts = build(settings)
    assert parts.recorder is not None and parts.recorder.writer is None
    assert not (tmp_path / "h.sqlite").exists()


async def test_whole_run_view_with_no_points_yet_says_so(tmp_path: Path) -> None:
    """Issue 36: `h` before the log gave a point showed two empty frames
    titled loss and throughput, with nothing saying there was no data yet."""
    db = tmp_path / "h.sqlite"
    HistoryWriter(db).close()  # a history file, nothing recorded for gpu1 yet

    from textual.app import App

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(WholeRunScreen(db, "gpu1", live=False))

    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, WholeRunScreen)
        await until(lambda: screen.loads >= 1, 10, "loaded")
        await pilot.pause()
        shot = screen_text(app)
        assert "no data yet: no loss value read from the log so far" in shot, shot
        assert "no data yet: no throughput value read from the log so far" in shot, shot
        assert "no GPU readings stored in this range" in shot
