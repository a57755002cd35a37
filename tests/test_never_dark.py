"""The banner never goes dark (issue 44), as a property over generated
snapshots — parts late, missing or partial: no tmux server, the agent
timed out, no GPU reading, a session never seen alive. Whenever

- the watched session is gone, dead or missing, or no tmux server runs
  where one is expected (a session was named and the listing was read),
- a session was named and no listing came (the agent never answered),
- the run was read and no poll has read it since (the agent lost: what is
  shown of it is old, and no rule judges it),
- the log is stale past the threshold while the run's GPUs hold memory,
- or the run's process is gone (its pane is a shell again, the run's
  output on record),

diagnose names at least one finding of WARNING or above. The one note
that may stand alone is a run that finished (exit status 0, no error in
its output), and `loading` (a young process filling GPU memory).
"Stale", for a run whose steps or lines have a cadence, also means past a
step's being overdue: k × its median step time, never before the threshold."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.diagnose import Thresholds, diagnose
from gputui.diagnose.context import Context
from gputui.diagnose.thresholds import DEFAULT_THRESHOLDS
from gputui.model import ConnectionState, GpuState, Severity, Snapshot, Tools
from test_diagnose import FULL_TOOLS, IMPORT_TB, NOW, run, stale_threshold

CUDA_TB = (
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 40, in <module>',
    "RuntimeError: CUDA error: an illegal memory access was encountered",
)


@dataclass(frozen=True)
class Parts:
    session: str  # alive · dead · gone · missing (never seen alive)
    # read · no_server (tmux there, no server) · timed_out (agent never answered)
    # · lost (read, then the agent stopped answering: the old listing kept)
    listing: str
    proc: str  # python · gone (the pane's shell alone) · zombie
    gpu: str  # busy · idle_held · free · none (no reading) · stale (old readings)
    silent: float  # seconds since the last log line
    steps: bool
    tail: str  # "" · error · cuda
    dead_status: int | None
    stale_after: float | None
    started_ago: float


parts = st.builds(
    Parts,
    session=st.sampled_from(["alive", "dead", "gone", "missing"]),
    listing=st.sampled_from(["read", "no_server", "timed_out", "lost"]),
    proc=st.sampled_from(["python", "gone", "zombie"]),
    gpu=st.sampled_from(["busy", "idle_held", "free", "none", "stale"]),
    silent=st.sampled_from([1.0, 8.0, 15.0, 40.0, 130.0, 700.0]),
    steps=st.booleans(),
    tail=st.sampled_from(["", "error", "cuda"]),
    dead_status=st.sampled_from([None, 0, 1, 137]),
    stale_after=st.sampled_from([None, 10.0, 60.0]),
    started_ago=st.sampled_from([20.0, 400.0, 3600.0]),
)


def snapshot(p: Parts) -> Snapshot:
    util = {"busy": 96.0, "idle_held": 0.0, "free": 0.0, "none": 0.0, "stale": 0.0}[p.gpu]
    mem = 0.0 if p.gpu == "free" else 45_000.0
    tail = {"": (), "error": IMPORT_TB, "cuda": CUDA_TB}[p.tail]
    snap = run(
        util=util,
        mem=mem,
        session=p.session,
        dead_status=p.dead_status,
        proc=p.proc != "gone",
        state="Z" if p.proc == "zombie" else "S",
        cpu=0.0,
        silent=p.silent,
        steps=p.steps,
        last_step_ago=p.silent,
        log_tail=(*(f"step {i} | loss 1.0" for i in range(5)), *tail),
        started_ago=p.started_ago,
    )
    if p.listing == "lost":  # what the monitor says once a poll could not read the run
        snap.run_read_at = NOW - 6.0
        snap.run_unread = "gputui's agent in CT 200 is not answering; starting it again"
    elif p.listing != "read":
        snap.sessions = []  # no server: nothing listed; or no listing came at all
        snap.procs = []
        snap.pane_tail = []
        snap.run_found_by = ""
    if p.listing == "timed_out":
        snap.tools = Tools()  # the agent never said hello
        # what the monitor says of it once no listing came for LISTING_LATE_S
        snap.listing_late_since = NOW - 30.0
        snap.listing_problem = "first poll failed: AgentError: the agent did not answer"
        snap.listing_session = snap.session_name
    if p.gpu == "none":
        snap.gpus = GpuState()
    elif p.gpu == "stale":
        for s in snap.gpus.latest.values():
            s.time = NOW - 120
    return snap


def must_warn(snap: Snapshot, p: Parts, threshold: float) -> str | None:
    """Why this snapshot must have a WARNING or worse (None: it need not)."""
    ctx = Context(snap, NOW, threshold, DEFAULT_THRESHOLDS)
    listed = bool(snap.sessions) or (snap.tools.probed and snap.tools.tmux is not None)
    if p.listing == "timed_out" and snap.session_name:
        return "the watched session is not known: the agent never answered"
    if p.listing == "lost":
        return "the run is not read now: what is shown of it is old"
    if snap.session_gone:
        return "the watched session is gone"
    s = ctx.session
    if s is None and listed:
        return "the watched session is missing (or no tmux server runs)"
    if s is not None and s.panes and not s.alive:
        clean = p.dead_status == 0 and not p.tail
        return None if clean else "the watched session is dead"
    if s is not None and p.proc == "gone" and snap.log_tail:
        return "the run's process is gone"
    held = [g for g in ctx.gpu_views if g.held]
    # "stale": past the stale threshold and, for a run with a step cadence,
    # past a step's being overdue (k × its median, never before the threshold)
    quiet = ctx.log_silent_s is not None and ctx.log_silent_s >= ctx.overdue_after
    if ctx.proc_alive and ctx.log_silent and quiet and held and not ctx.loading:
        return "the log is stale while the run's GPUs hold memory"
    return None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts)
def test_never_dark(p: Parts) -> None:
    snap = snapshot(p)
    threshold = stale_threshold(snap, Thresholds(stale_after=p.stale_after))
    why = must_warn(snap, p, threshold)
    if why is None:
        return
    found = diagnose(snap, NOW, Thresholds(stale_after=p.stale_after))
    loud = [f for f in found if f.severity in (Severity.WARNING, Severity.ERROR)]
    assert loud, (why, p, [(f.kind, f.severity.value, f.title) for f in found])


def test_connected_is_the_generated_state() -> None:
    assert run().connection == ConnectionState.CONNECTED and FULL_TOOLS.probed
