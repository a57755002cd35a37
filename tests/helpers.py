"""Polling helpers shared by the tests: wait until a condition holds, fail
naming what was awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any


async def until(
    fn: Callable[[], Any], timeout: float = 10.0, what: str = "condition", poll: float = 0.02
) -> Any:
    """Await until `fn()` returns something true (polled every `poll` s); that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(poll)


def wait_for(
    fn: Callable[[], Any], timeout: float = 5.0, what: str = "condition", poll: float = 0.05
) -> Any:
    """Blocking `until`, for synchronous tests and setup."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)
