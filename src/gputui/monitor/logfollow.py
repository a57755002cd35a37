"""Following a log file on the target by byte offset.

One long-lived command per log: a tiny `sh` script (a constant; the offset,
the last inode and the path are passed as positional arguments, never
formatted into it) that first prints one header line with the file's
`stat` — `@gputui ok|truncated|rotated SIZE MTIME INODE` or
`@gputui missing` — and then execs `tail -c +OFFSET -F -- PATH 2>&1`
(through a small python3 batcher where the target has one: BATCH_PY).

The offset counts the file's bytes consumed so far, partial line included
(the LineSplitter keeps the partial line), so when the stream ends or the
connection drops, the follower reopens at exactly that offset: no gap, no
duplicate, and the cut line is completed.

GNU tail's own notes arrive in-band (stderr merged into stdout keeps their
order relative to the data): "file truncated" (it then re-reads from 0),
"has appeared;  following new file" / "has been replaced;  following new
file" (a new file, read from 0), "has become inaccessible" / "cannot open"
(missing). They are taken out of the data and turned into LogState changes;
a `stat` (from the agent, via `observe_stat`) verifies them, and a stream
that missed a truncation or rotation is restarted (the header then says so).

The same stat is the watchdog on gputui's own side: when it shows the file
ahead of the bytes delivered (`LogState.behind`) and nothing has arrived for
STUCK_AFTER_S, the stream has stopped delivering — gputui's fault, not the
run's silence. The follower says so (`LogState.stuck`), drops that stream
without waiting for its read to return (a read that never resumes is one way
to get stuck) and resumes from the byte offset. A stream that is behind but
delivering is catching up, and is left alone.

Memory is bounded whatever the rate: lines are handed out per chunk read
(at most READ_CHUNK of input), the follower keeps only the last `keep`
lines, and the splitter bounds the partial line. The chunk is large (1 MiB)
on purpose: a burst then arrives in batches of thousands of lines, which
the consumers thin out in one go (the monitor parses a batch's newest lines
for metrics, the view shows its last ones), instead of paying per line in
hundreds of 64 KiB batches — which made catching up on a 22 MB burst under
CPU contention take ~50 s instead of a few. After each chunk the follower
yields to the event loop, so keys and timers get their turn mid-burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gputui.collect.logtail import LineSplitter
from gputui.config import Settings
from gputui.containers.base import FIXED_PATH
from gputui.diagnose.buffering import note_append
from gputui.errors import ConfigError, GputuiError
from gputui.model import NOT_FOLLOWED, UNREADABLE, LogState
from gputui.remote.base import RemoteProcess
from gputui.remote.identity import HANDS_SH, path_reader_argv
from gputui.remote.target import Target
from gputui.text.words import unreadable_fix

# The remote side. $1 offset (bytes consumed; "-" on the first start: begin
# $4 bytes before the end), $2 the inode last seen ("" if none), $3 the path.
# Prints the header `@gputui KIND SIZE MTIME INODE START`, then tails from
# byte START. A path that is not a regular file (a directory, /dev/zero, a
# FIFO) gets `@gputui notfile TYPE` and is not read: tail on /dev/zero would
# stream zeros forever and burn a core on both ends. A file this user may not
# read (an unprivileged CT's root and a file of the host's root) gets
# `@gputui unreadable`: tail would only retry "Permission denied" forever.
# Run as root with $6 (the script itself), it first asks whose hands follow
# the file (issue 34: `tail -F` as root streamed /etc/shadow once a parent
# directory of the log was swapped for a link): remote/identity.py HANDS_SH,
# the one decision every reader of a path the run supplied makes — root's
# only where nobody else can change the way, else the owner's (run again
# through setpriv), else `@gputui unsafe DIR` / `@gputui nosetpriv UID`.
# Every restart (the agent's stat saw a new inode) decides again.
FOLLOW_SCRIPT = (
    HANDS_SH
    + r"""off=$1; ino=$2; p=$3; back=${4:-0}; batch=$5; self=$6
