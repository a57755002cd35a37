"""The log view's write pacing: at once after a quiet spell, ~5 a second under a stream."""

from __future__ import annotations

from gputui.ui.pacing import WritePacer


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def writes_in_10_s(rate: float, lines: int = 1, rows: int | None = None) -> int:
    """A batch of `lines` ready every millisecond for 10 s, written when the
    pacer allows: how many writes went out."""
    clock = Clock()
    p = WritePacer(rate=rate, burst=2.0, clock=clock)
    writes = 0
    for _ in range(10_000):
        clock.t += 0.001
        if p.wait() <= 0:
            p.spend(lines, rows)
            writes += 1
    return writes


def test_after_a_quiet_spell_two_writes_go_at_once_then_every_quarter_second() -> None:
    clock = Clock()
    p = WritePacer(rate=4.0, burst=2.0, clock=clock)
    for _ in range(2):
        assert p.wait() == 0
        p.spend()
    assert p.wait() == 0.25
    clock.t += 0.1
    assert abs(p.wait() - 0.15) < 1e-9
    clock.t += 0.15
    assert p.wait() == 0
    p.spend()
    clock.t += 10  # quiet again: the burst is back, never more
    assert p.wait() == 0
    p.spend()
    p.spend()
    assert p.wait() == 0.25


def test_a_stream_gets_at_most_rate_writes_a_second() -> None:
    assert 40 <= writes_in_10_s(4.0) <= 42  # 4 a second, plus the first burst


def test_a_flood_that_replaces_the_view_is_drawn_twice_a_second() -> None:
    """Writes of a view's worth of lines or more cost two: ~2 a second; a
    stream of smaller writes keeps ~4."""
    for lines, want in ((250, (20, 22)), (5, (40, 42))):
        writes = writes_in_10_s(4.0, lines, rows=20)
        assert want[0] <= writes <= want[1], (lines, writes)


def test_a_stream_that_fills_a_short_view_is_no_flood() -> None:
    """40 lines/s arrive in batches of 8 (the batcher sends 5 a second): in
    a view 9 rows high each batch replaces most of it, and each is drawn as
    it comes, not held to 2 a second."""
    writes = writes_in_10_s(5.0, 9, rows=9)
    assert 50 <= writes <= 52, writes


def test_lines_that_keep_coming_keep_their_rate_and_a_pause_resets() -> None:
    """A stream is drawn at the same rate however long it lasts (issue 37:
    round 4 slowed it to 2 writes a second and a line waited ~0.4 s); after
    a pause the first line goes at once."""
    clock = Clock()
    p = WritePacer(rate=4.0, burst=2.0, clock=clock)

    def stream(seconds: float, every: float = 0.05) -> list[float]:
        times = []
        for _ in range(round(seconds / every)):  # 20 lines/s, written when allowed
            clock.t += every
            if p.wait() <= 0:
                p.spend()
                times.append(clock.t)
        return times

    first = stream(2.0)
    assert 8 <= len(first) <= 11  # 4 a second (plus the burst) while it starts
    later = stream(10.0)
    assert 39 <= len(later) <= 41  # still 4 a second
    clock.t += 5.0  # a quiet spell
    assert p.wait() == 0  # the next line at once
