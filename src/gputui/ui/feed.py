"""What the dashboard needs from a monitor. The real `gputui.monitor.engine.Monitor`
fits this; tests and screenshots pass a fake with fixed Snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from gputui.model import Snapshot

Listener = Callable[[Snapshot, set[str]], None]


class MonitorLike(Protocol):
    @property
    def snapshot(self) -> Snapshot: ...

    def subscribe(self, cb: Listener) -> None: ...

    def drain_log_lines(self) -> list[str]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def refresh(self) -> None: ...

    def watch_session(self, name: str) -> None: ...

    def watch_log(self, path: str) -> None: ...
