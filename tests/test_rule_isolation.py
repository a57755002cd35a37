"""Each diagnosis rule runs isolated (issue 44): a rule that raises loses
only its own finding, its traceback goes to the debug log, and it shows as
a finding of its own ("could not evaluate … — a gputui bug; the rest
holds") — in the dashboard's diagnose, in watch's recorder and in the host
view, which all call diagnose."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.diagnose import diagnose, diagnose_with, registry
from gputui.diagnose.context import Context
from gputui.model import Severity
from gputui.record.history import HistoryWriter
from gputui.record.recorder import RunRecorder
from test_diagnose import NOW, run
from test_history import LogOnlyMonitor

HUNG = {"util": 0.0, "silent": 300.0, "last_step_ago": 300.0, "cpu": 0.0}


def _boom(ctx: Context) -> None:
    raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")


@pytest.fixture
def one_rule_raises() -> Iterator[str]:
    """torchrun's rule raises, as int() did on a 5,000-digit rank."""
    entries = registry.ENTRIES
    i = next(n for n, e in enumerate(entries) if e.func.__name__ == "rule_rank_failed")
    kept = entries[i]
    entries[i] = dataclasses.replace(kept, func=_boom)
    try:
        yield "rank_failed"
    finally:
        entries[i] = kept


def test_a_rule_that_raises_loses_only_its_own_finding(
    one_rule_raises: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="gputui.diagnose")
    found = diagnose(run(**HUNG), NOW)
    kinds = [f.kind for f in found]
    assert "held_but_idle" in kinds, kinds  # the rest holds
    failed = [f for f in found if f.kind == "rule_failed"]
    assert len(failed) == 1, kinds
    f = failed[0]
    assert f.severity == Severity.WARNING
    assert f.title == f"could not evaluate {one_rule_raises} — a gputui bug; the rest holds"
    assert any("ValueError" in e for e in f.evidence), f.evidence
    # the traceback is in the debug log
    rec = next(r for r in caplog.records if "_boom" in r.getMessage() or r.exc_info)
    assert rec.exc_info is not None and rec.exc_info[0] is ValueError


def test_a_rule_that_raises_on_a_healthy_run_is_still_said(one_rule_raises: str) -> None:
    found = diagnose(run(), NOW)
    assert [f.kind for f in found] == ["rule_failed"]


async def test_watchs_recorder_records_and_alerts_though_a_rule_raises(
    one_rule_raises: str, tmp_path: Path
) -> None:
    log = tmp_path / "train.log"
    log.write_text("")
    mon = LogOnlyMonitor(log)
    mon.snapshot = run(**HUNG)
    told: list[str] = []
    rec = RunRecorder(
        mon,  # type: ignore[arg-type]
        HistoryWriter(tmp_path / "h.sqlite"),
        diagnose=diagnose_with(None),
        sinks=[lambda a: told.append(a.kind)],
        clock=lambda: NOW,
        tick_s=3600,  # only the test's ticks
    )
    await rec.tick()
    assert rec.errors == [], rec.errors
    kinds = {f.kind for f in rec.findings}
    assert {"held_but_idle", "rule_failed"} <= kinds, kinds
    assert "held_but_idle" in told, told
    await rec.stop()


def test_the_host_views_diagnose_never_raises(one_rule_raises: str) -> None:
    """The host view diagnoses each container's run through diagnose_with."""
    found = diagnose_with(10.0)(run(**HUNG), NOW)
    assert {"held_but_idle", "rule_failed"} <= {f.kind for f in found}
