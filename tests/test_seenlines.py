"""SeenLines: which lines of a container's log a reopened stream sends
again (monitor/seenlines.py) — by stamp and text, not by "after the last
stamp": the container's stderr may come stamped before a stdout line
ahead of it (tests/test_container_mainproc_e2e.py follows such a log)."""

from __future__ import annotations

from gputui.monitor.seenlines import SeenLines
from gputui.remote.mainproc import key_stamp, stamp_key

S = 1_700_000_000  # some second


def k(ms: int) -> tuple[int, int]:
    """S plus `ms` milliseconds as a stamp key."""
    return S + ms // 1000, (ms % 1000) * 10**6


def shown(seen: SeenLines, lines: list[tuple[int, str]]) -> list[str]:
    return [text for ms, text in lines if seen.is_new(k(ms), text)]


def test_a_stream_shows_every_line_whatever_its_stamp() -> None:
    seen = SeenLines()
    assert seen.reopen() is None  # nothing shown yet: the stream starts from the tail
    lines = [(3, "a"), (1, "b"), (4, "c"), (5, "x"), (5, "x"), (5, "y"), (2, "late")]
    assert shown(seen, lines) == ["a", "b", "c", "x", "x", "y", "late"]


def test_a_reopened_stream_drops_each_line_shown_once_and_no_other() -> None:
    seen = SeenLines()
    shown(seen, [(3, "a"), (1, "b"), (4, "c"), (5, "x"), (5, "y")])
    since = seen.reopen()
    assert since is not None and since <= k(1)  # from before the oldest stamp in the window
    # the tool sends again what it holds since then, in the log's order, and what is new
    again = [(3, "a"), (1, "b"), (4, "c"), (5, "x"), (2, "d"), (5, "x"), (5, "y"), (6, "e")]
    assert shown(seen, again) == ["d", "x", "e"]  # "x" at 5 was shown once: the second is new


def test_the_window_keeps_the_last_seconds_and_the_floor_only_rises() -> None:
    seen = SeenLines(window_ns=2 * 10**9)
    shown(seen, [(0, "a"), (1000, "b"), (3000, "c")])
    assert len(seen) == 2  # "a" is over 2 s before the newest
    assert seen.reopen() == k(1000)
    assert shown(seen, [(1000, "b"), (3000, "c"), (500, "too old")]) == []  # before --since
    shown(seen, [(100, "late")])  # a late line is shown and the floor stays
    assert seen.reopen() == k(1000)


def test_the_window_is_thinned_to_half_past_its_most_lines() -> None:
    seen = SeenLines(most=100)
    shown(seen, [(i, f"line {i}") for i in range(101)])
    assert len(seen) == 50
    since = seen.reopen()
    assert since == k(51)
    assert shown(seen, [(i, f"line {i}") for i in range(51, 101)]) == []  # all shown before


def test_a_floor_as_a_stamp_reads_back() -> None:
    assert key_stamp(k(1500)) == "2023-11-14T22:13:21.500000000Z"
    assert stamp_key(key_stamp(k(1500))) == k(1500)


def test_a_log_sent_to_its_end_with_nothing_new_settles_at_its_newest_stamp() -> None:
    seen = SeenLines()
    shown(seen, [(1000, "a"), (2000, "b"), (3000, "c")])
    assert seen.reopen() == k(3000 - 10_000)  # the window: lines may still come stamped earlier
    assert shown(seen, [(1000, "a"), (2000, "b"), (3000, "c")]) == [] and seen.resent == 3
    seen.settle()  # the stream ended: the log holds nothing else (a stopped container)
    assert seen.reopen() == k(3000)
    assert shown(seen, [(3000, "c")]) == [] and seen.resent == 4  # its last line only
    assert shown(seen, [(3000, "c2"), (4000, "d")]) == ["c2", "d"]  # a restart's lines
    assert seen.shown == 5
