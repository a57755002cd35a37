"""The dashboard's terminal driver reads keys without waking ten times a
second (ui/quietinput.py): its input thread on a real pty, keys typed
into the pty's other end, Textual's own parser and messages."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import threading
import time
import tty
from collections.abc import AsyncIterator
from typing import Any

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver
from textual.drivers.web_driver import WebDriver

import helpers
from gputui.ui import quietinput
from gputui.ui.quietinput import QuietLinuxDriver, quiet_driver


class Keys:
    """What the driver posts to its app."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    async def _post_message(self, message: Any) -> bool:
        if isinstance(message, events.Key):
            self.keys.append(message.key)
        return True


@pytest.fixture
async def driver() -> AsyncIterator[tuple[QuietLinuxDriver, int, Keys]]:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = pty.openpty()
    tty.setraw(slave)  # as the driver puts the terminal: each byte readable at once
    app = Keys()
    d = QuietLinuxDriver(app)  # type: ignore[arg-type]
    d.fileno = slave  # the pty in place of this process's stdin
    thread = threading.Thread(target=d.run_input_thread, daemon=True)
    thread.start()
    try:
        yield d, master, app
    finally:
        d.exit_event.set()
        thread.join(5)
        alive = thread.is_alive()
        d.close()
        os.close(master)
        os.close(slave)
        for s, h in handlers.items():
            signal.signal(s, h)
        assert not alive, "the input thread did not end when its exit flag was set"


async def test_idle_it_sleeps_and_a_key_still_comes_at_once(driver: Any) -> None:
    d, master, app = driver
    await asyncio.sleep(0.3)  # started and waiting
    woke = d.input_wakes
    await asyncio.sleep(1.5)
    assert d.input_wakes - woke == 0  # Textual's driver: ~15 wakes here
    t0 = time.monotonic()
    os.write(master, b"q")
    await helpers.until(lambda: app.keys == ["q"], 5, "the key")
    assert time.monotonic() - t0 < 1.0
    assert d.input_wakes - woke <= 2


async def test_a_lone_escape_still_times_out_into_a_key(driver: Any) -> None:
    """Esc alone may begin a sequence: the parser waits ESCDELAY for more,
    so the thread waits with a timeout while one is pending."""
    _d, master, app = driver
    await asyncio.sleep(0.2)
    os.write(master, b"\x1b")
    await helpers.until(lambda: app.keys == ["escape"], 3, "escape on its own")
    os.write(master, b"\x1b[A")  # a whole sequence is one key
    await helpers.until(lambda: app.keys == ["escape", "up"], 3, "the up arrow")


async def test_setting_the_exit_flag_ends_the_thread_at_once() -> None:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = pty.openpty()
    d = QuietLinuxDriver(Keys())  # type: ignore[arg-type]
    d.fileno = slave
    thread = threading.Thread(target=d.run_input_thread, daemon=True)
    try:
        thread.start()
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        d.exit_event.set()  # what disable_input does (quit, suspend)
        await asyncio.get_running_loop().run_in_executor(None, thread.join, 5)
        assert not thread.is_alive() and time.monotonic() - t0 < 1.0
    finally:
        d.close()
        os.close(master)
        os.close(slave)
        for s, h in handlers.items():
            signal.signal(s, h)


async def test_after_a_suspend_the_next_thread_reads_keys_again() -> None:
    """`a` (attach) suspends the app: Textual stops the input (sets the exit
    flag, joins the thread, clears the flag), closes the driver, and on
    resume starts a new thread. The first version closed its wake-up pipe
    in close(): the new thread died of EBADF and its traceback took the
    screen."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = pty.openpty()
    tty.setraw(slave)
    app = Keys()
    d = QuietLinuxDriver(app)  # type: ignore[arg-type]
    d.fileno = slave
    loop = asyncio.get_running_loop()
    try:
        for key in ("a", "b"):  # before the suspend, and after the resume
            thread = threading.Thread(target=d.run_input_thread, daemon=True)
            thread.start()
            await asyncio.sleep(0.2)
            os.write(master, key.encode())
            await helpers.until(lambda k=key: app.keys[-1:] == [k], 5, f"key {key}")  # type: ignore[misc]
            d.exit_event.set()  # disable_input: set, join, clear
            await loop.run_in_executor(None, thread.join, 5)
            assert not thread.is_alive()
            d.exit_event.clear()
            d.close()  # suspend_application_mode closes the driver
    finally:
        os.close(master)
        os.close(slave)
        for s, h in handlers.items():
            signal.signal(s, h)
    assert app.keys == ["a", "b"]


def test_only_textuals_terminal_driver_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    assert quiet_driver(LinuxDriver) is QuietLinuxDriver
    assert quiet_driver(WebDriver) is WebDriver  # `gputui serve` keeps the web driver
    monkeypatch.setattr(quietinput, "XTermParser", None)  # a Textual that moved its parser
    assert quiet_driver(LinuxDriver) is LinuxDriver
