"""A screen whose partial updates paint only the widgets they touch.

Textual 8.2's compositor picks the widgets to render for an update by their
clip region, and every child of the screen has the whole screen as its clip:
so each log write (a few rows at the bottom) rendered the header, the
banner, the GPU rows and the footer again, line by line through their style
filters — about half of the dashboard's CPU at 4 log lines a second. Only
cells inside the update's spans are sent to the terminal, so a widget whose
visible part (region ∩ clip) lies outside the update's bounding box adds
nothing to the output. Nor does one that overlaps none of the update's
regions: the once-a-second frame changes the GPU rows and the run panel, and
their bounding box spans the sessions table beside the run panel, which
Textual re-rendered every second although none of its cells are sent.
`LeanCompositor` leaves such widgets out, has the others render only the
rows of the update regions they overlap (their clip narrowed to those rows:
columns stay whole, so the cuts between widgets are unchanged), and hands
them to Textual's own code. A full render (no crop) is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


class LeanCompositor(Compositor):
    _update_regions: tuple[Region, ...] = ()

    def render_partial_update(self) -> Any:
        self._update_regions = tuple(self._dirty_regions)
        try:
            return super().render_partial_update()
        finally:
            self._update_regions = ()

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        everyone = self.visible_widgets
        if not crop or getattr(self, "_visible_widgets", None) is not everyone:
            return super()._get_renders(crop)
        updates = [u.intersection(crop) for u in self._update_regions] or [crop]
        touched = {}
        for widget, (region, clip) in everyone.items():
            visible = region.intersection(clip)
            hit = [u for u in updates if u.overlaps(visible)]
            if not hit:
                continue
            top = min(u.y for u in hit)
            bottom = max(u.bottom for u in hit)
            if clip.y < top or clip.bottom > bottom:  # render those rows only
                y = max(clip.y, top)
                clip = Region(clip.x, y, clip.width, max(0, min(clip.bottom, bottom) - y))
            touched[widget] = (region, clip)
        self._visible_widgets = touched
        try:
            return list(super()._get_renders(crop))
        finally:
            self._visible_widgets = everyone


class LeanScreen(Screen[Any]):
    """A `Screen` painted through `LeanCompositor`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = LeanCompositor()
