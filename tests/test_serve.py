"""`gputui serve` (issue 25): the dashboard as a web page.

The end-to-end test starts the real `gputui serve --demo` and opens its URL in
a real headless Chromium (Debian's `chromium`, installed by install.sh),
driven over the DevTools protocol: the page's websocket carries the
dashboard, whose screen shows the simulated GPUs' rows and the demo's
buffering banner; the screenshot is kept (UPDATE_SCREENSHOTS=1 writes it to
screenshots/web-demo.png). Without the token, every request is refused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser import (
    CHROMIUM,
    chromium_argv,
    free_port,
    page_socket,
    serve_output,
    serving,
    start_chromium,
)
from gputui.cli.serve import app_command, dashboard_argv, parse_bind, token_ok, who_can_reach
from gputui.errors import GputuiError

ROOT = Path(__file__).resolve().parent.parent
TAKES_VALUE = {"--host", "--ct", "-p", "--config", "--bind"}
ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]")


BANNER = "is block-buffered: its lines reach the log late"  # the demo's banner
MEMORY = re.compile(r"\d+\.\d/140G")  # a GPU row's memory column


def shows_the_demo(text: str) -> bool:
    """The GPU panel with its 8 rows and the buffering banner have arrived."""
    return "8× H200 (simulated)" in text and len(MEMORY.findall(text)) >= 8 and BANNER in text


# ------------------------------------------------------------------ pure parts


def test_bind_is_loopback_unless_public() -> None:
    assert parse_bind("127.0.0.1:8000", public=False) == ("127.0.0.1", 8000, True)
    assert parse_bind("[::1]:8001", public=False) == ("::1", 8001, True)
    for addr in ("0.0.0.0:8000", "192.0.2.7:8000", ":::8000"):
        with pytest.raises(GputuiError, match="--public"):
            parse_bind(addr, public=False)
    assert parse_bind("0.0.0.0:8000", public=True) == ("0.0.0.0", 8000, False)
    assert "only this machine" in who_can_reach("127.0.0.1", 8000, True)
    assert "ANYONE" in who_can_reach("0.0.0.0", 8000, False)
    with pytest.raises(GputuiError, match="HOST:PORT"):
        parse_bind("8000", public=False)


def test_dashboard_argv_drops_serve_and_its_flags() -> None:
    argv = ["--ct", "serve", "serve", "--bind", "127.0.0.1:1", "--host", "h", "--public"]
    assert dashboard_argv(argv, TAKES_VALUE, allow_actions=False) == [
        "--ct",
        "serve",
        "--host",
        "h",
        "--read-only",
    ]
    argv = ["serve", "--bind=127.0.0.1:1", "--allow-actions", "gpu1/200"]
    assert dashboard_argv(argv, TAKES_VALUE, allow_actions=True) == ["gpu1/200"]


def test_app_command_quotes_every_word() -> None:
    cmd = app_command(["--log", "/tmp/a b; rm -rf ~", "--read-only"])
    assert "'/tmp/a b; rm -rf ~'" in cmd
    assert token_ok("abc", "abc") and not token_ok("abd", "abc") and not token_ok("", "abc")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--demo", "--bind", "0.0.0.0:8000"], "--public"),
        (["h:", "--bind", "127.0.0.1:8000"], "no port"),  # the one target grammar
        (["--bind", "127.0.0.1:8000"], "no target given"),
    ],
)
def test_bad_serve_is_one_line(argv: list[str], says: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr


# ------------------------------------------------------------------ end to end


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`gputui serve --demo` on a free loopback port; yields its URL."""
    with serving(tmp_path, tmp_path / "state") as (_proc, url):
        yield url


def test_requests_without_the_token_are_refused(served: str) -> None:
    base = served.split("?", 1)[0]
    for path in ("", "?token=wrong", "ws", "static/js/textual.js"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + path, timeout=30)
        assert err.value.code == 403, path
    with urllib.request.urlopen(served, timeout=30) as ok:
        assert ok.status == 200
        assert "gputui_token=" in ok.headers.get("Set-Cookie", "")
        page = ok.read().decode()
    assert "textual-terminal" in page
    assert "googleapis" not in page  # the page asks nobody but this server


