"""Pilot tests of the REAL dashboard against the real-sshd test bed.

`GputuiApp` built by `gputui.ui.wiring.build` from Settings naming the test
bed's sshd on 127.0.0.1 and `--ct N`: the real SshTransport, the real Monitor
(agent, log follower, host nvidia-smi stream), the real actions. The run is a
real python3 in a real tmux session inside the stand-in CT; only `pct` and
`nvidia-smi` are stand-ins, the latter serving the GPU values set here.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest
from textual import events
from textual.widgets import DataTable, Log

from gputui.diagnose import Thresholds
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.result import ResultScreen
from gputui.ui.widgets.banner import Banner
from gputui.ui.widgets.status import StatusLine
from helpers import yes_once_shown
from test_alerts import Hook
from ui_scenarios import (
    SIZE,
    gputui_processes_in_ct,
    gputui_processes_on_host,
    make_app,
    prepare_run,
    screen_text,
    session_alive,
    settings_for,
    start_buffered,
    start_unbuffered,
    until,
)

H200_MIB = 143771
LINE = re.compile(r"^line (\d{5}) pid (\d+) step \d+ loss [\d.]+$")


def h200(index: int, **values: Any) -> dict[str, Any]:
    g: dict[str, Any] = {
        "index": index,
        "name": "NVIDIA H200",
        "uuid": f"GPU-ui00000{index}",
        "memory.total": H200_MIB,
        "power.limit": 700,
    }
    g.update(values)
    return g


def numbered(app: Any, pid: int | None = None) -> list[int]:
    """The numbers of the counter's lines the log widget holds, in order
    (only those written by `pid` when given)."""
    lines = app.query_one("#log", Log).lines
    return [int(m[1]) for x in lines if (m := LINE.match(x)) and (pid is None or int(m[2]) == pid)]


def line_with(text: str, needle: str) -> str:
    hits = [x for x in text.splitlines() if needle in x]
    assert hits, f"{needle!r} not on screen:\n{text}"
    return hits[0]


@pytest.mark.timeout(60)
async def test_sessions_gpus_and_log_show_what_the_testbed_serves(testbed: Any, ct: int) -> None:
    gpu0 = {"memory.used": 40960, "utilization.gpu": 87, "temperature.gpu": 66, "power.draw": 512.3}
    gpu1 = {"memory.used": 2048, "utilization.gpu": None, "temperature.gpu": 41, "power.draw": 98.0}
    testbed.set_gpus({"gpus": [h200(0, **gpu0), h200(1, **gpu1)]})
    run = prepare_run(testbed, ct, "train")
    start_unbuffered(testbed, run, count=40, period=0.05)
    app, parts = make_app(
        settings_for(testbed, ct, interval=0.5, diagnosis=Thresholds(stale_after=30.0))
    )
    snap = parts.monitor.snapshot
    try:
        async with app.run_test(size=SIZE) as pilot:
            # log tail: every line 1..40 exactly once, in order
            await until(
                lambda: numbered(app)[-1:] == [40],
                20,
                "line 40 in the log view",
                lambda: f"log view: {app.query_one('#log', Log).lines[-5:]}; log: {snap.log}",
            )
            assert numbered(app) == list(range(1, 41))
            assert snap.log.path == str(run.log)

            # sessions table: the tmux session, alive, its command
            table = app.query_one("#sessions", DataTable)
            await until(lambda: table.row_count == 1, 10, "one session row")
            name, state, _exit, command, _age = (str(c) for c in table.get_row("train"))
            assert name.strip().endswith("train")
            assert state == "alive"
            assert "count.py" in command

            # GPU rows: the stand-in's numbers, N/A as unknown (not 0)
            await until(lambda: len(snap.gpus.latest) == 2, 10, "two GPU readings")
            assert snap.gpus.latest[0].util_pct == 87
            assert snap.gpus.latest[1].util_pct is None
            await pilot.pause(0.3)
            text = screen_text(app)
            assert "GPUs · 2× H200" in text
            row0 = line_with(text, "40.0/140G")
            assert " 87%" in row0 and "66°C" in row0 and "512/700 W" in row0, row0
            row1 = line_with(text, "2.0/140G")
            assert "?%" in row1 and "41°C" in row1 and "98/700 W" in row1, row1
            assert " 0%" not in row1, f"N/A utilization shown as 0: {row1}"
            # the log's state line counts what arrived
            await until(
                lambda: "▲ growing  40 lines" in screen_text(app),
                5,
                "the log state to say 40 lines",
                lambda: line_with(screen_text(app), " lines"),
            )
            await pilot.press("q")
            await until(lambda: not app.is_running, 15, "the app to quit")
    finally:
        await parts.on_exit()


@pytest.mark.timeout(120)
async def test_buffered_banner_then_relaunch_clears_it(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """~20 s: the run must stay silent past stale_after (3 s) for the banner,
    then the relaunch stops the old run, waits VERIFY_S (3 s) and the new run
    must fill the log."""
    busy = {"memory.used": 80000, "utilization.gpu": 97, "temperature.gpu": 70, "power.draw": 650.0}
    testbed.set_gpus({"gpus": [h200(0, **busy), h200(1, **busy)]})
    run = prepare_run(testbed, ct, "buffered")
    start_buffered(testbed, run, count=100000, period=0.1)
    app, parts = make_app(
        settings_for(testbed, ct, interval=0.5, diagnosis=Thresholds(stale_after=3.0))
    )
    snap = parts.monitor.snapshot

    def kind() -> str | None:
        f = app.query_one(Banner).finding
        return f.kind if f else None

    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(
                lambda: kind() == "busy_but_silent",
                20,
                "the buffering banner",
                lambda: f"findings: {[f.kind for f in app.findings]}; proc: {snap.training_proc}",
            )
            banner = app.query_one(Banner)
            assert banner.display and banner.has_class("-shown")
            text = str(banner.render())
            assert "block-buffered" in text and "[r] relaunch unbuffered" in text, text
            assert numbered(app) == []  # nothing reached the log
            proc = snap.training_proc
            assert proc is not None and proc.block_buffered is True
            # down to 100x30 the banner goes compact and keeps its key (and the app survives)
            await pilot.resize_terminal(100, 30)
            await pilot.pause(0.3)
            assert app.is_running and banner.compact and banner.display
            assert "[r] relaunch unbuffered" in str(banner.render())
            await pilot.resize_terminal(*SIZE)
            await pilot.pause(0.3)
            assert not banner.compact

            await pilot.press("r")
            await until(
                lambda: isinstance(app.screen, ConfirmScreen) and app.screen.plan, 15, "the plan"
            )
            assert app.executed == []  # the box is open, nothing ran yet
            seen: set[str | None] = set()  # every banner word during the relaunch
            stray: list[str] = []  # what any other word said, and what the monitor saw then
            t0 = time.monotonic()

            async def sample() -> None:
                while True:
                    k = kind()
                    seen.add(k)
                    if k not in (None, "busy_but_silent", "buffered_output") and len(stray) < 5:
                        f = app.query_one(Banner).finding
                        rec, now = parts.recorder, time.time()
                        act = rec._last_action(now) if rec is not None else None
                        book = rec.gate.book if rec is not None else None
                        inc = book.open.get("run_end") if book is not None else None
                        stray.append(
                            f"+{time.monotonic() - t0:.1f}s {f.title if f else k!r} "
                            f"{f.evidence[:2] if f else ''}; gone={snap.session_gone} "
                            f"name={snap.session_name} sessions="
                            f"{[(x.name, [q.pid for q in x.panes], x.alive) for x in snap.sessions]}"
                            f"; action={act and (act.verb, act.start - now, act.end and act.end - now, sorted(act.pids))}"
                            f" window={book and book.in_window(now)} incident="
                            f"{inc and (inc.opened - now, inc.expected, inc.finding.kind)}"
                        )
                    await asyncio.sleep(0.05)

            sampler = asyncio.create_task(sample())
            await yes_once_shown(pilot)
            await until(lambda: app.executed, 5, "the relaunch to start")
            assert [p.action for p in app.executed] == ["relaunch"]
            await until(
                lambda: not [w for w in app.workers if w.group == "action" and w.is_running],
                30,
                "the relaunch to finish",
            )
            notes = [str(n.message) for n in app._notifications]
            assert not any("fail" in n.lower() for n in notes), notes
            # the new run: another process, unbuffered, its lines 1, 2, 3... in the view
            new = await until(
                lambda: (p := snap.training_proc) is not None and p.pid != proc.pid and p,
                10,
                "the relaunched process",
            )
            assert new.block_buffered is False, new
            await until(
                lambda: len(numbered(app, new.pid)) >= 10,
                15,
                "the relaunched run's lines in the log view",
                lambda: f"log view: {app.query_one('#log', Log).lines[-5:]}; log: {snap.log}",
            )
            nums = numbered(app, new.pid)
            assert nums == list(range(1, len(nums) + 1)), nums
            assert f"line 00001 pid {new.pid} " in run.log.read_text()  # the file, too
            await until(
                lambda: kind() is None and not banner.display,
                10,
                "the banner to clear",
                lambda: f"findings: {[f.kind for f in app.findings]}",
            )
            # the sessions list shows the user's command, not gputui's wrapper script
            if isinstance(app.screen, ResultScreen):
                await pilot.press("escape")
                await pilot.pause(0.2)
            sessions = screen_text(app)
            assert "set -o pipefail" not in sessions and "log=$1" not in sessions, sessions
            assert "python3 -u" in line_with(sessions, "▶ buffered"), sessions
            # the relaunch report says what happened, in words
            said = " ".join(str(n.message) for n in app._notifications)
            assert "new log" in said and "->" not in said, said
            sampler.cancel()
            said_by_banner = seen - {None, "busy_but_silent", "buffered_output"}
            assert not said_by_banner, stray  # never "session gone: KeyboardInterrupt"
            # issue 22: the relaunch's own consequences (the SIGINT's
            # KeyboardInterrupt, the old log's silence) are no news: the only
            # alerts are the buffering incident's, resolved once the new run is up
            rec = parts.recorder
            assert rec is not None
            await until(
                lambda: any(a.state == "resolved" for a in rec.alerts),
                40,
                "the buffering incident resolved",
                lambda: f"alerts: {[(a.kind, a.state) for a in rec.alerts]}",
            )
            states = [(a.cause, a.state) for a in rec.alerts]
            assert {c for c, _ in states} == {"buffering"}, states
            assert [s for _, s in states].count("firing") == 1, states
            assert [s for _, s in states].count("resolved") == 1, states
            shown = app.query_one(StatusLine).notices
            notices = [n.text for k, n in shown.items() if k.startswith("incident:")]
            # the header's incident notices (the recorder is wired as run_app wires
            # it): the buffering incident's alone, never the relaunch's own
            # consequences (the session gone, the old log's silence)
            assert all("buffe" in n for n in notices), notices
            assert not [n for n in notices if "is gone" in n or "KeyboardInterrupt" in n], notices
            # the old log was moved aside, not deleted or truncated
            moved = sorted(run.dir.glob("train.log.*"))
            assert len(moved) == 1, list(run.dir.iterdir())
            assert session_alive(testbed, ct, "buffered")
            if isinstance(app.screen, ResultScreen):
                await pilot.press("escape")
            await pilot.press("q")
            await until(lambda: not app.is_running, 15, "the app to quit")
    finally:
        await parts.on_exit()


@pytest.mark.timeout(120)
async def test_a_relaunch_that_dies_at_once_is_on_the_banner_and_sent_once(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """Relaunch, confirm it runs: the user presses r, y and the new run dies
    at once (ModuleNotFoundError, its new pane dead with exit 1). The banner
    names the dead session within seconds of the relaunch's end, and one
    alert reaches the webhook — the user's action does not hide its new run."""
    busy = {"memory.used": 80000, "utilization.gpu": 97, "temperature.gpu": 70, "power.draw": 650.0}
    testbed.set_gpus({"gpus": [h200(0, **busy)]})
    run = prepare_run(testbed, ct, "dies")
    start_unbuffered(testbed, run, count=100000, period=0.1)
    hook = Hook()
    url = f"json://127.0.0.1:{hook.port}/alerts"
    app, parts = make_app(
        settings_for(
            testbed, ct, interval=0.5, diagnosis=Thresholds(stale_after=3.0), alert_urls=[url]
        )
    )

    def words() -> str:
        f = app.query_one(Banner).finding
        return f"{f.kind} {f.title}" if f else ""

    def dead_session_shown() -> bool:
        # by its kind: "dies" is also in the log's path, and a poll taken while
        # the relaunch had moved the old log aside says the log is missing
        f = app.query_one(Banner).finding
        if f is None or f.kind not in ("session_dead", "run_exited"):
            return False
        return "session dies" in f.title and bool(app.query_one(Banner).display)

    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: numbered(app), 20, "the run's lines")
            run.script.write_text("import gputui_no_such_module\n")  # the next start dies
            await pilot.press("r")
            await until(
                lambda: isinstance(app.screen, ConfirmScreen) and app.screen.plan, 15, "the plan"
            )
            await yes_once_shown(pilot)
            await until(lambda: app.executed, 5, "the relaunch to start")
            await until(
                lambda: not [w for w in app.workers if w.group == "action" and w.is_running],
                30,
                "the relaunch to finish",
            )
            ended = time.time()
            await until(
                dead_session_shown,
                20,
                "the dead session on the banner",
                lambda: f"banner {words()!r}; findings {[(f.kind, f.title) for f in app.findings]}",
            )
            shown_after, said = time.time() - ended, words()
            rec = parts.recorder
            assert rec is not None
            await until(
                lambda: hook.got,
                20,
                "the alert",
                lambda: (
                    f"alerts {[(a.cause, a.state) for a in rec.alerts]}; {rec.errors}; "
                    f"findings {[(f.kind, f.title) for f in rec.findings]}; "
                    f"sessions {parts.monitor.snapshot.sessions}"
                ),
            )
            await asyncio.sleep(5)  # nothing else follows
            got = [str(g.get("title", "")) for g in hook.got]
            if isinstance(app.screen, ResultScreen):
                await pilot.press("escape")
            await pilot.press("q")
            await until(lambda: not app.is_running, 15, "the app to quit")
    finally:
        await parts.on_exit()
        hook.close()
    assert "ModuleNotFoundError" in said or "exit" in said, said
    assert shown_after < 10, f"the banner said it {shown_after:.1f} s after the relaunch"
    assert len(got) == 1 and "dies" in got[0], got


