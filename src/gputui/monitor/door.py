"""The door of a watched run: all that the dashboard, the host view, `watch`
and the recorder may ask of a `Monitor` (monitor/engine.py), or of what
stands in for one (a fake with fixed Snapshots in tests and screenshots, a
host view's monitor lent to a run view).

Through it a user reads the latest `Snapshot` (the monitor's: read it, do
not write it), hears of each change (`subscribe`, and `unsubscribe` when it
no longer listens), takes the new log lines, and asks for what it wants
watched (`watch_session`, `watch_log`) or polled now (`refresh`). Nothing
outside monitor/ writes a monitor's attributes: what its owner sets is a
parameter of `Monitor(...)`, or a method (`poll_every`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gputui.config import Settings
from gputui.model import Snapshot
from gputui.remote.target import Target

# (the snapshot, the parts of it that changed: "gpus", "log", ...)
Listener = Callable[[Snapshot, set[str]], None]


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
    recorder reads the log through it) and the settings it was made with."""

    @property
    def target(self) -> Target: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def dropped_log_lines(self) -> int: ...
