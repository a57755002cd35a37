"""Recording one monitored target: history, findings, alerts.

A `RunRecorder` sits beside a Monitor and uses only its public side (the
listener, the snapshot, the target): it writes GPU samples as they arrive,
reads the log from its cursor every `log_every` seconds (one short command;
none while the log has not grown), diagnoses once a second, records
findings appearing and clearing, session exits, connection changes and the
actions of the audit log, and hands alerts to its sinks. The TUI and
`gputui watch` run the same recorder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.collect.metrics import MetricParser
from gputui.config import DEFAULTS, Settings
from gputui.diagnose import DEFAULT_THRESHOLDS, Diagnose, Thresholds, diagnose_with, stale_threshold
from gputui.diagnose.compare import (
    RunPoint,
    SteadyVerdict,
    live_of_run,
    live_points,
    merge_points,
    program_of,
    steps_unread,
)
from gputui.diagnose.registry import kinds_that
from gputui.errors import GputuiError
from gputui.model import ConnectionState, Finding, Snapshot, VsLast
from gputui.monitor import GpusRead, News, WatchedRun
from gputui.record.alerts import Alert, AlertGate
from gputui.record.history import (
    EventRow,
    GpuRow,
    HistoryWriter,
    PairCache,
    PointRow,
    RunInfo,
    RunPair,
    incident_key,
)
from gputui.record.incidents import SETTLE_S
from gputui.record.runlog import parse_chunk_off_loop
from gputui.record.vslast import compare_pair
from gputui.record.yourkill import YourKills
from gputui.remote.identity import path_reader_argv
from gputui.remote.target import spec_of
from gputui.statefiles import audit_path
from gputui.tasks import cancel_and_wait
from gputui.text.numbers import bounded_int
from gputui.text.untrusted import visible
from gputui.verbs import VERB_BY_ID

log = logging.getLogger(__name__)  # `gputui -v`: incidents, exits, actions, connection

# one short command a minute while the log grows: pct exec costs
LOG_EVERY_S = DEFAULTS.history_log_every
READ_CHUNK = 4 * 1024 * 1024  # bytes of log per read; a long log is read over several ticks
# The follower's word that the log started over (its truncation count) may
# come after the recorder saw the same restart by size or inode;
# within this long (plus two reads) it is that restart, not another — taken
# as another, the new run was read again from 0: every line twice (the soak).
MARKS_LAG_S = 15.0
AUDIT_EVERY_S = 10.0
# The user's relaunch or kill: what it causes is no news from when it begins
# until SETTLE_S after it ends (gputui.record.incidents), at most this long.
ACTION_MAX_S = 300.0
# Findings that say the run has been quiet: after the user's relaunch the
# new run gets the stale threshold from the action's end to print (its
# first line resets them), not a moment less.
SILENCE_KINDS = kinds_that("silence")  # declared by each finding kind (diagnose/registry.py)
# What says a relaunched or launched run is not there: news once the new
# run has had settle_s to come up and no session of it came.
GONE_KINDS = kinds_that("gone")
_PID_RE = re.compile(r"\bPIDs? (\d+)")
# The new run against the last one (issue 49): compared this often; the
# monitor's line times are taken as the lines' own from this long after
# start-up (before: the log's backlog, stamped when it was read).
COMPARE_EVERY_S = 5.0
LIVE_AFTER_S = 10.0


def _expected(action: object) -> bool:
    """The user's verb whose consequences are no news (gputui.verbs: Audit.BEGIN_AND_END)."""
    verb = VERB_BY_ID.get(action) if isinstance(action, str) else None
    return verb is not None and verb.expected


@dataclass
class UserAction:
    """The user's relaunch, kill or launch, from the audit log: from its
    plan (`start`) to its end line (`end`, None while it runs); `pids`: the
    processes it stopped (the old run's)."""

    verb: str
    start: float
    end: float | None = None
    pids: frozenset[int] = field(default_factory=frozenset)
    by: int | None = None  # the gputui process running it (its "begun" line's)


