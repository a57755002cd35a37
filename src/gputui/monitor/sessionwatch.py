"""The tmux sessions and the one watched: the agent's `sessions` op (or the
plain-command loop's listing), `Snapshot.sessions`, `session_name`,
`session_gone` and the listing's lateness, and the `SessionsChanged` they
emit.

A session is said gone only when two listings in a row lack it (the second
asked afresh, not the agent's reused answer); unasked, gputui never watches
the pane it runs in itself (`--local` inside tmux)."""

from __future__ import annotations

from typing import Any, ClassVar

from gputui.model import Session, Snapshot
from gputui.monitor.door import SessionsChanged, Update
from gputui.remote.agent_client import AgentClient, Request

# `tmux list-panes` runs in the agent about this often while no pane's
# process came, went or was reparented and no server's open files changed
# (the agent watches those in /proc each poll and lists at once when one
# did: agent.TmuxWatch): a session that ends is seen in the same poll; a
# rename or a pane's new command within this long.
LIST_PANES_EVERY_S = 5.0
# no tmux listing for this long (the agent not answering): the session is unknown, said so
LISTING_LATE_S = 15.0


def choose_session(
    sessions: list[Session], wanted: str | None, own: frozenset[int] = frozenset()
) -> str | None:
    """`wanted` if given, else the only session, else the most recently
    created — never, unasked, one whose main pane is gputui's own (`own`:
    this process and its ancestors, under `--local` inside tmux: its
    "training process" was gputui)."""
    if wanted:
        return wanted
    sessions = [s for s in sessions if not is_own(s, own)]
    if not sessions:
        return None
    if len(sessions) == 1:
        return sessions[0].name
    return max(sessions, key=lambda s: (s.created or 0.0, s.name)).name


def is_own(session: Session, own: frozenset[int]) -> bool:
    """gputui runs in this session's main pane (the pane's process is this
    process or one of its ancestors)."""
    pane = session.main_pane
    return pane is not None and pane.pid is not None and pane.pid in own


class SessionWatch:
    """See the module docstring. `wanted`: the session the user named (None:
    the only / most recent one); `own`: the PIDs gputui runs as."""

    emits: ClassVar[type[Update]] = SessionsChanged

    def __init__(self, wanted: str | None, own: frozenset[int]) -> None:
        self.wanted = wanted
        # under --local, the panes gputui itself runs in: never chosen unasked
        self.own = own
        self._seen: str | None = None
        self._names_when_gone: set[str] | None = None
        # The first listing without the watched session is confirmed by the
        # next (a fresh one, not the agent's reused answer) before it is said
        # gone: one listing that missed it, under load, put "session gone"
        # in the banner while the run went on (loaded CI runs j, q, r).
        self.missing_unconfirmed = False
        self.missed_listings = 0  # listings that lacked the session, the next had it
        self.listed_at: float | None = None  # when the sessions were last listed (local)

    def watch(self, name: str | None, snap: Snapshot) -> None:
        """Watch this tmux session (None: the only / most recent one)."""
        self.wanted = name or None
        self._seen = None
        self._names_when_gone = None
        self.missing_unconfirmed = False
        snap.session_gone = False

    def call(self, agent: AgentClient) -> Request:
        """The agent's `sessions` op for this poll's batch."""
        reuse = 0.0 if self.missing_unconfirmed else LIST_PANES_EVERY_S
        return agent.sessions_request(reuse_s=reuse)

    def note_listing(self, snap: Snapshot, asked: float, now: float, problem: str) -> bool:
        """snapshot.listing_late_since: the sessions were not listed by the
        poll asked at `asked`, and none came for LISTING_LATE_S — a `--session
        NAME` the agent never answers about is said to be unknown, and why
        (issue 44), not left to a dark banner. True when it changed (the
        run's part: ProcsChanged)."""
        listed = self.listed_at
        lately = listed is not None and (listed >= asked or now - listed < LISTING_LATE_S)
        since = listed if listed is not None else snap.started
        late = not lately and now - since >= LISTING_LATE_S
        new = (since, problem, self.wanted) if late else (None, "", None)
        if new != (snap.listing_late_since, snap.listing_problem, snap.listing_session):
            snap.listing_late_since, snap.listing_problem, snap.listing_session = new
            return True
        return False

    def apply(self, sessions: list[Session], snap: Snapshot, now: float) -> bool:
        """A listing of the sessions into `snap`: which one is watched,
        whether it is gone. True when what the snapshot says changed."""
        self.listed_at = now
        if snap.listing_late_since is not None:
            snap.listing_late_since, snap.listing_problem, snap.listing_session = None, "", None
        names = {s.name for s in sessions}
        seen = self._seen
        missing = seen is not None and seen not in names and not snap.session_gone
        if missing and not self.missing_unconfirmed:
            self.missing_unconfirmed = True  # said gone only if the next listing agrees
            return False
        if self.missing_unconfirmed and not missing:
            self.missed_listings += 1
        self.missing_unconfirmed = False
        changed = _sessions_key(sessions) != _sessions_key(snap.sessions)
        snap.sessions = sessions
        name = self._choose(sessions, names, snap)
        if name in names:
            self._seen = name
            self._names_when_gone = None
            gone = False
            snap.ct_restarted_at = None  # seen since: a restart explains nothing of it
        else:
            gone = seen is not None and seen == name
        if name != snap.session_name or gone != snap.session_gone:
            snap.session_name = name
            snap.session_gone = gone
            changed = True
        return changed

    def _choose(self, sessions: list[Session], names: set[str], snap: Snapshot) -> str | None:
        seen, wanted = self._seen, self.wanted
        if wanted is None and seen is not None and seen not in names:
            # The watched session is gone: say so, unless a new session
            # appeared since (a relaunch under another name).
            if self._names_when_gone is None:
                self._names_when_gone = names
            fresh = [s for s in sessions if s.name not in self._names_when_gone]
            return choose_session(fresh, None, self.own) if fresh else seen
        if wanted is None and snap.session_name in names and seen:
            return snap.session_name  # keep watching the one we chose
        return choose_session(sessions, wanted, self.own)


def _sessions_key(sessions: list[Session]) -> list[tuple[Any, ...]]:
    return [
        (
            s.name,
            s.socket,
            s.windows,
            s.attached,
            tuple(
                (p.pid, p.dead, p.dead_status, p.dead_signal, p.current_command) for p in s.panes
            ),
        )
        for s in sessions
    ]
