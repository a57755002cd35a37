"""Whether what the snapshot shows of the run — its processes, its tmux
sessions — is current: `Snapshot.run_read_at` (when a poll last read them)
and `run_unread` (why no poll has since: gputui's agent in the container
stopped answering, the container stopped), and the `ProcsChanged` and
`SessionsChanged` they emit.

Unread, the old processes are shown as of their read, never as live, and
the diagnosis does not judge them (diagnose/listing.py says why they are
not current). Once the container is seen stopped they are cleared: every
process of a stopped container ended with it, and a PID read before the
stop names nothing after the start (a fresh PID namespace counts from 1
again)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from gputui.model import CtStatus, Snapshot
from gputui.monitor.door import ProcsChanged, SessionsChanged, Update
from gputui.monitor.feed import Changed


def _words(snap: Snapshot) -> str:
    return snap.container.words if snap.container is not None else "the host"


class RunRead:
    """See the module docstring. `changed(*kinds)`: the monitor's."""

    emits: ClassVar[tuple[type[Update], ...]] = (ProcsChanged, SessionsChanged)

    def __init__(self, changed: Changed, clock: Callable[[], float]) -> None:
        self.changed = changed
        self.clock = clock

    def read(self, snap: Snapshot) -> None:
        """A poll read the run's sessions (and then its processes): current."""
        snap.run_read_at = self.clock()
        if snap.run_unread:
            snap.run_unread = ""
            self.changed(*self.emits)

    def unread(self, snap: Snapshot, problem: str) -> None:
        """This poll could not read the run (`problem`: the agent's last
        error): what the snapshot holds of it is as of the last read — or,
        the container stopped, gone."""
        if snap.run_read_at is None:
            return  # nothing read yet, nothing shown: the start-up's words say so
        if snap.ct_status in (CtStatus.STOPPED, CtStatus.MISSING):
            why = f"{_words(snap)} is {snap.ct_status.value}: its processes ended with it"
            if snap.procs or snap.sessions:
                snap.procs, snap.sessions, snap.run_found_by = [], [], ""
                self.changed(*self.emits)
        else:
            why = f"gputui's agent in {_words(snap)} is not answering; starting it again"
            if problem:
                why += f" ({problem.splitlines()[0][:160]})"
        if why != snap.run_unread:
            snap.run_unread = why
            self.changed(*self.emits)
