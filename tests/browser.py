"""Headless Chromium for the web view's tests (tests/test_serve*.py): where
it is, the flags every start shares (loopback only: every other name fails to
resolve; no background traffic), and a start with its DevTools endpoint."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (install.sh installs it)"
)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chromium_argv(tmp_path: Path, *extra: str, size: str = "1600,1000") -> list[str]:
    assert CHROMIUM is not None
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # tests run as root
        "--disable-gpu",
        "--no-first-run",
        # tests talk to 127.0.0.1 only: every other name fails to resolve
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={tmp_path / 'chromium'}",
        f"--window-size={size}",
        *extra,
    ]


def start_chromium(tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    """Chromium on about:blank and the port of its DevTools endpoint."""
    proc = subprocess.Popen(
        chromium_argv(
            tmp_path,
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
        if m:
            return proc, m.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail("chromium did not start its DevTools endpoint")
