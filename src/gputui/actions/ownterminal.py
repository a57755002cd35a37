"""The attach verb in this terminal (issue 45): a tmux client of another
user never gets the admin's terminal.

A tmux server can replace its client with any program (`set-hook -g
client-attached 'detach-client -E PROG'`), and that program keeps the
client's terminal: on root's own tty it could type into root's shell
(TIOCSTI), read root's keys after the detach, or write escape sequences a
terminal answers. So the attach argv of a session whose server is another
user's runs on a pseudo-terminal gputui opens for it, in a session of its
own (that pty is its controlling terminal, root's is not), and gputui
relays: root's keys to it, its output through `text.terminal`'s filter
(drawing only) to root's terminal. When the client ends, the pty is closed:
a program of the owner's left holding it gets a hang-up, never root's tty.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
import termios
import time
import tty
from dataclasses import dataclass

from gputui.text.terminal import RESET, TerminalFilter

# The child's first step, as root in the new session: the pty on fd 0
# becomes its controlling terminal, then the attach argv replaces it.
CONTROLLING_TTY = (
    "import fcntl, os, sys, termios\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)
DRAIN_S = 0.3  # after the client ends: its last output, then the pty closes
ESCAPE = b"\x1d"  # Ctrl-]: leave the relay at once, whatever runs on the other side
ESCAPE_WORDS = "Ctrl-] leaves at once"
HANGUP_WAIT_S = 2.0  # the client's time to end on the hang-up before it is killed


@dataclass
class Relayed:
    """What a relayed attach came to: the client's exit status and how many
    sequences of its output were not passed to the terminal."""

    returncode: int
    dropped: int
    escaped: bool = False  # left with ESCAPE: the client was hung up on


def relay(argv: list[str], stdin_fd: int = 0, stdout_fd: int = 1) -> Relayed:
    """Run argv on a new pty and relay it to the terminal on stdin_fd /
    stdout_fd until argv ends (see the module text)."""
    master, slave = os.openpty()
    copy_size(stdin_fd, master)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", CONTROLLING_TTY, *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            close_fds=True,
            cwd="/",
        )
    finally:
        os.close(slave)
    filt = TerminalFilter()
    saved = termios.tcgetattr(stdin_fd) if os.isatty(stdin_fd) else None
    try:
        if saved is not None:
            tty.setraw(stdin_fd)
        escaped = _pump(master, stdin_fd, stdout_fd, filt, proc)
    finally:
        if saved is not None:
            termios.tcsetattr(stdin_fd, termios.TCSAFLUSH, saved)  # and drop unread input
        os.close(master)  # a hang-up for whatever still holds the pty
        _write_all(stdout_fd, RESET)
    try:
        code = proc.wait(HANGUP_WAIT_S)
    except subprocess.TimeoutExpired:  # our own child, deaf to the hang-up
        proc.kill()
        code = proc.wait()
    return Relayed(code, filt.dropped, escaped)


def _pump(
    master: int, stdin_fd: int, stdout_fd: int, filt: TerminalFilter, proc: subprocess.Popen[bytes]
) -> bool:
    """Keys to the pty, its output filtered to the terminal, until the
    client has ended and its last output is passed (or the pty hung up);
    True when ESCAPE was typed first (a client that never ends)."""
    inputs = [master, stdin_fd]
    size = window_size(stdin_fd)
    ended_at: float | None = None
    while True:
        if ended_at is None and proc.poll() is not None:
            ended_at = time.monotonic()
        if ended_at is not None and time.monotonic() - ended_at > DRAIN_S:
            return False
        ready, _, _ = select.select(inputs, [], [], 0.1)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: nothing holds the pty any more
                return False
            _write_all(stdout_fd, filt.feed(data))
        if stdin_fd in ready:
            keys = os.read(stdin_fd, 4096)
            if not keys:
                inputs.remove(stdin_fd)
            elif ended_at is None:
                _write_all(master, keys.split(ESCAPE, 1)[0])
                if ESCAPE in keys:
                    return True
        now = window_size(stdin_fd)
        if now != size:
            size = now
            copy_size(stdin_fd, master)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)


def window_size(fd: int) -> bytes:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return b""


def copy_size(src: int, dst: int) -> None:
    """The terminal's rows and columns onto the relayed pty (a SIGWINCH there)."""
    size = window_size(src)
    if size:
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)
