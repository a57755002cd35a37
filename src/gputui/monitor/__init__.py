"""The run engine behind one door: one target's run kept current in a
Snapshot (`engine.py`, the composer), fed by a module per source — the GPU
readings (`gpufeed.py`), the followed log (`logfollow.py`, `logchoice.py`,
its stat `logstat.py`, its metrics `metricsread.py`), tmux's sessions
(`sessionwatch.py`), the run's processes (`runprocs.py`), the container
(`containerwatch.py`), the OOM kills (`oomcount.py`, `oomlook.py`), the
ports the run could not take (`portwatch.py`), the GPU holders' owners
(`gpuowners.py`), the plain-command loop without python3 (`plainloop.py`)
— and the in-container agent (`supervisor.py`). `feed.py` is the shape
the now-and-then feeds share (`NowAndThen`).

This package is the door: outside monitor/ a module imports `gputui.monitor`
and nothing under it (the `monitor-door` contract in pyproject.toml). It
builds a watched run from settings (`watch_run`) and hands out the GPU
feeds a run is watched with; what a user may ask of a run is the
`WatchedRun` protocol (monitor/door.py), never the `Monitor` class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gputui.monitor.door import (
    PENDING_LINES_MAX,
    UPDATES,
    AgentFacts,
    ConnectionChanged,
    CtChanged,
    GpusRead,
    Listener,
    LogChanged,
    LogLines,
    MetricsChanged,
    News,
    ProcsChanged,
    RunFeed,
    SessionsChanged,
    Update,
    WatchedRun,
    kinds_of,
    new_lines,
    news_of,
)
from gputui.monitor.gpufeed import (
    GpuFeed,
    NvidiaSmiFeed,
    SharedGpus,
    SimulatedGpus,
    apps_once_argv,
    parse_apps_block,
)
from gputui.monitor.gpuowners import holder_pids
from gputui.monitor.logchoice import stdout_log_files
from gputui.monitor.logfollow import log_kind, named_log, not_a_file_error
from gputui.monitor.portwatch import ports_named
from gputui.monitor.tools import probe_tools

if TYPE_CHECKING:
    from gputui.config import Settings
    from gputui.errors import ConfigError
    from gputui.remote.target import Target

__all__ = [
    "PENDING_LINES_MAX",
    "UPDATES",
    "AgentFacts",
    "ConnectionChanged",
    "CtChanged",
    "GpuFeed",
    "GpusRead",
    "Listener",
    "LogChanged",
    "LogLines",
    "MetricsChanged",
    "News",
    "ProcsChanged",
    "RunFeed",
    "SessionsChanged",
    "Update",
    "WatchedRun",
    "apps_once_argv",
    "holder_pids",
    "host_gpus",
    "kinds_of",
    "named_log_problem",
    "new_lines",
    "news_of",
    "nvidia_smi_gpus",
    "parse_apps_block",
    "ports_named",
    "probe_tools",
    "shared_gpus",
    "simulated_gpus",
    "stdout_log_files",
    "watch_run",
]


def watch_run(
    target: Target,
    settings: Settings | None = None,
    gpus: GpuFeed | None = None,
    *,
    agent_python: str = "python3",
    interval: float | None = None,
    host_names: dict[str, str] | None = None,
) -> WatchedRun:
    """A run on `target` watched as `settings` say (not started: `start()`).
    `gpus`: the GPU feed (default: the settings' source, nvidia-smi or NVML);
    `interval`: seconds between polls (default: the settings'); `host_names`:
    the host's listing of its containers, kept current by a host view."""
    from gputui.monitor.engine import Monitor

    return Monitor(
        target,
        settings,
        gpus,
        agent_python=agent_python,
        interval=interval,
        host_names=host_names,
    )


def nvidia_smi_gpus(target: Target, where: str, apps_period_s: float | None = None) -> GpuFeed:
    """The GPUs read with nvidia-smi on the host or in the container
    (`where`: "auto", "host", "ct"); `apps_period_s`: how often the compute
    apps are listed (doctor's short watch: every second)."""
    if apps_period_s is None:
        return NvidiaSmiFeed(target, where=where)
    return NvidiaSmiFeed(target, where=where, apps_period_s=apps_period_s)


def host_gpus(host: Target) -> NvidiaSmiFeed:
    """The host's GPU streams, shared by the host view's monitors."""
    return NvidiaSmiFeed(host, where="host")


def shared_gpus(host_feed: NvidiaSmiFeed, place: int | str | None) -> GpuFeed:
    """The host's GPU feed as the monitor of one container sees it."""
    return SharedGpus(host_feed, place)


def simulated_gpus(n: int, load: Callable[[], float], name: str) -> GpuFeed:
    """`n` made-up GPUs (--demo), as busy as `load` says (0..1)."""
    return SimulatedGpus(n, load, name=name)


async def named_log_problem(target: Target, settings: Settings) -> ConfigError | None:
    """The log the user named (--log, `[run] log`) when it is a directory,
    a device or unreadable: the one line to say; None otherwise."""
    log = named_log(settings)
    kind = await log_kind(target, log)
    return not_a_file_error(log, kind) if kind and log else None
