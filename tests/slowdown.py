"""How much slower than a free CPU this machine runs CPU work right now.

A few end-to-end tests bound wall time (a diagnosis within 10 s of the
stale threshold). Part of that time is deliberate waiting (the doctor's
watch), the rest is CPU work (interpreter start, ssh handshake, parsing)
that a loaded machine stretches: on this 2-core box at load 10 a doctor's
start-up alone took 3 s. Such a bound is kept as it is on a free CPU and
stretched by the slowdown measured while the timed work ran, never by a
guess:

A probe thread wakes every `period` s and spins until it has used `burst`
s of its own CPU time; the wall time that took over `burst` is the slowdown
at that moment (1.0: the CPU was free; 3.0: CPU work took three times as
long). It costs `burst / period` of one core (4 %).
"""

from __future__ import annotations

import threading
import time
from types import TracebackType


class SlowdownProbe:
    def __init__(self, period: float = 0.25, burst: float = 0.01) -> None:
        self.period = period
        self.burst = burst
        self.samples: list[tuple[float, float]] = []  # (monotonic time, slowdown)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slowdown probe", daemon=True)

    def __enter__(self) -> SlowdownProbe:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            wall0, cpu0 = time.monotonic(), time.thread_time()
            while time.thread_time() - cpu0 < self.burst:
                pass
            wall, cpu = time.monotonic() - wall0, time.thread_time() - cpu0
            self.samples.append((wall0, max(1.0, wall / cpu)))

    def between(self, t0: float, t1: float) -> float:
        """The mean slowdown over [t0, t1] (1.0 when nothing was measured)."""
        inside = [s for t, s in self.samples if t0 <= t <= t1]
        return sum(inside) / len(inside) if inside else 1.0


def stretched(bound_s: float, waiting_s: float, slowdown: float) -> float:
    """`bound_s` on a free CPU, of which `waiting_s` is deliberate waiting
    (not stretched by load) and the rest CPU work (stretched)."""
    return waiting_s + (bound_s - waiting_s) * max(1.0, slowdown)
