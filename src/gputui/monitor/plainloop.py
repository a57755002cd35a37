"""The plain-command loop: without python3 in the CT (no agent), one
long-lived shell loop lists the tmux panes (`Snapshot.sessions`, through the
session watch) and stats the log followed (its stream's watchdog and the
space of its file system, through the monitor's log stat), started again
when the log changes. No process tree then (`tools.python3` says why)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

from gputui.collect import tmux as tmux_parse
from gputui.errors import GputuiError
from gputui.model import Session
from gputui.monitor.logfollow import FileStat, LogFollower, file_stat_from_words
from gputui.remote.base import RemoteProcess
from gputui.remote.identity import HANDS_SH
from gputui.remote.target import Target

PERIOD_S = 5.0  # the loop lists and stats at most this often

# The plain-command fallback (no python3 in the CT): one long-lived loop that
# prints `tmux list-panes -a -F …` every $1 seconds and, when $2 names the log
# followed, its `stat` — the log stream's watchdog, which the agent's stat is
# elsewhere — after the space of its file system (`stat -f`, coreutils and
# busybox; none of df's mount-table walks). $3… is the tmux argv.
PANES_LOOP_SCRIPT = (
    HANDS_SH
    + r"""n=$1; log=$2; shift 2
while :; do
  "$@" 2>&1; echo "@gputui rc $?"
  if [ -n "$log" ]; then
    h=$(gputui_hands "$log")  # the run's path: root's hands only where nobody else can swap it
    if fs=$(hands_run stat -f -L -c '%a %S %b' -- "$log" 2>/dev/null ||
            hands_run stat -f -L -c '%a %S %b' -- "${log%/*}/" 2>/dev/null); then
      echo "@gputui fs $fs"
    fi
    if st=$(hands_run stat -L -c '%s %Y %i' -- "$log" 2>/dev/null); then
      echo "@gputui stat $st"
    else
      echo "@gputui stat -"
    fi
  fi
  echo "@gputui end"
  sleep "$n"
done
"""
)


class PlainLoop:
    """See the module docstring. `on_sessions`: a round's listing;
    `observe_stat(path, stat, offset_before, space)`: a round's stat of the
    log (False: that log is no longer followed); `follower()`: the log's
    stream now; `spawn(work, name)`: runs the reader as the monitor's task."""

    def __init__(
        self,
        target: Target,
        on_sessions: Callable[[list[Session]], None],
        observe_stat: Callable[[str, FileStat | None, int | None, tuple[int, int] | None], bool],
        follower: Callable[[], LogFollower | None],
        spawn: Callable[[Coroutine[Any, Any, None], str], None],
    ) -> None:
        self.target = target
        self.on_sessions = on_sessions
        self.observe_stat = observe_stat
        self.follower = follower
        self.spawn = spawn
        self.proc: RemoteProcess | None = None
        self.log = ""  # the log the loop stats ("" none)
        self._offset: int | None = None  # the stream's offset at the last stat
        self._rounds = 0  # rounds (panes listed, log stat'ed) the current loop delivered

    async def ensure(self, log: str, interval: float) -> GputuiError | None:
        """List tmux panes, and stat `log` (the log followed), with a
        long-lived shell loop (started again when the log changes); the
        error when it could not be started."""
        if self.proc is not None:
            if log == self.log:
                return None
            await self.close()
        self.log = log
        self._offset = None
        self._rounds = 0
        argv = [
            "sh",
            "-c",
            PANES_LOOP_SCRIPT,
            "gputui-panes",
            f"{max(interval, PERIOD_S):g}",
            log,
            *tmux_parse.list_panes_argv(),
        ]
        try:
            proc = await self.target.open(argv)
        except GputuiError as err:
            return err
        self.proc = proc
        self.spawn(self._reader(proc), "panes loop")
        return None

    @property
    def pending(self) -> bool:
        """The plain-command loop (no python3 in the CT) runs and has not
        delivered its first round yet: tmux's panes and the log's stat and
        disk space are still to come."""
        return self.proc is not None and self._rounds == 0

    async def _reader(self, proc: RemoteProcess) -> None:
        block: list[str] = []
        space: tuple[int, int] | None = None  # the `@gputui fs` line before a stat
        try:
            while True:
                raw = await proc.readline()
                if not raw:
                    break
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith("@gputui fs "):
                    space = space_from_words(line.split()[2:])
                elif line.startswith("@gputui stat "):
                    self._stat(line, space)
                    space = None
                elif line == "@gputui end":
                    rc: int | None = None
                    if block and block[-1].startswith("@gputui rc "):
                        with contextlib.suppress(ValueError, IndexError):
                            rc = int(block.pop().split()[2])
                    text = "\n".join(block) + "\n"
                    block = []
                    sessions = tmux_parse.sessions_from_result(
                        rc, text if rc == 0 else "", "" if rc == 0 else text
                    )
                    self.on_sessions(sessions)
                    if self.proc is proc:
                        self._rounds += 1
                elif len(block) < 10_000:
                    block.append(line)
        finally:
            if self.proc is proc:
                self.proc = None
            with contextlib.suppress(Exception):
                await proc.close()

    def _stat(self, line: str, space: tuple[int, int] | None = None) -> None:
        """The loop's stat of the log: the same watchdog the agent's stat
        drives (a stream that stops delivering while the file grows is
        resumed from its offset). The stat was taken after the previous one
        arrived, so the offset then is a floor of the file's size."""
        f = self.follower()
        if f is None:
            return
        fs = file_stat_from_words(line.split()[2:])
        if fs is not None:
            fs = FileStat(fs.size, fs.mtime + f.clock_offset, fs.inode)
        if self.observe_stat(self.log, fs, self._offset, space):
            self._offset = f.state.offset

    async def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(Exception):
                await proc.close()


def space_from_words(words: list[str]) -> tuple[int, int] | None:
    """`stat -f -c '%a %S %b'` (blocks available, block size, blocks) as
    words -> (free, total) bytes; None for anything else."""
    if len(words) != 3:
        return None
    try:
        avail, size, blocks = (int(w) for w in words)
    except ValueError:
        return None
    return avail * size, blocks * size
