"""Which log file a run view follows, and the stream that follows it.

The file the user named (`--log`, or `w` in the dashboard) wins; else the
file the run's stdout reaches (through a pipe and tee, too); a run that
ended keeps its log on screen; else the config's `[run] log`; else, for a
run that is a Docker/Podman container's or a pod's main process (no tmux
session named), the container's own log (`docker logs -f`, monitor/
containerlog.py). When the choice changes, the old stream stops and a new
`LogFollower` starts (by byte offset, so nothing is missed or shown
twice). A log deleted while the run still writes it (`rm train.log`, a
start script that cleans up) is read on through /proc/PID/fd/N of the
process that holds it open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gputui.config import Settings
from gputui.errors import ConfigError
from gputui.model import LogState, Proc
from gputui.monitor.containerlog import ContainerLogFollower
from gputui.monitor.logfollow import LogFollower, named_log, not_a_file_error
from gputui.remote.mainproc import has_logs, is_log_source, log_source
from gputui.remote.target import Target

LOG_TAIL_KEEP = 200  # lines kept in snapshot.log_tail


def deleted_handle(procs: list[Proc], path: str | None) -> str | None:
    """Where `path` can still be read when it was deleted while the run
    writes it (/proc/PID/fd/N of a process holding it open); else None."""
    if not path:
        return None
    for p in sorted(procs, key=lambda p: not p.is_python):
        handle = p.stdout.deleted.get(path)
        if handle:
            return handle
    return None


def stdout_log_files(procs: list[Proc]) -> list[str]:
    """The files the run's stdout ends up in: the training process's first,
    else any process in the tree whose stdout goes to a file or a pipe
    read by something that writes files (tee)."""
    order = sorted(procs, key=lambda p: (not p.is_python, p.stdout.kind == "tty"))
    for p in order:
        files = [f for f in p.stdout.files if f and not f.startswith("/dev/")]
        if files:
            return files
    return []


class LogChoice:
    """See the module docstring. `on_switch(follower or None)` runs when the
    choice changes, before the new stream starts (the monitor points its
    snapshot at the new stream's state there)."""

    def __init__(
        self,
        target: Target,
        settings: Settings,
        *,
        on_lines: Callable[[list[str]], None],
        on_state: Callable[[LogState], None],
        on_switch: Callable[[LogFollower | None], None],
        clock: Callable[[], float],
        on_read: Callable[[], None] | None = None,
    ) -> None:
        self.target = target
        self.settings = settings
        self.on_lines = on_lines
        self.on_read = on_read  # a file follower's read handed all its lines on
        self.on_state = on_state
        self.on_switch = on_switch
        self.clock = clock
        self.override: str | None = settings.log  # --log, then `w` in the dashboard
        self.follower: LogFollower | None = None

    @property
    def path(self) -> str | None:
        return self.follower.path if self.follower is not None else None

    def known(self) -> str | None:
        """The log the user named (--log, the run config), else the one followed."""
        return self.override or self.settings.run.log or self.path

    def wanted(self, procs: list[Proc]) -> str | None:
        """The log to follow for a run of these processes."""
        if self.override:
            return self.override
        files = stdout_log_files(procs)
        if files:
            return files[0]
        if self.follower is not None and not procs:
            return self.follower.path  # the run ended: keep showing its log
        if self.settings.run.log:
            return self.settings.run.log
        return log_source(self.target.container) if self.main_process(procs) else None

    def main_process(self, procs: list[Proc]) -> bool:
        """The run is its container's main process, so its output is the
        container's log (`docker logs`): a Docker/Podman container or pod,
        no tmux session named, and no run found or the one found is PID 1's."""
        if self.settings.session or not has_logs(self.target.container):
            return False
        return not procs or any(p.pid == 1 for p in procs)

    async def choose(self, procs: list[Proc]) -> bool:
        """Follow wanted(procs); True when the followed log changed. A log
        deleted while the run writes it is read through the fd the run holds
        (the same file: reading goes on at the same byte)."""
        path = self.wanted(procs)
        via = deleted_handle(procs, path)
        if path == self.path:
            if self.follower is not None and procs:  # a run that ended keeps its view
                self.follower.read_through(via)
            return False
        if self.follower is not None:
            await self.follower.stop()
            self.follower = None
        if is_log_source(path):
            self.follower = ContainerLogFollower(
                self.target, self.on_lines, self.on_state, keep=LOG_TAIL_KEEP, clock=self.clock
            )
        elif path is not None:
            self.follower = LogFollower(
                self.target,
                path,
                self.on_lines,
                self.on_state,
                keep=LOG_TAIL_KEEP,
                clock=self.clock,
                via=via,
                on_read=self.on_read,
            )
        self.on_switch(self.follower)
        if self.follower is not None:
            await self.follower.start()
        return True

    def named_error(self) -> ConfigError | None:
        """The log the user named (--log, [run] log) is a directory or a
        device: their mistake, one line and exit 2 (doctor and dashboard),
        not a quiet "nothing wrong"."""
        f = self.follower
        named = self.override or named_log(self.settings)
        if f is None or not named or f.path != named or not f.state.not_a_file:
            return None
        return not_a_file_error(named, f.state.not_a_file, f.state.error)

    async def check_named(self) -> None:
        """Raise named_error() once the stream's first header is in."""
        f = self.follower
        if f is None or f.path != (self.override or named_log(self.settings)):
            return
        while not (f.positioned or f.state.not_a_file or f.state.error):
            await asyncio.sleep(0.02)
        err = self.named_error()
        if err is not None:
            raise err

    async def stop(self) -> None:
        if self.follower is not None:
            await self.follower.stop()
