"""Alerts: the gate (appear, hold, quiet period, one resolved), the
terminal sequences, and a real JSON webhook on 127.0.0.1 receiving them
through apprise."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gputui.alerts import AlertGate, AppriseSender, safe_text, terminal_notification
from gputui.errors import ConfigError
from gputui.history import HistoryWriter
from gputui.model import Finding, Severity
from helpers import until
from test_history import LogOnlyMonitor

HUNG = Finding(
    "held_but_idle", Severity.ERROR, "GPUs idle with memory held", ["util 0 % for 5 min"]
)
DOWN = Finding("connection", Severity.WARNING, "connection lost")
NOISE = Finding("tools_missing", Severity.INFO, "py-spy missing")


def states(alerts: list[Any]) -> list[tuple[str, str]]:
    return [(a.kind, a.state) for a in alerts]


def test_gate_appear_quiet_period_and_one_resolved() -> None:
    g = AlertGate("t", quiet_s=600)
    assert states(g.update([HUNG, NOISE], 0)) == [("held_but_idle", "firing")]
    assert g.update([HUNG], 10) == []  # still open: not again
    assert states(g.update([], 20)) == [("held_but_idle", "resolved")]
    assert g.update([], 30) == []  # one resolved
    assert g.update([HUNG], 40) == []  # flaps back inside the quiet period
    assert g.update([], 50) == []  # its clear is not told either
    assert g.update([HUNG], 60) == []
    assert states(g.update([HUNG], 600)) == [("held_but_idle", "firing")]  # quiet period over


def test_gate_holds_connection_down_for_n_seconds() -> None:
    g = AlertGate("t", holds={"connection": 60})
    assert g.update([DOWN], 0) == []
    assert g.update([], 30) == []  # a blip: nothing at all
    assert g.update([DOWN], 40) == []
    assert states(g.update([DOWN], 100)) == [("connection", "firing")]
    assert states(g.update([], 110)) == [("connection", "resolved")]


def test_terminal_notification_carries_no_raw_escapes() -> None:
    evil = Finding(
        "session_dead", Severity.ERROR, "run died\x1b]52;c;ZXZpbA==\x07; rm -rf\x9b2J", ["x\x1b[2J"]
    )
    (alert,) = AlertGate("host\x1b]0;title\x07").update([evil], 0)
    seq = terminal_notification(alert)
    assert seq.startswith("\a\x1b]9;")
    # exactly the sequences we frame: BEL, two OSC starts, two string terminators
    assert seq.count("\x1b") == 4 and seq.count("\x07") == 1
    assert "\x9b" not in seq
    title = seq.split("\x1b]777;notify;")[1]
    assert title.count(";") == 1  # only the field separator we put there
    assert safe_text("a\tb\nc\u202ed") == "a b c d"


def test_bad_notification_url_is_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match=r"urls\[0\]: apprise does not understand"):
        AppriseSender(["not a url"])


class Hook:
    """A JSON webhook on 127.0.0.1 that keeps what it received."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                hook.got.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def test_alert_test_command_posts_one(hook: Hook, tmp_path: Path) -> None:
    from gputui.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[alerts]\nurls = ["json://127.0.0.1:{hook.port}/hook"]\n')
    assert main(["alert-test", "--config", str(cfg)]) == 0
    assert len(hook.got) == 1 and "test" in hook.got[0]["title"]


async def test_webhook_gets_appear_not_repeat_and_one_resolved(hook: Hook, tmp_path: Path) -> None:
    """The recorder's path end to end: findings per tick -> gate -> apprise
    -> a real HTTP POST on loopback."""
    from gputui.recorder import RunRecorder

    log = tmp_path / "train.log"
    log.write_text("")
    sender = AppriseSender([f"json://127.0.0.1:{hook.port}/alerts"])
    found: list[Finding] = []
    clock = [1000.0]
    w = HistoryWriter(tmp_path / "h.sqlite")
    rec = RunRecorder(
        LogOnlyMonitor(log),
        w,
        diagnose=lambda s, n: list(found),
        gate=AlertGate("box", quiet_s=300),
        shared_sinks=[sender.send],
        clock=lambda: clock[0],
        tick_s=3600,  # only the test's ticks
    )
    await rec.start()
    seq: list[list[Finding]] = [[HUNG], [HUNG], [HUNG], [], [HUNG], [], [HUNG]]
    for step in seq:
        found[:] = step
        clock[0] += 10
        await rec.tick()
    await rec.stop()
    w.close()
    await until(lambda: len(hook.got) >= 2, 10, "two webhook posts")
    assert len(hook.got) == 2, hook.got
    first, second = hook.got  # in order: a resolved never overtakes its alert
    assert "GPUs idle with memory held" in first["title"] and first["type"] == "failure"
    assert "resolved" in second["title"] and second["type"] == "success"
    assert "util 0 % for 5 min" in first["message"]


async def test_dashboard_and_watch_post_each_alert_once(hook: Hook, tmp_path: Path) -> None:
    """Two gputui processes recording one target into one history file (two
    writers, as a dashboard and `watch`): the webhook gets the alert and its
    resolution once, while each process still rings its own terminal."""
    from gputui.recorder import RunRecorder

    log = tmp_path / "train.log"
    log.write_text("")
    db = tmp_path / "h.sqlite"
    found: list[Finding] = []
    rang: list[str] = []
    clock = [1000.0]
    recs = []
    for who in ("dashboard", "watch"):
        w = HistoryWriter(db)
        sender = AppriseSender([f"json://127.0.0.1:{hook.port}/alerts"])
        recs.append(
            (
                RunRecorder(
                    LogOnlyMonitor(log),
                    w,
                    diagnose=lambda s, n: list(found),
                    gate=AlertGate("box", quiet_s=300),
                    sinks=[lambda a, who=who: rang.append(f"{who} {a.state}")],
                    shared_sinks=[sender.send],
                    clock=lambda: clock[0],
                    tick_s=3600,  # only the test's ticks
                ),
                w,
            )
        )
    for rec, _ in recs:
        await rec.start()
    for step in ([], [HUNG], [HUNG], []):  # both running before the run hangs
        found[:] = step
        clock[0] += 10
        for rec, _ in recs:
            await rec.tick()
    for rec, w in recs:
        await rec.stop()
        w.close()
    await until(lambda: len(hook.got) >= 2, 10, "two webhook posts")
    assert ["resolved" in g["title"] for g in hook.got] == [False, True]  # in order
    assert sorted(rang) == sorted(
        ["dashboard firing", "watch firing", "dashboard resolved", "watch resolved"]
    )
