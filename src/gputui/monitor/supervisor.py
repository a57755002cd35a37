"""Keeping one agent running in the container for a monitor: start it when
there is none, and after a failure wait before the next start (2 s,
doubling to 2 min; 10 min when python3 is missing or too old, where the
monitor falls back to plain commands). A stop() while an agent starts
(q during start-up) never leaves it running: it is closed once it is up.

The supervisor starts and closes, and answers what the door asks of the
agent over its open channel (its facts, a process tree, a plan's facts);
what a start means for the run view (tools, the CT's state, the fallback)
is the monitor's and its feeds'.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputui.errors import GputuiError
from gputui.model import Proc
from gputui.monitor.door import AgentFacts
from gputui.remote.agent_client import AgentClient, AgentUnavailable
from gputui.remote.target import Target

RETRY_START_S = 2.0
RETRY_MAX_S = 120.0  # a broken agent costs at most one container exec per 2 min
NO_PYTHON_RETRY_S = RETRY_MAX_S * 5  # python3 missing or too old: the fallback runs meanwhile
STOP_WAIT_S = 1.0  # close() waits this long for an agent still starting, to close it
# The container is stopped: the next start is at most this far off, not the
# doubling wait's (after a 20-s stop gputui said "stopped" for 12 s more
# while the CT ran): one failing `pct exec` each time while it is down.
CT_STOPPED_RETRY_S = 5.0
FACTS_TIMEOUT_S = 5.0  # a plan's facts (run_facts); past it, the planners run their commands


@dataclass
class AgentStart:
    """What one start attempt did: the agent, or the problem (the error's own
    text, for reading the CT's state from it) and whether python3 is missing."""

    agent: AgentClient | None
    problem: str = ""
    no_python: bool = False


class AgentSupervisor:
    """See the module docstring. `agent` is the running agent or None;
    `error` the last problem, for doctor and the status line."""

    def __init__(
        self, target: Target, *, python: str = "python3", clock: Callable[[], float]
    ) -> None:
        self.target = target
        self.python = python
        self.clock = clock
        self.agent: AgentClient | None = None
        self.error: str | None = None
        self.starts = 0  # how many times an agent was started
        self.retry_at = 0.0
        self.backoff = RETRY_START_S
        self._starting: asyncio.Future[AgentClient] | None = None

    @property
    def alive(self) -> bool:
        return self.agent is not None and self.agent.alive

    def retry_now(self) -> None:
        """A fresh link: the next ensure() starts an agent at once."""
        self.retry_at = 0.0

    async def ensure(self) -> AgentStart | None:
        """Start an agent unless one runs or the wait after a failure is not
        over; None when nothing was tried."""
        if self.alive:
            return None
        if self.agent is not None:  # it went away
            await self.close()
        now = self.clock()
        if now < self.retry_at:
            return None
        self.starts += 1
        # In its own task: a close() while it starts must not cancel it
        # half-way (that would leave it running in the CT).
        fut = asyncio.ensure_future(AgentClient.start(self.target, python=self.python))
        self._starting = fut
        try:
            try:
                self.agent = await asyncio.shield(fut)
            finally:
                if fut.done() and self._starting is fut:
                    self._starting = None
        except GputuiError as err:
            self.agent = None
            self._failed(str(err), now)
            no_python = isinstance(err, AgentUnavailable) and (
                "is not installed" in err.problem or "too old" in err.problem
            )
            if no_python:
                self.retry_at = now + NO_PYTHON_RETRY_S
            return AgentStart(None, err.problem, no_python)
        self.error = None
        self.backoff = RETRY_START_S
        return AgentStart(self.agent)

    def look_again_within(self, seconds: float) -> None:
        """The next start is at most `seconds` from now (the doubling wait
        goes on after it)."""
        self.retry_at = min(self.retry_at, self.clock() + seconds)

    def _failed(self, error: str, now: float) -> None:
        self.error = error
        self.retry_at = now + self.backoff
        self.backoff = min(self.backoff * 2, RETRY_MAX_S)

    async def lost(self, agent: AgentClient, error: str) -> None:
        """A request to `agent` failed (`error`): when it is gone, close it
        and start the next one after the current wait."""
        self.error = error
        if not agent.alive:
            await self.close()
            self.retry_at = self.clock() + self.backoff

    @property
    def facts(self) -> AgentFacts | None:
        """What the agent said of itself (None: none started yet)."""
        agent = self.agent
        if agent is None:
            return None
        pid_ns = agent.hello.get("pid_ns")
        return AgentFacts(
            alive=agent.alive,
            pid_ns=str(pid_ns) if pid_ns else None,
            tmux_skipped=tuple(agent.tmux_skipped),
        )

    async def processes_of(self, pid: int) -> list[Proc] | None:
        """The process tree under `pid`, asked of the running agent (None: none)."""
        agent = self.agent
        if agent is None or not agent.alive:
            return None
        return await agent.processes(pid, sources=False)

    async def run_facts(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """A plan's facts (the agent's `facts` op), None while no agent answers."""
        agent = self.agent
        if agent is None or not agent.alive:
            return None
        answer = await agent.call("facts", timeout=FACTS_TIMEOUT_S, **request)
        return answer if isinstance(answer, dict) else None

    async def close(self) -> None:
        agent, self.agent = self.agent, None
        if agent is not None:
            with contextlib.suppress(Exception):
                await agent.close()

    async def stop(self) -> None:
        """Close the agent and one still starting (waited for a little, else
        closed whenever it comes up)."""
        await self.close()
        fut, self._starting = self._starting, None
        if fut is None:
            return
        if not fut.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(fut), STOP_WAIT_S)
        if not fut.done():  # still starting: close it whenever it comes up
            fut.add_done_callback(_close_when_started)
        elif not fut.cancelled() and fut.exception() is None:
            with contextlib.suppress(Exception):
                await fut.result().close()


_closing: set[asyncio.Future[Any]] = set()  # closes of agents started during a stop


def _close_when_started(fut: asyncio.Future[AgentClient]) -> None:
    if fut.cancelled() or fut.exception() is not None:
        return
    task = asyncio.ensure_future(fut.result().close())
    _closing.add(task)
    task.add_done_callback(_closing.discard)
