"""Who holds each GPU process: the watched run, another session, another
container, the host, or no live owner (a leftover). Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from gputui.diagnose.context import Context
from gputui.diagnose.thresholds import DEFAULT_THRESHOLDS, LEFTOVER_IDLE_S
from gputui.diagnose.whose import run_owner, same_user
from gputui.model import GpuProcess, Session, Snapshot
from gputui.text.owners import container_words
from gputui.text.words import dur, gib


def own_idle_for(gp: GpuProcess, now: float, idle_pct: float) -> float | None:
    """Seconds this process's own readings have been below `idle_pct`
    (from the first idle reading); None when it is not idle or not read."""
    start = None
    for t, v in reversed(gp.util):
        if v >= idle_pct:
            break
        start = t
    return None if start is None else max(0.0, now - start)


OTHER_USER_WORDS = " — not this run's user"  # plain text's mark of another user's holder


@dataclass(frozen=True)
class Holder:
    """Who owns a process that holds GPU memory.

    kind: "run" (the watched run) · "session" (another tmux session) ·
    "container" (another container) · "host" (a host process, outside the
    watched container) ·
    "process" (a live process with a live parent, not in tmux) · "orphan"
    (no live owner: a zombie, or its parent is gone) · "unknown"."""

    gp: GpuProcess
    kind: str
    owner: str  # in words: "session eval", "CT 201", "a host process", ...
    leftover: bool = False  # no live owner, idle on its GPU a while (or a zombie)
    # whose process it is, as its container sees it (the agent's `owners`
    # op: the CT's uid, never the host's uid + 100000); None: not known
    uid: int | None = None
    user: str | None = None
    # known to be another uid's than the watched run's (issue 45): the GPU
    # pane marks it apart from the run user's own processes
    other_user: bool = False

    @property
    def pid(self) -> int:
        """Its PID as the user types it where the run lives."""
        return self.gp.ct_pid if self.gp.ct_pid is not None else self.gp.host_pid

    @property
    def live_other(self) -> bool:
        """A live process of another run: never advice to kill it."""
        return self.kind in ("session", "container", "host", "process")

    def words(self, users: bool = False) -> str:
        """'held by session eval (PID 491)'; users: whose it is after the PID,
        as the GPU pane says it (`user_said`): 'held by session eval (PID 491
        alice — not this run's user)'."""
        user = f" {self.user_said}" if users and self.user_said else ""
        return f"held by {self.owner} (PID {self.pid}{user})"

    @property
    def user_words(self) -> str:
        """Its owner as nvitop's USER column says it: 'alice', 'uid 1001'
        (no passwd entry); '' when not known."""
        if self.uid is None:
            return ""
        return self.user or f"uid {self.uid}"

    @property
    def user_said(self) -> str:
        """`user_words` in plain text: another user's than the run's marked in
        words, 'alice — not this run's user' (the GPU pane marks it with
        OTHER_USER_STYLE instead); '' when not known."""
        if not self.user_words:
            return ""
        return self.user_words + (OTHER_USER_WORDS if self.other_user else "")

    @property
    def whose(self) -> str:
        """'uid 1001 (alice)', 'uid 0 (root)', 'uid 1001'; '' when not known."""
        if self.uid is None:
            return ""
        return f"uid {self.uid}" + (f" ({self.user})" if self.user else "")


def pane_sessions(sessions: Iterable[Session]) -> dict[int, Session]:
    return {pane.pid: s for s in sessions for pane in s.panes if pane.pid and not pane.dead}


def gpu_holder(ctx: Context, gp: GpuProcess) -> Holder:
    """Who holds one GPU process (`_holder`), with whose process it is when
    the agent in its container said (Snapshot.gpu_owners, by its CT PID),
    and whether that is another user than the run's."""
    h = _holder(ctx, gp)
    known = ctx.snap.gpu_owners
    if known is None or gp.ct_pid is None or not gp.in_container:
        return h
    uid, user = known.owners.get(gp.ct_pid, (None, None))
    if uid is None:
        return h
    other = same_user(uid, user, run_owner(ctx)) is False
    return replace(h, uid=uid, user=user, other_user=other)