def _process_alive(pid: int) -> bool:
    """Whether process `pid` of this machine exists (the audit log is this machine's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: it exists
    return True


# $1 path, $2 offset, $3 bytes, $4 seconds, $5 the run's inode (0: none):
# `@gputui SIZE INODE` (or `@gputui missing`), then up to $3 bytes from $2.
# A constant: the values are positional. Only a regular file is read (as the
# follower does): a FIFO's bytes belong to the run's own reader, and a read
# of one with no writer never ends (`@gputui notfile`). `timeout` (where the
# target has it) kills the read after $4 seconds, `tail` and all: nothing is
# left running. A log rotated away (renamed in its directory: train.log.1)
# with lines past $2 not read yet is read there first — a regular file, not
# a link, of the run's inode beside the path — so its last lines are kept.
READ_SCRIPT = r"""p=$1; off=$2; n=$3; lim=$4; ino=${5:-0}
if st=$(stat -L -c '%s %i' -- "$p" 2>/dev/null); then :
else echo "@gputui missing"; exit 0; fi
if [ "$ino" != 0 ] && [ "${st#* }" != "$ino" ]; then
  q=$(find "$(dirname -- "$p")" -maxdepth 1 -inum "$ino" -type f 2>/dev/null | head -n 1)
  if [ -n "$q" ] && [ ! -L "$q" ] && qs=$(stat -c '%s %i' -- "$q" 2>/dev/null) \
    && [ "${qs%% *}" -gt "$off" ]; then p=$q; st=$qs; fi
fi
if [ ! -f "$p" ]; then echo "@gputui notfile"; exit 0; fi
echo "@gputui $st"
[ "$n" -gt 0 ] || exit 0
if command -v timeout >/dev/null 2>&1; then
  timeout -s KILL "$lim" tail -c "+$((off + 1))" -- "$p" 2>/dev/null | head -c "$n"
else
  tail -c "+$((off + 1))" -- "$p" 2>/dev/null | head -c "$n"
fi
"""
READ_LIMIT_S = 45  # the script's own limit, under the 60 s the command is given

AlertSink = Callable[[Alert], Any]
TickListener = Callable[[Snapshot, list[Finding]], None]


def read_argv(
    path: str, offset: int, n: int, limit_s: int = READ_LIMIT_S, inode: int = 0
) -> list[str]:
    """READ_SCRIPT with the hands remote/identity.py picks for `path` (a
    path the run supplied): root's only where nobody else can change the
    way to it, else its owner's (issue 45: `tail` as root read a root-only
    file through a directory the owner swapped for a link)."""
    args = [path, str(int(offset)), str(int(n)), str(int(limit_s)), str(int(inode))]
    return path_reader_argv(path, ["sh", "-c", READ_SCRIPT, "gputui-read", *args], "gputui-read")


def parse_read(out: bytes) -> tuple[int, int, bytes] | None:
    """(size, inode, data) from READ_SCRIPT's output; None when the log is missing."""
    head, _, data = out.partition(b"\n")
    words = head.decode("ascii", "replace").split()
    if len(words) != 3 or words[0] != "@gputui":
        return None
    try:
        return int(words[1]), int(words[2]), data
    except ValueError:
        return None


def open_history(settings: Settings) -> HistoryWriter | None:
    """The history file of [history] (None when it is off); GputuiError
    when it cannot be used."""
    if not settings.history:
        return None
    return HistoryWriter(
        settings.history_path, max_bytes=int(float(settings.history_max_mb) * 1024 * 1024)
    )


def _given_name(monitor: WatchedRun) -> str | None:
    """The target as the user named it (`gpu1/200`), before the ssh config
    resolved it to the address it is recorded under; None for this machine."""
    settings = getattr(monitor, "settings", None)
    if not isinstance(settings, Settings):
        return None
    spec = spec_of(settings)
    return str(spec) if spec is not None else None


