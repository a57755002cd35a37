"""A dashboard whose terminal went away (SIGHUP) spends no CPU while it
quits. `terminal_gone` puts /dev/null on stdio; Textual's input thread read
it in a loop that, on a read that returns nothing, selects and reads again
at once: 100 % of a core and the GIL until the process ended (a loaded
CI-like run: a dashboard spinning 10 min after SIGHUP, its quit starved).
Real Textual driver on a real pty: a small app calls `terminal_gone` and
then stays up (a quit that takes its time: the monitor's stop has 10 s);
its CPU over the next seconds is measured."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

APP = """
import sys, time
from textual.app import App
from gputui.ui.app import terminal_gone

class Stays(App):
    def on_mount(self):
        self.set_timer(0.3, self.gone)

    def gone(self):
        terminal_gone(self)
        self.set_timer(4.0, self.exit)

Stays().run()
"""

SRC = Path(__file__).resolve().parent.parent / "src"


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_after_the_terminal_is_gone_the_dashboard_does_not_spin(tmp_path: Path) -> None:
    script = tmp_path / "stays.py"
    script.write_text(APP)
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(SRC)}
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, str(script)], env)
    try:
        deadline = time.monotonic() + 60
        seen = bytearray()
        while time.monotonic() < deadline and b"\x1b[?1049h" not in seen:  # the app is up
            if select.select([fd], [], [], 0.1)[0]:
                seen.extend(os.read(fd, 65536))
        assert b"\x1b[?1049h" in seen, bytes(seen[-300:])
        time.sleep(1.0)  # terminal_gone has run (0.3 s after mount)
        before, t0 = cpu_s(pid), time.monotonic()
        time.sleep(2.0)
        spent, wall = cpu_s(pid) - before, time.monotonic() - t0
    finally:
        _, status = os.waitpid(pid, 0)  # it ends by itself, 4 s after
        os.close(fd)
    # an idle app: a few hundredths of a core; the spin was ~1 CPU s per s
    assert spent < 0.3 * wall, f"{spent:.2f} CPU s in {wall:.1f} s after the terminal went away"
    assert os.waitstatus_to_exitcode(status) == 0
