"""What a plan reads of a run, in one round trip: the agent already running
in the target (the monitor's, asked through WatchedRun.run_facts) answers
its `facts` op with the same text each
of find_run's commands prints — the session's panes, `ps`, the processes'
links and identities — and the tools the verb needs, so a confirm box's plan
waits for one request on an open channel, not for four to six container entries in
a row (issue 46: 2.2–4.5 s on the test bed, each a new channel and container
entry).

Nothing here is cached: the facts are read when the key is pressed, and the
executors check again what they act on (PID and start time) before acting.
With no agent, a tmux argv the agent cannot reach the same way, or an agent
that fails, `look` answers None and the planners run their commands as before.

A process that keeps no agent (the CLI verbs: `gputui kill|relaunch|dump|
flush|launch`) asks through `agent_for_plan`: the agent started at the
plan's first question, on the connection already open (one container entry,
then one request), and closed once the plan is made; where it cannot start
(no python3 in the container, too old, no answer) the commands, as the
dashboard does with no agent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gputui.actions.inspect import (
    RunInfo,
    descendants,
    links_of,
    parse_panes,
    parse_ps,
    server_socket,
)
from gputui.actions.procid import parse_proc_ids
from gputui.collect import tmux as tmux_parse
from gputui.errors import GputuiError
from gputui.remote.identity import SETPRIV
from gputui.remote.target import Target

# The monitor's question to its agent (WatchedRun.run_facts): the `facts`
# op's arguments -> its answer, or None while no agent answers.
FactsReader = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]

# agent_for_plan's facts: past this, the planners run their commands (as past
# the monitor's FACTS_TIMEOUT_S; its start waits as the monitor's does, 20 s)
PLAN_FACTS_TIMEOUT_S = 5.0


@dataclass
class Looked:
    """A run as one `facts` answer tells it."""

    info: RunInfo
    # each tool candidate found: (path, root owns it alone, why not)
    tools: list[tuple[str, bool, str]] = field(default_factory=list)
    # executables of the run's root processes (decoded as ProcId.exe): root's alone?, why not
    root_exes: dict[str, tuple[bool, str]] = field(default_factory=dict)
    # the `-S` socket's (uid, gid); None: no socket asked, or unreadable
    socket_ids: tuple[int, int] | None = None
    # LOG_CHECK_SCRIPT's answer for (log, uid, gid): looked at with those hands
    log_checks: dict[tuple[str, int, int], str] = field(default_factory=dict)

    def root_tool(self) -> tuple[str | None, list[str]]:
        """The first tool found that root owns alone, and why each before it is not
        (dump.parse_root_tools' answer)."""
        why: list[str] = []
        for found, ok, reason in self.tools:
            if ok:
                return found, why
            why.append(f"{found}: {reason}")
        return None, why


def reach(tmux: list[str] | None) -> dict[str, str] | None:
    """The agent's arguments that reach the tmux server `tmux` reaches (the
    agent then reaches it as its owner, with its own root-owned tmux, as the
    snapshot's argv it built does); None for an argv it cannot read the same
    way — another tmux binary than `tmux` on PATH among them."""
    if not tmux or tmux == ["tmux"]:
        return {}
    at = max((i for i, a in enumerate(tmux) if os.path.basename(a) == "tmux"), default=-1)
    rest = tmux[at + 1 :] if at >= 0 else []
    if at < 0 or tmux[at] != "tmux" or len(rest) != 2:
        return None
    sock = server_socket(tmux)
    if rest[0] == "-S" and sock is not None:
        return {"socket": sock}
    if rest[0] == "-L":
        return {"socket_name": rest[1]}
    return None


async def look(
    facts: FactsReader | None,
    session: str,
    tmux: list[str] | None,
    tools: list[str] | None = None,
    logs: list[str] | None = None,
) -> Looked | None:
    """The run in `session` (and `tools` looked up, `logs` looked at with
    the run owner's hands: relaunch's old log) in one agent request; None
    when that cannot be asked (see the module's doc)."""
    where = reach(tmux)
    if facts is None or where is None:
        return None
    from gputui.actions.inspect import list_panes_argv

    fields = [
        tmux_parse.PANE_FIELDS.index("session_name"),
        tmux_parse.PANE_FIELDS.index("pane_pid"),
        tmux_parse.FIELD_SEP,
    ]
    request: dict[str, Any] = {
        "session": session,
        "list_panes": list_panes_argv(session, ["tmux"])[1:],
        "fields": fields,
        "tools": list(tools or []),
        "logs": list(dict.fromkeys(lg for lg in logs or [] if lg)),
        "setpriv": SETPRIV,  # the agent drops to the owner as identity.as_owner does
        **where,
    }
    try:
        answer = await facts(request)
    except GputuiError:
        return None
    return None if answer is None else looked(answer, session, "socket" in where)


async def look_at_log(facts: FactsReader | None, log: str, uid: int, gid: int) -> str | None:
    """LOG_CHECK_SCRIPT's answer for `log` looked at with (uid, gid)'s hands,
    in one more request (a log the first answer told of: the one relaunch
    finds the run writing); None when that cannot be asked."""
    if facts is None or not log.startswith("/"):
        return None
    request = {"logs": [log], "owners": [[uid, gid]], "setpriv": SETPRIV}
    try:
        answer = await facts(request)
    except GputuiError:
        return None
    for row in (answer or {}).get("log_checks") or []:
        if len(row) == 4 and row[:3] == [log, uid, gid] and isinstance(row[3], str):
            return row[3]
    return None


def looked(answer: dict[str, Any], session: str, socket: bool) -> Looked | None:
    """A `facts` answer -> the RunInfo find_run would have built from the
    same commands' output; None when the pane this side's parser takes
    (collect.tmux's checks) is not one whose processes the agent read."""
    panes = answer.get("panes") or {}
    found = parse_panes(panes.get("stdout") or "", session) if panes.get("exit") == 0 else []
    info = RunInfo(session=session, pane=found[0] if found else None)
    out = Looked(
        info,
        tools=[(str(f), real is not None, str(why)) for f, real, why in answer.get("tools") or []],
    )
    ids2 = answer.get("socket_ids")
    if isinstance(ids2, list) and len(ids2) == 2 and all(isinstance(x, int) for x in ids2):
        out.socket_ids = (ids2[0], ids2[1])
    for row in answer.get("log_checks") or []:
        if len(row) == 4 and isinstance(row[3], str):
            out.log_checks[(str(row[0]), int(row[1]), int(row[2]))] = row[3]
    if info.pane is None or info.pane.pid is None:
        return out
    if "ps" not in answer or info.pane.pid not in (answer.get("roots") or []):
        return None  # find_run's commands read it
    if socket:  # inspect.server_uid's answer: root's -> None, unreadable -> -1
        info.server_uid = -1 if out.socket_ids is None else (out.socket_ids[0] or None)
    ps = answer["ps"]
    info.procs = descendants(
        parse_ps(ps.get("stdout") or "") if ps.get("exit") == 0 else [], info.pane.pid
    )
    mine = {p.pid for p in info.procs}
    info.cwds, info.argvs, info.fds = links_of(str(answer.get("links") or "").encode("ascii"))
    ids = parse_proc_ids(str(answer.get("ids") or ""))
    info.ids = {p: i for p, i in ids.items() if p in mine}
    for exe_hex, (ok, why) in (answer.get("root_exes") or {}).items():
        exe = bytes.fromhex(exe_hex).decode("utf-8", "surrogateescape")
        out.root_exes[exe] = (bool(ok), str(why))
    return out


class PlanAgent:
    """The agent of one plan made by a process that keeps none (see the
    module's doc): started in `target` at the first question, closed by
    agent_for_plan; where it cannot start, None answers (the commands)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.agent: Any = None  # AgentClient once started
        self.tried = False

    async def _started(self) -> Any:
        from gputui.remote.agent_client import AgentClient

        if not self.tried:
            self.tried = True
            try:
                self.agent = await AgentClient.start(
                    self.target, clock_samples=0, probe_tools=False
                )
            except GputuiError:  # AgentUnavailable: no python3, too old, a stopped CT
                return None
        return self.agent if self.agent is not None and self.agent.alive else None

    async def facts(self, request: dict[str, Any]) -> dict[str, Any] | None:
        agent = await self._started()
        if agent is None:
            return None
        answer = await agent.call("facts", timeout=PLAN_FACTS_TIMEOUT_S, **request)
        return answer if isinstance(answer, dict) else None

    async def server_of(self, session: str) -> list[str] | None:
        """The tmux argv reaching the server that holds `session` when that
        is not the default one — another user's (`su - alice -c 'tmux new
        …'`), a `-L` one — as the dashboard's listing finds it; None: the
        default server's, not found, or no agent to ask."""
        agent = await self._started()
        if agent is None:
            return None
        try:
            sessions = await agent.sessions(timeout=PLAN_FACTS_TIMEOUT_S)
        except GputuiError:
            return None
        named = [s for s in sessions if s.name == session]
        if not named or any(s.socket is None for s in named):  # the default server's first
            return None
        return list(named[0].tmux)

    async def close(self) -> None:
        if self.agent is not None:
            await self.agent.close()


@contextlib.asynccontextmanager
async def agent_for_plan(target: Target) -> AsyncIterator[PlanAgent]:
    """A PlanAgent for a plan made once (its `facts` a FactsReader); the
    agent, when one was started, is closed on exit. Nothing is started for
    a plan that asks nothing."""
    agent = PlanAgent(target)
    try:
        yield agent
    finally:
        await agent.close()