PATH=@FIXED_PATH@; export PATH
case $p in /*) cd / ;; esac
if [ -n "$self" ]; then
  h=$(gputui_hands "$p")
  case $h in
    "as "*) set -- $h
      exec setpriv --reuid="$2" --regid="$3" --clear-groups -- \
        sh -c "$self" gputui-follow "$off" "$ino" "$p" "$back" "$batch" "" ;;
    self|root) ;;
    *) echo "@gputui $h"; exit 0 ;;
  esac
fi
if st=$(stat -L -c '%s %Y %i' -- "$p" 2>/dev/null); then
  if [ ! -f "$p" ]; then echo "@gputui notfile $(stat -L -c %F -- "$p")"; exit 0; fi
  if [ ! -r "$p" ]; then echo "@gputui unreadable"; exit 0; fi
  set -- $st
  if [ "$off" = "-" ]; then
    if [ "$1" -gt "$back" ]; then off=$(($1 - back)); else off=0; fi
    echo "@gputui ok $st $off"
  elif [ "$1" -lt "$off" ]; then echo "@gputui truncated $st 0"; off=0
  elif [ -n "$ino" ] && [ "$3" != "$ino" ]; then echo "@gputui rotated $st 0"; off=0
  else echo "@gputui ok $st $off"; fi
else
  echo "@gputui missing"; off=0
fi
if [ -n "$batch" ] && py=$(command -v python3) && { [ "$(id -u)" != 0 ] ||
   [ "$(stat -L -c %u -- "$py" "${py%/*}" | tr '\n' ' ')" = "0 0 " ]; }; then
  exec "$py" -I -S -c "$batch" "$((off + 1))" "$p"
fi
exec tail -c "+$((off + 1))" -F -- "$p" 2>&1
""".replace("@FIXED_PATH@", FIXED_PATH)
)

# $5 of FOLLOW_SCRIPT where the target has python3 (on FOLLOW_SCRIPT's fixed
# PATH, `-I -S`: no module from the working directory or PYTHONPATH; as
# root only one root owns, with its directory): runs the same tail and
# passes its output on in batches. GNU tail writes each time the file is
# written, and each write crosses ssh as a packet that gputui decrypts and
# hands on in Python: at 1,000 lines/s that was ~500 reads and ~850 packets
# a second. Here the first bytes after a quiet spell (≥ 1 s without any) go
# out at once and the batcher waits 0.03 s (the rest of a burst); while
# lines keep coming it waits 0.2 s after each read, so a stream goes out
# at most 5 times a second, the rate the view draws it at (issue 24: at
# 20 lines/s the 0.03 s wait woke it, and gputui, for every line; issue 37:
# a line on screen within ~150 ms, p50, of its write). During the 0.2 s
# wait tail is stopped (SIGSTOP, SIGCONT after): it woke for every line
# written (inotify) to pass it into the pipe, ~40 times a second at 40
# lines/s (0.16 % of a core on the H200, issue 37), and now reads the file
# once after the wait; tail gets PR_SET_PDEATHSIG (SIGKILL) so that a
# batcher killed outright never leaves it stopped (without ctypes, as in
# python3-minimal, tail is not stopped). A full read (a burst) goes on
# without waiting. SIGTERM/SIGHUP (the watchdog) and a closed stdout end
# tail too; without ctypes, a batcher killed outright leaves tail's output
# without a reader, and GNU tail -F then exits by itself.
BATCH_PY = r"""import os, signal, subprocess, sys, time
try:  # tail dies with the batcher, even a batcher killed outright while tail is stopped
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    def orphan_dies():
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
except Exception:  # no ctypes (python3-minimal): tail is never stopped
    orphan_dies = None
tail = subprocess.Popen(["tail", "-c", "+" + sys.argv[1], "-F", "--", sys.argv[2]],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        preexec_fn=orphan_dies)
def stop(*_):
    tail.kill()
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGHUP, stop)
fd = tail.stdout.fileno()
last = 0.0
try:
    while True:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
        now = time.monotonic()
        if len(data) < 65536 and now - last >= 1.0:
            time.sleep(0.03)  # the first bytes after a quiet spell: the rest of a burst
        elif len(data) < 65536:  # lines keep coming
            if orphan_dies:
                os.kill(tail.pid, signal.SIGSTOP)
            try:
                time.sleep(0.2)
            finally:
                if orphan_dies:
                    os.kill(tail.pid, signal.SIGCONT)
        last = now
except (OSError, KeyboardInterrupt):
    pass
if tail.poll() is None:
    tail.kill()
sys.exit(tail.wait() & 0xFF)
"""

HEADER_PREFIX = b"@gputui "
READ_CHUNK = 1024 * 1024  # bytes handed out per read at most (see the module docstring)
MSG_MAX = 4096  # bytes of a possible tail note held back waiting for its newline
BACKLOG_BYTES = 256 * 1024  # how much of an existing log the first stream reads
BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 60.0  # a CT that stays stopped costs one pct exec a minute
VERIFY_GRACE_S = 3.0  # how long a stat may disagree with the stream before a restart
STUCK_AFTER_S = 5.0  # file ahead and no byte delivered for this long: the stream is stuck
RESUME_WAIT_S = 2.0  # how long a resume waits for the stuck stream to let go

LinesCallback = Callable[[list[str]], None]
StateCallback = Callable[[LogState], None]


@dataclass
class FileStat:
    size: int
    mtime: float  # the target's clock
    inode: int


def file_stat_from_words(words: list[str]) -> FileStat | None:
    """`stat -L -c '%s %Y %i'` as words -> FileStat; None for `-` (no such
    file) or anything else."""
    if len(words) != 3:
        return None
    try:
        return FileStat(int(words[0]), float(words[1]), int(words[2]))
    except ValueError:
        return None


def follow_argv(
    path: str,
    offset: int | None,
    inode: int | None,
    backlog: int = BACKLOG_BYTES,
    batch: bool = True,
) -> list[str]:
    """argv (inside the target) that follows `path` from byte `offset`, or
    (offset None: the first start) from `backlog` bytes before its end;
    `batch`: through BATCH_PY where the target has python3."""
    return [
        "sh",
        "-c",
        FOLLOW_SCRIPT,
        "gputui-follow",
        "-" if offset is None else str(int(offset)),
        "" if inode is None else str(int(inode)),
        path,
        str(int(backlog)),
        BATCH_PY if batch else "",
        FOLLOW_SCRIPT,  # $6: run again as the log's owner (see FOLLOW_SCRIPT)
    ]


def named_log(settings: Settings) -> str | None:
    """The log the user named: --log, else `[run] log` in the config."""
    return settings.log or settings.run.log


def not_a_file_error(path: str, kind: str, said: str | None = None) -> ConfigError:
    """The one line for a named log that is a directory, a device or unreadable
    (or not followed: `said` is the follower's line)."""
    if kind == NOT_FOLLOWED:
        problem, _, fix = (said or f"{path} not followed").partition(" — ")
        return ConfigError(problem, fix or "keep the log in a directory only its owner can write")
    if kind == UNREADABLE:
        return ConfigError(f"log {path} cannot be read (permission denied)", unreadable_fix(path))
    return ConfigError(
        f"log {path} is a {kind}, not a file",
        "pass the file the run writes with --log (or [run] log in the config)",
    )


async def log_kind(target: Target, path: str | None, timeout: float = 10.0) -> str | None:
    """What `path` is on the target when it exists and is NOT a regular file
    ("directory", "character special file", "fifo") or one this user may
    not read (UNREADABLE); None otherwise (a readable file, missing, or the
    check itself failed: the follower says more)."""
    if not path:
        return None
    argv = [
        "sh",
        "-c",
        'if [ -e "$1" ] && [ ! -f "$1" ]; then stat -L -c %F -- "$1"; '
        'elif [ -e "$1" ] && [ ! -r "$1" ]; then echo unreadable; fi',
        "-",
        path,
    ]
    try:  # with the hands that will follow it (HANDS_SH): never through another's link as root
        res = await target.run(path_reader_argv(path, argv), timeout=timeout)
    except GputuiError:
        return None
    kind = res.out.strip() if res.ok else ""
    if kind.startswith("@gputui "):
        return None  # not followed as root: the follower says why, in one line
    return UNREADABLE if kind == "unreadable" else kind or None


def refused(path: str, kind: str, what: str) -> tuple[str, str]:
    """(the problem, the fix) for a log FOLLOW_SCRIPT would not follow."""
    if kind == "nosetpriv":
        return (
            f"{path} not followed: it is uid {what}'s and setpriv is missing to read it as them",
            "install util-linux (setpriv) in the target",
        )
    return (
        f"{path} not followed: directory {what} on its way may be changed by other users "
        "than the log's owner (it could be swapped for a link to any file root may read)",
        "keep the log in a directory only its owner can write (or a sticky one, as /tmp)",
    )


_TAIL_NOTE = re.compile(rb"tail: [^\n]*\n")


def classify_tail_note(note: str, path: str) -> str | None:
    """What a `tail: ...` line GNU tail wrote means for `path`.

    -> "truncated" | "new" (appeared or replaced: a new file read from 0) |
    "replaced" | "missing" | "note" (tail's own chatter, not data) | None
    (not a tail note: it is data that happens to start with "tail: ")."""
    if not note.startswith("tail: "):
        return None
    body = note[6:].rstrip("\n")
    base = os.path.basename(path) or path
    if body.startswith(("inotify ", "warning: ", "error reading")):
        return "note"
    if base not in body:
        return None
    if body.endswith(": file truncated"):
        return "truncated"
    if "has appeared;" in body and "following new file" in body:
        return "new"
    if "has been replaced;" in body and "following new file" in body:
        return "replaced"
    if "has become inaccessible" in body or (
        body.startswith("cannot open ") and "for reading" in body
    ):
        return "missing"
    if body.endswith("No such file or directory"):
        return "missing"
    if "has been replaced with an untailable" in body or "giving up on this name" in body:
        return "missing"
    return None


class LogFollower:
    """Follow one log file; see the module docstring.

    `on_lines(batch)` gets the new complete lines (a list per chunk read);
    `on_state(state)` is called when the LogState changed (existence,
    truncation, rotation, errors); `on_read()`, when given, after each read
    of the stream was handed out (`consuming` is True meanwhile). All run
    on the event loop.
    """

    def __init__(
        self,
        target: Target,
        path: str,
        on_lines: LinesCallback,
        on_state: StateCallback | None = None,
        *,
        keep: int = 500,
        clock: Callable[[], float] = time.time,
        backlog: int = BACKLOG_BYTES,
        via: str | None = None,
        on_read: Callable[[], None] | None = None,
    ) -> None:
        self.target = target
        self.backlog = backlog
        self.path = path
        self.via = via  # read through this instead (/proc/PID/fd/N of a deleted log)
        self.on_lines = on_lines
        self.on_state = on_state
        self.on_read = on_read
        # True while one read's data is handed out (`on_lines`, perhaps
        # several times: a tail note cuts a read in two); `on_read()` then
        # says the read is done, so a listener can tell all its lines on
        # in the read's own turn of the event loop (engine: one batch a read)
        self.consuming = False
        self.clock = clock
        self.state = LogState(path=path, read_via=via)
        self.tail: deque[str] = deque(maxlen=keep)
        self.inode: int | None = None
        self.clock_offset = 0.0  # our clock minus the target's (AgentClient.clock_offset)
        self.streams_opened = 0  # how many times the tail command was started
        self._splitter = LineSplitter()
        self._carry = b""  # bytes held back: maybe the start of a tail note
        self._had_file = False
        self._proc: RemoteProcess | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._restart = asyncio.Event()
        self._disagree_since: float | None = None
        self._delivered_at = clock()  # last byte arrived, or a stream (re)started
        self._positioned = False  # a header has told us where reading starts
        self._skip_partial = False  # started mid-file: drop bytes up to the first line end
        self._backlog_end = 0  # bytes up to here were in the file before we started
        # For the batch being handed to on_lines: the time its lines are
        # attributed to, and whether they are backlog (written before we
        # started, so they arrive together; their time is the file's mtime).
        self.batch_time = 0.0
        self.batch_is_backlog = False
        self._closing: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._task is None:
            self._stopped = False
            self._task = asyncio.create_task(self._run(), name=f"logfollow {self.path}")

    async def stop(self) -> None:
        """End the stream; nothing is left running on the target."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._close_proc()

    def restart(self) -> None:
        """Drop the current stream and reopen at the offset (e.g. after a
        stat showed it missed a truncation)."""
        self._restart.set()
        proc = self._proc
        if proc is not None:
            self._closing = asyncio.ensure_future(proc.close())

    @property
    def read_path(self) -> str:
        """What is opened on the target: the path, or the fd a deleted log is
        still open on (same file, so reading goes on at the same offset)."""
        return self.via or self.path

    def read_through(self, via: str | None) -> None:
        """Read the log through `via` from now on (None: by its path again)."""
        if via != self.via:
            self.via = via
            self.state.read_via = via
            self.restart()

    def kick(self) -> None:
        """Retry now if waiting out a backoff (e.g. the link is back)."""
        if self._proc is None:
            self._restart.set()

    @property
    def positioned(self) -> bool:
        """A stream has started and said where reading begins."""
        return self._positioned

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _close_proc(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(Exception):
                await proc.close()

    # ------------------------------------------------------------ the loop

    async def _run(self) -> None:
        backoff = BACKOFF_START_S
        while not self._stopped:
            self._restart.clear()
            got_header = await self._one_stream()
            if self._stopped:
                return
            if self.state.not_a_file:
                backoff = BACKOFF_MAX_S  # look again now and then, never in a loop
            elif got_header:
                backoff = BACKOFF_START_S
            if self._restart.is_set():
                continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._restart.wait(), backoff)
            if not got_header:
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _one_stream(self) -> bool:
        """Open the stream, read it to its end. True if it got going."""
        self._delivered_at = self.clock()  # a stream on its way gets its own grace
        offset = self.state.offset if self._positioned else None
        argv = follow_argv(self.read_path, offset, self.inode, self.backlog)
        try:
            proc = await self.target.open(argv)
        except GputuiError as err:
            self._set_error(str(err))
            return False
        except Exception as err:  # the transport library's own errors (asyncssh.Error, ...)
            self._set_error(f"log stream for {self.path} failed: {err}")
            return False
        self._proc = proc
        self.streams_opened += 1
        self._carry = b""
        self._delivered_at = self.clock()
        try:
            header = await proc.readline()
            if not header.startswith(HEADER_PREFIX):
                status = None
                with contextlib.suppress(Exception):
                    status = await asyncio.wait_for(proc.wait(), 5.0)
                said = (await proc.stderr_text()).strip() or header.decode("utf-8", "replace")
                self._set_error(
                    f"cannot follow {self.path}: "
                    + (said.splitlines()[-1] if said else f"exit {status}")
                )
                return False
            self._apply_header(header.decode("utf-8", "replace").split())
            while True:
                chunk = await proc.read(READ_CHUNK)
                if not chunk:
                    break
                self.consuming = True
                try:
                    self._consume(chunk)
                finally:
                    self.consuming = False
                if self.on_read is not None:
                    self.on_read()
                if len(chunk) >= READ_CHUNK:  # more may be buffered: a read of
                    await asyncio.sleep(0)  # buffered data never yields by itself
        except Exception as err:  # a broken link: reopen at the offset
            self._set_error(f"log stream for {self.path} broke: {err}")
        finally:
            # Held-back bytes were not counted in the offset: they come again.
            self._carry = b""
            await self._close_proc()
        return True

    # ------------------------------------------------------------ header / data

    def _apply_header(self, words: list[str]) -> None:
        kind = words[1] if len(words) > 1 else "missing"
        st = self.state
        st.error = None
        st.not_a_file = None
        if kind == "notfile":
            st.not_a_file = " ".join(words[2:]) or "not a regular file"
            st.error = f"{self.path} is a {st.not_a_file}, not a log file"
            self._notify()
            return
        if kind == "unreadable":  # looked at again now and then, as a directory is
            st.not_a_file = UNREADABLE
            st.error = f"cannot read {self.path}: permission denied"
            self._notify()
            return
        if kind in ("unsafe", "nosetpriv"):
            st.not_a_file = NOT_FOLLOWED
            st.error = " — ".join(refused(self.path, kind, " ".join(words[2:])))
            self._notify()
            return
        first = not self._positioned
        self._positioned = True
        if kind == "missing":
            if st.exists:
                self._had_file = True
            st.exists = False
            st.size = None
            self._reset_position()
        else:
            try:
                size, mtime, inode = int(words[2]), float(words[3]), int(words[4])
            except (IndexError, ValueError):
                size, mtime, inode = st.size or 0, st.mtime or 0.0, self.inode or 0
            try:
                start = int(words[5])
            except (IndexError, ValueError):
                start = st.offset
            if kind == "truncated":
                st.truncations += 1
                self._reset_position()
            elif kind == "rotated":
                st.rotations += 1
                self._reset_position()
            elif first:
                st.offset = start
                self._skip_partial = start > 0
                self._backlog_end = size
                # quiet since now: a first 8 KiB block after a silent start
                # shows the buffer (buffering.note_append)
                st.last_append_at = self.clock()
            st.exists = True
            st.size = size
            st.mtime = mtime + self.clock_offset
            self.inode = inode
            self._had_file = True
        self._notify()

    def _reset_position(self) -> None:
        """The file starts over: complete what was pending, offset 0."""
        rest = self._flush_splitter()
        if rest:
            self._emit(rest)
        self.state.offset = 0

    def _flush_splitter(self) -> list[str]:
        flush = getattr(self._splitter, "flush", None)
        if flush is None:
            self._splitter = LineSplitter()
            return []
        out = flush()
        return list(out) if out else []

    def _consume(self, chunk: bytes) -> None:
        data = self._carry + chunk
        self._carry = b""
        start = 0  # first byte not yet fed
        pos = 0
        while True:
            i = data.find(b"tail: ", pos)
            if i < 0:
                break
            j = data.find(b"\n", i)
            if j < 0:
                if len(data) - i <= MSG_MAX + len(self.read_path):
                    self._feed(data[start:i])
                    self._carry = data[i:]
                    return
                break
            kind = classify_tail_note(data[i : j + 1].decode("utf-8", "replace"), self.read_path)
            if kind is None:
                pos = i + 6
                continue
            self._feed(data[start:i])
            self._tail_note(kind)
            start = pos = j + 1
        self._feed(data[start:])

    def _feed(self, data: bytes) -> None:
        if not data:
            return
        st = self.state
        if self._skip_partial:
            # Started in the middle of a line: it is not a line of ours.
            cut = min((i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                st.offset += len(data)
                return
            if data[cut : cut + 2] == b"\r\n":
                cut += 1
            st.offset += cut + 1
            data = data[cut + 1 :]
            self._skip_partial = False
            if not data:
                return
        st.offset += len(data)
        now = self.clock()
        self._delivered_at = now
        if st.size is None or st.size < st.offset:
            st.size = st.offset
        if st.stuck or (st.behind_since is not None and st.offset >= st.size):
            st.stuck = False
            st.behind_since = None if st.offset >= st.size else st.behind_since
            self._notify()
        st.exists = True
        backlog = st.offset <= self._backlog_end
        written = st.written_by
        if backlog and written is not None:
            t = min(now, written)
        else:
            t = now
            st.mtime = now  # data just arrived: the file was written about now
        note_append(st, data, now, t, backlog)
        lines = self._splitter.feed(data)
        if lines:
            self._emit(list(lines), t, backlog)

    def _emit(self, lines: list[str], t: float | None = None, backlog: bool = False) -> None:
        st = self.state
        n = len(lines)
        t = self.clock() if t is None else t
        st.note_line(t)
        if n > 1:  # the rest of a batch arrived together: gaps of 0
            st.lines_total += n - 1
            if not backlog:
                gaps = st.line_gaps
                gaps.extend([0.0] * min(n - 1, gaps.maxlen or n - 1))
        if backlog:
            st.line_gaps.clear()  # backlog lines say nothing about the run's rhythm
        self.tail.extend(lines)
        self.batch_time, self.batch_is_backlog = t, backlog
        self.on_lines(lines)

    def _tail_note(self, kind: str) -> None:
        st = self.state
        if kind == "truncated":
            st.truncations += 1
            self._reset_position()
            st.size = 0
        elif kind in ("new", "replaced"):
            if self._had_file or kind == "replaced":
                st.rotations += 1
            self._reset_position()
            st.exists = True
            st.size = 0
            self.inode = None  # learnt from the next stat
            self._had_file = True
        elif kind == "missing":
            if st.exists:
                self._had_file = True
            st.exists = False
        else:
            return
        self._disagree_since = None
        self._notify()

    # ------------------------------------------------------------ verification

    def observe_stat(self, stat: FileStat | None, offset_before: int | None = None) -> None:
        """A stat of the path taken by someone else (the agent; mtime already
        in our clock): update size and mtime, restart a stream that missed a
        truncation/rotation, and resume one that stopped delivering.

        `offset_before`: the offset when the stat was asked for. The file
        had at least that many bytes then, so only a size below it is a
        truncation; a size below the offset now may just be a stat taken
        before the stream read further."""
        st = self.state
        now = self.clock()
        changed = False
        if stat is None:
            if st.exists is not False and self.running:
                # tail says "has become inaccessible" itself; just note it.
                st.exists = False
                changed = True
            self._disagree_since = None
            changed |= self._set_behind(False, now)
        else:
            if st.exists is not True:
                st.exists = True
                changed = True
            floor = st.offset if offset_before is None else min(offset_before, st.offset)
            shrunk = stat.size < floor
            if stat.size != st.size:
                # the file has at least the bytes delivered, unless it shrank
                st.size = stat.size if shrunk else max(stat.size, st.offset)
            st.mtime = stat.mtime
            if self.inode is None:
                self.inode = stat.inode
            disagree = shrunk or stat.inode != self.inode
            changed |= self._watch_delivery(stat, disagree, now)
            if disagree:
                if self._disagree_since is None:
                    self._disagree_since = now
                elif now - self._disagree_since >= VERIFY_GRACE_S:
                    self._disagree_since = None
                    self.restart()
            else:
                self._disagree_since = None
        if changed:
            self._notify()

    def _watch_delivery(self, stat: FileStat, disagree: bool, now: float) -> bool:
        """The watchdog (see the module docstring). True if the state changed."""
        received = self.state.offset + len(self._carry)  # held-back bytes did arrive
        ahead = not disagree and self._positioned and stat.size > received
        changed = self._set_behind(ahead, now)
        # Only an open stream can be stuck; one that failed to open is waiting
        # out its backoff (and says why in LogState.error).
        open_ = self._proc is not None and not self._stopped
        if ahead and open_ and now - self._delivered_at >= STUCK_AFTER_S:
            self._resume_stuck(now)
            changed = True
        return changed

    def _set_behind(self, ahead: bool, now: float) -> bool:
        st = self.state
        if ahead == st.behind:
            return False
        st.behind_since = now if ahead else None
        if not ahead:
            st.stuck = False
        return True

    def _resume_stuck(self, now: float) -> None:
        """The stream stopped delivering while the file grew: say so and
        resume from the offset in a fresh stream. The old one is cancelled,
        not asked to finish: its read may be what never returns."""
        st = self.state
        st.stuck = True
        st.resumes += 1
        self._delivered_at = now  # the new stream gets its own grace
        old = self._task
        self._task = asyncio.create_task(self._resume_after(old), name=f"logfollow {self.path}")

    async def _resume_after(self, old: asyncio.Task[None] | None) -> None:
        proc, self._proc = self._proc, None
        if old is not None and not old.done():
            old.cancel()
            await asyncio.wait({old}, timeout=RESUME_WAIT_S)
        if proc is not None:  # closed in the background: it may hang too
            self._closing = asyncio.ensure_future(proc.close())
        self._carry = b""
        await self._run()

    # ------------------------------------------------------------ state

    def _set_error(self, text: str) -> None:
        self.state.error = text
        self._notify()

    def _notify(self) -> None:
        if self.on_state is not None:
            self.on_state(self.state)
