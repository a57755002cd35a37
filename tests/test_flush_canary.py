"""Flush live tries gdb's calls on a throw-away process first: seen on a real
H200 machine, gdb 13.1 could not restore a thread's registers after its call
and the training run crashed. A failing stand-in means the run is not touched."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from gputui.actions.flush import CANARY_CODE, canary_argv, execute_flush, gdb_argv
from gputui.actions.plan import ActionError, ActionPlan
from gputui.remote.base import CommandResult
from gputui.remote.identity import as_owner

# what gdb 13.1 printed on the H200 machine (bench/gpu/results/run5/gdb_train0.txt)
H200_GDB = """0x00007fda78fd36c6 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
Couldn't write extended state status: Bad address.
Couldn't write extended state status: Bad address.
History has not yet reached $1.
[Inferior 1 (process 703) detached]
"""


class Recorder:
    """A Target that answers every command with one result and keeps the argv."""

    ct = None

    def __init__(self, out: str, status: int) -> None:
        self.out, self.status = out, status
        self.ran: list[list[str]] = []

    async def run(self, argv: list[str], **kw: Any) -> CommandResult:
        self.ran.append(argv)
        return CommandResult(argv, self.status, self.out.encode(), b"")


def plan_for(pid: int) -> ActionPlan:
    return ActionPlan(
        action="flush",
        title="Flush?",
        target="pid",
        pids=[pid],
        commands=[gdb_argv("/usr/bin/gdb", pid)],
        params={"logs": [], "canary": CANARY, "exe": "/usr/bin/python3", "procs": {}},
    )


CANARY = as_owner(1000, 1000, ["/usr/bin/python3", "-c", CANARY_CODE])


def test_the_canary_runs_the_same_gdb_calls_on_a_process_of_its_own() -> None:
    argv = canary_argv(CANARY, gdb_argv("/usr/bin/gdb", 4242))
    assert argv[:2] == ["bash", "-c"]
    assert argv[4] == str(len(CANARY)) and argv[5 : 5 + len(CANARY)] == CANARY
    assert argv[5 + len(CANARY)] == "/usr/bin/gdb"  # data in argv, never in the script
    assert argv[6 + len(CANARY) :] == gdb_argv("/usr/bin/gdb", 4242)[3:]
    assert "4242" not in argv[2] and "gdb" not in argv[2] and "python" not in argv[2]
    assert shlex.split(shlex.join(argv)) == argv


async def test_a_failing_canary_leaves_the_run_alone_and_says_why() -> None:
    target = Recorder(H200_GDB, 1)
    result = await execute_flush(target, plan_for(703))  # type: ignore[arg-type]
    assert not result.ok
    assert "not tried" in result.summary and "nothing was done" in result.summary
    assert len(target.ran) == 1 and target.ran[0][0] == "bash"  # the run's own gdb never ran
    assert any("Couldn't write extended state status" in d for d in result.details)
    assert any("gdb 14 or newer" in d for d in result.details)  # why, and what helps
    assert any("r relaunches" in d for d in result.details)


async def test_a_canary_that_fails_otherwise_gives_no_xsave_hint() -> None:
    target = Recorder("ptrace: Operation not permitted.\n", 1)
    result = await execute_flush(target, plan_for(703))  # type: ignore[arg-type]
    assert not result.ok and not any("gdb 14" in d for d in result.details)


async def test_a_canary_whose_calls_return_0_lets_the_flush_go_on() -> None:
    target = Recorder("$1 = 1\n$2 = 0\n", 0)
    result = await execute_flush(target, plan_for(703))  # type: ignore[arg-type]
    assert [a[0] for a in target.ran] == ["bash", "/usr/bin/gdb"]
    assert result.ok, result.details


async def test_a_plan_without_the_canary_it_showed_is_not_run() -> None:
    """A plan from before the box showed the canary's command and identity."""
    target = Recorder("$1 = 1\n$2 = 0\n", 0)
    plan = plan_for(703)
    del plan.params["canary"]
    with pytest.raises(ActionError, match="plan the action again"):
        await execute_flush(target, plan)  # type: ignore[arg-type]
    assert target.ran == []