@pytest.mark.timeout(60)
async def test_quit_leaves_no_gputui_process_behind(testbed: Any, ct: int) -> None:
    testbed.set_gpus({"gpus": [h200(0, **{"memory.used": 30000, "utilization.gpu": 90})]})
    run = prepare_run(testbed, ct, "quitme")
    start_unbuffered(testbed, run, count=100000, period=0.2)
    app, parts = make_app(
        settings_for(testbed, ct, interval=0.5, diagnosis=Thresholds(stale_after=30.0))
    )
    snap = parts.monitor.snapshot
    try:
        async with app.run_test(size=SIZE):
            await until(lambda: numbered(app), 20, "log lines")
            await until(lambda: snap.gpus.latest, 10, "GPU readings")
            # while it runs, the helpers are there (so the check below can fail)
            running = gputui_processes_on_host(testbed)
            assert any("gputui-agent" in p for p in running), running
            assert any("nvidia-smi" in p for p in running), running
            assert gputui_processes_in_ct(testbed, ct), "no gputui helper seen in the CT"
            t0 = time.monotonic()
            # the key itself, not pilot.press: that then waits for every
            # widget's queue to drain, and a queue closed by the quit never
            # does — 30 s of the pilot's, the quit's own time unmeasured
            # (full suite, main 3331b85)
            app.post_message(events.Key("q", "q"))
            await until(lambda: not app.is_running, 15, "the app to quit")
            quit_s = time.monotonic() - t0
    finally:
        await parts.on_exit()
    assert quit_s < 5, f"quitting took {quit_s:.1f} s"
    await until(
        lambda: not gputui_processes_on_host(testbed) and not gputui_processes_in_ct(testbed, ct),
        5,
        "gputui's processes to end",
        lambda: (
            f"host: {gputui_processes_on_host(testbed)}\nct: {gputui_processes_in_ct(testbed, ct)}"
        ),
    )
    # the user's run is not gputui's: it keeps running
    assert session_alive(testbed, ct, "quitme")
