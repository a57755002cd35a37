"""The banner never goes dark, end to end on the SSH test bed under load
(issue 44): a run that crashes and whose tmux server ends with it (no
remain-on-exit) before gputui's first session listing — the `--session`
never seen alive — is still named, a WARNING or worse, whether gputui
starts after the crash, before the run, or behind a slow `pct`; two busy
loops (one per core) run beside it. Real sshd on 127.0.0.1, the stand-in
`pct` and `nvidia-smi`, real tmux and python3, the real Monitor."""

from __future__ import annotations

import asyncio
import multiprocessing
import shlex
import time
from collections.abc import Iterator
from typing import Any

import pytest

import scenarios as sc
from gputui.config import Settings
from gputui.diagnose import Thresholds, diagnose
from gputui.model import Finding, Severity
from gputui.monitor.engine import Monitor
from gputui.remote.target import Target

CRASH = """import sys, time
for n in range(1, 4):
    print("step %d | loss %.4f" % (n, 1.0 / n), flush=True)
    time.sleep(0.2)
raise RuntimeError("ERROR")
"""
CUDA = "CUDA error: an illegal memory access was encountered"
PLAIN = "ValueError: the batch has no samples"


def _busy() -> None:
    while True:
        pass


@pytest.fixture
def load() -> Iterator[None]:
    """Two busy loops beside the run, as `stress -c 2` would."""
    procs = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.join()


def _launch(testbed: Any, run: sc.Run, error: str) -> None:
    (run.dir / "crash.py").write_text(CRASH.replace("ERROR", error))
    sc.launch(testbed, run, f"python3 crash.py 2>&1 | tee {shlex.quote(str(run.log))}")


def _server_gone(testbed: Any, ct: int) -> bool:
    r = testbed.ct_exec(ct, ["env", "-i", f"PATH={sc.CLEAN_PATH}", "tmux", "ls"])
    return r.returncode != 0


async def _first_word(
    testbed: Any, run: sc.Run, *, launch_after: float | None = None, error: str = CUDA
) -> list[Finding]:
    """Watch `--session` + `--log` with the real Monitor until a WARNING or
    worse shows (at most 25 s); the findings then (else the last ones).
    launch_after: the run is launched that long after gputui started."""
    tr = testbed.transport()
    await tr.connect()
    settings = Settings(interval=1.0, session=run.session, log=str(run.log), gpu_source="host")
    mon = Monitor(Target(tr, run.ct), settings)
    found: list[Finding] = []
    try:
        await mon.start()
        t0 = time.monotonic()
        launched = launch_after is None
        while time.monotonic() - t0 < 25:
            if not launched and time.monotonic() - t0 >= (launch_after or 0.0):
                _launch(testbed, run, error)
                launched = True
            found = diagnose(mon.snapshot, time.time())
            loud = any(f.severity != Severity.INFO for f in found)
            if loud and launched and _server_gone(testbed, run.ct):
                return found
            await asyncio.sleep(0.5)
    finally:
        await mon.stop()
        await tr.close()
    return found


def _loud(found: list[Finding]) -> list[Finding]:
    return [f for f in found if f.severity != Severity.INFO]


def _crash_over(testbed: Any, run: sc.Run) -> None:
    """The run crashed and the CT's tmux server ended with it."""
    deadline = time.monotonic() + 15
    while not _server_gone(testbed, run.ct):
        assert time.monotonic() < deadline, "the tmux server did not end"
        time.sleep(0.1)
    assert "Error" in run.log.read_text()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("error", [CUDA, PLAIN], ids=["cuda", "plain"])
async def test_a_session_that_ended_before_the_first_listing_is_named(
    testbed: Any, ct: int, load: None, error: str
) -> None:
    run = sc.prepare(testbed, ct, "gone-early", "dflash")
    _launch(testbed, run, error)
    _crash_over(testbed, run)  # gputui starts now: the session is never seen alive
    loud = _loud(await _first_word(testbed, run))
    assert loud, "no WARNING or worse: the banner went dark"
    words = " ".join(f.title for f in loud)
    assert "dflash" in words or "CUDA error" in words, words
    assert error.split(": ")[-1] in " ".join(f.title + " ".join(f.evidence) for f in loud)


@pytest.mark.timeout(90)
async def test_a_dashboard_started_before_the_run_names_its_crash(
    testbed: Any, ct: int, load: None
) -> None:
    run = sc.prepare(testbed, ct, "gone-later", "dflash")
    loud = _loud(await _first_word(testbed, run, launch_after=2.0, error=PLAIN))
    assert loud, "no WARNING or worse: the banner went dark"
    assert any("dflash" in f.title for f in loud), [f.title for f in loud]


@pytest.mark.timeout(120)
async def test_behind_a_slow_pct_the_gone_session_is_still_named(
    testbed: Any, ct: int, load: None
) -> None:
    testbed.set_pct_delay(2.0)
    try:
        run = sc.prepare(testbed, ct, "gone-slow", "dflash")
        _launch(testbed, run, PLAIN)
        _crash_over(testbed, run)
        loud = _loud(await _first_word(testbed, run))
    finally:
        testbed.set_pct_delay(0.3)
    assert loud, "no WARNING or worse: the banner went dark"
    assert any("dflash" in f.title for f in loud), [f.title for f in loud]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("started", ["after", "with"])
async def test_the_dashboards_banner_names_a_session_gone_before_it_was_seen(
    testbed: Any, ct: int, load: None, started: str
) -> None:
    """The whole dashboard (its recorder, history and news filter too), as
    the user starts it: after the crash, or at the same moment as the run."""
    from gputui.ui.widgets.banner import Banner
    from ui_scenarios import SIZE, make_app, settings_for

    run = sc.prepare(testbed, ct, f"banner-{started}", "dflash")
    if started == "after":
        _launch(testbed, run, CUDA)
        _crash_over(testbed, run)
    settings = settings_for(
        testbed,
        ct,
        interval=1.0,
        session="dflash",
        log=str(run.log),
        diagnosis=Thresholds(stale_after=30.0),
    )
    app, parts = make_app(settings)
    try:
        async with app.run_test(size=SIZE) as pilot:
            if started == "with":
                _launch(testbed, run, CUDA)
            shown: list[str] = []
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                await pilot.pause(0.5)
                f = app.query_one(Banner).finding
                if f is not None and f.severity != Severity.INFO and _server_gone(testbed, ct):
                    shown.append(f"{f.kind}: {f.title}")
                    break
            assert shown, f"the banner stayed dark; findings: {app.findings}"
            await pilot.press("q")
    finally:
        await parts.on_exit()
