"""Is the run's stdout block-buffered? Judged by what the log does, not by
the command line. Pure.

Argv and environment only make a suspicion: Python with no `-u`, no
PYTHONUNBUFFERED and stdout not a terminal *would* buffer its prints in
8 KiB blocks — unless the program flushes its own lines (`print(...,
flush=True)`, `logging`'s StreamHandler, `sys.stdout.reconfigure(
line_buffering=True)`, loguru, rich), and many do. The log tells which
(LogState.appends, noted by the follower as appends arrive):

- appends that end at a line end, off any 4 KiB boundary, one after the
  other: the writer flushes its lines — the suspicion is cleared;
- an append that stops mid-line at a 4 KiB boundary, the rest of that line
  coming a second or more later: a block buffer — confirmed;
- neither yet: "not yet known" (never a warning by itself; a log silent past
  the threshold while the GPUs work still is: rules `busy_but_silent`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputui.model import LogState, Proc
from gputui.text.words import dur

BLOCK = 4096  # a block buffer's writes end on multiples of this (8 KiB: Python's, glibc's)
CUT_HELD_S = 1.0  # a line cut at a block boundary whose rest waits this long: a buffer held it
BLOCK_MIN = 7680  # Python's blocks: 8 KiB of whole writes, less at most one write (~a line)
QUIET_S = 1.0  # ... arriving after this long with nothing
LINES_TO_CLEAR = 3  # this many line-sized appends, one by one, clear the suspicion
# once lines have cleared it, this many held cuts confirm it again (stdout
# buffered while stderr's lines, a warning or a logger, arrive one by one)
BLOCKS_OVER_LINES = 2

BUFFERED = "buffered"  # the log showed a block buffer
FLUSHES = "flushes"  # suspected, but the log shows the program flushes its lines
UNBUFFERED = "unbuffered"  # -u, PYTHONUNBUFFERED or a terminal: not even suspected
UNKNOWN = "unknown"  # suspected, the log has not told yet
NOT_JUDGED = "not judged"  # not Python, or its environment unreadable


@dataclass(frozen=True)
class Buffering:
    """The verdict on one process's stdout and the log lines that gave it."""

    state: str
    suspected: bool  # argv/env say Python would block-buffer
    evidence: list[str] = field(default_factory=list)

    @property
    def block_buffered(self) -> bool | None:
        """True: confirmed by the log; False: cleared or not suspected;
        None: not known (yet)."""
        if self.state == BUFFERED:
            return True
        if self.state in (FLUSHES, UNBUFFERED):
            return False
        return None

    @property
    def maybe(self) -> bool:
        """Confirmed, or suspected and not cleared yet."""
        return self.state == BUFFERED or (self.suspected and self.state == UNKNOWN)


def is_block(size: int, quiet: float | None) -> bool:
    """One Python block: ~8 KiB of whole writes (its text layer hands the
    buffer whole `write()`s up to 8 KiB), after a quiet spell."""
    return BLOCK_MIN <= size <= 2 * BLOCK and quiet is not None and quiet >= QUIET_S


def note_append(st: LogState, data: bytes, now: float, t: float, backlog: bool = False) -> None:
    """Note what one delivered append says of the writer (LogState.appends),
    the evidence judge() goes by. `now`: its arrival; `t`: when it was
    written (the file's mtime for backlog); `backlog`: bytes that were in the
    file before gputui started (they arrive together: no "block" by size).

    A program that flushes its lines writes them one by one: small appends,
    each ending a line. A block buffer writes 8 KiB at a time: Python's
    (3.8+) ~8 KiB of whole writes after a quiet spell ("block"); C stdio's
    (and a pipe's reader passing it on as 4 KiB halves) a cut at a 4 KiB
    boundary mid-line whose rest waits for the next block ("cut"). A cut
    completed within CUT_HELD_S is the transport's (an ssh packet, a batch),
    not the writer's."""
    end, size = st.offset, len(data)
    quiet = None if st.last_append_at is None else now - st.last_append_at
    st.last_append_at = now
    if st.cut_at is not None:
        held = now - st.cut_at
        if held >= CUT_HELD_S:
            st.appends.append((st.cut_written, "cut", st.cut_offset, held, 0))
        else:  # the rest of the same write came at once (tee's 4 KiB halves, a batch)
            size, quiet = size + st.cut_size, st.cut_quiet
        st.cut_at = None
    last = data[-1:]
    aligned = end % BLOCK == 0 or (len(data) >= BLOCK and len(data) % BLOCK == 0)
    if last not in (b"\n", b"\r") and aligned:
        st.cut_at, st.cut_written, st.cut_offset = now, t, end
        st.cut_size, st.cut_quiet = size, quiet
    elif not backlog and is_block(size, quiet):
        st.appends.append((t, "block", end, quiet or 0.0, size))
    elif last == b"\n" and not aligned and size < BLOCK:
        st.appends.append((t, "line", end, 0.0, size))


