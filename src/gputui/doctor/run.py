"""`gputui doctor`, end to end: connect, take one snapshot, diagnose, report.

`inspect(settings)` returns (facts, snapshot, findings, inspected);
`main(settings, as_json)` prints the text or JSON report and returns the exit
code (0 nothing wrong, 1 something wrong, 2 could not inspect; see
gputui/doctor/doctor-json.md).

One snapshot is a short watch, not a single reading: the monitor runs for
at least `settle_s` seconds and until the pieces of a snapshot are in (GPU
readings and nvidia-smi's process list mapped to the CT, the log read and
stat'ed, the pane's processes; `unseen_pieces`). When the GPUs look
held-but-idle, the watch goes on until the idle streak is long enough for
the hang rule (`diagnose.IDLE_SHORT_S`), so a hang is named in one call
instead of "come back later". The bound, WATCH_MAX_S, counts from the end
of the monitor's start-up, which a loaded host slows; a piece still missing
then is named in the report (`watch_incomplete`), never "nothing wrong".

Two corrections are made to the snapshot before diagnosis, both because a
one-shot watch reads the log's backlog at start-up:

- lines already in the file when the watch began are stamped with the time
  they were *read*; a line cannot have been written after the file's last
  modification, so `last_line_time` and `metrics.last_step_time` are capped
  at the log's mtime (the agent's stat, in the local clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import asdict
from typing import Any

from gputui import diagnose as rules
from gputui.config import Settings
from gputui.diagnose.buffering import UNKNOWN, judge
from gputui.diagnose.evidence import buffering_words
from gputui.doctor.facts import connection_facts
from gputui.doctor.report import exit_code, findings_to_json, render_text
from gputui.errors import GputuiError
from gputui.model import ConnectionState, CtStatus, Finding, Severity, Snapshot
from gputui.monitor import (
    GpuFeed,
    WatchedRun,
    holder_pids,
    named_log_problem,
    nvidia_smi_gpus,
    ports_named,
    probe_tools,
    watch_run,
)
from gputui.record.unread import vs_last_now
from gputui.record.yourkill import YourKills
from gputui.remote.base import Transport
from gputui.remote.target import Target, make_target
from gputui.text.untrusted import visible

SETTLE_S = 2.0  # how long the one-shot watch runs at least
IDLE_EXTRA_S = 0.1  # past diagnose.IDLE_SHORT_S, when GPUs look held and idle
# never watch longer than this once the monitor has started (generous: the
# pieces of a snapshot come within a few seconds, later on a loaded host)
WATCH_MAX_S = 20.0
# a suspected stdout buffer: watched this long for the log to tell
# (`--buffer-watch`); still not known then, it is said so, never "nothing wrong"
BUFFER_WATCH_S = 15.0
APPS_PERIOD_S = 1.0  # compute-apps listing period during the watch
LOOK_S = 0.25  # how often the watch looks at the snapshot
DEMO_LABEL = "demo (this machine, simulated GPUs)"


def _held_and_idle(snap: Snapshot, now: float) -> bool:
    """A live run, and one of its GPUs (all GPUs when the process-to-GPU
    mapping is unknown) holds memory while every reading so far is idle."""
    if not any(p.is_python for p in snap.procs):
        return False
    gpus = snap.gpus
    pids = {p.pid for p in snap.procs}
    mine = {gp.gpu_uuid for gp in gpus.processes or [] if gp.ct_pid in pids and gp.gpu_uuid}
    for idx, s in (gpus.latest or {}).items():
        if s.time is None or now - s.time > rules.GPU_FRESH_S:
            continue
        if mine and s.uuid not in mine:
            continue
        if s.mem_used_mib is None or s.mem_used_mib < rules.HELD_MIB:
            continue
        ring = (gpus.util_history or {}).get(idx)
        pts = list(ring.points()) if ring is not None else [(s.time, s.util_pct)]
        if pts and all(v is not None and v < rules.IDLE_UTIL_PCT for _, v in pts):
            return True
    return False


def _idle_span(snap: Snapshot) -> float:
    """Seconds covered by the GPU readings so far (the shortest over GPUs)."""
    spans = []
    for ring in (snap.gpus.util_history or {}).values():
        pts = list(ring.points())
        if pts:
            spans.append(pts[-1][0] - pts[0][0])
    return min(spans) if spans else 0.0


def one_shot_gpu_feed(target: Target, settings: Settings) -> GpuFeed | None:
    """The monitor's nvidia-smi feed, but listing the compute apps every
    second: the host-PID -> CT-PID mapping needs the agent's PID namespace,
    which arrives after the first listing, and a short watch cannot wait for
    the next one at the usual 5 s. None: let the monitor choose (NVML)."""
    source = settings.gpu_source or "auto"
    if source == "nvml" or (settings.local and source == "auto"):
        return None
    return nvidia_smi_gpus(target, source, apps_period_s=APPS_PERIOD_S)


def correct_backlog_times(snap: Snapshot) -> None:
    """Cap the arrival times of lines read from the backlog at the log's mtime
    (see the module docstring)."""
    log = snap.log
    written = log.written_by
    if written is None or not log.exists:
        return
    if log.last_line_time is not None and log.last_line_time > written:
        log.last_line_time = written
    m = snap.metrics
    if m.last_step_time is not None and m.last_step_time > written:
        m.last_step_time = written


def _hang_watch_due(snap: Snapshot) -> bool:
    """A possible hang: the watch goes on long enough to say so."""
    return _held_and_idle(snap, time.time()) and _idle_span(snap) < (
        rules.IDLE_SHORT_S + IDLE_EXTRA_S
    )


def buffering_watch_due(
    snap: Snapshot,
    watched_s: float,
    since: float,
    settings: Settings,
    limit_s: float = BUFFER_WATCH_S,
) -> bool:
    """stdout suspected block-buffered (no -u, no PYTHONUNBUFFERED), the log
    has not shown blocks or single lines yet, but it gets lines (one came
    since `since`, wall clock), its process has just started, or its GPUs
    are busy while no step has reached the log: the watch goes on, up to
    `limit_s`, for the log to tell (a verdict from argv alone is often
    wrong) — unless a finding already gives the verdict (buffering_said). A
    silent log of an idle run is not waited on: its silence is the finding."""
    p = snap.training_proc
    if p is None or watched_s >= limit_s or snap.log.exists is not True:
        return False
    now = time.time()
    last = snap.log.last_line_time
    young = p.start_time is not None and now - p.start_time < limit_s  # just started
    mtime = snap.log.mtime
    growing = (last is not None and last >= since) or (mtime is not None and now - mtime < 5.0)
    if not young and not growing and not _busy_without_steps(snap, now):
        return False
    return judge(p, snap.log, now).state == UNKNOWN and not buffering_said(snap, settings)


def _busy_without_steps(snap: Snapshot, now: float) -> bool:
    """The run's GPUs are busy and no step has reached its log."""
    if snap.metrics.last_step is not None:
        return False
    ctx = rules.Context(snap, now, rules.STALE_FLOOR_S)
    return bool(ctx.busy)


