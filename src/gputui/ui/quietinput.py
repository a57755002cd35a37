"""Textual's terminal driver, its input thread asleep until a key comes.

Textual's `LinuxDriver` reads the keyboard in a thread that wakes ten
times a second (`select(0.1)`) whether or not anything was typed: to see
its exit flag, and to time out a lone Esc. Each wake takes the GIL from
the main thread: ~0.1 % of a core on an idle dashboard, the whole cost of
that thread (issue 37: gputui's CPU beside nvitop's while a log streams).

`QuietLinuxDriver` waits with no timeout while no escape sequence is half
read, and wakes on input or on a byte in a pipe of its own, written when
the exit flag is set (`disable_input`: quit, suspend, an external
command). A half-read sequence (an Esc alone so far) is timed out as
Textual does (ESCDELAY, 100 ms). Anything it does not find as expected in
the installed Textual (the parser's pending timeout) falls back to
Textual's ten wakes a second.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import Any

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

try:  # Textual's own parser (a private module: a newer Textual may move it)
    from textual._xterm_parser import XTermParser
except ImportError:  # then Textual's driver is kept (quiet_driver)
    XTermParser = None  # type: ignore[assignment,misc]

POLL_S = 0.1  # Textual's own wait, kept while a sequence is half read


class WakingEvent(threading.Event):
    """The driver's exit flag: setting it also wakes the input thread."""

    def __init__(self, wake: Callable[[], None]) -> None:
        super().__init__()
        self._wake = wake

    def set(self) -> None:
        super().set()
        self._wake()


class QuietLinuxDriver(LinuxDriver):
    """See the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the running input thread's wake-up pipe (write end), None between
        # threads: suspend (`a` attach) closes the driver and resume starts a
        # new thread, so each thread has its own pipe; the lock keeps a poke
        # from writing to a descriptor closed (and maybe reused) meanwhile
        self._wake_lock = threading.Lock()
        self._wake_w: int | None = None
        self.exit_event = WakingEvent(self._poke)
        self.input_wakes = 0  # times the input thread woke (tests)

    def _poke(self) -> None:
        with self._wake_lock:
            if self._wake_w is not None:
                with contextlib.suppress(OSError):  # full: it is only a wake-up
                    os.write(self._wake_w, b"x")

    @staticmethod
    def _drain(fd: int) -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 4096):
                pass

    def run_input_thread(self) -> None:
        """Textual's `run_input_thread`, waiting on its pipe too and with no
        timeout while the parser has none pending."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        with self._wake_lock:
            self._wake_w = wake_w
        try:
            self._read_keys(wake_r)
        finally:
            with self._wake_lock:
                self._wake_w = None
            os.close(wake_r)
            os.close(wake_w)

    def _read_keys(self, wake_r: int) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        fileno = self.fileno
        parser = XTermParser(self._debug)
        feed = parser.feed
        tick = parser.tick
        decode = getincrementaldecoder("utf-8")().decode

        def timeout() -> float | None:
            pending = getattr(parser, "_timeout_time", POLL_S)
            return None if pending is None else POLL_S

        def process(events: list[tuple[selectors.SelectorKey, int]]) -> None:
            self.input_wakes += 1
            for key, mask in events:
                if key.fd == wake_r:
                    self._drain(wake_r)
                elif mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4))
                    if not data:
                        break  # stdin piped and at its end
                    for event in feed(data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(timeout()))
            selector.unregister(fileno)
            for event in tick():
                self.process_message(event)
        finally:
            selector.close()
            try:
                for _event in feed(""):
                    pass
            except Exception:  # EOFError, ParseError: the parser's end, as Textual's
                pass


def quiet_driver(driver_class: type[Driver]) -> type[Driver]:
    """`driver_class`, or the quiet one in place of Textual's LinuxDriver
    (the inline, headless and web drivers are kept, and Textual's own where
    its parser is not where this module looks for it)."""
    if driver_class is LinuxDriver and XTermParser is not None:
        return QuietLinuxDriver
    return driver_class
