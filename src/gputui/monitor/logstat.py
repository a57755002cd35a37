"""The followed log's stat: the agent's `stat` op in a poll's batch (or
the plain-command loop's stat, without python3), which drives the log
stream's watchdog (a stream that stops delivering while the file grows is
resumed from its offset) and says the space left on its file system —
`Snapshot.log`'s size, mtime, existence and fs_free/fs_total, and the
`LogChanged` it emits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from gputui.model import Snapshot
from gputui.monitor.door import LogChanged, Update
from gputui.monitor.feed import Changed
from gputui.monitor.logfollow import FileStat, LogFollower
from gputui.remote.agent_client import AgentClient, Request


class LogStat:
    """See the module docstring. `follower()`: the log's stream now;
    `changed(*kinds)`: the monitor's, told of the kinds of update that came."""

    emits: ClassVar[type[Update]] = LogChanged

    def __init__(
        self,
        snapshot: Snapshot,
        follower: Callable[[], LogFollower | None],
        changed: Changed,
    ) -> None:
        self.snapshot = snapshot
        self.follower = follower
        self.changed = changed
        self._path: str | None = None  # the log stat'ed in this poll's batch
        self._offset_before: int | None = None  # its stream's offset then

    def call(self, agent: AgentClient) -> dict[str, Request]:
        """The poll's batch's stat of the log followed now (none: no log)."""
        f = self.follower()
        self._path = f.read_path if f is not None else None
        self._offset_before = f.state.offset if f is not None else None
        return {"stat": agent.stat_request([self._path])} if self._path else {}

    async def apply(self, agent: AgentClient, answers: dict[str, Any]) -> None:
        """The batch's stat into the stream's watchdog and the snapshot; a
        log chosen during the poll is stat'ed now."""
        f = self.follower()
        now_path = f.read_path if f is not None else None
        if now_path:
            if now_path == self._path:
                stat = agent.stat_result(answers["stat"])
            else:  # a new log was chosen during this poll
                self._offset_before = f.state.offset if f is not None else None
                stat = await agent.stat([now_path])
            st = stat.get(now_path) or {}
            self.observe(now_path, _file_stat(st), self._offset_before, _space(st))

    def observe(
        self,
        path: str,
        fs: FileStat | None,
        offset_before: int | None,
        space: tuple[int, int] | None = None,
    ) -> bool:
        """A stat of the log followed (the agent's, or the plain-command
        loop's) drives its stream's watchdog; a change of size, mtime or
        existence is published, and so is the space (free, total bytes) of
        its file system when the stat said it. False when `path` is no
        longer followed."""
        f = self.follower()
        if f is None or f.read_path != path:
            return False
        log = self.snapshot.log
        before = (log.size, log.mtime, log.exists, _mib(log.fs_free), _mib(log.fs_total))
        f.observe_stat(fs, offset_before)
        log = self.snapshot.log
        if space is not None:
            log.fs_free, log.fs_total = space
        # free space moves with every write of anyone: published by the MiB
        if (log.size, log.mtime, log.exists, _mib(log.fs_free), _mib(log.fs_total)) != before:
            self.changed(LogChanged)
        return True


def _space(st: dict[str, Any]) -> tuple[int, int] | None:
    """(free, total) bytes of the log's file system from an agent stat reply."""
    try:
        free, total = st.get("fs_free"), st.get("fs_total")
        return (int(free), int(total)) if free is not None and total is not None else None
    except (TypeError, ValueError):
        return None


def _mib(n: int | None) -> int | None:
    return None if n is None else n >> 20


def _file_stat(st: dict[str, Any]) -> FileStat | None:
    """The agent's stat answer for one path -> FileStat, or None when absent."""
    if not st.get("exists") or st.get("size") is None:
        return None
    return FileStat(int(st["size"]), float(st.get("mtime") or 0.0), int(st.get("inode") or 0))
