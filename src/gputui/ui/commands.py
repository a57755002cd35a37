"""Command palette (ctrl+p): every action, with why it is unavailable."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from gputui.verbs import VERBS, keyed

if TYPE_CHECKING:
    from gputui.ui.app import GputuiApp


class ActionCommands(Provider):
    def _entries(self) -> list[tuple[str, str, str]]:
        app: GputuiApp = self.app  # type: ignore[assignment]
        out = []
        for v in VERBS:
            why = app.why_not(v.id)
            help_ = v.help if why is None else f"unavailable: {why}"
            out.append((keyed(v.id, v.label, app.keys), help_, v.id))
        out.append(("[/] filter the log", "show only lines matching a regex", "filter"))
        out.append(("[p] pause / resume the log", "freeze the log view", "pause"))
        return out

    def _run(self, action_id: str) -> None:
        app: GputuiApp = self.app  # type: ignore[assignment]
        if action_id in ("filter", "pause"):
            app.call_later(app.run_action, action_id)
        else:
            app.call_later(app.run_action, f"verb('{action_id}')")

    async def discover(self) -> Hits:
        for text, help_, action_id in self._entries():
            yield DiscoveryHit(text, partial(self._run, action_id), help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_, action_id in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), partial(self._run, action_id), help=help_)