# the findings that give the buffering verdict themselves
BUFFERING_SAID = frozenset({"busy_but_silent", "buffered_output"})


def buffering_said(snap: Snapshot, settings: Settings) -> bool:
    """A finding already says the run's stdout is block-buffered (its log
    stale past the threshold while its GPUs are busy): the buffering watch has
    nothing left to wait for. Watching on let a hang's idle window pass on a
    stand-in GPU and a full disk's run, and the report named a stall instead."""
    found = rules.diagnose(snap, time.time(), settings.diagnosis)
    return any(f.kind in BUFFERING_SAID for f in found)


def buffering_not_known(snap: Snapshot, now: float, watched_s: float) -> Finding | None:
    """The watch ended and it is still not known whether the run's stdout
    is block-buffered, while its GPUs are busy and no step has reached the
    log: said so with what was seen — "nothing wrong" would be a guess (a
    deploy script asking early was told all is well)."""
    p = snap.training_proc
    if p is None or not _busy_without_steps(snap, now):
        return None
    b = judge(p, snap.log, now)
    if b.state != UNKNOWN:
        return None
    size = snap.log.size
    ev = [
        f"watched {watched_s:.0f} s: the log {snap.log.path or '(none)'} got "
        + (f"{size:,} bytes" if size is not None else "no bytes gputui could count")
        + " and no step while the GPUs were busy",
        "; ".join(buffering_words(p)) + " → Python writes stdout in 8 KiB blocks",
        *b.evidence,
    ]
    return Finding(
        kind="buffering_unknown",
        severity=Severity.WARNING,
        title=(
            f"not yet known whether stdout of PID {p.pid} is block-buffered: no step has "
            "reached the log while its GPUs are busy"
        ),
        evidence=ev,
        fix=(
            "run gputui doctor again later (--buffer-watch SECONDS watches longer), or "
            "start python with -u / PYTHONUNBUFFERED=1 so the log is never late"
        ),
    )


