"""What a confirm box shows and what an action's result box shows.

Pure: no Textual, no I/O. The verbs themselves (keys, labels, why not) are
`gputui.verbs`; the backend that plans and runs them (the actions module, or
a fake in tests) implements `ActionBackend`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gputui.model import Snapshot


@dataclass
class PlannedAction:
    """What the confirm box shows; fixed when the box opens."""

    verb: str
    title: str
    target: str
    description: str
    commands: list[str]
    warning: str = ""
    plan: Any = None  # the backend's own plan object, handed back to execute()
    interactive_argv: list[str] | None = None  # attach: run in the terminal


@dataclass
class ActionOutcome:
    ok: bool
    summary: str
    details: str = ""
    saved_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ActionBackend(Protocol):
    async def plan(self, verb: str, snap: Snapshot) -> PlannedAction:
        """Inspect (read-only) and build the plan; raise GputuiError when it
        cannot be done. Nothing may act on a process here."""
        ...

    async def execute(self, planned: PlannedAction) -> ActionOutcome: ...