class DevTools:
    """The least of the DevTools protocol: commands and the events seen."""

    def __init__(self, ws: object) -> None:
        self.ws = ws
        self.next_id = 0
        self.frames: list[bytes] = []

    async def call(self, method: str, **params: object) -> dict[str, object]:
        self.next_id += 1
        my_id = self.next_id
        await self.ws.send_json({"id": my_id, "method": method, "params": params})  # type: ignore[attr-defined]
        while True:
            msg = await self.ws.receive_json()  # type: ignore[attr-defined]
            self._event(msg)
            if msg.get("id") == my_id:
                return dict(msg.get("result") or {})

    async def pump(self, seconds: float) -> None:
        try:
            msg = await asyncio.wait_for(self.ws.receive_json(), seconds)  # type: ignore[attr-defined]
        except asyncio.TimeoutError:
            return
        self._event(msg)

    def _event(self, msg: dict[str, object]) -> None:
        if msg.get("method") == "Network.webSocketFrameReceived":
            resp = dict(msg["params"])["response"]  # type: ignore[call-overload]
            data = str(resp["payloadData"])
            self.frames.append(base64.b64decode(data) if resp["opcode"] == 2 else data.encode())

    def screen_text(self) -> str:
        return ANSI.sub(b"", b"".join(self.frames)).decode("utf-8", "replace")


async def open_page(port: str, url: str, shot: Path) -> tuple[str, str]:
    async with page_socket(port) as ws:
        dt = DevTools(ws)
        await dt.call("Network.enable")
        await dt.call("Page.enable")
        await dt.call("Page.navigate", url=url)
        deadline = time.monotonic() + 150  # the dashboard starts the demo's run first
        while time.monotonic() < deadline:
            text = dt.screen_text()
            if shows_the_demo(text):
                break
            await dt.pump(1.0)
        await asyncio.sleep(2)  # let the page paint what it was sent
        for _ in range(10):
            await dt.pump(0.1)
        body = await dt.call(
            "Runtime.evaluate", expression="document.body.className", returnByValue=True
        )
        png = await dt.call("Page.captureScreenshot", format="png")
        shot.write_bytes(base64.b64decode(str(png["data"])))
        classes = str(dict(body["result"]).get("value"))  # type: ignore[call-overload]
        return dt.screen_text(), classes


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (install.sh installs it)")
@pytest.mark.timeout(360)  # the page waits up to 150 s for the dashboard on a loaded machine
def test_page_shows_the_demo_dashboard(served: str, tmp_path: Path) -> None:
    browser, port = start_chromium(tmp_path)
    shot = tmp_path / "web-demo.png"
    try:
        text, classes = asyncio.run(open_page(port, served, shot))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=30)
        except subprocess.TimeoutExpired:
            browser.kill()
    # what arrived, so a failure says whether the app sent nothing (did not
    # start in time, or died at once) or sent a screen without the demo
    seen = (
        f"page classes {classes!r}; {len(text)} characters came: {text[-600:]!r}; "
        f"gputui serve printed: {serve_output(tmp_path)[-1500:]}"
    )
    assert "-first-byte" in classes and "-closed" not in classes, seen
    assert "8× H200 (simulated)" in text, f"no GPU panel on the page; {seen}"
    assert len(MEMORY.findall(text)) >= 8, f"fewer than 8 GPU rows on the page; {seen}"
    assert BANNER in text, f"the demo's banner is not on the page; {seen}"
    assert "READ-ONLY" in text, "the page does not say it is read-only"
    assert shot.stat().st_size > 10_000
    if os.environ.get("UPDATE_SCREENSHOTS"):
        shutil.copyfile(shot, ROOT / "screenshots" / "web-demo.png")


# ------------------------------------------------------------------ every tab's dashboard ends


