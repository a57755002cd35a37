"""What a feed of the monitor is told to call when it moved a part of the
Snapshot: `changed(*kinds)`, the monitor's, with the kinds of update it
emits (door.py: `ProcsChanged`, `CtChanged`, ...)."""

from __future__ import annotations

from typing import Protocol

from gputui.monitor.door import Update


class Changed(Protocol):
    """The monitor's `_changed`: these kinds of update go out with this
    event-loop turn's news."""

    def __call__(self, *kinds: type[Update]) -> None: ...
