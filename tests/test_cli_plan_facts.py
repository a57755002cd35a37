"""The CLI verbs' plans read the run as the dashboard's do: in one request
to gputui's agent, started in the CT for it on the one SSH connection (issue
46's leftover: `gputui kill|relaunch|dump|flush|launch` ran 2–6 `pct exec`s in a
row, each a few hundred ms on a busy Proxmox host; actions/facts.py,
agent_for_plan). Where the agent cannot start (no python3 in the CT) the
commands make the same plan, printed the same and asked the same.

Real parts: the real sshd, the stand-in `pct` counting its calls, a CT,
real tmux, a real block-buffered Python run through `| tee` (the run of
tests/test_actions_live.py); every answer to the question is "n", so
nothing acts on the run.
"""

from __future__ import annotations

import argparse
import io
import shutil
from pathlib import Path
from typing import Any

import pytest

import scenarios
from gputui.actions import facts
from gputui.cli.actions import run_async
from gputui.config import RunConfig, Settings
from gputui.remote.identity import PYTHON_SCRIPT
from gputui.remote.target import Target
from test_actions_live import py_spy, start_buffered, work  # noqa: F401 (fixtures)

QUESTION = "Run it? [y/N] "
# how the agent's start reads in the stand-in's log (its first 300 characters)
AGENT = "-- /bin/sh -c " + PYTHON_SCRIPT.replace("\n", " ")[:60]


async def plan_by_cli(
    testbed: Any, ct: int, verb: str, settings: Settings, **flags: Any
) -> tuple[int, str, list[str]]:
    """`gputui VERB --session … ` answered "n" over ssh: (exit code, what it
    printed with the question, the `pct` calls it made)."""
    args = argparse.Namespace(yes=False, json=False, **flags)
    out = io.StringIO()
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return "n"

    testbed.count_pct_calls()
    rc = await run_async(
        verb, args, settings, target=Target(testbed.transport(), ct), out=out, ask=ask
    )
    calls = testbed.pct_call_details()
    return rc, out.getvalue() + "".join(asked), calls


def execs(calls: list[str], ct: int) -> list[str]:
    return [c for c in calls if c.split("\t", 1)[0] == f"exec {ct}"]


async def test_cli_plans_in_one_agent_request_and_by_commands_without_python(
    monkeypatch: pytest.MonkeyPatch,
    testbed_commands: None,
    testbed: Any,
    ct: int,
    work: Path,  # noqa: F811
    py_spy: str,  # noqa: F811
) -> None:
    # which way the plan is read, not how fast: a loaded machine's slow answer
    # must not turn this into the commands' way
    monkeypatch.setattr(facts, "PLAN_FACTS_TIMEOUT_S", 60.0)
    start_buffered(testbed, ct, "clif", work)
    verbs: dict[str, dict[str, Any]] = {
        "kill": {"session": "clif", "force": False},
        "relaunch": {"session": "clif"},
        "dump": {"session": "clif", "py_spy": py_spy},
    }
    if shutil.which("gdb"):
        verbs["flush"] = {"session": "clif"}
    verbs["launch"] = {"session": None}  # the config's [run]: a session not running
    run = RunConfig(command="sleep 30", cwd=str(work), session="clif-new", log="new.log")
    fast: dict[str, str] = {}
    for verb, flags in verbs.items():
        rc, text, calls = await plan_by_cli(testbed, ct, verb, Settings(run=run), **flags)
        assert rc == 1 and text.endswith(QUESTION), (verb, text)
        assert len(calls) == 1 and AGENT in calls[0], (verb, calls)  # the agent alone
        fast[verb] = text
    assert "train.py" in testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout  # nothing acted

    scenarios.without_commands(testbed, ct, "python3*")  # a minimal template: no agent
    linked = f"{testbed.root}/usr-bin-of-{ct}/"
    for verb, flags in verbs.items():
        rc, text, calls = await plan_by_cli(testbed, ct, verb, Settings(run=run), **flags)
        text = text.replace(linked, "/usr/bin/")  # gdb found through a link of the tmpfs
        assert rc == 1 and text == fast[verb], verb  # the same plan, the same question
        assert AGENT in execs(calls, ct)[0], (verb, calls)  # tried first, once
        # then find_run's commands (a session not running: list-panes, the log)
        assert len(execs(calls, ct)) >= (3 if verb == "launch" else 5), (verb, calls)
    assert "train.py" in testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout
