"""The pane contract: what the dashboard needs to know to draw a pane.

A pane is a widget that draws itself from the monitor's `Snapshot`. It
declares its place and its inputs, and the dashboard (`GputuiApp.LAYOUT`,
one line a pane, in screen order) does the rest:

- `ID`: its DOM id; `ui/app.tcss` sizes it by that id (or the pane's own
  `DEFAULT_CSS`).
- `DRAWN_ON`: the kinds of the monitor's news it draws (`GpusRead`,
  `SessionsChanged`, ...: gputui.monitor's `Update`s), plus `Tick` when it
  also follows the clock once a second (ages, metrics). It is drawn only
  when one of them came: the dashboard redraws only what changed (issue 24).
- `draw(frame, changed)`: draw from `frame` (the snapshot, the clock's now,
  who holds the GPUs, ...); `changed` is every kind that came, so a pane
  that draws two things may redraw only the one that changed.

`MetricsChanged` never reaches a pane on its own: the metrics change with
nearly every log batch and are shown with the next `Tick`; the log's news
(`LogChanged`, `LogLines`) is the log panel's. The banner (findings)
and the log panel (its own drain and pacing) are placed by `LAYOUT` too
(`Placed`) but drawn by the app itself.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from gputui.diagnose.holders import holders_of
from gputui.model import Snapshot
from gputui.monitor import UPDATES, LogChanged, MetricsChanged, Update

if TYPE_CHECKING:
    from gputui.diagnose import Holder


@dataclass(frozen=True)
class Tick(Update):
    """The dashboard's own, not the monitor's: a second went by (ages,
    metrics, the log's age)."""


# what a pane may be drawn on: the log's news is the log panel's own, the
# metrics come with the Tick
PANE_UPDATES: frozenset[type[Update]] = (frozenset(UPDATES) - {LogChanged, MetricsChanged}) | {Tick}


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
    """A widget the dashboard draws from the snapshot when one of the kinds
    of news in its `DRAWN_ON` came."""

    DRAWN_ON: ClassVar[frozenset[type[Update]]] = frozenset()

    def __init_subclass__(cls, **kw: object) -> None:
        super().__init_subclass__(**kw)
        if not cls.DRAWN_ON <= PANE_UPDATES:  # one the dashboard never hands a pane
            raise TypeError(
                f"{cls.__name__}.DRAWN_ON names {_names(cls.DRAWN_ON - PANE_UPDATES)}: "
                f"a pane is drawn on {_names(PANE_UPDATES)}"
            )

    def draw(self, frame: Frame, changed: Set[type[Update]]) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Row:
    """Panes side by side: a `Horizontal` with this DOM id."""

    id: str
    panes: tuple[type[Placed], ...]


def _names(kinds: Set[type]) -> list[str]:
    return sorted(k.__name__ for k in kinds)


__all__ = ["PANE_UPDATES", "Frame", "Pane", "Placed", "Row", "Tick"]
