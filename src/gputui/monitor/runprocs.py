"""The watched run's processes and its pane's last lines: the agent's
`procs` and `capture` ops in a poll's batch (and its `writers` search when
no tmux session is watched), `Snapshot.procs`, `run_found_by` and
`pane_tail`, and the `ProcsChanged` they emit.

The run is the process tree of the watched session's main pane; with no
tmux session to watch, the trees of the processes that write the log
(`nohup python train.py > log &`, `python | tee log` from a shell that is
gone), found by the agent's `writers` op and re-searched at most every
WRITERS_RETRY_S while none is found."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, ClassVar

from gputui.collect import tmux as tmux_parse
from gputui.model import Pane, Proc, Snapshot
from gputui.monitor.door import ProcsChanged, SessionsChanged, Update
from gputui.monitor.feed import Changed
from gputui.remote.agent_client import AgentClient, AgentError, Request
from gputui.remote.mainproc import is_log_source

PANE_TAIL_LINES = 50
# A live pane whose process tree is unchanged is captured every few seconds,
# not every poll (a tmux subprocess a second was a sixth of the agent's CPU
# while a run streamed, issue 24); a dead pane, a new pane or a changed tree
# is captured in the same poll.
PANE_CAPTURE_EVERY_S = 5.0
WRITERS_RETRY_S = 3.0  # with no tmux run, who writes the log is searched at most this often

# (pid, tmux target, tmux socket) of a pane polled
PolledPane = tuple[int, str, str | None]


class RunProcs:
    """See the module docstring. `changed(*kinds)`: the monitor's, told of
    the kinds of update this poll brought; `known_log()`: the log path known now."""

    emits: ClassVar[type[Update]] = ProcsChanged

    def __init__(self, changed: Changed, known_log: Callable[[], str | None]) -> None:
        self.changed = changed
        self.known_log = known_log
        # (pid, tmux target, tmux socket) of the pane last polled
        self._polled_pane: PolledPane | None = None
        self._captured_at = float("-inf")  # monotonic time of the last pane capture
        # The run found by its log when no tmux session is watched: (log path,
        # root PIDs), and when the next search may run (monotonic).
        self._log_run: tuple[str, list[int]] | None = None
        self._writers_next = 0.0
        self._writers_path: str | None = None
        self.writers_searches = 0
        # this poll's pane, its tmux target and socket, same as the last
        # poll's, its tree unchanged (read() -> capture())
        self._this_poll: tuple[Pane | None, str | None, str | None, bool, bool] = (
            None,
            None,
            None,
            False,
            False,
        )

    @property
    def pane_pid(self) -> int:
        """The PID of the pane last polled (0: none)."""
        return self._polled_pane[0] if self._polled_pane is not None else 0

    def calls(self, agent: AgentClient) -> dict[str, Request]:
        """The poll's batch's requests for the pane of the last poll (nearly
        always this poll's): its process tree, and its last lines when due."""
        guess = self._polled_pane
        calls = {}
        if guess is not None:
            if time.monotonic() - self._captured_at >= PANE_CAPTURE_EVERY_S:
                calls["capture"] = agent.capture_request(guess[1], PANE_TAIL_LINES, guess[2])
            if guess[0]:
                calls["procs"] = agent.processes_request(guess[0])
        return calls

    async def read(self, agent: AgentClient, answers: dict[str, Any], snap: Snapshot) -> list[Proc]:
        """The run's processes into `snap` (the batch's answer when the pane
        is the last poll's, else asked again); returns them."""
        guess = self._polled_pane
        pane = snap.session.main_pane if snap.session is not None else None
        target = (
            tmux_parse.pane_target(pane.session, pane.window_index, pane.pane_index)
            if pane is not None
            else None
        )
        socket = snap.session.socket if snap.session is not None else None
        now_pane = (pane.pid or 0, target, socket) if pane is not None and target else None
        same = guess is not None and guess == now_pane
        self._polled_pane = now_pane
        procs: list[Proc] = []
        found_by = ""
        if pane is not None and not pane.dead and pane.pid:
            if same and "procs" in answers:
                procs = agent.processes_result(answers["procs"])
            else:
                procs = await agent.processes(pane.pid)
            found_by = "session"
            self._log_run = None
        elif snap.session is None and not snap.session_gone:
            procs = await self._procs_by_log(agent)
            found_by = "log" if procs else ""
        tree_same = [p.pid for p in procs] == [p.pid for p in snap.procs]  # no process came or went
        if procs or _procs_key(procs) != _procs_key(snap.procs):
            self.changed(ProcsChanged)  # cpu %, rss and fd 1 pos move every poll
        if found_by != snap.run_found_by:
            self.changed(ProcsChanged, SessionsChanged)
        snap.procs = procs
        snap.run_found_by = found_by
        self._this_poll = (pane, target, socket, same, tree_same)
        return procs

    async def capture(self, agent: AgentClient, answers: dict[str, Any], snap: Snapshot) -> None:
        """The pane's last lines into `snap`: the batch's capture, the kept
        lines while the pane and its tree stay, else captured now."""
        pane, target, socket, same, tree_same = self._this_poll
        pane_tail: list[str] = []
        if pane is not None and target:
            with contextlib.suppress(AgentError):
                if same and "capture" in answers:
                    pane_tail = agent.capture_result(answers["capture"], target, PANE_TAIL_LINES)
                elif same and tree_same and not pane.dead:
                    pane_tail = snap.pane_tail  # captured at most PANE_CAPTURE_EVERY_S ago
                else:
                    pane_tail = await agent.capture(target, PANE_TAIL_LINES, socket)
                if pane_tail is not snap.pane_tail:
                    self._captured_at = time.monotonic()
        if pane_tail != snap.pane_tail:  # (the same lines: the same list, which
            self.changed(ProcsChanged)  # the diagnosis keeps what it read from)
            snap.pane_tail = pane_tail

    async def _procs_by_log(self, agent: AgentClient) -> list[Proc]:
        """No tmux session watched: the process trees of the run that writes
        the log (`nohup python train.py > log &`, `python | tee log` from a
        shell that is gone). Once found, each poll costs one `procs` call per
        root, as with tmux; the search itself (a scan of every process's fds)
        runs at most every WRITERS_RETRY_S while nothing is found."""
        path = self.known_log()
        if not path:
            self._log_run = None
            return []
        if is_log_source(path):  # `docker logs`: the run is the container's main process
            return await self._trees(agent, [1])
        if self._log_run is not None and self._log_run[0] == path:
            procs = await self._trees(agent, self._log_run[1])
            if procs:
                return procs
        self._log_run = None
        now = time.monotonic()
        if now < self._writers_next and path == self._writers_path:
            return []  # a new log path is searched at once
        self._writers_next = now + WRITERS_RETRY_S
        self._writers_path = path
        self.writers_searches += 1
        found = await agent.writers(path)
        roots = [int(p) for p in found.get("roots") or []]
        if not roots:
            return []
        procs = await self._trees(agent, roots)
        if procs:
            self._log_run = (path, roots)
        return procs

    @staticmethod
    async def _trees(agent: AgentClient, roots: list[int]) -> list[Proc]:
        out: list[Proc] = []
        seen: set[int] = set()
        for root in roots:
            if root in seen:
                continue
            for p in await agent.processes(root):
                if p.pid not in seen:
                    seen.add(p.pid)
                    out.append(p)
        return out


def _procs_key(procs: list[Proc]) -> list[tuple[Any, ...]]:
    return [(p.pid, p.state, tuple(p.cmdline), p.stdout.kind, p.stdout.path) for p in procs]
