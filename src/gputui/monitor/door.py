"""The door of a watched run: all that the dashboard, the host view, `watch`,
doctor and the recorder may ask of a `Monitor` (monitor/engine.py), or of
what stands in for one (a fake with fixed Snapshots in tests and
screenshots, a host view's monitor lent to a run view). The package
(monitor/__init__.py) opens it: nothing outside monitor/ imports another of
its modules (the `monitor-door` contract in pyproject.toml).

Through it a user reads the latest `Snapshot` (the monitor's: read it, do
not write it), hears of each change as typed news (`subscribe`, and
`unsubscribe` when it no longer listens: once per event-loop turn, a tuple
of `Update`s — `GpusRead`, `SessionsChanged`, ..., and `LogLines`, which
carries the new lines themselves), and asks for what it wants watched
(`watch_session`, `watch_log`) or polled now (`refresh`). Nothing
outside monitor/ writes a monitor's attributes: what its owner sets is a
parameter of `watch_run(...)`, or a method (`poll_every`).

What doctor, the host view and `watch` ask besides the Snapshot are typed
questions here (`agent_facts`, `log_followed`, `plain_loop_pending`,
`ct_pids_pending`, `named_log_error`, `processes_of`, `run_facts` — a plan's
facts in one request), never the monitor's
parts (its agent, its follower, its GPU feed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from gputui.config import Settings
from gputui.errors import ConfigError
from gputui.model import Proc, Snapshot
from gputui.remote.target import Target

# Lines a listener holds at most between two writes (the monitor in one
# event-loop turn, the dashboard between two paced writes); older ones are
# counted as dropped ("N lines skipped during burst").
PENDING_LINES_MAX = 5000


@dataclass(frozen=True)
class Update:
    """One kind of news of a watched run: its class says which part of the
    Snapshot moved (a pane draws when one of the kinds it names came)."""


@dataclass(frozen=True)
class ConnectionChanged(Update):
    """The link to the host: up, down, failed, its round trip."""


@dataclass(frozen=True)
class GpusRead(Update):
    """New GPU readings, processes or health (about once a second)."""


@dataclass(frozen=True)
class SessionsChanged(Update):
    """tmux's sessions and panes, the one watched."""


@dataclass(frozen=True)
class ProcsChanged(Update):
    """The watched run's process tree."""


@dataclass(frozen=True)
class LogChanged(Update):
    """The followed log's state: its size, a rotation, another file."""


@dataclass(frozen=True)
class LogLines(Update):
    """New lines of the followed log, oldest first: the lines themselves
    (nothing is kept for a later drain). `dropped`: lines of this turn let
    go before these (a burst over PENDING_LINES_MAX in one event-loop turn)."""

    lines: tuple[str, ...]
    dropped: int = 0


@dataclass(frozen=True)
class MetricsChanged(Update):
    """Steps, loss, throughput parsed from the log."""


@dataclass(frozen=True)
class CtChanged(Update):
    """The container: its status, its tools, its neighbours' names."""


# The news of one event-loop turn: each kind of update at most once, in
# this order (LogLines last).
News = tuple[Update, ...]
# (the snapshot, the news since the listener's last call)
Listener = Callable[[Snapshot, News], None]

# Every kind of news but the lines, in the order a turn's news lists them.
UPDATES: tuple[type[Update], ...] = (
    ConnectionChanged,
    GpusRead,
    SessionsChanged,
    ProcsChanged,
    LogChanged,
    MetricsChanged,
    CtChanged,
)
_ONE: dict[type[Update], Update] = {kind: kind() for kind in UPDATES}


def news_of(kinds: Iterable[type[Update]], lines: Iterable[str] = (), dropped: int = 0) -> News:
    """The news that these kinds of update came (and, when any came, these
    new log lines): one update per kind, in a fixed order (UPDATES)."""
    wanted = set(kinds)
    news: list[Update] = [u for kind, u in _ONE.items() if kind in wanted]
    batch = tuple(lines)
    if batch or dropped:
        news.append(LogLines(batch, dropped))
    return tuple(news)


def kinds_of(news: News) -> set[type[Update]]:
    """The kinds of update in the news (GpusRead, LogLines, ...)."""
    return {type(u) for u in news}


def new_lines(news: News) -> LogLines | None:
    """The news's log lines (None: none came)."""
    for u in news:
        if isinstance(u, LogLines):
            return u
    return None


@dataclass(frozen=True)
class AgentFacts:
    """What the agent in the container said of itself, while one runs:
    whether it still answers, the container's PID namespace (its hello:
    maps the host's GPU processes into the container), the other users'
    tmux servers it did not list (and why)."""

    alive: bool
    pid_ns: str | None
    tmux_skipped: tuple[str, ...] = ()


class RunFeed(Protocol):
    """What the dashboard needs: the run's news (its log lines in it), and asks."""

    @property
    def snapshot(self) -> Snapshot: ...

    def subscribe(self, cb: Listener) -> None: ...

    def unsubscribe(self, cb: Listener) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def refresh(self) -> None: ...

    def watch_session(self, name: str | None) -> None: ...

    def watch_log(self, path: str) -> None: ...


class WatchedRun(RunFeed, Protocol):
    """A run watched on a real target: the feed, the target it is on (the
    recorder reads the log through it), the settings it was made with, its
    pace, and the typed questions doctor, the host view and `watch` ask."""

    @property
    def target(self) -> Target: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def interval(self) -> float:
        """Seconds between polls now."""
        ...

    def poll_every(self, seconds: float) -> None: ...

    def connection_failed(self, error: str) -> None:
        """The connection could not be made (before start): said as a change."""
        ...

    @property
    def agent_facts(self) -> AgentFacts | None:
        """The agent's facts; None while no agent has started."""
        ...

    @property
    def agent_error(self) -> str | None:
        """Why there is no agent (or its last request failed)."""
        ...

    @property
    def log_followed(self) -> bool:
        """A log is followed (a stream reads it)."""
        ...

    @property
    def plain_loop_pending(self) -> bool:
        """No python3 in the container: the plain-command loop has not
        delivered its first round (panes, the log's stat) yet."""
        ...

    @property
    def sessions_pending(self) -> bool:
        """The agent runs and has not listed tmux's sessions yet (a loaded
        host: the first listing came after doctor's settle time)."""
        ...

    @property
    def kernel_log_pending(self) -> bool:
        """The run vanished without a word and the kernel log's OOM kills
        are being read (one short command): its answer is the run's word."""
        ...

    @property
    def ct_pids_pending(self) -> bool:
        """The container's PID namespace, which maps the host's GPU processes
        into it, may still come (its agent has neither answered nor failed)."""
        ...

    def named_log_error(self) -> ConfigError | None:
        """The log the user named is a directory, a device, unreadable."""
        ...

    async def processes_of(self, pid: int) -> list[Proc] | None:
        """The process tree under `pid` in the container, asked of the agent
        over its open channel; None while no agent answers."""
        ...

    async def run_facts(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """What a plan reads of a run (the agent's `facts` op: a session's
        panes, its processes' links and identities, tools), asked of the
        agent over its open channel; None while no agent answers. Raises
        GputuiError when the agent fails or does not answer in time."""
        ...