def processes_with(marker: str) -> list[str]:
    """Every process whose environment holds `marker` (serve's own
    XDG_STATE_HOME, inherited by each tab's dashboard and what it starts)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            # any process on the machine: another test's argv may not be UTF-8
            cmd = cmd.decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"XDG_STATE_HOME={marker}".encode() in env.split(b"\0") and state != "Z":
            found.append(f"{pid} {state} {cmd.strip()[:120]}")
    return found


@pytest.fixture
def serve_proc(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """`gputui serve --demo`: (its process, its URL, the marker of what it starts);
    whatever is left at the end is killed by PID (and the test has failed)."""
    marker = str(tmp_path / "state")
    try:
        with serving(tmp_path, Path(marker)) as (proc, url):
            yield proc, url, marker
    finally:
        for line in processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)


def open_tab(tmp_path: Path, url: str) -> subprocess.Popen[bytes]:
    """A headless Chromium taking a screenshot of the page, as the issue's
    user did: it loads the page, resizes it for the shot and exits (~1.5 s);
    killing it sooner closes the tab as a browser that goes does."""
    assert CHROMIUM is not None
    return subprocess.Popen(
        chromium_argv(tmp_path, f"--screenshot={tmp_path / 'shot.png'}", url, size="1280,800"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def children_left(proc: subprocess.Popen[str], marker: str, within: float) -> list[str]:
    """What serve started that is still there after `within` seconds (polled)."""
    deadline = time.monotonic() + within
    while True:
        left = [p for p in processes_with(marker) if int(p.split()[0]) != proc.pid]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def wait_for_a_dashboard(proc: subprocess.Popen[str], marker: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any("gputui --demo" in p for p in processes_with(marker) if str(proc.pid) not in p):
            return
        time.sleep(0.05)
    pytest.fail("no dashboard started for the tab")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (install.sh installs it)")
@pytest.mark.timeout(240)
@pytest.mark.parametrize("close_after", [0.2, 0.5, 1.0, 1.5, 3.0])
def test_a_tab_closed_at_any_moment_of_start_up_leaves_no_dashboard(
    serve_proc: tuple[subprocess.Popen[str], str, str], tmp_path: Path, close_after: float
) -> None:
    """The issue's case: a tab gone ~1.5 s after it opened left `gputui --demo
    --read-only` spinning at 100 % CPU past SIGTERM and past serve itself."""
    proc, url, marker = serve_proc
    browser = open_tab(tmp_path, url)
    try:
        wait_for_a_dashboard(proc, marker, timeout=60)
        time.sleep(close_after)
    finally:
        browser.kill()
        browser.wait()
    left = children_left(proc, marker, within=10)
    assert not left, (
        f"10 s after the tab went, still running: {left}; " + serve_output(tmp_path)[-1500:]
    )
    assert proc.poll() is None, "serve itself ended"
    # it ended by its own quit: no SIGTERM/SIGKILL was needed (a quit during
    # the page's first resize left two screens resizing each other, round 5)
    assert "did not quit" not in serve_output(tmp_path), serve_output(tmp_path)[-1500:]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (install.sh installs it)")
@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_ended_by_a_signal_leaves_no_dashboard(
    serve_proc: tuple[subprocess.Popen[str], str, str], tmp_path: Path, sig: signal.Signals
) -> None:
    proc, url, marker = serve_proc
    browser = open_tab(tmp_path, url)
    try:
        wait_for_a_dashboard(proc, marker, timeout=60)
        time.sleep(4)  # the dashboard up, the demo's run started
        proc.send_signal(sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"serve did not end within 20 s of {sig.name}")
        left = children_left(proc, marker, within=10)
    finally:
        browser.kill()
        browser.wait()
    assert not left, f"after serve ended by {sig.name}, still running: {left}"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (install.sh installs it)")
@pytest.mark.timeout(240)
def test_a_dashboard_that_cannot_start_says_why_on_the_page(tmp_path: Path) -> None:
    closed = free_port()  # nothing listens there: the dashboard cannot connect
    browser = None
    target = (f"root@127.0.0.1:{closed}",)
    try:
        with serving(tmp_path, tmp_path / "state", target, home=tmp_path) as (_proc, url):
            browser, cport = start_chromium(tmp_path)
            text = asyncio.run(page_until(cport, url, "ended before it started", 120))
    finally:
        if browser is not None:
            browser.kill()
            browser.wait()
    assert "the dashboard ended before it started (exit status 2)" in text, text[-1500:]
    assert f"connection refused by 127.0.0.1 port {closed}" in text, text[-1500:]


async def page_until(port: str, url: str, wanted: str, timeout: float) -> str:
    """The page's terminal text once it holds `wanted` (or at `timeout`)."""
    async with page_socket(port) as ws:
        dt = DevTools(ws)
        await dt.call("Network.enable")
        await dt.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and wanted not in dt.screen_text():
            await dt.pump(1.0)
        return dt.screen_text()
