"""From Settings to the parts the dashboard runs on: target, monitor, actions.

`--demo` builds the local demo environment (private tmux server, a buffered
training script, simulated GPUs); `--local` watches this machine with NVML;
otherwise the ssh transport reaches the host (and the container, if any).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.actions.backend import ActionBackend
from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.monitor import GpuFeed, WatchedRun, simulated_gpus, watch_run
from gputui.remote.target import make_target

if TYPE_CHECKING:
    from gputui.record.recorder import RunRecorder


@dataclass
class Parts:
    monitor: WatchedRun
    actions: ActionBackend  # in --read-only too: the verbs that change nothing
    can_launch: bool
    start: Callable[[], Awaitable[None]]
    on_exit: Callable[[], Awaitable[None]]
    settings: Settings
    recorder: RunRecorder | None = None  # history and alerts
    history_error: str | None = None  # why the history is off, when it could not open


def build_recorder(monitor: WatchedRun, settings: Settings) -> tuple[RunRecorder, str | None]:
    """The dashboard's recorder: the history ([history] enabled) and the
    alerts (the config's notification URLs, the terminal's bell). When the
    history file cannot be used: alerts only, and why — the dashboard then
    runs without history rather than not at all."""
    from gputui.record.alerts import AppriseSender
    from gputui.record.recorder import RunRecorder, open_history

    sender = AppriseSender(list(settings.alert_urls))
    writer, why = None, None
    try:
        writer = open_history(settings)
    except GputuiError as err:
        why = f"no history this time: {err}"
    recorder = RunRecorder.for_settings(
        monitor, writer, settings, shared_sinks=[sender.send] if sender.enabled else []
    )
    return recorder, why


def build(settings: Settings) -> Parts:
    gpu_feed: GpuFeed | None = None
    demo = None
    if settings.demo:
        from gputui.demo.environment import GPUS, DemoEnvironment
        from gputui.statefiles import set_audit_path

        demo = DemoEnvironment()
        demo.prepare()
        demo.apply_env()
        demo.launch()
        settings = demo.settings(settings)
        settings.history_path = str(demo.root / "history.sqlite")  # not the user's history
        set_audit_path(demo.root / "audit.log")  # nor the user's audit log
        gpu_feed = simulated_gpus(GPUS, demo.load, name="NVIDIA H200 (simulated)")
    target = make_target(settings)
    transport = target.transport
    monitor = watch_run(target, settings, gpu_feed)
    # --read-only: Verb.changes greys; plans read the run through the monitor's agent
    actions = ActionBackend(target, settings, monitor, monitor.run_facts)
    recorder, history_error = build_recorder(monitor, settings)

    async def start() -> None:
        try:
            await transport.connect()
        except Exception as e:  # show it in the header too, not only as a toast
            monitor.connection_failed(str(e))
            raise
        await monitor.start()
        if recorder is not None:
            await recorder.start()

    async def on_exit() -> None:
        if recorder is not None:
            with contextlib.suppress(Exception):
                await recorder.stop()
            if recorder.writer is not None:
                await asyncio.get_running_loop().run_in_executor(None, recorder.writer.close)
        with contextlib.suppress(Exception):
            await transport.close()
        if demo is not None:
            demo.teardown()
            from gputui.statefiles import set_audit_path

            set_audit_path(None)

    return Parts(
        monitor,
        actions,
        bool(settings.run.command),
        start,
        on_exit,
        settings,
        recorder,
        history_error,
    )
