"""GPU-leftover advice is aimed at the run's owner only (issue 45): a
leftover holding GPU memory is advised killed (`kill PID` in the container)
only when it is the run's own user's; another uid's is named with its owner
and no kill command; one of an unknown owner gets the command that says
whose it is. The owner is the container's uid, read by the agent in the
container from /proc/PID/status (the host sees an unprivileged LXC's uid +
100000), reached through the poll's `owners` op. Real-looking snapshots: CT
200, the watched run in session dflash, a leftover (its parent gone, idle on
its GPU two minutes) holding 30 GiB on GPU 0."""

from __future__ import annotations

import os
import subprocess
import sys

from gputui.diagnose import diagnose
from gputui.model import Finding, GpuOwners, GpuProcess, Snapshot
from gputui.monitor.feed import Poll
from gputui.monitor.gpuowners import GpuOwnerWatch, holder_pids
from gputui.remote import agent as agent_mod
from test_diagnose import NOW, UUID, run

RUN_PID = 12  # the run's python in the CT (test_diagnose.run)
LEFT = 4242  # the leftover's PID in the CT


def _processes() -> list[GpuProcess]:
    left = GpuProcess(UUID + "0", 104242, 30 * 1024, "python3", ct_pid=LEFT, in_container=True)
    left.ancestors, left.state = [], "S"  # its parent is gone
    left.util = [(NOW - 120.0 + 5.0 * i, 0.0) for i in range(25)]  # idle two minutes
    mine = GpuProcess(UUID + "0", 100012, 40_000, "python", ct_pid=RUN_PID, in_container=True)
    return [mine, left]


def _snap(run_uid: int | None, owner: tuple[int, str | None] | None, **kw: object) -> Snapshot:
    """The watched run (its processes of `run_uid`) beside a leftover of
    `owner` (None: the agent did not say)."""
    snap = run(gpu_procs=_processes(), **kw)  # type: ignore[arg-type]
    for p in snap.procs:
        p.uid = run_uid
    owners = {RUN_PID: (run_uid, None)} if run_uid is not None else {}
    if owner is not None:
        owners[LEFT] = owner
    snap.gpu_owners = GpuOwners(owners, me=0, at=NOW)
    return snap


def _leftover(snap: Snapshot) -> Finding:
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "gpu_memory_orphaned"]
    return f


def test_a_root_leftover_beside_a_users_run_is_named_never_killed() -> None:
    """A user's run (uid 1001 in the CT); root's leftover holds GPU 0."""
    f = _leftover(_snap(1001, (0, "root")))
    assert f"kill {LEFT}" not in f.fix, f.fix
    assert (
        f"uid 0 (root)'s PID {LEFT} holds 30.0 GiB on GPU 0 — not this run's user; "
        "ask them or, as root, kill it"
    ) in f.fix, f.fix
    assert any("uid 0 (root)'s" in e for e in f.evidence), f.evidence


def test_a_users_leftover_beside_roots_run_is_named_never_killed() -> None:
    f = _leftover(_snap(0, (1001, "alice")))
    assert f"kill {LEFT}" not in f.fix, f.fix
    assert f"uid 1001 (alice)'s PID {LEFT} holds 30.0 GiB on GPU 0 — not this run's user" in f.fix


def test_a_leftover_of_an_unknown_owner_gets_the_check_never_a_kill() -> None:
    f = _leftover(_snap(0, None))
    assert f"kill {LEFT}" not in f.fix, f.fix
    assert "its owner unknown" in f.fix, f.fix
    assert f"`pct exec 200 -- ps -o pid,user,etime,cmd -p {LEFT}`" in f.fix, f.fix


def test_the_run_users_own_leftover_keeps_the_kill() -> None:
    for uid, user in ((1001, "alice"), (0, "root")):
        f = _leftover(_snap(uid, (uid, user)))
        assert f.fix == f"pct exec 200 -- kill {LEFT}  (after checking they are leftovers)", f.fix


def test_a_leftover_whose_run_owner_is_not_known_gets_no_kill() -> None:
    """The run's processes' uids unread and the agent's own unknown."""
    snap = _snap(None, (0, "root"))
    assert snap.gpu_owners is not None
    snap.gpu_owners.me = None
    f = _leftover(snap)
    assert f"kill {LEFT}" not in f.fix and "uid 0 (root)'s PID" in f.fix, f.fix


def _oom_beside(owner: tuple[int, str | None] | None, run_user: str | None) -> Finding:
    """A relaunched run died of CUDA OOM at start (its processes gone) in
    tmux of `run_user` (None: gputui's own server, the agent root's)."""
    from test_failures import OOM_NEW

    snap = _snap(None, owner, session="dead", dead_status=1, steps=False)
    snap.log_tail.extend(["Traceback (most recent call last):", OOM_NEW])
    snap.gpus.processes = [p for p in snap.gpus.processes if p.ct_pid == LEFT]
    if run_user is not None:
        snap.sessions[0].owner = run_user
    return next(f for f in diagnose(snap, NOW) if f.kind == "cuda_oom")


