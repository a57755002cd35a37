"""helpers.run_on_a_terminal reads the pty it made, never a descriptor of
the test after it: a process left holding the terminal wrote after the
helper returned, and its reader thread (then reading a closed number)
took the bytes of a pipe the next test had opened."""

from __future__ import annotations

import os
import time

from helpers import run_on_a_terminal


def test_a_late_writer_on_the_terminal_takes_nothing_from_the_next_file() -> None:
    late = "(sleep 1; echo late; sleep 1) 2>/dev/null & exit 0"  # holds the pty past the join
    r = run_on_a_terminal(["sh", "-c", late], dict(os.environ), 30, join_s=0.2)
    assert r.returncode == 0
    rd, wr = os.pipe()  # the next test's file: the lowest free numbers
    try:
        os.set_blocking(rd, False)
        os.write(wr, b"x" * 60_000)
        time.sleep(2.5)  # the late line is written and the terminal let go meanwhile
        got = b""
        try:
            while chunk := os.read(rd, 1 << 20):
                got += chunk
        except BlockingIOError:
            pass
        assert len(got) == 60_000, f"{60_000 - len(got)} bytes read by someone else"
    finally:
        os.close(rd)
        os.close(wr)
