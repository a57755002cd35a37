"""Watch a whole host: its GPUs, its containers and the run in each.

One ssh connection per host. On it:

- the host's GPU streams (`host_gpus`, nvidia-smi on the host: readings and
  the compute-apps listing with each PID's cgroup, PID namespace and NSpid);
- the host's list of containers, asked every LIST_PERIOD_S (a host command,
  never a command inside a container);
- for each running container, a watched run (`watch_run`, monitor/'s door:
  its agent and log stream, the same as the run view's) whose GPU readings
  are the host's, filtered to that container (`shared_gpus`, mapped with its
  agent's PID namespace): a container's agent starts when it runs, stops
  when it stops, and none is left behind — `stop()` closes every channel.
  The monitors' commands all run through one relay on the host
  (remote/relay.py), so the host holds three channels whatever the number of
  containers.

Steady state costs no new command inside any container: the monitors ask
their agents over the channels they hold. A plain GPU server (no container
tool) gets one monitor: the host itself. A Docker host (no Proxmox tool, a
`docker` that answers) lists its containers with `docker ps -a`: each
running one gets a monitor keyed "docker:NAME", entered with `docker exec`.

`build_host_view` (view.py) turns all this into rows; `HostWatch.view`
is the latest, rebuilt at most every REBUILD_MIN_S when something changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from gputui.collect.nvidiasmi import parse_apps_listing
from gputui.config import DEFAULTS, RunConfig, Settings, settings_naming
from gputui.containers import Container, ContainerListing, container_for, listing_kinds
from gputui.diagnose import Diagnose, diagnose_with
from gputui.errors import GputuiError
from gputui.host.view import (
    HostView,
    Place,
    RunIndex,
    container_rows,
    gpu_rows,
    host_gpu_processes,
    host_row,
)
from gputui.model import ConnectionState, Finding, Snapshot
from gputui.monitor import (
    News,
    WatchedRun,
    host_gpus,
    new_lines,
    shared_gpus,
    stdout_log_files,
    watch_run,
)
from gputui.remote.base import Transport
from gputui.remote.relay_client import RelayTransport
from gputui.remote.target import Target, make_transport
from gputui.tasks import cancel_and_wait

LIST_PERIOD_S = 10.0  # how often the host lists its containers
KEPT_LINES = 500  # each container's last log lines, for a run view opened later
# How often a container's monitor polls its agent (tmux, processes, the
# log's stat) while only the host view shows it; the run view opened on it
# polls at the user's interval. The log and GPU streams are live either way.
BACKGROUND_POLL_S = 5.0
SESSIONS_PERIOD_S = 5.0  # how often the other sessions' process trees are asked for
REBUILD_MIN_S = 0.5  # the view is rebuilt at most this often
CONNECT_RETRY_START_S = 2.0
CONNECT_RETRY_MAX_S = 5.0  # as the transport's reconnects: a host back up is seen in ~5 s

Listener = Callable[[HostView], None]


class HostWatch:
    """See the module docstring. Public: view, subscribe, start, stop,
    monitor_for, channels; counters for tests and the benchmark."""

    def __init__(
        self,
        settings: Settings,
        transport: Transport | None = None,
        *,
        diagnose: Diagnose | None = None,
        clock: Callable[[], float] = time.time,
        list_period_s: float = LIST_PERIOD_S,
        agent_python: str = "python3",
    ) -> None:
        self.settings = settings
        self.transport = transport or make_transport(settings)
        self.host = Target(self.transport, None)
        # Every container's agent and log stream run through one relay on
        # the host: one channel however many containers run.
        self.relay = RelayTransport(self.transport, python=agent_python)
        self.clock = clock
        self.list_period_s = list_period_s
        self.agent_python = agent_python
        self.diagnose = diagnose or diagnose_with(settings.diagnosis)
        self.feed = host_gpus(self.host)
        self.view = HostView(label=self.transport.label)
        self.listing: list[ContainerListing] | None = None  # None: no container host (or not yet)
        self.names: dict[str, str] = {}  # "lxc:201" -> its name (Snapshot.container_names)
        self.plain: bool | None = None  # True: no container tool on the host
        self.monitors: dict[Place, WatchedRun] = {}
        self.ready: set[Place] = set()  # monitors past their first poll
        self.lent: set[Place] = set()  # monitors a run view shows now
        # each container's last log lines, by the log they came from: a run
        # view opened later starts with them (issue 46: it stayed blank until
        # the run wrote again, minutes for a buffered one)
        self.kept_lines: dict[Place, tuple[str | None, deque[str]]] = {}
        self.kind: type[Container] | None = None  # the kind the host's listing answered for
        self.runs = RunIndex()
        self.list_calls = 0
        self.list_error: str | None = None
        self.first_complete_s: float | None = None  # seconds from start() to a complete view
        self._started_at = 0.0
        self._listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._monitor_tasks: dict[Place, asyncio.Task[None]] = {}
        self._running = False
        self._rebuild_handle: asyncio.TimerHandle | None = None
        self._last_rebuild = 0.0

    # ------------------------------------------------------------ publishing

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _heard(self, place: Place, snap: Snapshot, news: News) -> None:
        """A container's run moved: its new log lines kept (a run view opened
        later starts with them), the view rebuilt soon."""
        lines = new_lines(news)
        if lines is not None:
            self._keep_lines(place, snap.log.path, lines.lines)
        self._changed()

    def _changed(self, *_: Any) -> None:
        """Something moved: rebuild the view soon (at most every REBUILD_MIN_S)."""
        if not self._running or self._rebuild_handle is not None:
            return
        loop = asyncio.get_running_loop()
        wait = max(0.0, self._last_rebuild + REBUILD_MIN_S - time.monotonic())
        self._rebuild_handle = loop.call_later(wait, self._rebuild)

    def _rebuild(self) -> None:
        self._rebuild_handle = None
        self._last_rebuild = time.monotonic()
        self.view = self.build_view()
        if self.first_complete_s is None and self.view.complete:
            self.first_complete_s = time.monotonic() - self._started_at
        for cb in list(self._listeners):
            cb(self.view)

    def _on_connection(self, state: ConnectionState, detail: str | None) -> None:
        if state == ConnectionState.CONNECTED:
            self.feed.kick()  # a fresh link: the GPU stream reopens now, not after its backoff
        self._changed()

    def build_view(self) -> HostView:
        now = self.clock()
        view = HostView(label=self.transport.label)
        view.connection = self.transport.state
        view.error = self.transport.state_detail
        view.containers_known = None if self.plain is None else not self.plain
        view.gpu_error = self.feed.state.error
        namespaces: dict[str, int | str] = {}
        for place, mon in self.monitors.items():
            agent = mon.agent_facts
            if place is not None and agent is not None and agent.pid_ns:
                namespaces[agent.pid_ns] = place
        lines = self.feed.last_listing
        view.holders_known = lines is not None
        ids = {c.id: self._key(c) for c in self.listing or [] if isinstance(c.id, str)}
        listing = parse_apps_listing(lines) if lines else None
        procs = host_gpu_processes(listing, namespaces, ids) if listing else []
        view.gpus = gpu_rows(self.feed.state, procs, self.runs, plain_host=bool(self.plain))
        snaps: dict[int | str, tuple[Snapshot, list[Finding]]] = {}
        host_snap: tuple[Snapshot, list[Finding]] | None = None
        for place, mon in self.monitors.items():
            if place not in self.ready:
                continue
            pair = (mon.snapshot, self.diagnose(mon.snapshot, now))
            if place is None:
                host_snap = pair
            else:
                snaps[place] = pair
        if self.plain:
            snap, findings = host_snap if host_snap is not None else (None, [])
            view.containers = [host_row(snap, findings, view.gpus)]
        elif self.listing is not None:
            rows = [(self._key(c), c.status, c.name) for c in self.listing]
            view.containers = container_rows(rows, snaps, view.gpus)
            if self.kind is not None and self.kind.HOST_RUNS_TOO:  # the host's row first
                snap, findings = host_snap if host_snap is not None else (None, [])
                view.containers.insert(0, host_row(snap, findings, view.gpus))
        return view

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start watching; returns at once. A host that cannot be reached is
        shown down and retried; nothing here raises for it."""
        if self._running:
            return
        self._running = True
        self._started_at = time.monotonic()
        self._tasks.append(asyncio.create_task(self._run(), name=f"host {self.view.label}"))

    async def _run(self) -> None:
        backoff = CONNECT_RETRY_START_S
        while self._running:
            try:
                await self.transport.connect()
                break
            except GputuiError as err:
                self.view.connection = ConnectionState.FAILED
                self.view.error = str(err)
                for cb in list(self._listeners):
                    cb(self.view)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, CONNECT_RETRY_MAX_S)
        self.transport.on_state(self._on_connection)
        # The relay starts while the host lists its containers: the monitors
        # need it the moment the list is in.
        self._tasks.append(asyncio.create_task(self._warm_relay(), name="relay start"))
        self.feed.subscribe(self._changed)
        await self.feed.start()
        self._changed()
        self._tasks.append(asyncio.create_task(self._index_loop(), name="host sessions"))
        while self._running:
            try:
                await self._list_containers()
            except (GputuiError, asyncio.TimeoutError) as err:
                self.list_error = str(err)  # the link is down: the transport reconnects
            self._changed()
            if self.plain:
                return  # a plain server: nothing to list again
            await asyncio.sleep(self.list_period_s)

    async def _warm_relay(self) -> None:
        with contextlib.suppress(GputuiError, OSError):
            await self.relay.start()

    async def _index_loop(self) -> None:
        while self._running:
            await asyncio.sleep(SESSIONS_PERIOD_S if self.runs.by_pid else 1.0)
            try:
                await self._index_sessions()
            except (GputuiError, asyncio.TimeoutError):
                continue
            self._changed()

    async def _list_containers(self) -> None:
        """Ask the host for its containers; start a monitor for each running
        one, stop those of containers that stopped."""
        self.list_calls += 1
        listing = await self._ask_listing()
        if listing is None:
            return
        self.plain = False
        self.listing = listing
        self.names.clear()
        self.names.update(self.kind.listed_names(listing) if self.kind is not None else {})
        running: set[Place] = {self._key(c) for c in self.listing if c.status == "running"}
        if self.kind is not None and self.kind.HOST_RUNS_TOO:
            running.add(None)  # a Docker host may run the run on itself too
        for place in running - set(self.monitors):
            self._start_monitor(place)
        for gone in [c for c in self.monitors if c not in running]:
            await self._stop_monitor(gone)

    async def _ask_listing(self) -> list[ContainerListing] | None:
        """The host's containers, listed by the first kind whose tool answers
        (`containers.listing_kinds`: the Proxmox list, else the Docker one or
        `podman ps -a`); None for a plain server (its monitor started) or
        when the host did not answer."""
        for kind in [self.kind] if self.kind is not None else listing_kinds():
            argv = kind.list_argv()
            res = await self.host.run_host(argv or [], timeout=15.0)
            if res.ok:
                self.kind = kind
                return kind.read_list(res.out)
            if self.kind is not None:
                return None
            if not kind.tool_absent(res.exit_status, res.err):
                if kind.TOOL_DECIDES_HOST:
                    return None  # this kind's host; its tool answers later
                self.list_error = res.err.strip()[:200]  # there, but not answering
        self.plain = True
        self._start_monitor(None)
        return None

    def _key(self, c: ContainerListing) -> int | str:
        """A listed container's key: a CT's number, else "docker:NAME"."""
        return self.kind.place(c) if self.kind is not None else c.id

    def _start_monitor(self, place: Place) -> None:
        # the run's fields (session, log, [run]) are per CT: none from the host's settings
        container = container_for(place)
        settings = dataclasses.replace(
            settings_naming(self.settings, container), session=None, log=None, run=RunConfig()
        )
        # the container's processes among the host's GPU readings: the
        # monitor maps them with its agent's PID namespace once it says hello
        feed = shared_gpus(self.feed, place)
        target = Target(self.relay, container)
        pace = max(float(settings.interval or DEFAULTS.interval), BACKGROUND_POLL_S)
        mon = watch_run(
            target,
            settings,
            feed,
            agent_python=self.agent_python,
            interval=pace,
            host_names=self.names,  # the host's list, kept current
        )
        mon.subscribe(partial(self._heard, place))
        self.monitors[place] = mon

        async def run() -> None:
            with contextlib.suppress(Exception):
                await mon.start()
            self.ready.add(place)
            self._changed()

        self._monitor_tasks[place] = asyncio.create_task(run(), name=f"monitor {place}")

    async def _stop_monitor(self, place: Place) -> None:
        mon = self.monitors.pop(place, None)
        task = self._monitor_tasks.pop(place, None)
        self.ready.discard(place)
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if mon is not None:
            with contextlib.suppress(Exception):
                await mon.stop()
        self.runs.by_pid.pop(place, None)

    async def _index_sessions(self) -> None:
        """Which session (and log) each process of each container belongs to:
        the watched session from the monitor's tree, the others asked of the
        container's agent over its open channel (no new command)."""
        runs = RunIndex()
        for place, mon in list(self.monitors.items()):
            snap = mon.snapshot
            log = snap.log.path or next(iter(stdout_log_files(snap.procs)), None)
            runs.add(place, [p.pid for p in snap.procs], snap.session_name, log)
            agent = mon.agent_facts
            if agent is None or not agent.alive:
                continue
            for s in snap.sessions:
                pane = s.main_pane
                if s.name == snap.session_name or pane is None or pane.dead or not pane.pid:
                    continue
                with contextlib.suppress(Exception):
                    procs = await mon.processes_of(pane.pid)
                    if procs is None:
                        break  # the agent went away meanwhile
                    other = next(iter(stdout_log_files(procs)), None)
                    runs.add(place, [p.pid for p in procs], s.name, other)
        self.runs = runs

    def _keep_lines(self, place: Place, path: str | None, lines: Sequence[str]) -> None:
        kept_path, kept = self.kept_lines.get(place, (path, deque(maxlen=KEPT_LINES)))
        if kept_path != path:  # another log now: its lines only
            kept = deque(maxlen=KEPT_LINES)
        kept.extend(lines)
        self.kept_lines[place] = (path, kept)

    def lines_of(self, place: Place, path: str | None) -> list[str]:
        """The last lines kept of `path` in this container (a run view opens
        with them); [] when they came from another log."""
        kept_path, kept = self.kept_lines.get(place, (None, deque()))
        return list(kept) if path is not None and kept_path == path else []

    def monitor_for(self, place: Place) -> WatchedRun | None:
        return self.monitors.get(place)

    @property
    def channels(self) -> int:
        """ssh channels held open now (the GPU streams and the relay)."""
        return self.feed.channels + self.relay.channels

    async def stop(self) -> None:
        """Close every channel and the connection; nothing is left running."""
        self._running = False
        if self._rebuild_handle is not None:
            self._rebuild_handle.cancel()
            self._rebuild_handle = None
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        for place in list(self.monitors):
            await self._stop_monitor(place)
        await self.relay.close()
        await self.feed.stop()
        with contextlib.suppress(Exception):
            await self.transport.close()
