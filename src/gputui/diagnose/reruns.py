"""How much reruns of the same code move, one run to the next (issue 49).
Pure: runs' points in, a `RerunSpread` out; no I/O.

One run says nothing about the spread between runs: on a lent H100 two
reruns of one command (batch 4, nothing changed) read 154.7k and 149.4k
tok/s, +3.5 %, and in round 10 another pair −5.8 %; a run's tok/s moves in
stretches of ±15–20 % within it, and each run's mean lands a few % from the
last. Where the history holds earlier runs of the last run's program with
nothing changed (`program_changes` empty; record/history.rerun_group finds
them, passing over other configs tried in between), each is compared with
the one before it exactly as a new run is compared with its last
(`compare.compare`: the same matched window, the same rates, the same
trailing loss), and the root mean square of those changes is the spread a
rerun moves by. `compare` then calls a change within `rerun_times` × that
spread "same" (at most RERUN_BAND_MAX: a real −20 % is never within it),
and sets the loss band from the reruns' loss spread instead of the fixed
±1 % floor. Fewer than MIN_RERUNS measured changes: no spread, today's
test alone.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

from gputui.diagnose.compare import MIN_RERUNS, RunPoint, compare
from gputui.model import RerunSpread


def rms(xs: Sequence[float]) -> float:
    """The root mean square: the spread of changes whose mean is 0 (reruns
    of the same code: no change expected, either way)."""
    return math.sqrt(sum(x * x for x in xs) / len(xs))


def spread_of(runs: Iterable[tuple[int, Sequence[RunPoint]]]) -> RerunSpread | None:
    """The spread of `runs` (id, points; oldest first, all of one program
    with nothing changed, the last run last): each against the one
    before at their matched steps. A rate change counts once the pair has
    enough readings to alert on (MIN_POINTS_ALERT of each); a loss change
    once both have a loss over the same trailing steps. None with fewer than
    two runs. Two runs' points are held at a time (`runs` may read each
    when asked)."""
    ids: list[int] = []
    rate: list[float] = []
    loss: list[float] = []

    def counted() -> Iterator[Sequence[RunPoint]]:
        for run_id, points in runs:
            ids.append(run_id)
            yield points

    for before, after in itertools.pairwise(counted()):
        vs = compare(before, after)
        if vs.enough and vs.rate is not None and vs.rate.percent is not None:
            rate.append(vs.rate.percent / 100.0)
        if vs.loss_band is not None and vs.loss is not None and vs.loss.percent is not None:
            loss.append(vs.loss.percent / 100.0)
    if len(ids) < 2:
        return None
    return RerunSpread(
        tuple(ids),
        rms(rate) if len(rate) >= MIN_RERUNS else None,
        rms(loss) if len(loss) >= MIN_RERUNS else None,
        len(rate),
        len(loss),
    )
