"""An alert quotes session names and log lines: sent to a chat service
(Discord, Slack through apprise) it must ping nobody and hide no link
(issue 34, LOW). A real apprise, a real JSON webhook on 127.0.0.1."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from gputui.record.alerts import Alert, AppriseSender
from test_alerts import Hook

LINE = "@everyone @here @Channel <@123> <@&456> <!here> [click](https://example.invalid/x)"
SLACK = "<https://example.invalid/y|docs>"


@pytest.fixture
def hook() -> Iterator[Hook]:
    h = Hook()
    yield h
    h.close()


def pings_or_masks(text: str) -> list[str]:
    return re.findall(
        r"@(?:everyone|here|channel)\b|<[@!#]|\]\(|<https?:", text, flags=re.IGNORECASE
    )


def test_an_alert_pings_nobody_and_hides_no_link(hook: Hook) -> None:
    alert = Alert(
        target=f"gpuhost · session {LINE}",
        kind="dead",
        state="firing",
        severity="error",
        title=f"run in {LINE!s} exited",
        time=0.0,
        evidence=(f"last line: {LINE} {SLACK}",),
    )
    assert AppriseSender([f"json://127.0.0.1:{hook.port}/hook"]).send_blocking(alert)
    (got,) = hook.got
    assert pings_or_masks(got["title"]) == [] and pings_or_masks(got["message"]) == []
    shown = got["message"].replace("\u200b", "")
    assert "[click](https://example.invalid/x)" in shown and "@everyone" in shown  # read the same


SLIPS = "@everyone_ @here2 @room @Channel. x@here [x] (https://example.invalid/a) [y]\n\t(https://example.invalid/b)"


def test_every_at_and_every_masked_link_is_broken_whatever_follows(hook: Hook) -> None:
    """Issue 45 (LOW): a word list let `@everyone_`, `@here2`, `@room`
    (Matrix) and `[x] (url)` through; now every `@` is followed by a zero
    width space and no `]` is followed by `(`, whatever the spacing."""
    alert = Alert(
        target=f"gpuhost · session {SLIPS}",
        kind="dead",
        state="firing",
        severity="error",
        title=f"run {SLIPS} exited",
        time=0.0,
        evidence=(f"last line: {SLIPS}",),
    )
    assert AppriseSender([f"json://127.0.0.1:{hook.port}/hook"]).send_blocking(alert)
    (got,) = hook.got
    for text in (got["title"], got["message"]):
        assert re.findall("@(?!\u200b)", text) == [], text
        assert re.findall(r"\]\s*\(", text) == [], text
    assert "@room" in got["message"].replace("\u200b", "")  # it reads the same
