"""What a feed of the monitor is: `Changed`, what it calls when it moved a
part of the Snapshot, and `NowAndThen`, the one shape of the feeds that ask
the agent one op now and then in a poll's batch (oomcount.py, portwatch.py,
gpuowners.py).

A now-and-then feed declares its agent op (`op`), how often it is asked
while what it asks about stays the same (`every_s`), the Snapshot field it
owns (`owns`) and the update it emits (`emits`); each poll the monitor
(engine.py) asks it for its request (`call`) and hands it the answer
(`apply`), one loop over the feeds in `NOW_AND_THEN` (engine.py). A new
one is its module and its line there."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from gputui.model import Snapshot
from gputui.monitor.door import Update


class Changed(Protocol):
    """The monitor's `_changed`: these kinds of update go out with this
    event-loop turn's news."""

    def __call__(self, *kinds: type[Update]) -> None: ...


@dataclass(frozen=True)
class Poll:
    """What a now-and-then feed may read of this poll beside the snapshot."""

    pane_pid: int = 0  # the PID of the pane last polled (0: none)
    now: float = 0.0  # wall-clock time of the answer (kept in the snapshot)


class NowAndThen:
    """A feed that asks the agent one op now and then (see the module
    docstring). `clock`: monotonic seconds, for `every_s`."""

    op: ClassVar[str]  # the agent's op, and its key in the poll's batch
    every_s: ClassVar[float]  # asked at most this often while nothing it asks about moved
    owns: ClassVar[str]  # the Snapshot field it fills, and no other
    emits: ClassVar[type[Update]]  # the update that says the field moved

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._read_at = float("-inf")  # when it was last asked (clock)

    def fresh(self) -> bool:
        """It was asked less than `every_s` ago."""
        return self.clock() - self._read_at < self.every_s

    def asking(self, args: dict[str, Any]) -> dict[str, Any]:
        """`args` asked now (call's answer when it asks)."""
        self._read_at = self.clock()
        return args

    def call(self, snap: Snapshot, poll: Poll) -> dict[str, Any] | None:
        """The op's arguments for this poll's batch, or None: not asked."""
        raise NotImplementedError

    def apply(self, answer: Any, snap: Snapshot, poll: Poll) -> type[Update] | None:
        """This poll's answer (None: not asked) into `snap.<owns>`; the
        update to emit when what the snapshot says changed, else None."""
        raise NotImplementedError
