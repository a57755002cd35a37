"""The door of a watched run: all that the dashboard, the host view, `watch`,
doctor and the recorder may ask of a `Monitor` (monitor/engine.py), or of
what stands in for one (a fake with fixed Snapshots in tests and
screenshots, a host view's monitor lent to a run view). The package
(monitor/__init__.py) opens it: nothing outside monitor/ imports another of
its modules (the `monitor-door` contract in pyproject.toml).

Through it a user reads the latest `Snapshot` (the monitor's: read it, do
not write it), hears of each change (`subscribe`, and `unsubscribe` when it
no longer listens), takes the new log lines, and asks for what it wants
watched (`watch_session`, `watch_log`) or polled now (`refresh`). Nothing
outside monitor/ writes a monitor's attributes: what its owner sets is a
parameter of `watch_run(...)`, or a method (`poll_every`).

What doctor, the host view and `watch` ask besides the Snapshot are typed
questions here (`agent_facts`, `log_followed`, `plain_loop_pending`,
`ct_pids_pending`, `named_log_error`, `processes_of`), never the monitor's
parts (its agent, its follower, its GPU feed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gputui.config import Settings
from gputui.errors import ConfigError
from gputui.model import Proc, Snapshot
from gputui.remote.target import Target

# (the snapshot, the parts of it that changed: "gpus", "log", ...)
Listener = Callable[[Snapshot, set[str]], None]


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
    """What the dashboard needs: the run's news, its log lines, and asks."""

    @property
    def snapshot(self) -> Snapshot: ...

    def subscribe(self, cb: Listener) -> None: ...

    def unsubscribe(self, cb: Listener) -> None: ...

    def drain_log_lines(self) -> list[str]: ...

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
    def dropped_log_lines(self) -> int: ...

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
