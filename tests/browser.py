"""The web view's tests (tests/test_serve*.py): `gputui serve --demo` started
and stopped (`serving`), and headless Chromium — where it is, the flags every
start shares (loopback only: every other name fails to resolve; no
background traffic), and a start with its DevTools endpoint."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

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


SRC = Path(__file__).resolve().parent.parent / "src"


def serve_output(tmp_path: Path) -> str:
    """What `gputui serve` (and the apps it runs) printed so far."""
    return (tmp_path / "serve.out").read_text(errors="replace")


@contextlib.contextmanager
def serving(
    tmp_path: Path, state: Path, target: tuple[str, ...] = ("--demo",), home: Path | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`gputui serve TARGET` (the demo unless told) on a free loopback port,
    its state under `state`: (its process, its URL). Its output goes to tmp_path/serve.out (a pipe
    read by nobody after the URL could fill and stall the server; a failing
    test shows its tail); SIGINT at the end, SIGKILL 30 s later."""
    env = {**os.environ, "XDG_STATE_HOME": str(state), "PYTHONPATH": str(SRC)}
    if home is not None:
        env["HOME"] = str(home)
    with (tmp_path / "serve.out").open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gputui",
                "serve",
                *target,
                "--bind",
                f"127.0.0.1:{free_port()}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    try:
        url = ""
        deadline = time.monotonic() + 60
        while not url and time.monotonic() < deadline and proc.poll() is None:
            m = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", serve_output(tmp_path))
            url = m.group(1) if m else ""
            time.sleep(0.1)
        assert url, f"gputui serve printed no URL: {serve_output(tmp_path)[-2000:]}"
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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


@contextlib.asynccontextmanager
async def page_socket(port: str) -> AsyncIterator[Any]:
    """The DevTools websocket of Chromium's page (DevTools on `port`)."""
    import aiohttp

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
        page = next(t for t in json.load(r) if t["type"] == "page")
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws,
    ):
        yield ws
