"""Whose each GPU holder in the watched container is: the agent's `owners`
op in a poll's batch, `Snapshot.gpu_owners` and a `GpusRead` when it moved.

The GPU listing comes from the host (nvidia-smi's host PIDs, matched to the
container's PIDs through NSpid: GpuProcess.ct_pid); the host sees an
unprivileged LXC's uids + 100000, so the owner is asked of the agent inside
the container, by the container's PID, and its answer is the container's
uid and user name — what the advice shows and compares with the run's owner
(diagnose/holders.py, issue 45). Asked when the set of holders changed, and
every READ_EVERY_S while the same ones hold memory (a PID reused)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from gputui.model import GpuOwners, Snapshot
from gputui.monitor.door import GpusRead, Update
from gputui.monitor.feed import NowAndThen, Poll

READ_EVERY_S = 10.0
MAX_PIDS = 64  # as the agent's MAX_GPU_OWNERS
# A user name as useradd allows it: the container's /etc/passwd is the
# container's to write, and the name goes into advice, alerts and reports
# (any other is dropped: the uid alone names the owner).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?")


def holder_pids(snap: Snapshot) -> list[int]:
    """The container PIDs of the GPU processes in the watched container (or
    on the plain host), sorted."""
    pids = {
        gp.ct_pid
        for gp in snap.gpus.processes or []
        if gp.in_container and gp.ct_pid is not None and gp.ct_pid > 0
    }
    return sorted(pids)[:MAX_PIDS]


def owners_from(answer: Any) -> tuple[dict[int, tuple[int | None, str | None]], int | None] | None:
    """The agent's `owners` answer -> ({PID: (uid, user)}, the agent's uid);
    None for an answer that is not one (an error, an older agent)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("owners"), list):
        return None
    out: dict[int, tuple[int | None, str | None]] = {}
    for d in answer["owners"]:
        if not isinstance(d, dict) or not isinstance(d.get("pid"), int):
            continue
        uid = d.get("uid") if isinstance(d.get("uid"), int) else None
        user = d.get("user") if isinstance(d.get("user"), str) and uid is not None else None
        user = user if user is not None and _NAME.fullmatch(user) else None
        out[d["pid"]] = (uid, user)
    me = answer.get("uid") if isinstance(answer.get("uid"), int) else None
    return out, me


class GpuOwnerWatch(NowAndThen):
    """The `owners` call of a poll, and its answer into the snapshot."""

    op = "owners"
    every_s = READ_EVERY_S
    owns = "gpu_owners"
    emits = GpusRead

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self._asked: list[int] = []

    def call(self, snap: Snapshot, poll: Poll) -> dict[str, Any] | None:
        """The `owners` op's args when this poll should ask, else None."""
        pids = holder_pids(snap)
        known = snap.gpu_owners
        same = pids == self._asked and known is not None and set(pids) <= set(known.owners)
        if not pids or (same and self.fresh()):
            self._asked = pids if not pids else self._asked
            return None
        self._asked = pids
        return self.asking({"pids": pids})

    def apply(self, answer: Any, snap: Snapshot, poll: Poll) -> type[Update] | None:
        before = snap.gpu_owners
        if not self._asked:
            snap.gpu_owners = None
            return self.emits if before is not None else None
        if answer is None:
            return None  # not asked this poll: the last answer stands
        got = owners_from(answer)
        if got is None:  # an error (an older agent): asked, and not known
            known = before.owners if before is not None else {}
            got = {p: known.get(p, (None, None)) for p in self._asked}, None
        owners, me = got
        snap.gpu_owners = GpuOwners(owners, me, poll.now)
        moved = before is None or (before.owners, before.me) != (owners, me)
        return self.emits if moved else None
