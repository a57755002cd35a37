"""Which lines of a container's log are new when its stream is reopened
(`docker logs -f -t --since STAMP`), by their time stamps and texts.

The container's stdout and stderr are two pipes, each stamped as it is
read, and the two race for the log: a stderr line can come after a stdout
line stamped later (docker's json-file log; `docker logs` sends them down
two pipes as well). So a line is not old because its stamp is not after
the last one shown. What is kept instead is the window of lines shown whose
stamps are at most WINDOW_NS before the newest — each as (stamp, a hash of
its text), MOST of them at most — and a stream is reopened from the
window's floor: a line the tool sends again that is in the window is
dropped, once for each time it was shown (two equal lines with the same
stamp are two lines), and every other line is new. Within one stream
nothing is dropped: the tool sends each line once.

The one loss left: a line stamped more than the window before the newest
one shown, not yet read when the stream broke (the two pipes' race is
well under a second; a stream's own stamps run in order).

A stream that sent the window again, nothing new, and ended (a stopped
container's log: `logs -f` prints it and exits) has shown that the log
holds nothing unseen: `settle()` raises the floor to the newest stamp, so
the reopens while the container stays stopped send its last line again,
not the window's lines (two reopens a second).
"""

from __future__ import annotations

from collections import Counter, deque

Key = tuple[int, int]  # (UTC seconds, nanoseconds): mainproc.stamp_key
Entry = tuple[int, int]  # (the stamp in nanoseconds, hash of the text)

WINDOW_NS = 10 * 10**9
MOST = 20_000


class SeenLines:
    """See the module docstring. `reopen()` as each stream opens (its
    `--since`), then `is_new(key, text)` for each stamped line it sends."""

    def __init__(self, window_ns: int = WINDOW_NS, most: int = MOST) -> None:
        self.window_ns = window_ns
        self.most = most
        self._shown: deque[Entry] = deque()  # the window, in the order shown
        self._newest: int | None = None
        self._floor: int | None = None  # every line shown stamped at or after it is in _shown
        self._again: Counter[Entry] = Counter()  # the window as the open stream may resend it
        self._since: int | None = None  # the open stream's floor
        self.shown = 0  # lines found new, all told
        self.resent = 0  # lines sent again and dropped, all told

    def reopen(self) -> Key | None:
        """A stream opens: -> its floor, as (seconds, nanoseconds); None
        before any line was shown (the stream starts from the log's tail)."""
        self._since = self._floor
        if self._floor is None:
            self._again = Counter()
            return None
        self._again = Counter(e for e in self._shown if e[0] >= self._floor)
        return divmod(self._floor, 10**9)

    def is_new(self, key: Key, text: str) -> bool:
        """Whether the open stream's line is one not shown yet; a new one is
        counted as shown."""
        ns = key[0] * 10**9 + key[1]
        entry = (ns, hash(text))
        if self._again[entry] > 0:
            self._again[entry] -= 1
            self.resent += 1
            return False
        if self._since is not None and ns < self._since:
            return False  # before the stream's --since: the tool sent more than asked
        self._note(entry)
        self.shown += 1
        return True

    def settle(self) -> None:
        """The open stream sent the log to its end, and nothing in it was
        new: the next one starts from the newest stamp shown."""
        if self._newest is not None and (self._floor is None or self._newest > self._floor):
            self._floor = self._newest
            self._shown = deque(e for e in self._shown if e[0] >= self._newest)

    def _note(self, entry: Entry) -> None:
        ns = entry[0]
        self._shown.append(entry)
        if self._newest is None or ns > self._newest:
            self._newest = ns
        floor = self._newest - self.window_ns
        if self._floor is None or floor > self._floor:
            self._floor = floor
            while self._shown and self._shown[0][0] < floor:
                self._shown.popleft()
        if len(self._shown) > self.most:
            self._thin()

    def _thin(self) -> None:
        """Over MOST lines in the window: raise the floor to keep about half."""
        stamps = sorted(e[0] for e in self._shown)
        floor = stamps[len(stamps) - self.most // 2]
        if self._floor is None or floor > self._floor:
            self._floor = floor
            self._shown = deque(e for e in self._shown if e[0] >= floor)

    def __len__(self) -> int:
        return len(self._shown)
