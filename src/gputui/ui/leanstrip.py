"""A `Strip` that makes its caches when first asked for them.

Textual's `Strip.__init__` makes seven caches (crop, divide, style, filter,
…) for every strip; a row the log view draws is made once, written to the
terminal and at most cropped or rendered — the caches were most of what a
new row cost beside its segments (~8 a frame, five frames a second while a
log streams). `LeanStrip` is a `Strip` in everything else: each cache slot
of Textual's (found from a probe `Strip`, so a Textual that adds or renames
one is followed) is made, at the size Textual gives it, when a method first
reads it. Where a slot's default is not a cache or a constant the probe
cannot copy, `lean_strip` makes a plain `Strip`.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from textual.cache import FIFOCache
from textual.strip import Strip


def _slots() -> tuple[dict[str, int], dict[str, Any]] | None:
    """Textual's Strip slots: {cache slot: its size}, {other slot: its
    default}; None when a default is neither a FIFOCache nor immutable."""
    probe = Strip([], 0)
    caches: dict[str, int] = {}
    others: dict[str, Any] = {}
    for name in Strip.__slots__:
        if name in ("_segments", "_cell_length"):
            continue
        value = getattr(probe, name)
        if type(value) is FIFOCache:
            caches[name] = value._maxsize
        elif value is None or isinstance(value, (int, str, bool)):
            others[name] = value
        else:
            return None
    return caches, others


_SLOTS = _slots()
_CACHES, _DEFAULTS = _SLOTS if _SLOTS is not None else ({}, {})


class LeanStrip(Strip):
    """See the module docstring."""

    __slots__ = ()

    def __init__(self, segments: list[Segment], cell_length: int) -> None:
        # (the list is the caller's own, made for this strip: not copied)
        self._segments = segments
        self._cell_length = cell_length
        for name, value in _DEFAULTS.items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:
        size = _CACHES.get(name)
        if size is None:
            raise AttributeError(name)
        cache: FIFOCache[Any, Any] = FIFOCache(size)
        setattr(self, name, cache)
        return cache


def lean_strip(segments: list[Segment], cell_length: int) -> Strip:
    """A strip of `segments` (a list of the caller's own), `cell_length` cells."""
    if _SLOTS is None:
        return Strip(segments, cell_length)
    return LeanStrip(segments, cell_length)


__all__ = ["LeanStrip", "lean_strip"]
