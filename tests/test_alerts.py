"""Alerts: the gate (appear, hold, quiet period, one resolved), the
terminal sequences, and a real JSON webhook on 127.0.0.1 receiving them
through apprise."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gputui.errors import ConfigError
from gputui.model import Finding, Severity
from gputui.record.alerts import Alert, AlertGate, AppriseSender, safe_text, terminal_notification
from gputui.record.history import HistoryWriter
from helpers import until
from test_history import LogOnlyMonitor

HUNG = Finding(
    "held_but_idle", Severity.ERROR, "GPUs idle with memory held", ["util 0 % for 5 min"]
)
DOWN = Finding("connection", Severity.WARNING, "connection lost")
NOISE = Finding("tools_missing", Severity.INFO, "py-spy missing")


def states(alerts: list[Any]) -> list[tuple[str, str]]:
    return [(a.kind, a.state) for a in alerts]


def sent(alerts: list[Any]) -> list[tuple[str, str]]:
    """What goes out (the screen-only "quiet" left out)."""
    return [(a.kind, a.state) for a in alerts if a.state != "quiet"]


def test_gate_appear_quiet_period_and_one_resolved() -> None:
    g = AlertGate("t", quiet_s=600)
    assert states(g.update([HUNG, NOISE], 0)) == [("held_but_idle", "firing")]
    assert g.update([HUNG], 10) == []  # still open: not again
    assert sent(g.update([], 20)) == []  # gone for one tick: not yet resolved
    assert states(g.update([], 30)) == [("held_but_idle", "resolved")]
    assert g.update([], 40) == []  # one resolved
    assert g.update([HUNG], 50) == []  # back inside the quiet period
    assert sent(g.update([], 60)) == [] and sent(g.update([], 70)) == []  # not told: no resolved
    assert g.update([HUNG], 80) == []
    assert states(g.update([HUNG], 600)) == [("held_but_idle", "firing")]  # quiet period over


def test_gate_holds_connection_down_for_n_seconds() -> None:
    g = AlertGate("t", holds={"connection": 60})
    assert g.update([DOWN], 0) == []
    assert g.update([], 30) == []  # a blip: nothing at all
    assert g.update([DOWN], 40) == []
    assert states(g.update([DOWN], 100)) == [("connection", "firing")]
    assert sent(g.update([], 110)) == []
    assert states(g.update([], 120)) == [("connection", "resolved")]


BUFFERED = Finding("buffered_output", Severity.WARNING, "stdout of PID 6611 is block-buffered")
SILENT = Finding("busy_but_silent", Severity.WARNING, "GPUs busy, log silent 11 s")
STALLED = Finding("progress_stalled", Severity.WARNING, "stalled: no new step for 20 s")
STALLED_IDLE = Finding("held_but_idle", Severity.WARNING, "stalled: GPUs idle 6 s")
DEAD = Finding("session_dead", Severity.ERROR, "session t is gone: KeyboardInterrupt")


def test_a_buffered_run_cycling_is_one_incident_told_once_and_once_worse() -> None:
    """Issue 27: buffered, silent, the chunk, silent again … — one alert,
    one escalation, no "resolved" until the run is unbuffered, then one."""
    g = AlertGate("t", quiet_s=600)
    out = []
    t = 0.0
    for _cycle in range(3):
        for f in [BUFFERED] * 3 + [SILENT] * 3:
            out += g.update([f], t)
            t += 1
    assert sent(out) == [("buffered_output", "firing"), ("busy_but_silent", "escalated")]
    assert {a.cause for a in out} == {"buffering"}
    # the first chunk arrived: the "log silent" toast goes; none comes back
    assert [a.state for a in out].count("quiet") == 1
    assert sent(g.update([], t)) == []  # relaunched unbuffered
    assert states(g.update([], t + 5)) == [("busy_but_silent", "resolved")]
    assert g.update([], t + 10) == []


def test_a_hang_escalates_twice_and_resolves_once_when_killed() -> None:
    g = AlertGate("t")
    out = g.update([STALLED], 0) + g.update([STALLED_IDLE], 5) + g.update([HUNG], 10)
    out += g.update([HUNG], 20) + g.update([], 30) + g.update([], 40)
    assert sent(out) == [
        ("progress_stalled", "firing"),
        ("held_but_idle", "escalated"),
        ("held_but_idle", "escalated"),
        ("held_but_idle", "resolved"),
    ]
    assert [a.severity for a in out if a.state != "quiet"][:3] == ["warning", "warning", "error"]


def test_a_hang_standing_buffering_down_is_no_resolution_of_it() -> None:
    """A buffered run that hangs: the buffering rules stand down (the hang
    says it); when the steps resume, buffering is as it was — no "resolved"."""
    g = AlertGate("t")
    out = g.update([BUFFERED], 0) + g.update([HUNG], 10) + g.update([HUNG], 30)
    out += g.update([BUFFERED], 40) + g.update([BUFFERED], 60)
    assert sent(out) == [
        ("buffered_output", "firing"),
        ("held_but_idle", "firing"),
        ("held_but_idle", "resolved"),
    ]


def test_reconnecting_then_lost_is_one_connection_incident() -> None:
    lost = Finding("connection", Severity.ERROR, "cannot reach box: connection refused")
    g = AlertGate("t", holds={"connection": 60})
    out = g.update([DOWN], 0) + g.update([DOWN], 60) + g.update([lost], 70) + g.update([DOWN], 80)
    out += g.update([lost], 90) + g.update([], 100) + g.update([], 110)
    assert sent(out) == [
        ("connection", "firing"),
        ("connection", "escalated"),
        ("connection", "resolved"),
    ]


def test_a_lost_connection_resolves_nothing_it_hides() -> None:
    g = AlertGate("t", holds={"connection": 60})
    out = g.update([HUNG], 0) + g.update([DOWN], 10) + g.update([DOWN], 100)
    out += g.update([HUNG], 110) + g.update([HUNG], 130)
    assert sent(out) == [
        ("held_but_idle", "firing"),
        ("connection", "firing"),
        ("connection", "resolved"),
    ]


def test_the_users_relaunch_is_no_news() -> None:
    """Issue 22: the relaunch's own SIGINT (the session gone with a
    KeyboardInterrupt) and the old log's silence are no alert; the old
    toasts go; the buffering resolves once the new, unbuffered run is up."""
    g = AlertGate("t")
    out = g.update([SILENT], 0)
    g.expect(10, 40)  # from the plan until the new run is up
    during = g.update([DEAD], 12) + g.update([DEAD], 20) + g.update([], 30) + g.update([], 40)
    assert sent(during) == []
    assert [a.state for a in during] == ["quiet"]  # the "log silent" toast went
    after = g.update([], 41) + g.update([], 50)
    assert sent(out + after) == [("busy_but_silent", "firing"), ("busy_but_silent", "resolved")]


def test_the_banner_leaves_out_what_the_user_caused() -> None:
    from gputui.record.incidents import IncidentBook

    book = IncidentBook()
    book.update([SILENT], 0)
    book.expect(10, 40)
    assert book.is_news(SILENT, 12)  # the old run is as buffered as before
    assert not book.is_news(DEAD, 12)  # the relaunch's own SIGINT
    book.update([DEAD], 12)
    assert not book.is_news(DEAD, 100)  # still the user's doing after the window
    assert book.is_news(HUNG, 100)  # a new cause after the window is news


def test_a_finding_about_the_new_run_is_news_inside_the_window() -> None:
    """The relaunch's own SIGINT opened the run_end incident silent; the new
    run's pane dead at once (the caller names it news) is told then, once,
    and the banner shows it; it resolves when the run is relaunched again."""
    from gputui.record.incidents import IncidentBook

    g = AlertGate("t")
    g.expect(10, 40)
    during = g.update([DEAD], 12) + g.update([DEAD], 14)  # the old session's SIGINT
    assert sent(during) == []
    told = g.update([DEAD], 16, news={"session_dead"}) + g.update([DEAD], 17, news={"session_dead"})
    assert sent(told) == [("session_dead", "firing")]
    assert sent(g.update([], 18) + g.update([], 30)) == [("session_dead", "resolved")]
    book = IncidentBook()
    book.expect(10, 40)
    book.update([DEAD], 12)
    assert not book.is_news(DEAD, 16)
    assert book.is_news(DEAD, 16, news={"session_dead"})


def test_the_users_kill_is_no_news_ever() -> None:
    g = AlertGate("t")
    g.expect(0, 10)
    out = g.update([DEAD], 5) + g.update([DEAD], 20) + g.update([DEAD], 2000)
    out += g.update([], 2010) + g.update([], 2020)
    assert out == []


def test_incidents_open_before_a_restart_resolve_aloud_only_if_alerting() -> None:
    g = AlertGate("t")
    g.seed(HUNG, 0)
    g.seed(NOISE, 0)  # a note in the history, never sent
    out = g.update([], 10) + g.update([], 20)
    assert sent(out) == [("held_but_idle", "resolved")]
    # both resolve in the history
    assert sorted((n.cause, n.state) for n in g.recorded) == [
        ("hang", "resolved"),
        ("tools_missing", "resolved"),
    ]


def test_causes_cover_the_rules_and_alerts_derive_from_them() -> None:
    from gputui.diagnose import SPECIFICITY
    from gputui.record.alerts import ALERT_KINDS
    from gputui.record.incidents import CAUSES

    kinds = [k for c in CAUSES for k in c.kinds]
    assert len(kinds) == len(set(kinds)) and set(kinds) <= set(SPECIFICITY)
    assert set(ALERT_KINDS) == {
        "connection",
        "ct_missing",
        "ct_stopped",
        "gpu_lost",
        "session_dead",
        "run_exited",
        "disk_full",
        "held_but_idle",
        "busy_but_silent",
        "buffered_output",
        "progress_stalled",
        # the run's own failures (issue 31)
        "cuda_oom",
        "nccl_timeout",
        "nccl_error",
        "loss_nan",
        # a port taken, /dev/shm full, torchrun's first failed rank (round 9)
        "port_in_use",
        "shm_exhausted",
        "rank_failed",
        "waiting_for_input",
        "cuda_error",
        # the hardware's own words (issue 32): a throttle, ECC / a pending row remap, an Xid
        "gpu_throttled",
        "gpu_ecc",
        "gpu_xid",
        # the deploy made it worse than the last run (issue 49)
        "slower_than_last",
        "loss_above_last",
        # the words real logs need (issue 47): killed without a word, a NaN gradient
        # norm, a collapsed fp16 loss scale, a write that found no room
        "run_killed",
        "grad_nan",
        "loss_scale_collapsed",
        "out_of_space",
        # the kernel log's own line of an OOM kill (issue 47)
        "kernel_oom_kill",
        # a watched session no listing has shown for a while (issue 44)
        "session_unknown",
    }
    names = {c.name for c in CAUSES}
    assert all(m in names for c in CAUSES for m in c.masked_by)


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
    from gputui.cli.main import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[alerts]\nurls = ["json://127.0.0.1:{hook.port}/hook"]\n')
    assert main(["alert-test", "--config", str(cfg)]) == 0
    assert len(hook.got) == 1 and "test" in hook.got[0]["title"]
    # no host: the title names this machine, not "gputui gputui: test" (issue 46)
    assert hook.got[0]["title"].startswith("gputui local: test"), hook.got[0]["title"]


async def test_webhook_gets_appear_not_repeat_and_one_resolved(hook: Hook, tmp_path: Path) -> None:
    """The recorder's path end to end: findings per tick -> gate -> apprise
    -> a real HTTP POST on loopback."""
    from gputui.record.recorder import RunRecorder

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
    seq: list[list[Finding]] = [[HUNG], [HUNG], [HUNG], [], [], [HUNG], [], [], [HUNG]]
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
    from gputui.record.recorder import RunRecorder

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
    for step in ([], [HUNG], [HUNG], [], []):  # both running before the run hangs
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


async def test_a_new_dashboard_does_not_toast_the_last_runs_incident_ending(
    tmp_path: Path,
) -> None:
    """A dashboard opened on a target whose history holds an incident still
    open from before (the last run's): when its cause is gone, the history
    and the webhook hear 'resolved', the new screen does not — it showed
    'resolved: log lines arrive in bursts up to 67 s late', an incident it
    never showed (issue 46). An incident it did show still ends aloud."""
    from gputui.record.recorder import RunRecorder

    log = tmp_path / "train.log"
    log.write_text("")
    db = tmp_path / "h.sqlite"
    found: list[Finding] = [HUNG]
    clock = [1000.0]

    def recorder(toasts: list[str], sent: list[str]) -> tuple[RunRecorder, HistoryWriter]:
        w = HistoryWriter(db)
        rec = RunRecorder(
            LogOnlyMonitor(log),
            w,
            diagnose=lambda s, n: list(found),
            gate=AlertGate("box", quiet_s=300),
            sinks=[lambda a: sent.append(a.state)],
            clock=lambda: clock[0],
            tick_s=3600,  # only the test's ticks
        )
        rec.toast_sinks.append(lambda a: toasts.append(a.state))
        return rec, w

    before_toasts: list[str] = []
    old, w = recorder(before_toasts, [])
    await old.start()
    for _ in range(2):  # the last dashboard: the run hangs, and it is said
        clock[0] += 10
        await old.tick()
    await old.stop()
    w.close()
    assert before_toasts == ["firing"]

    toasts: list[str] = []
    sent: list[str] = []
    new, w = recorder(toasts, sent)
    await new.start()
    found[:] = []  # the cause is gone (the new run does not hang)
    for _ in range(3):
        clock[0] += 10
        await new.tick()
    assert "resolved" in sent, sent  # the history's and the webhook's end of it
    assert toasts == [], toasts  # not this screen's news
    clock[0] += 600  # past the quiet period
    for step in ([HUNG], [HUNG], [], [], []):  # it hangs while this screen shows it
        found[:] = step
        clock[0] += 10
        await new.tick()
    await new.stop()
    w.close()
    assert toasts[0] == "firing" and toasts[-1] == "resolved", toasts


def test_a_long_log_path_never_cuts_the_cause_from_the_subject() -> None:
    """A run that logs under a deep directory: the subject (cut at 200
    characters for mail and push titles) lost "so output is block-buffered"
    behind the path. Now the path gives up its directories first; the file
    name and the cause stay, and the body keeps the whole path."""
    deep = "/srv/experiments/" + "ablation-lr-3e-4-warmup-2000/" * 5 + "train.log"
    title = (
        f"GPUs busy, log silent 4 min: stdout of PID 12 is a pipe into tee writing {deep} "
        "with no -u and PYTHONUNBUFFERED unset, so output is block-buffered"
    )
    alert = Alert("root@gpu1/200", "busy_but_silent", "firing", "warning", title, 0.0,
                  evidence=(f"log {deep}: no new line for 4 min",))  # fmt: skip
    assert len(alert.subject) <= 200
    assert alert.subject.endswith("so output is block-buffered"), alert.subject
    assert "…/train.log" in alert.subject and "PID 12" in alert.subject
    assert deep in alert.body  # the evidence line keeps the whole path
    short = Alert("h", "busy_but_silent", "firing", "warning", "log /a/b.log silent", 0.0)
    assert short.subject == "gputui h: log /a/b.log silent"  # what fits is left alone


def test_the_dashboards_own_plan_is_no_news_before_the_audit_log_is_read(tmp_path: Path) -> None:
    """The dashboard tells its recorder of a confirmed relaunch as it begins
    (note_begun), so the run's consequences — its log moved aside — are not on
    the banner as news in the tick before the audit log's "begun" line is
    read (the relaunch banner test, loaded: 'log … does not exist' at +0.5 s,
    no action known). No audit line at all here: the note alone does it;
    without it the same finding is news. The audit log's lines for the same
    plan then key to the same action (its end closes it)."""
    from gputui.record.recorder import RunRecorder

    log = tmp_path / "train.log"
    log.write_text("")
    audit = tmp_path / "audit.jsonl"
    missing = Finding("log_missing", Severity.ERROR, f"log {log} does not exist")
    rec = RunRecorder(
        LogOnlyMonitor(log),
        HistoryWriter(tmp_path / "h.sqlite"),
        diagnose=lambda s, n: [],
        audit_file=audit,
        tick_s=3600,
    )
    now = time.time()
    assert rec.is_news(missing, now)
    rec.note_begun("relaunch", now - 1.23456, [4242])
    assert not rec.is_news(missing, now + 0.5)
    ended = {"target": rec.name, "action": "relaunch", "plan": round(now - 1.23456, 3)}
    audit.write_text(json.dumps({**ended, "epoch": now + 2, "pids": [4242]}) + "\n")
    assert not rec.is_news(missing, now + 2.5)
    assert [a.end for a in rec._actions.values()] == [now + 2]


async def test_dashboard_tick_brings_the_recorders(tmp_path: Path) -> None:
    """The dashboard's 1 Hz tick kicks the recorder's (one timer a second for
    both): a kick ticks it at once, not on its own timer (30 s here); a second
    kick under half a tick after it is left for the next."""
    import asyncio

    from gputui.record.recorder import RunRecorder

    log = tmp_path / "train.log"
    log.write_text("")
    ticks: list[float] = []
    w = HistoryWriter(tmp_path / "h.sqlite")
    rec = RunRecorder(
        LogOnlyMonitor(log),
        w,
        diagnose=lambda s, n: ticks.append(time.monotonic()) or [],
        gate=AlertGate("box", quiet_s=300),
        tick_s=30,  # its own timer: never within the test
    )
    await rec.start()
    try:
        await until(lambda: rec._next is not None, 10, "the recorder waiting for its tick")
        rec.kick()
        await until(lambda: len(ticks) >= 1, 10, "the kicked tick")
        await until(lambda: rec._next is not None, 10, "the recorder waiting again")
        rec.kick()  # under half a tick after the last: left for the next
        await asyncio.sleep(0.2)
        assert len(ticks) == 1, ticks
    finally:
        await rec.stop()
        w.close()
