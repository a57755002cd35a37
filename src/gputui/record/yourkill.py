"""Whether a dead pane is the user's own stop: the audit log's kill of
that session (its container, the pane's PID among the processes the box
showed, after the session was made). doctor then says the run was stopped
by you, not that it died with its KeyboardInterrupt."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from gputui.model import Snapshot, YourKill
from gputui.statefiles import audit_path

KILL_VERBS = ("kill", "force_kill")
TAIL_BYTES = 256 * 1024  # the audit log's last actions: a kill long past is not asked about


def your_kill_in(
    lines: Iterable[str], ct: int | None, session: str, pane_pid: int, since: float | None
) -> YourKill | None:
    """The last kill in `lines` (audit log JSON lines) that stopped the run
    in `session` of CT `ct` whose pane was `pane_pid`, made after `since`
    (the session's creation); None when there is none."""
    found = None
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if not isinstance(e, dict) or e.get("action") not in KILL_VERBS:
            continue
        pids = e.get("pids")
        at = e.get("epoch")
        if (
            e.get("session") != session
            or e.get("ct") != ct
            or not isinstance(pids, list)
            or pane_pid not in pids
            or not isinstance(at, (int, float))
            or (since is not None and at < since)
        ):
            continue
        by = e.get("ended_by")
        found = YourKill(float(at), by if isinstance(by, str) else None)
    return found


def your_kill(
    path: Path, ct: int | None, session: str, pane_pid: int, since: float | None
) -> YourKill | None:
    """`your_kill_in` over the audit log's last TAIL_BYTES; None when it
    cannot be read."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read()
    except OSError:
        return None
    text = data.decode("utf-8", "replace")
    return your_kill_in(text.splitlines(), ct, session, pane_pid, since)


def dead_pane_key(snap: Snapshot) -> tuple[int | None, str, int, float | None] | None:
    """(CT, session, pane PID, session created) of the watched session's
    dead main pane; None while it runs, or when there is none."""
    session = snap.session
    pane = session.main_pane if session is not None and not snap.session_gone else None
    if session is None or pane is None or not pane.dead or pane.pid is None:
        return None
    return snap.ct_id, session.name, pane.pid, session.created


class YourKills:
    """`of(snap)`: the user's own kill of the watched session's dead pane,
    read from the audit log again only when the pane or the log changed
    (the dashboard and the recorder ask each tick)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._key: object = None
        self._said: YourKill | None = None

    def of(self, snap: Snapshot) -> YourKill | None:
        dead = dead_pane_key(snap)
        if dead is None:
            return None
        path = self.path or audit_path()
        try:
            size = path.stat().st_size
        except OSError:
            size = -1
        key = (dead, str(path), size)
        if key != self._key:
            self._key = key
            self._said = your_kill(path, *dead)
        return self._said
