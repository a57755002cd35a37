"""An action whose gputui is gone mid-action (quit, killed: a "begun" line
in the audit log and no end line) no longer keeps the banner and the
alerts dark (issue 44): for ACTION_MAX_S (5 min) every new incident of that
target's session was taken as the user's own doing — a crash or a hang of
the next run, watched by a new dashboard, showed no banner. The "begun"
line names the gputui process running it (`by`); once that process is
gone, the action is over. A live one still holds its window."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from gputui.actions.plan import audit_begun
from gputui.model import Finding, Severity
from gputui.record.history import HistoryWriter
from gputui.record.recorder import RunRecorder
from test_history import LogOnlyMonitor

GONE = Finding("session_dead", Severity.ERROR, "session dflash is gone: RuntimeError: CUDA error")


def _recorder(tmp_path: Path, audit: Path) -> RunRecorder:
    log = tmp_path / "train.log"
    log.write_text("")
    mon = LogOnlyMonitor(log)
    mon.snapshot.session_name = "dflash"
    return RunRecorder(
        mon,  # type: ignore[arg-type]
        HistoryWriter(tmp_path / "h.sqlite"),
        diagnose=lambda s, n: [],
        audit_file=audit,
        tick_s=3600,
    )


def _begun_by(audit: Path, target: str, pid: int, ago: float) -> None:
    t = time.time() - ago
    line = {
        "epoch": round(t, 3),
        "phase": "begun",
        "plan": round(t - 0.5, 3),
        "target": target,
        "begins": "relaunch",
        "session": "dflash",
        "pids": [4242],
        "by": pid,
    }
    with audit.open("a") as f:
        f.write(json.dumps(line) + "\n")


def _gone_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


async def test_an_action_whose_gputui_is_gone_keeps_nothing_dark(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rec = _recorder(tmp_path, audit)
    _begun_by(audit, rec.name, _gone_pid(), ago=60.0)
    assert rec.is_news(GONE, time.time()) is True
    await rec.stop()


async def test_an_action_whose_gputui_still_runs_holds_its_window(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rec = _recorder(tmp_path, audit)
    alive = subprocess.Popen(["sleep", "30"])
    try:
        _begun_by(audit, rec.name, alive.pid, ago=60.0)
        assert rec.is_news(GONE, time.time()) is False
        alive.kill()
        alive.wait()
        assert rec.is_news(GONE, time.time()) is True  # over once its gputui is gone
    finally:
        alive.kill()
    await rec.stop()


def test_the_begun_line_names_its_gputui(tmp_path: Path) -> None:
    from types import SimpleNamespace

    plan = SimpleNamespace(created=time.time(), action="relaunch", session="s", ct=200, pids=[1])
    path = audit_begun("t", plan, tmp_path / "audit.jsonl")  # type: ignore[arg-type]
    import os

    assert json.loads(path.read_text())["by"] == os.getpid()


async def test_an_action_cut_short_still_writes_its_end_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gputui quit mid-relaunch (the action's task cancelled): the audit log
    gets its end line, so no recorder waits 5 minutes for it."""
    import dataclasses

    import gputui.actions as actions
    from gputui.actions.plan import ActionPlan
    from gputui.remote.local import LocalTransport
    from gputui.remote.target import Target

    async def cut_short(*args: object) -> None:
        raise asyncio.CancelledError

    kill = actions.ACTIONS["kill"]
    monkeypatch.setitem(actions.ACTIONS, "kill", dataclasses.replace(kill, execute=cut_short))
    audit = tmp_path / "audit.jsonl"
    plan = ActionPlan("kill", "Kill?", "t", session="dflash", pids=[4242])
    with pytest.raises(asyncio.CancelledError):
        await actions.execute(Target(LocalTransport()), plan, audit_file=audit)
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [x.get("phase", "end") for x in lines] == ["begun", "end"], lines
    assert lines[1]["ok"] is False and "interrupted" in lines[1]["outcome"]
