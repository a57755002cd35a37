"""Whose the watched run is, and whether a process is that user's: advice
to stop or kill a process is aimed at the run's owner only (issue 45).
Pure."""

from __future__ import annotations

from gputui.diagnose.context import Context

RunOwner = tuple[set[int], set[str]]  # the run's uids, else its tmux server owner's name


def run_owner(ctx: Context) -> RunOwner:
    """Whose the run is: the uids of its processes; with none left, its
    tmux server's owner (a name) or, for gputui's own server, the uid the
    agent runs as. Both empty: not known."""
    uids = {p.uid for p in ctx.procs if p.uid is not None}
    if uids:
        return uids, set()
    session = ctx.session
    if session is not None and session.owner:
        return set(), {session.owner}
    snap = ctx.snap
    me = snap.ports_taken.me if snap.ports_taken is not None else None
    if me is None and snap.gpu_owners is not None:
        me = snap.gpu_owners.me
    return ({me} if me is not None else set()), set()


def same_user(uid: int | None, user: str | None, owner: RunOwner) -> bool | None:
    """Whether a process of `uid` (or `user`) is the run owner's; None when
    either side is not known."""
    uids, names = owner
    if uids and uid is not None:
        return uid in uids
    if names and user is not None:
        return user in names
    return None