class RunRecorder:
    """See the module docstring. `start()` after the monitor started (or
    before: it waits for data); `stop()` writes what is pending."""

    def __init__(
        self,
        monitor: WatchedRun,
        writer: HistoryWriter | None,
        *,
        diagnose: Diagnose | None = None,
        thresholds: Thresholds | None = None,
        gate: AlertGate | None = None,
        sinks: list[AlertSink] | None = None,
        shared_sinks: list[AlertSink] | None = None,
        log_every: float = LOG_EVERY_S,
        audit_file: Path | None = None,
        metric_regexes: list[str] | None = None,
        clock: Callable[[], float] = time.time,
        tick_s: float = 1.0,
    ) -> None:
        self.monitor = monitor
        self.writer = writer
        self.name: str = monitor.target.label
        self.given_name = _given_name(monitor)  # as the user named it: `gpu1/200`
        self.thresholds = thresholds or DEFAULT_THRESHOLDS
        self.diagnose = diagnose or diagnose_with(self.thresholds)
        self.gate = gate or AlertGate(self.name)
        # sinks: this process's own (the terminal, watch's stdout); shared
        # sinks (notification URLs) get each alert once among every gputui
        # recording the same target into the same history file.
        self.sinks: list[AlertSink] = list(sinks or [])
        # toast sinks (a screen): the alerts, and "quiet" when a finding a
        # toast shows is no longer shown (de-escalated, gone)
        self.toast_sinks: list[AlertSink] = []
        self._shown_here: set[str] = set()  # causes whose firing this process's screens heard
        self.shared_sinks: list[AlertSink] = list(shared_sinks or [])
        self.log_every = log_every
        self.audit_file = audit_file
        self.your_kills = YourKills(audit_file) if audit_file is not None else None
        self.clock = clock
        self.tick_s = tick_s
        self.findings: list[Finding] = []
        self.alerts: list[Alert] = []  # every alert handed to the sinks
        self.tick_listeners: list[TickListener] = []
        self.errors: list[str] = []
        self.error_listeners: list[Callable[[str], None]] = []  # told each new error
        self.target_id: int | None = None
        self._attached = False
        self._parser = MetricParser(
            list(metric_regexes or getattr(monitor.settings, "metric_regexes", None) or [])
        )
        self._gpu_last: dict[int, float] = {}
        self._run: RunInfo | None = None
        self._run_path: str | None = None
        self._caught_up = False
        self._log_due = 0.0
        self._log_seen: tuple[int | None, int, int] = (None, 0, 0)
        self._marks: int | None = None
        self._marks_quiet_until = 0.0  # the follower's late word of a restart already seen
        self._audit_due = 0.0
        self._audit_mtime = 0.0
        self._audit_seen = 0  # bytes of the audit log read for expected windows
        self.settle_s = SETTLE_S  # after the user's action ended: its new run is up
        self._exits: set[str] = set()
        self._actions: dict[float, UserAction] = {}  # by plan time
        self._connection: ConnectionState | None = None
        self._task: asyncio.Task[None] | None = None
        self._next: asyncio.Future[None] | None = None  # the loop's wait for its next tick
        self._driven = False  # a dashboard's tick brings the recorder's (kick)
        self._ticked = 0.0  # monotonic time of the last tick begun
        self._pending: set[asyncio.Future[Any]] = set()
        self._last_send: asyncio.Future[Any] | None = None
        # the new run against the last one (issue 49)
        self.vs_last: VsLast | None = None
        self._program_run: int | None = None  # the run whose program is recorded
        self._compare_due = 0.0
        self._last_cache = PairCache()
        self._log_marks: tuple[int, int] | None = None
        self._log_soon = 0  # ticks left that read the log whatever log_every says
        self._run_pid: int | None = None  # the run's Python as last seen (its end reads the log)
        # told when the verdict against the last run changes (watch prints it)
        self.verdict_listeners: list[Callable[[VsLast], None]] = []
        self._told: tuple[int | None, str, bool] | None = None
        self._steady = SteadyVerdict()  # the verdict's words wait for a few checks that agree

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def for_settings(
        cls,
        monitor: WatchedRun,
        writer: HistoryWriter | None,
        settings: Settings,
        *,
        sinks: list[AlertSink] | None = None,
        shared_sinks: list[AlertSink] | None = None,
    ) -> RunRecorder:
        """A recorder with the user's settings: [diagnosis] thresholds (with
        --stale-after), the alerts' quiet period and connection hold, how
        often the log is sampled; actions come from the audit log."""
        gate = AlertGate(
            monitor.target.label,
            quiet_s=float(settings.alert_quiet_period),
            holds={"connection": float(settings.alert_connection_down_after)},
        )
        return cls(
            monitor,
            writer,
            thresholds=settings.diagnosis,
            gate=gate,
            sinks=sinks,
            shared_sinks=shared_sinks,
            log_every=float(settings.history_log_every),
            audit_file=audit_path(),
        )

    async def start(self) -> None:
        """Start ticking. The history is joined once the target is connected
        (its name is only final then: `root@10.1.2.6:22 ct 200`, not the
        `gpu1 ct 200` typed); alerts work from the first tick."""
        self.monitor.subscribe(self._on_monitor)
        self._task = asyncio.create_task(self._loop(), name=f"recorder {self.name}")

    async def _attach(self) -> None:
        self.name = self.monitor.target.label
        self.gate.target = self.name
        self._attached = True
        if self.writer is None:
            return
        self.target_id = await asyncio.wrap_future(self.writer.target_id(self.name))
        if self.given_name:
            await asyncio.wrap_future(self.writer.name_target(self.target_id, self.given_name))
        opened = await asyncio.wrap_future(self.writer.open_findings(self.name))
        # Incidents still open from the last time: not new when seen again,
        # not told again, and resolved when their cause is gone.
        for cause, e in opened.items():
            if not self.gate.knows(cause):
                f = Finding(kind=e.name, severity=_severity(e.severity), title=e.title)
                self.gate.seed(f, e.t)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait([task] if task is not None else [])
        for t in list(self._pending):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self.writer is not None:
            await asyncio.wrap_future(self.writer.flush())

    def kick(self) -> None:
        """The dashboard's once-a-second tick: the recorder's comes right
        after it, in the same wake of the event loop — one 1 Hz timer for
        both, not two, and the banner's diagnosis is always fresh for it.
        A kick under half a tick after the last tick is left for the next;
        without kicks (watch, doctor, a dashboard gone) the recorder's own
        timer ticks, after 1.5 ticks once it has been kicked."""
        self._driven = True
        nxt = self._next
        if (
            nxt is not None
            and not nxt.done()
            and time.monotonic() - self._ticked >= self.tick_s / 2
        ):
            nxt.set_result(None)

    async def _wait_tick(self) -> None:
        loop = asyncio.get_running_loop()
        self._next = nxt = loop.create_future()
        wait = self.tick_s * (1.5 if self._driven else 1.0)
        timer = loop.call_later(wait, _settle, nxt)
        try:
            await nxt
        finally:
            timer.cancel()
            self._next = None
        self._ticked = time.monotonic()

    async def _loop(self) -> None:
        while True:
            await self._wait_tick()
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except GputuiError as err:
                self._error(str(err))
            except Exception as err:  # recording must never take the monitor down
                self._error(f"recording failed: {type(err).__name__}: {err}")

    def _error(self, text: str) -> None:
        if not self.errors or self.errors[-1] != text:
            self.errors.append(text)
            del self.errors[:-20]
            for cb in list(self.error_listeners):
                cb(text)

    # ------------------------------------------------------------ GPU samples

    def _on_monitor(self, snap: Snapshot, news: News) -> None:
        w = self.writer
        if w is None or w.closed or self.target_id is None:
            return
        if not any(isinstance(u, GpusRead) for u in news):
            return
        rows = []
        for s in list(snap.gpus.latest.values()):
            if s.time <= self._gpu_last.get(s.index, 0.0):
                continue
            self._gpu_last[s.index] = s.time
            rows.append(
                GpuRow(
                    s.index,
                    s.time,
                    s.util_pct,
                    s.mem_used_mib,
                    s.mem_total_mib,
                    s.temp_c,
                    s.power_w,
                )
            )
        if rows:
            w.add_gpu(self.target_id, rows)

    # ------------------------------------------------------------ each tick

    async def tick(self) -> None:
        snap = self.monitor.snapshot
        now = self.clock()
        if not self._attached and snap.connection == ConnectionState.CONNECTED:
            await self._attach()
        self.expect_from_audit(snap.session_name)
        self.mark_your_kill(snap)
        self.findings = list(self.diagnose(snap, now))
        alerts = self.gate.update(self.findings, now, self.news_kinds(snap, self.findings, now))
        await self._record_incidents()
        await self._record_connection(snap, now)
        await self._record_exits(snap, now)
        for alert in alerts:
            await self._tell(alert)
        for cb in list(self.tick_listeners):
            cb(snap, self.findings)
        if self.writer is not None and self.target_id is not None:
            marks = (snap.log.truncations, snap.log.rotations)
            if marks != self._log_marks:  # a new run's log (a relaunch): its run at once —
                if self._log_marks is not None:  # the old file's last lines first, then
                    self._log_soon = 3  # the new file's (a read each): three ticks read
                self._log_marks = marks
            if self._run_ended(snap):
                self._log_due = 0.0  # its last steps, before a new run's tee truncates them
            if self._log_soon:
                self._log_soon -= 1
                self._log_due = 0.0
            if now >= self._log_due:
                await self.import_log(now)
            if self.audit_file is not None and now >= self._audit_due:
                self._audit_due = now + AUDIT_EVERY_S
                await self.import_audit()
            await self._follow_last_run(snap, now)

    def _run_ended(self, snap: Snapshot) -> bool:
        """Whether the run's Python process, seen last tick, is gone now
        (killed, crashed, finished, relaunched): its log is read at once,
        not at the next `log_every` — a run killed in its first minute had
        no steps in the history, and a relaunch's `| tee` truncating the log
        took the old run's last steps before the minute's read (issue 49)."""
        proc = snap.training_proc
        pid = proc.pid if proc is not None else None
        ended = self._run_pid is not None and pid != self._run_pid
        self._run_pid = pid
        return ended

    async def _tell(self, alert: Alert) -> None:
        """An alert to every sink (a network send to the shared ones once
        among the gputui recording this target); "quiet" to the screens only.
        A screen hears of an incident's end only when it heard of the
        incident: one still open from before this screen began (the last
        run's, seeded from the history) ends in the history and the webhook,
        not as a 'resolved' on a dashboard that never showed it (issue 46)."""
        cause = alert.cause or alert.kind
        if alert.state in ("firing", "escalated"):
            self._shown_here.add(cause)
        ended = alert.state in ("resolved", "quiet")
        sinks = [] if ended and cause not in self._shown_here else list(self.toast_sinks)
        if alert.state == "resolved":
            self._shown_here.discard(cause)
        if alert.state != "quiet":
            self.alerts.append(alert)
            sinks += self.sinks
            if self.shared_sinks and await self._claim(alert):
                sinks += self.shared_sinks
        for sink in sinks:
            res = sink(alert)
            if asyncio.iscoroutine(res):  # a network send: in order, off this tick
                t = asyncio.ensure_future(_after(self._last_send, res))
                self._last_send = t
                self._pending.add(t)
                t.add_done_callback(self._pending.discard)

    async def _claim(self, alert: Alert) -> bool:
        if self.writer is None or self.target_id is None:
            return True
        state = alert.state
        if state == "escalated":  # each stage once: stalled, then probably hung
            state = f"escalated:{alert.kind}:{alert.severity}"
        fut = self.writer.claim_alert(self.target_id, alert.cause or alert.kind, state, alert.time)
        return await asyncio.wrap_future(fut)

    async def _event(self, ev: EventRow) -> bool:
        log.debug("%s: %s %s %s %s", self.name, ev.kind, ev.name, ev.state, visible(ev.title)[:300])
        if self.writer is None or self.target_id is None:
            return True
        return await asyncio.wrap_future(self.writer.add_event(self.target_id, ev))

    async def _record_incidents(self) -> None:
        """The history says what the alerts say: one incident per cause,
        opened, worse, resolved (gputui.record.incidents)."""
        run_id = self._run.id if self._run else None
        words = {"firing": "open", "escalated": "worse", "resolved": "resolved"}
        for n in self.gate.recorded:
            f = n.finding
            await self._event(
                EventRow(
                    n.time,
                    "incident",
                    n.cause,
                    words.get(n.state, n.state),
                    f.severity.value,
                    f.title,
                    incident_key(f.kind, n.time),
                    run_id,
                )
            )

    async def _record_connection(self, snap: Snapshot, now: float) -> None:
        state = snap.connection
        if state == self._connection:
            return
        self._connection = state
        await self._event(
            EventRow(now, "connection", state.value, "", "", snap.connection_error or "")
        )

    async def _record_exits(self, snap: Snapshot, now: float) -> None:
        """An event per pane that ended, with its start command only for a
        session of the watched run's owner (issue 45: another user's command
        line never leaves the machine in history)."""
        owner = snap.session.owner if snap.session is not None else None
        for s in snap.sessions:
            for p in s.panes:
                if not p.dead:
                    continue
                key = f"{s.name}:{p.pid}:{s.created or 0:.0f}"
                if key in self._exits:
                    continue
                self._exits.add(key)
                how = (
                    f"signal {p.dead_signal}"
                    if p.dead_signal
                    else f"exit status {p.dead_status}"
                    if p.dead_status is not None
                    else "exited"
                )
                command = p.start_command[:500] if s.owner == owner else ""
                await self._event(EventRow(now, "exit", s.name, how, "", command, key))

    # ------------------------------------------------------------ the log

    def read_log_soon(self) -> None:
        """Read the log's new lines at the next tick, not after `log_every`
        (the whole-run view asks while it is open)."""
        self._log_due = 0.0

    async def import_log(self, now: float | None = None) -> int:
        """Read the log on from the run's cursor; returns the points added.
        Reads again at once while more is waiting, else after log_every."""
        now = self.clock() if now is None else now
        assert self.writer is not None
        snap = self.monitor.snapshot
        path = snap.log.path
        if not path:
            return 0
        self._log_due = now + self.log_every
        if path != self._run_path:
            self._run_path = path
            self._run = await asyncio.wrap_future(self.writer.current_run(self.name, path))
            self._caught_up = False
            self._log_seen = (None, 0, 0)
            self._marks = None
        seen = (snap.log.size, snap.log.truncations, snap.log.rotations)
        if self._run is not None and seen == self._log_seen and snap.log.size == self._run.cursor:
            return 0  # nothing new (the monitor's stat says so): no command
        cursor = self._run.cursor if self._run is not None else 0
        inode = self._run.inode if self._run is not None else 0
        argv = read_argv(path, cursor, READ_CHUNK, inode=inode)
        res = await self.monitor.target.run(argv, timeout=60.0)
        got = parse_read(res.stdout)
        if got is None:
            return 0
        size, inode, data = got
        # the follower saw it truncated (a rotation is a new inode at the path:
        # seen by the read itself, after the rotated file's last lines)
        marks = snap.log.truncations
        restarted = self._marks is not None and marks != self._marks
        self._marks = marks
        if restarted and now < self._marks_quiet_until:
            restarted = False  # its word of the restart this run began with, come late
        if self._run is None or inode != self._run.inode or size < self._run.cursor or restarted:
            # first sight of this log, or it was replaced / truncated: its run
            stale = self._run.id if self._run is not None else None
            self._run = await asyncio.wrap_future(
                self.writer.new_run(self.name, path, inode, now, after=stale)
            )
            self._caught_up = False
            if stale is not None:
                self._marks_quiet_until = now + MARKS_LAG_S + 2 * self.log_every
            self._log_due = now  # read on from the run's cursor at the next tick
            return 0
        points, consumed = await parse_chunk_off_loop(data, cursor, self._parser)
        timed = self._caught_up
        seen_at = self._line_times(snap)  # when the monitor saw each step's line
        rows = [
            PointRow(
                p.offset,
                seen_at.get(p.step, now) if p.step is not None else now,
                timed or p.step in seen_at,
                p.step,
                p.loss,
                p.throughput,
                p.lr,
            )
            for p in points
        ]
        unit = next((p.unit for p in reversed(points) if p.unit), "")
        new_cursor = cursor + consumed
        await asyncio.wrap_future(self.writer.add_points(self._run.id, rows, new_cursor, now, unit))
        self._run = _with_cursor(self._run, new_cursor, now, unit)
        if new_cursor + READ_CHUNK // 4 < size and consumed:
            self._log_due = now  # more is waiting: read on at the next tick
        else:
            self._caught_up = True
            self._log_seen = seen
        return len(rows)

    def _line_times(self, snap: Snapshot) -> dict[int, float]:
        """Step -> when the monitor's follower got its line, for this run's
        steps it saw live: the history stores a point's own time, not the
        minute's read that stored it (s/step and the time to the first step
        of a run against the last are read from these)."""
        since = snap.started + LIVE_AFTER_S if snap.started else 0.0
        return {p.step: p.t for p in live_points(snap.metrics, since) if p.step is not None}

    # ------------------------------------------------------------ the last run (issue 49)

    async def _follow_last_run(self, snap: Snapshot, now: float) -> None:
        """Record what the current run runs (once per run), and every
        COMPARE_EVERY_S compare it with its last run: `vs_last`, also on the
        snapshot, where the rules (slower_than_last, loss_above_last), the
        run panel and doctor read it. When steps both runs reached are in
        neither the history nor the monitor's rings (`steps_unread`: a fast
        run in its first minute), the log is read first, not at log_every."""
        run, w = self._run, self.writer
        if run is None or w is None:
            return
        if run.id != self._program_run:
            act = self._last_action(now)
            env = sorted(getattr(getattr(self.monitor.settings, "run", None), "env", None) or {})
            prog = program_of(snap, act.pids if act is not None else frozenset(), env)
            if prog is not None:
                await asyncio.wrap_future(w.set_program(run.id, prog, snap.session_name or "", now))
                self._program_run = run.id
        if now < self._compare_due:
            return
        self._compare_due = now + COMPARE_EVERY_S
        pair = await asyncio.wrap_future(w.pair(run.id, self._last_cache))
        if pair is not None and pair.last is not None:
            live = self._live_of(pair, snap)
            if steps_unread(pair.this.points, live, pair.last.points):
                await self.import_log(now)  # the steps both runs reached, before comparing
                if self._run is not None:
                    pair = await asyncio.wrap_future(w.pair(self._run.id, self._last_cache))
        vs = self.against_last(pair, snap)
        self.vs_last = vs = self._steady.settle(vs) if vs is not None else None
        snap.vs_last = vs
        told = (vs.last_run, vs.verdict, vs.loss_out) if vs is not None else None
        if vs is not None and vs.verdict and told != self._told:
            self._told = told
            for cb in list(self.verdict_listeners):
                cb(vs)

    def against_last(self, pair: RunPair | None, snap: Snapshot) -> VsLast | None:
        if pair is None or pair.last is None:
            return None
        this = merge_points(pair.this.points, self._live_of(pair, snap))
        return compare_pair(pair, this, snap.metrics.throughput_unit)

    def _live_of(self, pair: RunPair, snap: Snapshot) -> list[RunPoint]:
        """The monitor's points of the pair's run (its rings: the last 600)."""
        since = snap.started + LIVE_AFTER_S if snap.started else 0.0
        return live_of_run(
            pair.this.points,
            live_points(snap.metrics, since),
            snap.metrics.restarted_at,
            pair.this.first_seen,
        )

    # ------------------------------------------------------------ actions

    def expect_from_audit(self, session: str | None = None) -> None:
        """The user's relaunch, kill or launch of this target's session (the
        audit log: a line when it begins, one when it ends, from this
        process or another gputui): its consequences are expected from its
        plan until SETTLE_S after it ends — no finding of it is news. A stat
        a tick; new lines only when the file grew."""
        self._read_audit(session)
        self._end_orphans()

    def _read_audit(self, session: str | None) -> None:
        p = self.audit_file
        if p is None:
            return
        try:
            size = p.stat().st_size
            if size < self._audit_seen:
                self._audit_seen = 0  # a new file
            if size == self._audit_seen:
                return
            with p.open("rb") as fh:
                fh.seek(self._audit_seen)
                data = fh.read(size - self._audit_seen)
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a line half written is read next time
        self._audit_seen += end
        for line in data[:end].splitlines():
            self._expect_line(line, session)

    def mark_your_kill(self, snap: Snapshot) -> None:
        """The user's own k of the watched session's dead pane, for the
        diagnosis to say 'stopped by you', not 'died' (record/yourkill.py)."""
        if self.your_kills is not None:
            snap.your_kill = self.your_kills.of(snap)

    def is_news(self, f: Finding, now: float) -> bool:
        """False for a finding the user's own relaunch or kill caused (the
        dashboard's banner leaves it out, as the alerts do)."""
        snap = self.monitor.snapshot
        self.expect_from_audit(snap.session_name)
        return self.gate.book.is_news(f, now, self.news_kinds(snap, [f], now))

    def news_kinds(self, snap: Snapshot, findings: Iterable[Finding], now: float) -> set[str]:
        """The kinds among `findings` that are news although the user's own
        action's window is open: their evidence is the run it started, not
        the one it stopped. Nothing while the action runs. Then: the watched
        session's pane being a process the action did not stop (the new
        run's) makes its findings news at once — but not one naming a PID
        the action stopped, and a silence only after the stale threshold
        from the action's end; no new session after settle_s makes a
        relaunch's or launch's "gone" findings news. Judged by that evidence
        for as long as it lasts, not only while the window is open: an
        incident opened silent in the window (the new run hung before its
        first line, its silence news only after the stale threshold, which
        may be longer than the window) is told once its evidence is the new
        run's, not kept silent till it closes."""
        act = self._last_action(now)
        if act is None or act.end is None:
            return set()
        since_end = now - act.end
        sess = next((s for s in snap.sessions if s.name == snap.session_name), None)
        # its pane's PID is not one the action stopped (tmux's session_created
        # has whole seconds: a run relaunched in its first second looks old)
        new_run = sess is not None and any(
            p.pid is not None and p.pid not in act.pids for p in sess.panes
        )
        quiet_for = stale_threshold(snap, self.thresholds)
        out: set[str] = set()
        for f in findings:
            if not new_run:
                if act.verb != "kill" and since_end >= self.settle_s and f.kind in GONE_KINDS:
                    out.add(f.kind)
                continue
            text = " ".join([f.title, *f.evidence])  # quotes the run's own lines: any number
            named = {bounded_int(m, 1) for m in _PID_RE.findall(text)} - {None}
            if named & act.pids:
                continue  # the old run's: its memory freed late, its exit
            if f.kind in SILENCE_KINDS and since_end < quiet_for:
                continue  # the gap before the new run's first line
            out.add(f.kind)
        return out

    def _last_action(self, now: float) -> UserAction | None:
        """The last of the user's actions begun by `now`."""
        acts = [a for a in self._actions.values() if a.start <= now]
        return max(acts, key=lambda a: a.start) if acts else None

    def _expect_line(self, line: bytes, session: str | None) -> None:
        try:
            e = json.loads(line)
        except ValueError:
            return
        if not isinstance(e, dict) or e.get("target") != self.name:
            return
        if not _expected(e.get("action") or e.get("begins")):
            return
        if session and e.get("session") and e.get("session") != session:
            return  # another session's run on this target
        try:
            t = float(e.get("epoch") or 0.0)
            created = float(e.get("plan") or t)
        except (TypeError, ValueError):
            return
        pids = e.get("pids")
        by = e.get("by")
        self._expect(
            str(e.get("action") or e.get("begins")),
            t,
            created,
            [p for p in pids if isinstance(p, int)] if isinstance(pids, list) else [],
            ended=e.get("phase") != "begun",
            by=by if isinstance(by, int) and not isinstance(by, bool) and by > 0 else None,
        )

    def _end_orphans(self) -> None:
        """An action whose gputui is gone with no end line (quit or killed
        mid-action) is over: for ACTION_MAX_S its consequences — a run's
        crash, a hang — were taken as the user's doing, and the banner and
        the alerts stayed dark (issue 44)."""
        me = os.getpid()
        for act in self._actions.values():
            gone = act.by is not None and act.by != me and not _process_alive(act.by)
            if act.end is None and gone:  # what followed is news: nobody finishes it
                act.end = act.start
                self.gate.expect(act.start, act.start)

    def note_begun(self, action: str, created: float, pids: Sequence[int]) -> None:
        """The dashboard's own confirmed plan, told in-process as it begins
        (the audit log's "begun" line says the same, read a tick later: under
        load the run's consequences — its log moved aside — could be on the
        banner first, as news)."""
        if _expected(action):  # keyed as the audit log's lines are: the plan's time to 1 ms
            self._expect(action, time.time(), round(created, 3), list(pids), ended=False)

    def _expect(
        self,
        action: str,
        t: float,
        created: float,
        pids: list[int],
        *,
        ended: bool,
        by: int | None = None,
    ) -> None:
        start = min(t, created)
        self.gate.expect(start, t + (self.settle_s if ended else ACTION_MAX_S))
        act = self._actions.setdefault(start, UserAction(action, start))
        act.pids |= set(pids)
        if by is not None and act.end is None:
            act.by = by
        if ended:
            act.end = t

    async def import_audit(self) -> int:
        """Actions on this target from the audit log (keyed, so re-reading adds nothing)."""
        p = self.audit_file
        if p is None:
            return 0
        try:
            st = p.stat()
        except OSError:
            return 0
        if st.st_mtime == self._audit_mtime:
            return 0
        self._audit_mtime = st.st_mtime
        added = 0
        text = await asyncio.get_running_loop().run_in_executor(None, _read_text, p)
        for line in text.splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if not isinstance(e, dict) or e.get("target") != self.name or e.get("phase"):
                continue  # another target's, or the line saying an action began
            t = float(e.get("epoch") or 0.0)
            action = str(e.get("action") or "")
            ok = "ok" if e.get("ok") else "failed"
            if await self._event(
                EventRow(
                    t, "action", action, ok, "", str(e.get("outcome") or "")[:500], f"{t}:{action}"
                )
            ):
                added += 1
        return added


async def _after(previous: asyncio.Future[Any] | None, send: Any) -> Any:
    """Run `send` once the previous send is over: a "resolved" never
    overtakes its alert."""
    if previous is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(previous)
    return await send


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _read_text(p: Path) -> str:
    return p.read_text(encoding="utf-8", errors="replace")


def _with_cursor(run: RunInfo, cursor: int, t: float, unit: str) -> RunInfo:
    return RunInfo(
        run.id,
        run.target,
        run.log_path,
        run.inode,
        run.generation,
        run.first_seen,
        max(run.last_seen, t),
        cursor,
        unit or run.throughput_unit,
    )


def _severity(text: str) -> Any:
    from gputui.model import Severity

    try:
        return Severity(text)
    except ValueError:
        return Severity.WARNING
