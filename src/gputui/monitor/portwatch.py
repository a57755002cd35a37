"""Who holds the port the run could not listen on.

While one of the run's last lines (log or pane) says a port was already in
use (diagnose/ports.py: torch.distributed's store, any server of the run),
each poll's batch asks the agent who listens on it (its `listeners` op, at
most every READ_EVERY_S) and the snapshot carries the answer
(`Snapshot.ports_taken`) for the `port_in_use` rule. No such line: nothing
is asked, and an old answer is dropped."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gputui.diagnose.holders import pane_sessions
from gputui.diagnose.ports import RECENT_LINES, WORDS, ports_taken
from gputui.model import PortHolder, PortsTaken, Snapshot
from gputui.monitor.door import ProcsChanged, Update
from gputui.monitor.feed import NowAndThen, Poll

READ_EVERY_S = 5.0


def _recent(snap: Snapshot) -> list[str]:
    return list(snap.log_tail)[-RECENT_LINES:] + list(snap.pane_tail or [])[-RECENT_LINES:]


def ports_named(snap: Snapshot) -> list[int]:
    """The ports the run's last lines say were taken (sorted)."""
    lines = _recent(snap)
    text = "\n".join(lines)
    if not any(w in text for w in WORDS):  # the usual poll: one pass over the text
        return []
    return sorted({t.port for t in ports_taken(lines) if t.port is not None})


def holders_from(answer: Any, snap: Snapshot) -> tuple[list[PortHolder], list[int]] | None:
    """The agent's `listeners` answer -> (holders, unseen ports), each
    holder with the tmux session it runs under when it is one of the listed;
    None for an answer that is not one (an error)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("listeners"), list):
        return None
    panes = pane_sessions(snap.sessions)
    holders = []
    for h in answer["listeners"]:
        if not isinstance(h, dict) or not isinstance(h.get("pid"), int):
            continue
        ancestors = [a for a in h.get("ancestors") or [] if isinstance(a, int)]
        session = next((panes[p].name for p in [h["pid"], *ancestors] if p in panes), None)
        holders.append(
            PortHolder(
                port=int(h.get("port") or 0),
                pid=h["pid"],
                cmdline=[str(a) for a in h.get("cmdline") or []],
                user=str(h["user"]) if h.get("user") is not None else None,
                ancestors=ancestors,
                session=session,
                uid=h["uid"] if isinstance(h.get("uid"), int) else None,
            )
        )
    unseen = [int(p) for p in answer.get("unseen") or [] if isinstance(p, int)]
    return holders, unseen


class PortWatch(NowAndThen):
    """The `listeners` call of a poll, and its answer into the snapshot
    (the run's part: who holds the port it could not take)."""

    op = "listeners"
    every_s = READ_EVERY_S
    owns = "ports_taken"
    emits = ProcsChanged

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self._asked: list[int] = []

    def call(self, snap: Snapshot, poll: Poll) -> dict[str, Any] | None:
        """The `listeners` op's args when this poll should ask, else None."""
        ports = ports_named(snap)
        self._asked = ports
        if not ports:
            return None
        known = snap.ports_taken
        if known is not None and known.ports == ports and self.fresh():
            return None
        return self.asking({"ports": ports})

    def apply(self, answer: Any, snap: Snapshot, poll: Poll) -> type[Update] | None:
        before = snap.ports_taken
        if not self._asked:
            snap.ports_taken = None
            return self.emits if before is not None else None
        got = holders_from(answer, snap) if answer is not None else None
        if got is None:
            return None  # not asked this poll (or an error): the last answer stands
        holders, unseen = got
        me = answer.get("uid") if isinstance(answer.get("uid"), int) else None
        snap.ports_taken = PortsTaken(list(self._asked), holders, unseen, poll.now, me)
        moved = before is None or (before.holders, before.unseen) != (holders, unseen)
        return self.emits if moved else None