def no_run(snap: Snapshot) -> Finding | None:
    """No session named, none found and no run found by its log: "nothing
    wrong" would say a run is fine that is not there."""
    if snap.session_name or snap.procs or not snap.tools.probed:
        return None
    where = snap.container.words if snap.container is not None else "the host"
    server = "no tmux server runs" if not snap.sessions else "no tmux session"
    ev = [f"tmux in {where}: {server}"]
    if snap.log.path:
        ev.append(f"no process has {snap.log.path} open for writing")
    return Finding(
        kind="no_run",
        severity=Severity.WARNING,
        title=f"no run found in {where}: {server}, and no process writes a log",
        evidence=ev,
        fix="start the run, or name it: --session NAME, --log PATH",
    )


def unseen_pieces(monitor: WatchedRun) -> list[str]:
    """What the watch still waits for, in words (empty: everything is in).
    Each piece is waited for only while it can still come: a failed agent,
    a GPU error, a log that does not exist end their waits."""
    snap = monitor.snapshot
    out: list[str] = []
    log = snap.log
    log_read = not monitor.log_followed or (
        log.exists is False
        or (log.exists is True and log.size is not None and log.offset >= log.size)
    )  # the backlog is read: a dead run's traceback is in the tail
    if not log_read:
        out.append("the log's size and backlog")
    gpus = snap.gpus
    if not (gpus.latest or gpus.error):
        out.append("a GPU reading")
    elif gpus.latest and gpus.processes_pending:
        out.append("nvidia-smi's list of GPU processes")  # the apps loop starts after
    elif (
        snap.ct_id is not None
        and monitor.ct_pids_pending
        and any(gp.in_container is None for gp in gpus.processes or [])
    ):
        out.append("the CT PIDs of the GPU processes")  # next listing: 1 s
    if monitor.plain_loop_pending:
        # no python3 in the CT: the sessions, the log's stat and its disk
        # come from the plain-command loop's first round (a loaded host took
        # over the 2 s settle: the run's session was not found, its full
        # disk unseen, and the report said "ok")
        out.append("tmux's panes and the log's stat (plain commands)")
    pane = snap.session.main_pane if snap.session is not None else None
    agent = monitor.agent_facts
    agent_alive = agent is not None and agent.alive
    if monitor.sessions_pending:  # no pane yet, so its processes were not waited for
        out.append("tmux's session listing")
    if monitor.kernel_log_pending:  # the run vanished quietly: the kernel's OOM lines
        out.append("the kernel log's OOM kills")
    if pane is not None and pane.pid and not pane.dead and not snap.procs and agent_alive:
        out.append("the processes of the session's pane")  # a poll timed out: the next one
    if agent_alive:
        named = ports_named(snap)  # a port the run could not listen on: who holds it
        if named and (snap.ports_taken is None or snap.ports_taken.ports != named):
            out.append("who listens on the port the run could not take")  # the next poll
        owners = snap.gpu_owners.owners if snap.gpu_owners is not None else {}
        if any(p not in owners for p in holder_pids(snap)):
            out.append("whose the GPU processes are")  # the next poll: kill advice is the owner's
    return out


