"""Help (`?`) draws a finding's fix with the spaces around its inline code."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.widgets import Static
from textual.widgets._markdown import MarkdownBlock

from gputui.model import Finding, Severity
from gputui.ui.screens.help import HelpScreen, help_markdown

FIX = "add `-u` to the python command or `export PYTHONUNBUFFERED=1` in the start script"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("")


def screen_text(markdown: str) -> str:
    async def go() -> str:
        app = Host()
        async with app.run_test(size=(120, 40)) as pilot:
            app.push_screen(HelpScreen(markdown))
            await pilot.pause()
            blocks = app.screen.query(MarkdownBlock)
            return "\n".join(b.render().plain for b in blocks)  # type: ignore[union-attr]

    return asyncio.run(go())


def test_fix_with_inline_code_keeps_its_spaces() -> None:
    f = Finding("buffered", Severity.WARNING, "GPUs busy but the log is silent", fix=FIX)
    text = screen_text(help_markdown({}, [f]))
    assert "add -u to the python command or export PYTHONUNBUFFERED=1 in the start" in text


def test_plain_fix_is_still_code() -> None:
    f = Finding("x", Severity.WARNING, "title", fix="kill -9 1234")
    assert "fix: `kill -9 1234`" in help_markdown({}, [f])


def test_evidence_is_shown_as_written_never_as_a_link_or_markup() -> None:
    """Evidence quotes remote text (a log line, a session name): Markdown in
    it is shown, not obeyed (issue 34: `[text](https://…)` became a link)."""
    from markdown_it import MarkdownIt

    line = "[text](https://example.invalid/x) **bold** see https://example.invalid"
    f = Finding("x", Severity.WARNING, "title [t](https://example.invalid)", evidence=[line])
    md = help_markdown({}, [f])
    tokens = [t for t in MarkdownIt("gfm-like").parse(md) if t.type == "inline"]
    assert not [c for t in tokens for c in t.children or [] if c.type.startswith("link")]
    assert line in screen_text(md)