STAMP_SAME_S = 0.05  # container-log lines stamped this close one after the other: one write


def note_stamped(st: LogState, lines: list[tuple[float, str]]) -> None:
    """note_append for a container's own log (`docker logs -t`): the runtime
    stamps each line as it reads the run's stdout, so one write's lines come
    stamped one right after the other. `lines`: (stamp in local time, text),
    oldest first, not backlog; they may come a line at a time, so the write
    being read (LogState.stamp_group) is judged once the next one begins."""
    for t, text in lines:
        size = len(text.encode()) + 1
        g = st.stamp_group
        if g is not None and t - g[3] <= STAMP_SAME_S:
            g[1] += size
            g[2] += 1
            g[3] = t
            continue
        if g is not None:
            _judge_group(st, g)
        quiet = -1.0 if st.last_append_at is None else t - st.last_append_at
        st.stamp_group = [t, float(size), 1.0, t, quiet]
        st.last_append_at = t


def _judge_group(st: LogState, g: list[float]) -> None:
    t, n, count, quiet = g[0], int(g[1]), g[2], g[4]
    if is_block(n, quiet if quiet >= 0 else None):
        st.appends.append((t, "block", st.offset, quiet, n))
    elif count == 1:  # a line on its own: the writer flushed it (a piece of a block is not)
        st.appends.append((t, "line", st.offset, 0.0, n))


def _marks(log: LogState, now: float, since: float | None) -> tuple[list[str], int]:
    """(the blocks seen, in words; how many line-sized appends) since the
    process started (`since`, its start time; None: unknown)."""
    floor = None if since is None else since - 1.0
    blocks: list[str] = []
    lines = 0
    for t, kind, offset, secs, size in log.appends:
        if floor is not None and t < floor:
            continue
        if kind == "cut":
            blocks.append(_cut_words(offset, secs))
        elif kind == "block":
            blocks.append(
                f"{size:,} bytes arrived at once after {dur(secs)} of silence "
                "— one 8 KiB block of a stdout buffer"
            )
        elif kind == "line":
            lines += 1
    pending = log.cut_at
    fresh = floor is None or log.cut_written >= floor
    if pending is not None and now - pending >= CUT_HELD_S and fresh:
        blocks.append(_cut_words(log.cut_offset, now - pending))
    return blocks, lines


def _cut_words(offset: int, held: float) -> str:
    return (
        f"a write stopped mid-line at byte {offset:,} (a 4 KiB boundary) and the rest "
        f"of that line came {dur(held)} later — a block buffer's writes"
    )


def judge(proc: Proc | None, log: LogState | None, now: float) -> Buffering:
    """The verdict on `proc`'s stdout from its argv/env and the log's appends."""
    if proc is None or not proc.is_python:
        return Buffering(NOT_JUDGED, False)
    suspected = proc.block_buffered
    if suspected is False:
        return Buffering(UNBUFFERED, False)
    if suspected is None:
        return Buffering(NOT_JUDGED, False)
    if log is None or not log.path:
        return Buffering(UNKNOWN, True)
    blocks, lines = _marks(log, now, proc.start_time)
    if blocks and (lines < LINES_TO_CLEAR or len(blocks) >= BLOCKS_OVER_LINES):
        more = f" ({len(blocks)} blocks so far)" if len(blocks) > 1 else ""
        return Buffering(BUFFERED, True, [f"log {log.path}: {blocks[-1]}{more}"])
    if lines >= LINES_TO_CLEAR:
        return Buffering(
            FLUSHES,
            True,
            [
                f"log {log.path}: {lines} appends arrived one by one, each ending at a line "
                "end — the program flushes its own lines"
            ],
        )
    return Buffering(UNKNOWN, True)


def panel_words(b: Buffering) -> str:
    """The process panel's sentence for the verdict (style chosen by the UI)."""
    if b.state == BUFFERED:
        return "BLOCK-BUFFERED (no -u, no PYTHONUNBUFFERED): the log gets 8 KiB chunks"
    if b.state == FLUSHES:
        return "flushes its own lines (no -u, but they reach the log one by one)"
    if b.state == UNKNOWN:
        return (
            "buffering not yet known: no -u, no PYTHONUNBUFFERED — "
            "watching whether its lines arrive one by one or in 8 KiB blocks"
        )
    return ""