async def watch_once(
    monitor: WatchedRun,
    settle_s: float = SETTLE_S,
    *,
    clock: Any = time.monotonic,
    unseen: list[str] | None = None,
    tmux_skipped: list[str] | None = None,
    buffer_watch_s: float = BUFFER_WATCH_S,
) -> Snapshot:
    """Run the monitor for a short watch and return its snapshot; nothing is
    left running on the target afterwards.

    It lasts at least `settle_s` and until every piece of `unseen_pieces`
    is in (and a possible hang was watched long enough), at most WATCH_MAX_S
    counted from the end of the monitor's start-up (the agent's start
    through ssh and the container, bounded by its own timeout): a slow
    start-up no longer eats the watch. What is still missing when it ends
    is put in `unseen` (the report says so, rather than "nothing wrong");
    other users' tmux servers not used (why) in `tmux_skipped`."""
    t0 = clock()
    try:
        await monitor.start()
        start = clock()
        started_wall = time.time()
        snap = monitor.snapshot
        down = (CtStatus.STOPPED, CtStatus.MISSING)
        missing: list[str] = []
        while True:
            if snap.ct_status in down or snap.connection == ConnectionState.FAILED:
                missing = []
                break
            if snap.log.not_a_file:
                missing = []
                break  # a directory or a device: nothing to read (named_log_error)
            missing = unseen_pieces(monitor)
            now = clock()
            if now - start >= WATCH_MAX_S:
                break
            if (
                now - t0 >= settle_s
                and not missing
                and not _hang_watch_due(snap)
                and not buffering_watch_due(
                    snap, now - start, started_wall, monitor.settings, buffer_watch_s
                )
            ):
                break
            await asyncio.sleep(LOOK_S)
        await monitor.refresh()
        if missing:
            missing = unseen_pieces(monitor)  # the last poll may have brought one
        if unseen is not None:
            unseen[:] = missing
        agent = monitor.agent_facts
        if tmux_skipped is not None and agent is not None:
            tmux_skipped[:] = agent.tmux_skipped
    finally:
        await monitor.stop()
    return monitor.snapshot


def config_exposed(line: str) -> Finding:
    """The config file holds secrets and others may read it (config.exposed_secrets)."""
    what, _, fix = line.partition(" — ")
    return Finding(
        kind="config_exposed",
        severity=Severity.WARNING,
        title="the gputui config holds secrets others may read",
        evidence=[what],
        fix=fix,
    )


def watch_incomplete(unseen: list[str]) -> Finding:
    """The watch reached WATCH_MAX_S without every piece: the report may
    miss what they would have shown, so it is never "nothing wrong"."""
    return Finding(
        kind="watch_incomplete",
        severity=Severity.WARNING,
        title=(
            f"the watch ended after {WATCH_MAX_S:g} s without {', '.join(unseen)}: "
            "this report may miss what they would show"
        ),
        evidence=[f"not seen: {u}" for u in unseen],
        fix="run gputui doctor again; a loaded host or container answers slowly",
    )