def _holder(ctx: Context, gp: GpuProcess) -> Holder:
    """Name the owner of one GPU process from its parents (`ancestors`),
    its container and the tmux sessions' pane PIDs."""
    if gp.ct_pid is not None and gp.ct_pid in ctx.run_pids:
        return Holder(gp, "run", "the watched run")
    where = container_words(gp, ctx.snap.container_names)
    if gp.in_container is False:
        if where:
            return Holder(gp, "container", where)
        if ctx.snap.container is not None:
            return Holder(gp, "host", "a host process")
        return Holder(gp, "unknown", "a process outside the watched run")
    panes = pane_sessions(ctx.sessions)
    chain = [gp.ct_pid, *(gp.ancestors or [])] if gp.ct_pid is not None else []
    for pid in chain:
        if pid in ctx.run_pids or (
            pid in panes and panes[pid].name == ctx.snap.session_name and pid is not None
        ):
            return Holder(gp, "run", "the watched run")
        s = panes.get(pid) if pid is not None else None
        if s is not None:
            who = f" (tmux of {s.owner})" if s.owner and s.owner != "root" else ""
            return Holder(gp, "session", f"session {s.name}{who}")
    if where and (ctx.snap.container is None or not ctx.snap.container.kind):
        return Holder(gp, "container", where)  # a plain host: a Docker container's process
    if gp.in_container is None:
        return Holder(gp, "unknown", "an unknown process")
    idle = own_idle_for(gp, ctx.now, ctx.th.idle_util_pct)
    if idle is None and not gp.util:  # no own readings: the whole GPU idle says it for all
        view = next((g for g in ctx.gpu_views if g.sample.uuid == gp.gpu_uuid), None)
        idle = view.idle_for if view is not None and view.own_util is None else None
    idle_long = idle is not None and idle >= LEFTOVER_IDLE_S
    if gp.state == "Z":
        return Holder(gp, "orphan", "a zombie", leftover=True)
    if gp.ancestors == []:
        return Holder(gp, "orphan", "no live owner (its parent is gone)", leftover=idle_long)
    if gp.ancestors:
        return Holder(gp, "process", f"a process under PID {gp.ancestors[0]}")
    return Holder(gp, "unknown", "an unknown process")


def gpu_holders(ctx: Context) -> list[Holder]:
    """Who holds each GPU process of the watched GPUs' listing."""
    return [gpu_holder(ctx, gp) for gp in (ctx.gpus.processes or [])]


def holder_line(h: Holder, now: float, idle_pct: float) -> str:
    """'held by session eval (PID 491): 5.1 GiB on GPU-…, 98 % SM, state R, CPU 40 s'."""
    gp = h.gp
    bits = [f"{gib(gp.used_mib)} on {gp.gpu_uuid or 'a GPU'}"]
    if gp.sm_util is not None:
        idle = own_idle_for(gp, now, idle_pct)
        bits.append(f"{gp.sm_util:.0f} % SM" + (f", idle {dur(idle)}" if idle else ""))
    if gp.state:
        bits.append(f"state {gp.state}")
    if gp.cpu_s is not None:
        bits.append(f"CPU {dur(gp.cpu_s)}")
    if h.whose:
        bits.append(f"{h.whose}'s")
    name = f" {gp.name}" if gp.name else ""
    return f"{h.words()}{name}: " + ", ".join(bits)


def gpu_words(ctx: Context, uuid: str) -> str:
    """'GPU 0' (its index, as nvidia-smi numbers it), else its UUID."""
    idx = next((s.index for s in ctx.gpus.latest.values() if s.uuid == uuid), None)
    return f"GPU {idx}" if idx is not None else (uuid or "a GPU")


def leftover_is_mine(ctx: Context, h: Holder) -> bool | None:
    """Whether a leftover is the run's own user's (a `kill PID` in the
    container is the advice); False: another uid's; None: not known whose
    it is (or whose the run is)."""
    return same_user(h.uid, h.user, run_owner(ctx)) if h.uid is not None else None


def leftover_words(ctx: Context, h: Holder) -> str:
    """What to do with a leftover that is not known to be the run user's
    (never a bare kill): 'uid 1001 (alice)'s PID 4242 holds 30 GiB on GPU 0
    — not this run's user; ask them or, as root, kill it', or how to check
    whose it is."""
    held = f"holds {gib(h.gp.used_mib)} on {gpu_words(ctx, h.gp.gpu_uuid)}"
    check = f"`{ctx.in_ct(f'ps -o pid,user,etime,cmd -p {h.pid}')}`"
    mine = leftover_is_mine(ctx, h)
    if mine is False:
        return (
            f"{h.whose}'s PID {h.pid} {held} — not this run's user; ask them or, as root, kill it"
        )
    if h.uid is None:
        return f"PID {h.pid} {held}, its owner unknown: check {check}; kill it only if it is this run's user's"
    return (
        f"{h.whose}'s PID {h.pid} {held}, and whose the run is is not known: check {check}; "
        "kill it only if it is this run's user's"
    )


def holders_of(snap: Snapshot, now: float) -> list[Holder]:
    """Who holds each GPU process of the snapshot (the GPU rows' words)."""
    if not snap.gpus.processes:
        return []
    return gpu_holders(Context(snap, now, DEFAULT_THRESHOLDS.stale_floor_s))


def snapshot_holders(snap: Snapshot, now: float, users: bool = False) -> dict[tuple[str, int], str]:
    """(GPU uuid, host PID) -> who holds it in words ("the watched run",
    "held by session eval (PID 491)"), for doctor's report; users: with whose
    it is, as the GPU pane says it ("held by session eval (PID 491 alice —
    not this run's user)"; the JSON has `uid` and `user` apart)."""
    return {
        (h.gp.gpu_uuid, h.gp.host_pid): (h.owner if h.kind == "run" else h.words(users))
        for h in holders_of(snap, now)
    }
