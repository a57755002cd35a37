"""Coalesce bursts of change notices into one call per event-loop turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class OncePerTurn:
    """`request()` as often as you like; `fn` runs once, on the next turn of
    the running event loop (at once when no loop runs)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        self._pending = False

    def request(self) -> None:
        if self._pending:
            return
        self._pending = True
        try:
            asyncio.get_running_loop().call_soon(self._run)
        except RuntimeError:
            self._run()

    def now(self) -> None:
        """`fn` at once, in this turn, unless a run is already due on the next
        turn (that one takes whatever changed)."""
        if not self._pending:
            self._fn()

    def _run(self) -> None:
        self._pending = False
        self._fn()
