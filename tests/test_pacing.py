"""The log view's write pacing: at once after a quiet spell, under a stream
as often as a frame budget allows (issue 37: a fixed 2 Hz held lines half a
second)."""

from __future__ import annotations

import itertools

from gputui.ui.pacing import FramePacer


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def stream(p: FramePacer, clock: Clock, seconds: float, every: float, cost: float) -> list[float]:
    """A line every `every` s, written when allowed; each write costs `cost` s."""
    times = []
    for _ in range(round(seconds / every)):
        clock.t += every
        if p.wait() <= 0:
            p.spend()
            p.measured(cost)
            times.append(clock.t)
    return times


def test_a_line_after_a_quiet_spell_goes_at_once() -> None:
    clock = Clock()
    p = FramePacer(clock=clock)
    assert p.wait() == 0
    p.spend()
    assert 0 < p.wait() <= 0.5  # the next within the gap waits for it
    clock.t += 5.0
    assert p.wait() == 0


def test_cheap_frames_let_a_stream_show_seven_times_a_second() -> None:
    """At 100 lines/s with 0.5 ms frames (a 1.5 % share would
    allow 30 a second) the cap is ~7 writes a second: a line waits at most
    0.15 s for its frame."""
    clock = Clock()
    p = FramePacer(clock=clock)
    times = stream(p, clock, 10.0, 0.01, cost=0.0005)
    assert 60 <= len(times) <= 68, len(times)
    later = [t for t in times if t > times[0] + 2.0]  # the average has settled
    assert max(b - a for a, b in itertools.pairwise(later)) <= 0.15 + 1e-9


def test_dear_frames_are_spaced_to_the_budget() -> None:
    """3 ms frames at a 1 % share: a write every 0.3 s, so the log's frames
    take ~1 % of a core whatever the line rate (20 or 200 lines/s)."""
    for every in (0.05, 0.005):
        clock = Clock()
        p = FramePacer(share=0.01, clock=clock)
        times = stream(p, clock, 20.0, every, cost=0.003)
        later = [t for t in times if t > times[0] + 5.0]  # the average has settled
        rate = len(later) / (times[-1] - later[0])
        assert 3.0 <= rate <= 3.6, (every, rate)
        assert rate * 0.003 <= 0.0105


def test_a_flood_that_costs_more_than_the_cap_gets_two_writes_a_second() -> None:
    clock = Clock()
    p = FramePacer(clock=clock)
    times = stream(p, clock, 20.0, 0.001, cost=0.05)  # 50 ms frames: every row restyled
    later = [t for t in times if t > times[0] + 5.0]
    assert 1.9 <= len(later) / (times[-1] - later[0]) <= 2.1


def test_four_lines_a_second_are_each_drawn_at_once_on_a_fast_frame() -> None:
    """Issue 37's latency scene: lines 0.25 s apart and 1 ms frames: no line waits."""
    clock = Clock()
    p = FramePacer(clock=clock)
    for _ in range(40):
        clock.t += 0.25
        assert p.wait() == 0
        p.spend()
        p.measured(0.001)
