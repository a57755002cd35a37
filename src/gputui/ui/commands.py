"""Command palette (ctrl+p): every action, with why it is unavailable.

Hit texts are plain `Content`, never markup: the entries are written
`[r] relaunch`, `[/] filter the log`, and a reason may quote a session name.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Matcher, Provider
from textual.content import Content
from textual.markup import escape

from gputui.text.untrusted import visible
from gputui.verbs import VERBS, OptionKind, keyed


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


class Entry(NamedTuple):
    text: str
    help: str  # markup-escaped: Textual reads a hit's help as markup
    action_id: str  # a verb id, or "filter" / "pause"
    switch: str = ""  # one of the verb's switches on (gputui.verbs.Option.palette)


class ActionCommands(Provider):
    def _entries(self) -> list[Entry]:
        """Each verb, then each of its switches that is a palette entry
        (`[d] py-spy dump --native`), then the log's keys."""
        app = cast(VerbSource, self.app)
        out = []
        for v in VERBS:
            why = app.why_not(v.id)
            help_ = v.help_in(app.read_only) if why is None else f"unavailable: {visible(why)}"
            entry = keyed(v.id, v.label_in(app.read_only), app.keys)
            out.append(Entry(entry, help_, v.id))
            for o in v.option_list():
                if o.kind is OptionKind.SWITCH and o.palette:
                    switched = f"{o.help}: {help_}" if why is None else help_
                    out.append(Entry(f"{entry} {o.flag}", switched, v.id, o.name))
        out.append(Entry("[/] filter the log", "show only lines matching a regex", "filter"))
        out.append(Entry("[p] pause / resume the log", "freeze the log view", "pause"))
        return [e._replace(help=escape(e.help)) for e in out]

    def _run(self, entry: Entry) -> None:
        app = self.app
        if entry.action_id in ("filter", "pause"):
            app.call_later(app.run_action, entry.action_id)
        elif entry.switch:
            app.call_later(app.run_action, f"verb('{entry.action_id}', '{entry.switch}')")
        else:
            app.call_later(app.run_action, f"verb('{entry.action_id}')")

    async def discover(self) -> Hits:
        for e in self._entries():
            yield DiscoveryHit(Content(e.text), partial(self._run, e), text=e.text, help=e.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for e in self._entries():
            score = matcher.match(e.text)
            if score > 0:
                yield Hit(
                    score,
                    highlighted(matcher, e.text),
                    partial(self._run, e),
                    text=e.text,
                    help=e.help,
                )