async def inspect(
    settings: Settings,
    *,
    transport: Transport | None = None,
    gpu_feed: GpuFeed | None = None,
    settle_s: float = SETTLE_S,
    buffer_watch_s: float = BUFFER_WATCH_S,
) -> tuple[dict[str, Any], Snapshot | None, list[Finding], bool]:
    """(facts, snapshot, findings, inspected).

    Raises GputuiError (one line, exit 2) when the host cannot be reached,
    the container does not exist or is stopped, or the host lacks its tool — the
    target cannot be inspected then, as for `doctor.gather_facts`."""
    target = make_target(settings, transport)
    tr = target.transport
    t0 = time.perf_counter()
    try:
        await tr.connect()
        # a --log that is a directory or a device is named at once (one line,
        # exit 2), checked alongside the CT's status so it costs no extra wait
        _, bad_named = await asyncio.gather(
            target.require_running(), named_log_problem(target, settings)
        )
        if bad_named is not None:
            raise bad_named
        facts = connection_facts(target, settings, (time.perf_counter() - t0) * 1000.0)
        facts["tools"] = asdict(await probe_tools(target))
        if gpu_feed is None:
            gpu_feed = one_shot_gpu_feed(target, settings)
        monitor = watch_run(target, settings, gpu_feed)
        unseen: list[str] = []
        skipped: list[str] = []  # other users' tmux servers, not reached as their owner
        watch_t0 = time.monotonic()
        snap = await watch_once(
            monitor, settle_s, unseen=unseen, tmux_skipped=skipped, buffer_watch_s=buffer_watch_s
        )
        watched_s = time.monotonic() - watch_t0
        bad_log = monitor.named_log_error()
        if bad_log is not None:
            raise bad_log
        if monitor.agent_error:
            facts["agent_error"] = monitor.agent_error
        if skipped:
            facts["tmux_skipped"] = skipped
        correct_backlog_times(snap)
        snap.your_kill = YourKills().of(snap)  # your own k: stopped, not died
        now = time.time()
        snap.time = now
        if settings.history:  # the run against its last one, from the history (issue 49)
            snap.vs_last = await vs_last_now(
                settings.history_path, target, snap, settings.metric_regexes or ()
            )
        findings = rules.diagnose(snap, now, settings.diagnosis)
        if settings.config_exposed:
            findings = rules.sort_findings([*findings, config_exposed(settings.config_exposed)])
        # never "nothing wrong" while doctor does not know (issue 44)
        unknown = [f for f in (no_run(snap), buffering_not_known(snap, now, watched_s)) if f]
        if unknown:
            findings = rules.sort_findings([*findings, *unknown])
        if unseen:  # a slow host: never "nothing wrong" for what was not seen
            facts["not_seen"] = unseen
            findings = rules.sort_findings([*findings, watch_incomplete(unseen)])
        # the report shows the link as it was during the watch, not "closed"
        seen = (snap.connection, snap.connection_error, snap.rtt_ms)
    finally:
        with contextlib.suppress(Exception):
            await tr.close()
    snap.connection, snap.connection_error, snap.rtt_ms = seen
    return facts, snap, findings, True


def inspect_demo(settings: Settings) -> tuple[dict[str, Any], Snapshot | None, list[Finding], bool]:
    """`doctor --demo`: start the demo's run (its own directory and private
    tmux server, so an open `gputui --demo` is left alone), check it with the
    simulated GPUs, stop it again."""
    from gputui.demo.environment import GPUS, DemoEnvironment, default_dir
    from gputui.monitor import simulated_gpus

    demo = DemoEnvironment(default_dir().with_name("demo-doctor"))
    demo.prepare()
    demo.apply_env()
    try:
        demo.launch()
        feed = simulated_gpus(GPUS, demo.load, name="NVIDIA H200 (simulated)")
        facts, snap, findings, inspected = asyncio.run(
            inspect(demo.settings(settings), gpu_feed=feed)
        )
    finally:
        demo.teardown()
    facts["target"] = DEMO_LABEL
    if snap is not None:
        snap.target = DEMO_LABEL
    return facts, snap, findings, inspected


def main(settings: Settings, as_json: bool = False, buffer_watch_s: float = BUFFER_WATCH_S) -> int:
    """`gputui doctor`: print the report, return the exit code (0/1/2)."""
    try:
        if settings.demo:
            facts, snap, findings, inspected = inspect_demo(settings)
        else:
            facts, snap, findings, inspected = asyncio.run(
                inspect(settings, buffer_watch_s=buffer_watch_s)
            )
    except GputuiError as err:
        if as_json:
            facts = {"target": settings.host, "error": str(err)}
            print(findings_to_json(facts, None, [], now=time.time(), inspected=False))
        print(f"gputui: {visible(err)}", file=sys.stderr)
        return exit_code([], inspected=False)
    now = snap.time if snap is not None else time.time()
    if as_json:
        print(findings_to_json(facts, snap, findings, now=now, inspected=inspected))
    else:
        print(render_text(facts, snap, findings, now=now), end="")
    return exit_code(findings, inspected=inspected)
