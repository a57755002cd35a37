"""record/yourkill.py: the audit log's kill that left a pane dead is the
user's own stop only for that session's pane, in that container, after the
session was made."""

from __future__ import annotations

import json
from pathlib import Path

from gputui.record.yourkill import your_kill, your_kill_in


def line(**kw: object) -> str:
    e: dict[str, object] = {"action": "kill", "session": "train", "ct": 200, "pids": [6, 8]}
    e.update(epoch=1000.0, ended_by="SIGINT")
    e.update(kw)
    return json.dumps(e)


def test_the_kill_of_the_panes_pid_is_yours() -> None:
    got = your_kill_in([line()], 200, "train", 6, since=900.0)
    assert got is not None and got.at == 1000.0 and got.ended_by == "SIGINT"


def test_another_session_ct_pid_verb_or_an_older_session_is_not() -> None:
    for other in (
        line(session="eval"),
        line(ct=201),
        line(pids=[7, 8]),
        line(action="dump"),
        line(epoch=800.0),  # before the session was made: an older pane with the same PID
        "not json",
    ):
        assert your_kill_in([other], 200, "train", 6, since=900.0) is None, other


def test_the_last_kill_counts_and_an_unreadable_log_is_none(tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    audit.write_text(line() + "\n" + line(epoch=1100.0, ended_by="SIGKILL") + "\n")
    got = your_kill(audit, 200, "train", 6, None)
    assert got is not None and got.ended_by == "SIGKILL"
    assert your_kill(tmp_path / "none.log", 200, "train", 6, None) is None
