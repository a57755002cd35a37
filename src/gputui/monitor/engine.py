"""The monitor: one target's run, kept current in a Snapshot — the composer
of its feeds, each a module beside this one with its agent op, its part of
the Snapshot and the update it emits.

Steady state holds a handful of long-lived remote commands and starts no
new command in the container per poll:

- the agent in the CT (`AgentClient`, kept running by `AgentSupervisor`):
  every `interval` seconds one `batch` of the feeds' requests — tmux's
  sessions (sessionwatch.py), the watched pane's process tree and tail, or
  with no tmux session the run that writes the log (runprocs.py), a stat
  of the log (logstat.py), and now and then (`NOW_AND_THEN`, feed.py's
  `NowAndThen`) the OOM-kill count (oomcount.py), who holds a port
  (portwatch.py) and whose each GPU holder is (gpuowners.py);
- one log stream (`LogFollower`: `tail -c +OFFSET -F`, by byte offset), on
  the file `LogChoice` picks, its lines read for metrics (metricsread.py);
- the GPU feed (`NvidiaSmiFeed`: `nvidia-smi -lms` + a compute-apps loop on
  the host; or NVML locally; or simulated).

Without python3 in the CT, a long-lived shell loop lists the tmux panes
instead (plainloop.py: no process tree then; `tools.python3` says why).
The container's status, tools and neighbours: containerwatch.py.

Each poll finishes before the next is scheduled (no pile-up on a slow
link). Subscribers are called on the event loop once per turn with that
turn's news (monitor/door.py): an update per changed part (`GpusRead`,
`SessionsChanged`, ...) and the log's new lines themselves (`LogLines`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from gputui.config import DEFAULTS, Settings
from gputui.errors import CommandTimeout, ConfigError
from gputui.model import (
    ConnectionState,
    CtStatus,
    LogState,
    Metrics,
    Proc,
    Session,
    Snapshot,
)
from gputui.monitor.coalesce import OncePerTurn
from gputui.monitor.containerwatch import ContainerWatch
from gputui.monitor.door import (
    PENDING_LINES_MAX,
    AgentFacts,
    ConnectionChanged,
    CtChanged,
    GpusRead,
    Listener,
    LogChanged,
    MetricsChanged,
    ProcsChanged,
    Update,
    news_of,
)
from gputui.monitor.feed import NowAndThen, Poll
from gputui.monitor.gpufeed import (
    GpuFeed,
    NvidiaSmiFeed,
    SharedGpus,
    default_gpu_feed,
    note_gpu_tools,
)
from gputui.monitor.gpuowners import GpuOwnerWatch
from gputui.monitor.logchoice import LOG_TAIL_KEEP, LogChoice
from gputui.monitor.logfollow import LogFollower
from gputui.monitor.logstat import LogStat
from gputui.monitor.metricsread import MetricsRead
from gputui.monitor.oomcount import OomCount
from gputui.monitor.oomlook import OomLook
from gputui.monitor.plainloop import PlainLoop
from gputui.monitor.portwatch import PortWatch
from gputui.monitor.runprocs import RunProcs
from gputui.monitor.runread import RunRead
from gputui.monitor.sessionwatch import SessionWatch
from gputui.monitor.supervisor import CT_STOPPED_RETRY_S, AgentSupervisor
from gputui.remote.agent_client import AgentClient, AgentError
from gputui.remote.local import own_ancestry
from gputui.remote.target import Target
from gputui.tasks import cancel_and_wait

log = logging.getLogger(__name__)  # `gputui -v` (cli/debuglog.py)

NAMED_LOG_WAIT_S = 1.0  # start-up waits this long more for the named log's first header

# The feeds asked now and then in a poll's batch (monitor/feed.py): a new one
# is its module and its line here.
NOW_AND_THEN: tuple[type[NowAndThen], ...] = (
    OomCount,  # the run's cgroup OOM-kill count (the agent's `oom` op)
    PortWatch,  # who holds a port the run's output says was taken (`listeners`)
    GpuOwnerWatch,  # whose each GPU holder is (`owners`)
)


class Monitor:
    """See the module docstring. Its door (monitor/door.py, `WatchedRun`):
    snapshot, subscribe, unsubscribe, start, stop, refresh,
    watch_session, watch_log, target, settings, interval, poll_every and
    the typed questions (agent_facts, log_followed, ...).

    `interval`: seconds between polls (default: the settings'). `host_names`:
    the host's listing of its containers ("lxc:201" -> name), kept current by
    the owner (the host view): the monitor then reads none of its own."""

    def __init__(
        self,
        target: Target,
        settings: Settings | None = None,
        gpu_feed: GpuFeed | None = None,
        *,
        clock: Callable[[], float] = time.time,
        agent_python: str = "python3",
        interval: float | None = None,
        host_names: dict[str, str] | None = None,
    ) -> None:
        self.target = target
        self.settings = settings if settings is not None else Settings()
        self.clock = clock
        self.interval = float(interval or self.settings.interval or DEFAULTS.interval)
        self.snapshot = Snapshot(time=clock(), target=target.label, container=target.container)
        if host_names is not None:
            self.snapshot.container_names = host_names
        if not target.in_container:
            self.snapshot.ct_status = CtStatus.NONE
        self.gpu_feed = (
            gpu_feed if gpu_feed is not None else default_gpu_feed(target, self.settings)
        )
        if self.gpu_feed is not None:
            self.snapshot.gpus = self.gpu_feed.state
        self.metrics_read = MetricsRead(self.settings)  # steps, loss, throughput from the log
        self.agents = AgentSupervisor(target, python=agent_python, clock=clock)
        self.log_choice = LogChoice(
            target,
            self.settings,
            on_lines=self._on_log_lines,
            on_state=lambda _st: self._changed(LogChanged),
            on_switch=self._log_switched,
            clock=clock,
            on_read=self._log_read,
        )
        self.polls = 0
        self.dropped_log_lines = 0
        self._listeners: list[Listener] = []
        self._turn_lines: deque[str] = deque(maxlen=PENDING_LINES_MAX)  # this turn's
        self._turn_dropped = 0
        self._dirty: set[type[Update]] = set()
        self._publish = OncePerTurn(self._flush)
        # under --local, the panes gputui itself runs in: never chosen unasked
        own = own_ancestry() if self.settings.local else frozenset()
        self.session_watch = SessionWatch(self.settings.session, own)
        self.run_procs = RunProcs(self._changed, self.log_choice.known)
        self.run_read = RunRead(self._changed, clock)  # whether procs/sessions are current
        self._poll_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        # the log's stat (its stream's watchdog, its file system's space)
        self.log_stat = LogStat(self.snapshot, lambda: self.follower, self._changed)
        # no python3 in the CT: a shell loop lists the panes and stats the log
        self.plain_loop = PlainLoop(
            target, self._set_sessions, self.log_stat.observe, lambda: self.follower, self._spawn
        )
        self._start_task: asyncio.Task[None] | None = None
        self._stopping = False
        self.now_and_then = [feed() for feed in NOW_AND_THEN]
        # the container's status, tools and neighbours (the host view names its own)
        self.container_watch = ContainerWatch(
            target, self.snapshot, clock, self._changed, neighbours_read=host_names is not None
        )
        self.oom_look = OomLook(target, clock)  # the kernel log, once a run vanished quietly

    @property
    def agent(self) -> AgentClient | None:
        """The agent in the container, when one runs."""
        return self.agents.agent

    @property
    def agent_error(self) -> str | None:
        """Why there is no agent (or the last request failed), for doctor."""
        return self.agents.error

    @agent_error.setter
    def agent_error(self, error: str | None) -> None:
        self.agents.error = error

    @property
    def agent_starts(self) -> int:
        return self.agents.starts

    @property
    def follower(self) -> LogFollower | None:
        """The stream of the log followed now, if any."""
        return self.log_choice.follower

    # ------------------------------------------------------------ the door's questions

    @property
    def agent_facts(self) -> AgentFacts | None:
        """What the agent said of itself (None: none started yet)."""
        return self.agents.facts

    @property
    def log_followed(self) -> bool:
        return self.follower is not None

    @property
    def ct_pids_pending(self) -> bool:
        """Once the CT's PID namespace is known, a PID still unmapped stays
        so (it has exited): waiting longer would change nothing."""
        feed = self.gpu_feed
        if not isinstance(feed, NvidiaSmiFeed | SharedGpus) or feed.ct_pid_ns is not None:
            return False
        return self.agent_error is None

    async def processes_of(self, pid: int) -> list[Proc] | None:
        return await self.agents.processes_of(pid)

    async def run_facts(self, request: dict[str, Any]) -> dict[str, Any] | None:
        return await self.agents.run_facts(request)

    # ------------------------------------------------------------ publishing

    def subscribe(self, callback: Listener) -> None:
        self._listeners.append(callback)

    def unsubscribe(self, callback: Listener) -> None:
        """No more news to `callback` (a view that closed)."""
        if callback in self._listeners:
            self._listeners.remove(callback)

    def poll_every(self, seconds: float) -> None:
        """Poll at this pace from the next poll on (a host view's monitor:
        slow in the background, the dashboard's pace while one shows it)."""
        self.interval = float(seconds)

    def connection_failed(self, error: str) -> None:
        """The connection could not be made (before start()): subscribers see
        it at once, like any change of the connection."""
        self.snapshot.connection = ConnectionState.FAILED
        self.snapshot.connection_error = error
        self._dirty.add(ConnectionChanged)
        self._flush()

    def _changed(self, *kinds: type[Update]) -> None:
        """These kinds of update go out with this event-loop turn's news."""
        self._dirty.update(kinds)
        self._publish.request()

    def _flush(self) -> None:
        """This turn's news to every listener: an update per kind that came,
        and the lines that came (LogLines)."""
        kinds, self._dirty = self._dirty, set()
        lines, dropped = tuple(self._turn_lines), self._turn_dropped
        self._turn_lines.clear()
        self._turn_dropped = 0
        if not kinds and not lines:
            return
        news = news_of(kinds, lines, dropped)
        self.snapshot.time = self.clock()
        for cb in list(self._listeners):
            try:
                cb(self.snapshot, news)
            except Exception:  # one listener's bug must not starve the others (the recorder)
                log.exception(
                    "a listener of the monitor failed on %s", [type(u).__name__ for u in news]
                )

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect if needed and start every part; returns after the first
        poll. A stop() meanwhile (q while starting) ends it early, quietly."""
        if self._running:
            return
        self._running = True
        self._stopping = False
        task = asyncio.create_task(self._start(), name="monitor start")
        self._start_task = task
        try:
            await task
        except asyncio.CancelledError:
            if self._stopping and task.cancelled():
                return  # stop() ended the start-up
            raise
        except BaseException:
            # a failed start leaves nothing running and can be tried again
            # (it left `_running` set, so a retry returned at once and no
            # poll ever ran: the host view said "idle" forever, watch recorded
            # nothing)
            await self.stop()
            raise
        finally:
            if self._start_task is task:
                self._start_task = None

    async def _start(self) -> None:
        snap = self.snapshot
        snap.started = self.clock()
        tr = self.target.transport
        if tr.state == ConnectionState.CONNECTING:
            await tr.connect()  # ConnectError: one line with the fix, for the caller
        tr.on_state(self._on_connection)
        snap.connection = tr.state
        snap.connection_error = tr.state_detail
        snap.rtt_ms = tr.rtt_ms
        self._changed(ConnectionChanged)
        # Everything at once, each part published as it lands: the GPU feed
        # and (when the log path is known from --log / the config) the log
        # stream run as their own tasks while the agent starts. No `pct
        # status` up front: a running agent proves the CT runs; the CT is
        # checked only when the agent fails.
        if self.gpu_feed is not None:
            self.gpu_feed.subscribe(self._on_gpus)
            await self.gpu_feed.start()
        if not self.container_watch.neighbours_read:
            self._spawn(self.container_watch.read_neighbours(), "neighbours")
        if self.log_choice.wanted(self.snapshot.procs) is not None:
            await self._choose_log()
        try:
            await self._while_checking_log(self._ensure_agent_and_refresh())
        except (AgentError, CommandTimeout, asyncio.TimeoutError) as err:
            # a slow or failed first poll (a loaded host: tmux list-panes over
            # its time limit) is not the end of the monitor: the poll loop
            # below retries, as it does for every later poll
            self.agent_error = f"first poll failed: {type(err).__name__}: {err}"
        self._note_listing(snap.started)
        self._tasks.append(asyncio.create_task(self._poll_loop(), name="monitor poll"))
        self._changed(ConnectionChanged, CtChanged)

    async def _ensure_agent_and_refresh(self) -> None:
        await self._ensure_agent()
        await self.refresh()

    async def _while_checking_log(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` while the named log is checked; a bad log ends both at
        once (the user hears of a wrong --log before the agent is even up).
        The stream's header gets NAMED_LOG_WAIT_S more once `work` is done."""
        check = asyncio.ensure_future(self.log_choice.check_named())
        job = asyncio.ensure_future(work)
        try:
            await asyncio.wait({check, job}, return_when=asyncio.FIRST_EXCEPTION)
            if check.done():
                await check  # raises the ConfigError, if any
            await job
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(check), NAMED_LOG_WAIT_S)
        finally:
            for t in (check, job):
                if not t.done():
                    t.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await t

    async def stop(self) -> None:
        """Close every channel; nothing is left running on the target."""
        self._running = False
        self._stopping = True
        start, self._start_task = self._start_task, None
        if start is not None and start is not asyncio.current_task():
            start.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await start
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        await self.log_choice.stop()
        if self.gpu_feed is not None:
            await self.gpu_feed.stop()
        await self.agents.stop()
        await self.plain_loop.close()

    async def refresh(self) -> None:
        """Poll now (waits for a poll already running)."""
        async with self._poll_lock:
            await self._poll()

    def watch_session(self, name: str | None) -> None:
        """Watch this tmux session (None: the only / most recent one)."""
        self.session_watch.watch(name, self.snapshot)
        self._wake.set()

    def watch_log(self, path: str) -> None:
        """Follow this log file instead of the one found from stdout."""
        self.log_choice.override = path or None
        self._wake.set()

    @property
    def channels(self) -> int:
        """Long-lived remote commands held open now."""
        n = 0
        if self.agent is not None and self.agent.alive:
            n += 1
        if self.follower is not None and self.follower.running:
            n += 1
        if self.plain_loop.proc is not None:
            n += 1
        if self.gpu_feed is not None:
            n += self.gpu_feed.channels
        return n

    # ------------------------------------------------------------ connection / CT

    def _on_connection(self, state: ConnectionState, detail: str | None) -> None:
        snap = self.snapshot
        snap.connection = state
        snap.connection_error = detail
        snap.rtt_ms = self.target.transport.rtt_ms
        if state == ConnectionState.CONNECTED:
            self.agents.retry_now()  # a fresh link: restart the agent at once
            self._wake.set()
            if self.follower is not None and self.follower.running:
                self.follower.kick()
            if self.gpu_feed is not None:
                self.gpu_feed.kick()
        self._changed(ConnectionChanged)

    def _on_gpus(self) -> None:
        """The GPU feed's news, told to the listeners in the feed's own turn
        of the event loop: the feed already coalesced its sample's lines
        (`_changed` would wait one turn more — a wake of the event loop
        each second, for nothing)."""
        note_gpu_tools(self.gpu_feed, self.snapshot.tools)
        self._dirty.add(GpusRead)
        self._publish.now()

    # ------------------------------------------------------------ the agent

    async def _ensure_agent(self) -> None:
        """Start the agent if it is due; a start that failed checks the CT
        (and without python3, starts the plain-command fallback)."""
        started = await self.agents.ensure()
        if started is None:
            return
        if started.agent is None:
            await self.container_watch.check(started.problem)
            if self.snapshot.ct_status == CtStatus.STOPPED:
                self.agents.look_again_within(CT_STOPPED_RETRY_S)  # started again soon?
            if started.no_python:
                await self.container_watch.probe_tools()
                await self._ensure_fallback()
            return
        agent = started.agent
        await self.plain_loop.close()
        self.container_watch.agent_up(agent)
        if self.follower is not None:
            self.follower.clock_offset = agent.clock_offset
        if isinstance(self.gpu_feed, NvidiaSmiFeed | SharedGpus) and self.target.in_container:
            self.gpu_feed.ct_pid_ns = agent.hello.get("pid_ns")

    # ------------------------------------------------------------ polling

    async def _poll_loop(self) -> None:
        while self._running:
            await self._pause()
            self._wake.clear()
            asked = self.clock()
            try:
                async with self._poll_lock:
                    await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a poll must never kill the monitor
                self.agent_error = f"poll failed: {type(err).__name__}: {err}"
            self._note_listing(asked)

    async def _pause(self) -> None:
        """`interval` seconds, or less when `_wake` is set: a bare timer sets
        it (`asyncio.wait_for` wrapped the wait in a task of its own and a
        timeout of its own, ~6 event-loop callbacks a poll, every second)."""
        timer = asyncio.get_running_loop().call_later(self.interval, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()

    def _note_listing(self, asked: float) -> None:
        snap, problem = self.snapshot, self.agent_error or ""
        if self.session_watch.note_listing(snap, asked, self.clock(), problem):
            self._changed(ProcsChanged)

    async def _poll(self) -> None:
        self.polls += 1
        if self.agent is not None and not self.agent.alive:  # said while the next one starts
            self.run_read.unread(self.snapshot, self.agent_error or "")
        await self._ensure_agent()
        agent, read = self.agent, False
        if agent is not None:
            try:
                await self._poll_agent(agent)
                read = True
            except (AgentError, CommandTimeout) as err:
                await self.agents.lost(agent, str(err))
        if not read and self.plain_loop.proc is None:  # what is shown of the run is old
            self.run_read.unread(self.snapshot, self.agent_error or "")
        await self._choose_log()
        if self.agent is None and self.plain_loop.proc is not None:
            await self._ensure_fallback()  # the log it stats may have changed
        if await self.oom_look.after_poll(self.snapshot):  # the run vanished without a word
            self._changed(ProcsChanged)

    def _now_and_then_calls(self, poll: Poll) -> dict[str, tuple[str, dict[str, Any]]]:
        """The poll's batch's requests that are not in every poll: each
        now-and-then feed's op, when it asks (NOW_AND_THEN)."""
        calls = {}
        for feed in self.now_and_then:
            if (args := feed.call(self.snapshot, poll)) is not None:
                calls[feed.op] = (feed.op, args)
        return calls

    def _apply_now_and_then(self, answers: dict[str, Any]) -> None:
        """The answers to `_now_and_then_calls`' requests into the snapshot."""
        poll = Poll(self.run_procs.pane_pid, time.time())
        for feed in self.now_and_then:
            if (kind := feed.apply(answers.get(feed.op), self.snapshot, poll)) is not None:
                self._changed(kind)

    async def _poll_agent(self, agent: AgentClient) -> None:
        """One poll, in one round trip when the watched pane and the log are
        those of the last poll (nearly always): the sessions, the pane's
        process tree and last lines and a stat of the log go in one `batch`
        (4 requests were 8 packets a second). A pane or log that changed is
        asked for again on its own."""
        snap, run = self.snapshot, self.run_procs
        calls = {"sessions": self.session_watch.call(agent)}
        calls.update(run.calls(agent))
        calls.update(self.log_stat.call(agent))
        calls.update(self._now_and_then_calls(Poll(run.pane_pid)))
        answers = dict(zip(calls, await agent.batch(list(calls.values())), strict=True))
        self._set_sessions(agent.sessions_result(answers["sessions"]))
        await run.read(agent, answers, snap)
        self._apply_now_and_then(answers)
        # The log path may come from these processes' stdout: open its stream
        # now, so it starts while the pane is captured.
        await self._choose_log()
        await run.capture(agent, answers, snap)
        await self.log_stat.apply(agent, answers)

    def _set_sessions(self, sessions: list[Session]) -> None:
        self.run_read.read(self.snapshot)
        if self.session_watch.apply(sessions, self.snapshot, self.clock()):
            self._changed(self.session_watch.emits)

    # ------------------------------------------------------------ the log

    def named_log_error(self) -> ConfigError | None:
        """The log the user named is a directory or a device (LogChoice.named_error)."""
        return self.log_choice.named_error()

    async def _choose_log(self) -> None:
        if await self.log_choice.choose(self.snapshot.procs):
            self._changed(LogChanged, MetricsChanged)

    def _log_switched(self, f: LogFollower | None) -> None:
        """Another log is followed from now on: the snapshot shows its state,
        its tail and metrics parsed from it alone."""
        snap = self.snapshot
        snap.metrics = Metrics()
        if f is None:
            snap.log = LogState()
            snap.log_tail = deque(maxlen=LOG_TAIL_KEEP)
            return
        if self.agent is not None:
            f.clock_offset = self.agent.clock_offset
        snap.log = f.state
        snap.log_tail = f.tail

    def _on_log_lines(self, lines: list[str]) -> None:
        n = len(lines)
        overflow = len(self._turn_lines) + n - PENDING_LINES_MAX
        if overflow > 0:
            self.dropped_log_lines += overflow
            self._turn_dropped += overflow
        self._turn_lines.extend(lines if n <= PENDING_LINES_MAX else lines[-PENDING_LINES_MAX:])
        f = self.follower
        backlog = f is not None and f.batch_is_backlog
        now = f.batch_time if f is not None and f.batch_time else self.clock()
        if self.metrics_read.read(lines, self.snapshot.metrics, now, backlog):
            kinds: tuple[type[Update], ...] = (LogChanged, self.metrics_read.emits)
        else:
            kinds = (LogChanged,)
        if f is not None and f.consuming and f.on_read is not None:
            self._dirty.update(kinds)  # told when the read is done (_log_read)
        else:
            self._changed(*kinds)

    def _log_read(self) -> None:
        """A read of the log's stream was handed out: its lines go to the
        listeners now, in the read's own turn of the event loop, as one
        batch (as the GPU feed's samples do) — `_changed` waited one turn
        more, a wake of the event loop for each batch (~5 a second while a
        log streams). A flush already due this turn takes them instead."""
        if self._turn_lines or self._turn_dropped or self._dirty:
            self._publish.now()

    # ------------------------------------------------------------ the plain-command loop

    async def _ensure_fallback(self) -> None:
        """No python3 in the CT: the plain-command loop lists the panes and
        stats the log followed (plainloop.py)."""
        log = self.follower.read_path if self.follower is not None else ""
        err = await self.plain_loop.ensure(log, self.interval)
        if err is not None:
            self.agent_error = f"{self.agent_error}; {err}"

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run `work` as the monitor's task: stop() ends it."""
        self._tasks.append(asyncio.create_task(work, name=name))

    @property
    def plain_loop_pending(self) -> bool:
        return self.plain_loop.pending

    @property
    def sessions_pending(self) -> bool:
        return self.agent_error is None and self.session_watch.listed_at is None

    @property
    def kernel_log_pending(self) -> bool:
        return self.oom_look.reading


async def collect_snapshot(
    target: Target,
    settings: Settings | None = None,
    settle_s: float = 2.0,
    gpu_feed: GpuFeed | None = None,
) -> Snapshot:
    """One snapshot for `gputui doctor`: start a monitor, let the streams
    deliver for `settle_s`, stop it (nothing left running), return it."""
    mon = Monitor(target, settings, gpu_feed)
    try:
        await mon.start()
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline:
            await asyncio.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
            if mon.follower is None or mon.snapshot.log.exists is not None:
                gpus = mon.snapshot.gpus
                if (gpus.latest or gpus.error) and time.monotonic() > deadline - settle_s / 2:
                    break
        await mon.refresh()
    finally:
        await mon.stop()
    return mon.snapshot
