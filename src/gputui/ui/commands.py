"""Command palette (ctrl+p): every action, with why it is unavailable.

Hit texts are plain `Content`, never markup: the entries are written
`[r] relaunch`, `[/] filter the log`, and a reason may quote a session name.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content
from textual.markup import escape

from gputui.text.untrusted import visible
from gputui.verbs import VERBS, keyed


class VerbSource(Protocol):
    """What the palette asks of the app it runs in (ui.app.GputuiApp)."""

    read_only: bool
    keys: dict[str, str]

    def why_not(self, verb: str) -> str | None:
        """Why `verb` cannot run now; None when it can."""


def highlighted(matcher: Matcher, text: str) -> Content:
    """`matcher.highlight` without reading `text` as markup."""
    content = Content(text)
    _score, offsets = matcher.fuzzy_search.match(matcher.query, text)
    for offset in offsets:
        if not text[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


class ActionCommands(Provider):
    def _entries(self) -> list[tuple[str, str, str]]:
        app = cast(VerbSource, self.app)
        out = []
        for v in VERBS:
            why = app.why_not(v.id)
            help_ = v.help_in(app.read_only) if why is None else f"unavailable: {visible(why)}"
            out.append((keyed(v.id, v.label_in(app.read_only), app.keys), help_, v.id))
        out.append(("[/] filter the log", "show only lines matching a regex", "filter"))
        out.append(("[p] pause / resume the log", "freeze the log view", "pause"))
        # Textual reads a hit's help as markup
        return [(text, escape(help_), action_id) for text, help_, action_id in out]

    def _run(self, action_id: str) -> None:
        app = self.app
        if action_id in ("filter", "pause"):
            app.call_later(app.run_action, action_id)
        else:
            app.call_later(app.run_action, f"verb('{action_id}')")

    async def discover(self) -> Hits:
        for text, help_, action_id in self._entries():
            yield DiscoveryHit(Content(text), partial(self._run, action_id), text=text, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_, action_id in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(
                    score,
                    highlighted(matcher, text),
                    partial(self._run, action_id),
                    text=text,
                    help=help_,
                )
