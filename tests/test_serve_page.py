"""`gputui serve` in a real headless Chromium (issue 36): the page opens its
websocket, and the demo's banner is on the page itself — read from the
terminal the page draws (xterm.js's buffer, what its canvas shows), not only
from the bytes on the wire (tests/test_serve.py reads those).

The page's terminal object is not reachable from `window`; a script run
before the page's own (Page.addScriptToEvaluateOnNewDocument) keeps every
object assigned to a `.terminal` property, which is how textual-serve's page
holds its xterm.js Terminal. Chromium talks to 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser import CHROMIUM, page_socket, serving, start_chromium

ROOT = Path(__file__).resolve().parent.parent
BANNER = "is block-buffered: its lines reach the log late"  # the demo's banner
KEEP_TERMINALS = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    (window.__gputuiTerminals = window.__gputuiTerminals || []).push(value);
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true});
  },
});
"""
# the text xterm.js holds for its rows: what the page shows
SCREEN_TEXT = """
(() => {
  const t = (window.__gputuiTerminals || [])[0];
  if (!t || !t.buffer) return "";
  const b = t.buffer.active, rows = [];
  for (let i = 0; i < b.length; i++) { const l = b.getLine(i); rows.push(l ? l.translateToString(true) : ""); }
  return rows.join("\\n");
})()
"""

pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (install.sh installs it)"
    ),
    pytest.mark.timeout(360),  # the page waits up to 150 s for the dashboard on a loaded machine
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`gputui serve --demo` on a free loopback port; yields its URL."""
    with serving(tmp_path, tmp_path / "state") as (_proc, url):
        yield url


class Page:
    """The DevTools protocol, as little as this test needs."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[str] = []  # websocket events seen: created, frame

    async def call(self, method: str, **params: object) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        await self.ws.send_json({"id": my_id, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json()
            self._event(msg)
            if msg.get("id") == my_id:
                return dict(msg.get("result") or {})

    def _event(self, msg: dict[str, Any]) -> None:
        method = str(msg.get("method", ""))
        if method == "Network.webSocketCreated":
            self.events.append(f"created {msg['params']['url'].split('?')[0]}")
        elif method == "Network.webSocketFrameReceived" and "frame" not in self.events:
            self.events.append("frame")

    async def value(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return dict(r.get("result") or {}).get("value")


async def read_the_page(port: str, url: str) -> tuple[list[str], str, str]:
    """(websocket events, body classes, the terminal's text) once the banner
    is on the page or 150 s have passed."""
    async with page_socket(port) as ws:
        page = Page(ws)
        await page.call("Network.enable")
        await page.call("Page.enable")
        await page.call("Page.addScriptToEvaluateOnNewDocument", source=KEEP_TERMINALS)
        await page.call("Page.navigate", url=url)
        text, classes = "", ""
        deadline = time.monotonic() + 150  # the dashboard starts the demo's run first
        while time.monotonic() < deadline:
            classes = str(await page.value("document.body.className"))
            text = str(await page.value(SCREEN_TEXT) or "")
            if "-loaded" in classes and BANNER in text:
                break
            await asyncio.sleep(0.5)
        return page.events, classes, text


def test_the_page_opens_its_websocket_and_shows_the_banner(served: str, tmp_path: Path) -> None:
    browser, port = start_chromium(tmp_path)
    try:
        events, classes, text = asyncio.run(read_the_page(port, served))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=30)
        except subprocess.TimeoutExpired:
            browser.kill()
    seen = f"websocket {events}; page classes {classes!r}; on the page: {text[-800:]!r}"
    base = served.split("?", 1)[0]
    assert f"created {base.replace('http', 'ws')}ws" in events, seen  # the page's websocket
    assert "frame" in events, seen  # and the dashboard's screen came over it
    assert "-loaded" in classes and "-closed" not in classes, seen  # opened, still open
    assert BANNER in text, f"the demo's banner is not on the page; {seen}"
    assert "8× H200 (simulated)" in text, f"no GPU panel on the page; {seen}"
