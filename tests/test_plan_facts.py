"""A confirm box's plan reads the run in one request to the agent already
running in the target (issue 46: 2.2–4.5 s from the key to the plan on the
test bed, four to six `pct exec`s in a row per plan; actions/facts.py).

Real parts: the real sshd, the stand-in CT, real tmux, a real block-buffered
Python run through `| tee` (the run of tests/test_actions_live.py), the real
agent started in the CT as the monitor starts it. Every command the planners
start goes through a CountingTransport: with the agent, kill, flush and dump
and relaunch start none (their one request travels on the agent's open
channel; relaunch's old log is looked at in it, with the run owner's
hands); the plans are
the ones the commands give, and an executor still refuses a run that changed
since the box showed it.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.actions import ActionPlan, RunSeen, execute, plan
from gputui.config import Settings
from gputui.remote.agent_client import AgentClient
from gputui.remote.target import Target
from gputui.verbs import DumpOptions
from test_actions_live import py_spy, start_buffered, work  # noqa: F401 (fixtures)

# what each planner may still start besides its one agent request
COMMANDS_AT_MOST = {"kill": 0, "flush": 0, "dump": 0, "relaunch": 0}


@pytest.fixture
async def counted(
    testbed_commands: None, testbed: Any, ct: int
) -> AsyncIterator[tuple[helpers.CountingTransport, Target, AgentClient]]:
    transport = helpers.CountingTransport(testbed.transport())
    await transport.connect()
    target = Target(transport, ct)
    agent = await AgentClient.start(target, timeout=30)
    try:
        yield transport, target, agent
    finally:
        await agent.close()
        await transport.close()


def same(a: ActionPlan, b: ActionPlan) -> dict[str, Any]:
    """What differs between two plans of the same run (not their time)."""
    keys = ("action", "title", "target", "session", "ct", "pids", "commands", "notes", "params")
    return {k: (getattr(a, k), getattr(b, k)) for k in keys if getattr(a, k) != getattr(b, k)}


async def test_each_plan_reads_the_run_in_one_agent_request(
    counted: tuple[helpers.CountingTransport, Target, AgentClient],
    testbed: Any,
    ct: int,
    work: Path,  # noqa: F811
    py_spy: str,  # noqa: F811
) -> None:
    transport, target, agent = counted
    log = str(start_buffered(testbed, ct, "facts", work))  # the log the dashboard follows
    options = {"dump": DumpOptions(py_spy=py_spy)}
    verbs = ["kill", "dump", "relaunch"] + (["flush"] if shutil.which("gdb") else [])
    for verb in verbs:
        before = len(transport.calls)
        fast = await plan(
            verb,
            target,
            Settings(),
            RunSeen("facts", log=log, facts=helpers.facts_of(agent)),
            options.get(verb),
        )
        started = [argv for _, _, argv in transport.calls[before:]]
        assert len(started) <= COMMANDS_AT_MOST[verb], (verb, started)
        slow = await plan(verb, target, Settings(), RunSeen("facts", log=log), options.get(verb))
        assert len(transport.calls) - before - len(started) >= 4, f"{verb}: commands, as before"
        assert not same(fast, slow), (verb, same(fast, slow))
        assert fast.pids and fast.params.get("procs", True), (verb, fast.params)


async def test_a_run_changed_after_an_agent_plan_is_refused(
    counted: tuple[helpers.CountingTransport, Target, AgentClient],
    testbed: Any,
    ct: int,
    work: Path,  # noqa: F811
) -> None:
    """The facts are read when the key is pressed, and the kill still checks
    at y what it acts on: the run started again in the same session (other
    PIDs, another pane) is not stopped, and nothing is done."""
    _transport, target, agent = counted
    start_buffered(testbed, ct, "again", work)
    kill = await plan("kill", target, Settings(), RunSeen("again", facts=helpers.facts_of(agent)))
    testbed.ct_exec(ct, ["tmux", "kill-session", "-t", "=again"])
    time.sleep(0.5)
    start_buffered(testbed, ct, "again", work)
    result = await execute(target, kill)
    assert not result.ok and "plan the action again" in result.summary, result
    alive = testbed.ct_exec(ct, ["tmux", "has-session", "-t", "=again"])
    assert alive.returncode == 0, "the new run was stopped"


async def test_without_the_agent_the_plan_comes_from_commands(
    counted: tuple[helpers.CountingTransport, Target, AgentClient],
    testbed: Any,
    ct: int,
    work: Path,  # noqa: F811
) -> None:
    """An agent that went away (the monitor restarts it) leaves the plan to
    the commands: the box still gets it."""
    transport, target, agent = counted
    start_buffered(testbed, ct, "gone", work)
    await agent.close()
    before = len(transport.calls)
    kill = await plan("kill", target, Settings(), RunSeen("gone", facts=helpers.facts_of(agent)))
    assert kill.pids and len(transport.calls) - before >= 4
