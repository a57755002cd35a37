"""AgentSupervisor and LogChoice, the parts split out of the monitor, on
real processes on this machine (the local transport, no container)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gputui.config import Settings
from gputui.model import Proc, StdoutTarget
from gputui.monitor.logchoice import LogChoice
from gputui.monitor.logfollow import LogFollower
from gputui.monitor.supervisor import NO_PYTHON_RETRY_S, RETRY_MAX_S, AgentSupervisor
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def local() -> AsyncIterator[Target]:
    tr = LocalTransport()
    await tr.connect()
    yield Target(tr)
    await tr.close()


async def test_a_running_agent_is_kept_and_closed_on_stop(local: Target) -> None:
    sup = AgentSupervisor(local, clock=Clock())
    started = await sup.ensure()
    assert started is not None and started.agent is not None and sup.alive
    assert await sup.ensure() is None and sup.starts == 1  # one runs: nothing tried
    await sup.stop()
    assert sup.agent is None and not started.agent.alive


async def test_missing_python_waits_long_and_says_so(local: Target) -> None:
    clock = Clock()
    sup = AgentSupervisor(local, python="python3-missing", clock=clock)
    started = await sup.ensure()
    assert started is not None and started.agent is None and started.no_python
    assert sup.error and "python3-missing is not installed" in sup.error
    clock.now += NO_PYTHON_RETRY_S - 1
    assert await sup.ensure() is None and sup.starts == 1
    clock.now += 2
    assert await sup.ensure() is not None and sup.starts == 2


async def test_a_failing_agent_is_retried_with_a_doubling_wait(
    local: Target, tmp_path: Path
) -> None:
    broken = tmp_path / "python-broken"
    broken.write_text("#!/bin/sh\necho 'boom: cannot start' >&2\nexit 3\n")
    broken.chmod(0o755)
    clock = Clock()
    sup = AgentSupervisor(local, python=str(broken), clock=clock)
    waits = []
    for _ in range(9):
        started = await sup.ensure()
        assert started is not None and started.agent is None and not started.no_python
        waits.append(sup.retry_at - clock.now)
        assert await sup.ensure() is None  # still waiting
        clock.now = sup.retry_at
    assert waits == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, RETRY_MAX_S, RETRY_MAX_S, RETRY_MAX_S]
    assert sup.error and "boom: cannot start" in sup.error
    sup.retry_now()  # a fresh link
    assert await sup.ensure() is not None


def writer(pid: int, log: str, *, python: bool = True) -> Proc:
    return Proc(pid=pid, is_python=python, stdout=StdoutTarget(kind="file", path=log))


async def test_log_choice_follows_stdout_keeps_an_ended_runs_log_and_obeys_w(
    local: Target, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("from a\n")
    b.write_text("from b\n")
    lines: list[str] = []
    switched: list[LogFollower | None] = []
    choice = LogChoice(
        local,
        Settings(),
        on_lines=lines.extend,
        on_state=lambda _st: None,
        on_switch=switched.append,
        clock=Clock(),
    )
    try:
        assert choice.wanted([]) is None
        assert await choice.choose([writer(os.getpid(), str(a))])
        assert choice.path == str(a) and switched == [choice.follower]
        assert not await choice.choose([writer(os.getpid(), str(a))])  # same file: same stream
        assert not await choice.choose([])  # the run ended: its log stays
        for _ in range(100):
            if "from a" in lines:
                break
            await asyncio.sleep(0.05)
        assert "from a" in lines
        choice.override = str(b)  # `w` / --log
        assert choice.known() == str(b)
        assert await choice.choose([writer(os.getpid(), str(a))])
        assert choice.path == str(b) and len(switched) == 2
    finally:
        await choice.stop()


async def test_log_choice_names_a_directory_given_as_the_log(local: Target, tmp_path: Path) -> None:
    choice = LogChoice(
        local,
        Settings(log=str(tmp_path)),
        on_lines=lambda _l: None,
        on_state=lambda _st: None,
        on_switch=lambda _f: None,
        clock=Clock(),
    )
    try:
        assert await choice.choose([])
        with pytest.raises(Exception, match="directory"):
            await asyncio.wait_for(choice.check_named(), 10)
        assert choice.named_error() is not None
    finally:
        await choice.stop()