def test_an_oom_beside_another_users_leftover_names_it_without_a_kill() -> None:
    f = _oom_beside((0, "root"), "alice")  # alice's run (her tmux server), root's leftover
    assert f"kill {LEFT}" not in f.fix, f.fix
    assert f"uid 0 (root)'s PID {LEFT} holds 30.0 GiB on GPU 0 — not this run's user" in f.fix
    f = _oom_beside((1001, "alice"), None)  # root's run (gputui's server), alice's leftover
    assert f"kill {LEFT}" not in f.fix and "uid 1001 (alice)'s PID" in f.fix, f.fix
    f = _oom_beside(None, None)
    assert f"kill {LEFT}" not in f.fix and "ps -o pid,user,etime,cmd" in f.fix, f.fix
    f = _oom_beside((0, "root"), None)  # root's own leftover: the kill as before
    assert f"`pct exec 200 -- kill {LEFT}`, then relaunch (r)" in f.fix, f.fix


POLL = Poll(now=NOW)


def test_the_poll_asks_whose_the_ct_holders_are_and_keeps_the_answer() -> None:
    snap = run(gpu_procs=_processes())
    t = [0.0]
    watch = GpuOwnerWatch(clock=lambda: t[0])
    assert holder_pids(snap) == [RUN_PID, LEFT]
    assert watch.call(snap, POLL) == {"pids": [RUN_PID, LEFT]}
    answer = {"owners": [{"pid": LEFT, "uid": 1001, "user": "alice"}], "uid": 0}
    assert watch.apply(answer, snap, POLL)
    assert snap.gpu_owners is not None and snap.gpu_owners.owners[LEFT] == (1001, "alice")
    assert watch.call(snap, POLL) is not None  # the run's PID unanswered: asked again
    odd = {"owners": [{"pid": LEFT, "uid": 1002, "user": "\x1b]52;c;eA==\x07@here"}]}
    watch.apply(odd, snap, POLL)  # the CT's /etc/passwd: a name with escapes is dropped
    assert snap.gpu_owners is not None and snap.gpu_owners.owners[LEFT] == (1002, None)
    watch.apply(
        {"owners": [{"pid": RUN_PID, "uid": 0, "user": "root"}, answer["owners"][0]]}, snap, POLL
    )
    assert watch.call(snap, POLL) is None  # all known, fresh
    assert not watch.apply(None, snap, POLL) and snap.gpu_owners is not None
    t[0] = 11.0
    assert watch.call(snap, POLL) is not None  # every READ_EVERY_S: a PID may be reused
    watch.apply({"error": "no such op"}, snap, POLL)  # an older agent: what was known stands
    assert snap.gpu_owners is not None and snap.gpu_owners.owners[LEFT] == (1001, "alice")
    fresh = GpuOwnerWatch(clock=lambda: t[0])
    snap.gpu_owners = None
    fresh.call(snap, POLL)
    assert fresh.apply(
        {"error": "no such op"}, snap, POLL
    )  # asked: not known (doctor waits no more)
    assert snap.gpu_owners is not None and snap.gpu_owners.owners == {
        RUN_PID: (None, None),
        LEFT: (None, None),
    }
    snap.gpus.processes = []
    assert (
        watch.call(snap, POLL) is None and watch.apply(None, snap, POLL) and snap.gpu_owners is None
    )


def test_the_agent_reads_the_uid_from_proc_status() -> None:
    """The real agent function on real processes: this one, and one of
    another uid where the tests run as root."""
    got = agent_mod.pid_owners([os.getpid(), 2**22 + 12345])
    assert got["owners"][0]["uid"] == os.getuid() and got["uid"] == os.geteuid()
    assert got["owners"][1] == {"pid": 2**22 + 12345, "uid": None, "user": None}
    assert agent_mod.status_uid("Name:\tx\nUid:\t1001\t1001\t1001\t1001\n") == 1001
    if os.geteuid() != 0:
        return
    p = subprocess.Popen(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         "import time; print('up', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert p.stdout is not None and p.stdout.readline() == b"up\n"  # setpriv is done
        (o,) = agent_mod.pid_owners([p.pid])["owners"]
        assert o["uid"] == 65534 and o["user"] in ("nobody", None), o
    finally:
        p.kill()
        p.wait()


def test_memory_held_with_no_run_alive_names_another_users_holder() -> None:
    """The run is gone (its session dead, the log quiet), a process of uid
    1001 in the CT still holds GPU memory: the host-side check stays, and
    that process is named as not this run's user's (root's: gputui's own
    tmux server)."""
    snap = _snap(None, (1001, "alice"), session="dead", dead_status=0, util=0.0, silent=10.0)
    snap.gpus.processes = [p for p in snap.gpus.processes if p.ct_pid == LEFT]
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "gpu_memory_orphaned"]
    assert "-o pid,etime,cmd` on the host, then kill the leftovers of this run's user only" in f.fix
    assert f"uid 1001 (alice)'s PID {LEFT} in CT 200 is not this run's user's" in f.fix, f.fix
    assert snap.gpu_owners is not None
    snap.gpu_owners.owners[LEFT] = (0, "root")  # root's, as the run: the fix as before
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "gpu_memory_orphaned"]
    assert f.fix.endswith("on the host, then kill the leftovers"), f.fix
