"""The pane contract: what the dashboard needs to know to draw a pane.

A pane is a widget that draws itself from the monitor's `Snapshot`. It
declares its place and its inputs, and the dashboard (`GputuiApp.LAYOUT`,
one line a pane, in screen order) does the rest:

- `ID`: its DOM id; `ui/app.tcss` sizes it by that id (or the pane's own
  `DEFAULT_CSS`).
- `PARTS`: the parts of the snapshot it draws (words of `gputui.model.PARTS`),
  plus `TICK` when it also follows the clock once a second (ages, metrics).
  It is drawn only when one of them changed: the dashboard redraws only what
  changed (issue 24).
- `draw(frame, changed)`: draw from `frame` (the snapshot, the clock's now,
  who holds the GPUs, ...); `changed` is every part that changed, so a pane
  that draws two things may redraw only the one that changed.

"metrics" never reaches a pane on its own: the metrics change with nearly
every log batch and are shown with the next `TICK`. The banner (findings)
and the log panel (its own drain and pacing) are placed by `LAYOUT` too
(`Placed`) but drawn by the app itself.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from gputui.diagnose.holders import holders_of
from gputui.model import PARTS, Snapshot

if TYPE_CHECKING:
    from gputui.diagnose import Holder

TICK = "tick"  # a pseudo-part: a second went by (ages, metrics, the log's age)
# what a pane may name in PARTS: "log" is the log panel's own, "metrics" comes with TICK
DRAWN_ON = (PARTS - {"log", "metrics"}) | {TICK}


@dataclass(frozen=True)
class Frame:
    """What every pane may draw from, taken once per redraw."""

    snap: Snapshot
    now: float
    read_only: bool = False  # --read-only: the header says so
    tiny: bool = False  # fewer than TINY_HEIGHT rows (the app's -tiny class)

    @cached_property
    def holders(self) -> list[Holder]:
        """Who holds each GPU process: worked out once a frame, for every pane."""
        return holders_of(self.snap, self.now)


class Placed:
    """A widget the dashboard places by its DOM id."""

    ID: ClassVar[str]


class Pane(Placed):
    """A widget the dashboard draws from the snapshot when its `PARTS` change."""

    PARTS: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if not cls.PARTS <= DRAWN_ON:  # a misspelt part would never draw the pane
            raise TypeError(
                f"{cls.__name__}.PARTS names {sorted(cls.PARTS - DRAWN_ON)}: "
                f"a pane is drawn on {sorted(DRAWN_ON)}"
            )

    def draw(self, frame: Frame, changed: Set[str]) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Row:
    """Panes side by side: a `Horizontal` with this DOM id."""

    id: str
    panes: tuple[type[Placed], ...]


__all__ = ["DRAWN_ON", "TICK", "Frame", "Pane", "Placed", "Row"]
