"""Following a container's own log: the output of a run that is the
container's main process, as `docker logs -f -t` (podman, `kubectl logs -f
--timestamps`) prints it on the host.

A LogFollower whose stream is the host's logs command instead of `tail`
of a file. Each line carries its time stamp; the follower reopens a stream
that ended (the link dropped, the container stopped or was restarted) with
`--since` a stamp a little before the newest it handed on, and drops the
lines it has already shown by their stamps and texts (seenlines.py: the
container's stderr may come stamped before a stdout line ahead of it, so
"not after the last stamp" does not mean seen): no gap, no repeat. Lines
from before the follower started (the first stream's `--tail`) count as
backlog, timed by their own stamps. A line with no stamp is the tool's
own word (`No such container`), shown as the stream's error, not as the
run's output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gputui.diagnose.buffering import note_stamped
from gputui.errors import GputuiError
from gputui.model import LogState
from gputui.monitor.logfollow import READ_CHUNK, FileStat, LogFollower
from gputui.monitor.seenlines import SeenLines
from gputui.remote.mainproc import (
    BACKLOG_LINES,
    key_stamp,
    log_source,
    logs_argv,
    stamp_key,
    stamp_time,
    stamped_line,
)
from gputui.remote.target import Target

LINE_MAX = 1 << 20  # a partial line longer than this is handed on as it is
LIVED_S = 2.0  # a stream that ran this long without a line still counts as one that got going


class ContainerLogFollower(LogFollower):
    """See the module docstring; `path` is `mainproc.log_source(container)`."""

    def __init__(
        self,
        target: Target,
        on_lines: Callable[[list[str]], None],
        on_state: Callable[[LogState], None] | None = None,
        *,
        keep: int = 500,
        clock: Callable[[], float],
        backlog_lines: int = BACKLOG_LINES,
    ) -> None:
        super().__init__(
            target, log_source(target.container), on_lines, on_state, keep=keep, clock=clock
        )
        self.container = target.container
        self.backlog_lines = backlog_lines
        self.seen = SeenLines()  # the lines handed on lately, by stamp and text
        self._started_at = clock()
        self.state.exists = None

    def observe_stat(self, stat: FileStat | None, offset_before: int | None = None) -> None:
        """No file to stat: the stream itself says what there is."""

    async def _one_stream(self) -> bool:
        """Open `logs -f` on the host, hand on its new lines until it ends.
        True if it got going (a line came, or it ran a while)."""
        self._delivered_at = opened = self.clock()
        since = self.seen.reopen()
        argv = logs_argv(self.container, since and key_stamp(since), self.backlog_lines)
        try:
            proc = await self.target.open_host(argv)
        except GputuiError as err:
            self._set_error(str(err))
            return False
        except Exception as err:  # the transport library's own errors
            self._set_error(f"{self.path} failed: {err}")
            return False
        self._proc = proc
        self.streams_opened += 1
        got, pending = False, b""
        shown, resent = self.seen.shown, self.seen.resent
        try:
            while True:
                chunk = await proc.read(READ_CHUNK)
                if not chunk:
                    break
                pending += chunk
                cut = pending.rfind(b"\n") + 1 or (len(pending) if len(pending) > LINE_MAX else 0)
                if cut:
                    got |= self._lines(pending[:cut].decode("utf-8", "replace").splitlines())
                    pending = pending[cut:]
                await asyncio.sleep(0)
            if self.seen.shown == shown and self.seen.resent > resent:
                self.seen.settle()  # the log to its end, all of it shown: a stopped container
        except Exception as err:  # a broken link: reopen, --since the lines shown lately
            self._set_error(f"{self.path} broke: {err}")
        finally:
            await self._close_proc()
        return got or self.clock() - opened >= LIVED_S

    def _lines(self, raw: list[str]) -> bool:
        """Hand on the stamped lines not shown yet; a line with no stamp is
        the tool's error. True if the tool answered with lines."""
        fresh: list[tuple[float, str]] = []
        said: str | None = None
        for line in raw:
            parts = stamped_line(line)
            if parts is None:
                said = line.strip() or said
                continue
            stamp, text = parts
            if not self.seen.is_new(stamp_key(stamp), text):
                continue  # shown before the stream was reopened
            fresh.append((stamp_time(stamp) + self.clock_offset, text))
        st = self.state
        if said and not fresh:
            self._set_error(f"{self.path}: {said}")
            return False
        self._positioned = True
        if st.exists is not True or st.error:
            st.exists, st.error = True, None
            self._notify()
        old = [text for t, text in fresh if t < self._started_at]
        new = [text for t, text in fresh if t >= self._started_at]
        if st.last_append_at is None:
            st.last_append_at = self._started_at
        note_stamped(st, [(t, text) for t, text in fresh if t >= self._started_at])
        for batch, backlog in ((old, True), (new, False)):
            if not batch:
                continue
            t = fresh[len(old) - 1][0] if backlog else fresh[-1][0]
            st.offset += sum(len(text.encode()) + 1 for text in batch)
            st.size = st.offset
            st.mtime = t
            self._delivered_at = self.clock()
            self._emit(batch, min(t, self.clock()), backlog=backlog)
        return True
