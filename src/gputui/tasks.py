"""Stopping background asyncio tasks: cancel every one first, then wait for
each, so a slow task does not delay the cancellation of the others and no
task is left running when `stop()` returns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[object]]) -> None:
    """Cancel all of `tasks`, then await each; their errors are not raised
    (a task being stopped has nobody left to report to)."""
    pending = list(tasks)
    for t in pending:
        t.cancel()
    for t in pending:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
