"""`gputui watch`: headless — keep the connections, record, alert, export.

Meant for `systemd --user` or a tmux window. One process watches several
targets (`[user@]host[/ct]`, or `local`; none named: the config's
`[[targets]]`, as the dashboard and `doctor` take them); each gets a Monitor and a
RunRecorder writing to the one history file; alerts go to the notification
URLs of the config and, one line each, to stdout; `--prometheus ADDR`
serves /metrics. A target that cannot be reached is retried (the
"connection" finding alerts once it has been down `connection_down_after`
seconds). SIGTERM or SIGINT stop it cleanly: every remote command closed,
the history flushed, exit 0. So does SIGHUP (its terminal closed; what went
to that terminal goes nowhere from then on), unless it was started with
SIGHUP ignored (`nohup gputui watch …`): then it goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from gputui.config import Settings, settings_naming
from gputui.containers import parse_container
from gputui.diagnose.compare import summary
from gputui.errors import GputuiError
from gputui.host.targets import host_settings
from gputui.model import ConnectionState
from gputui.record.alerts import Alert, AppriseSender
from gputui.record.history import HistoryWriter
from gputui.record.recorder import RunRecorder, open_history
from gputui.remote.target import TARGET_GRAMMAR, parse_target
from gputui.text.untrusted import visible

if TYPE_CHECKING:
    from gputui.monitor import WatchedRun
    from gputui.remote.base import Transport

RETRY_START_S = 5.0
RETRY_MAX_S = 60.0
CLOSE_LIMIT_S = 20.0  # SIGTERM to exit: every target closed within this, at once
LINGER_S = 2.0  # then what did not close gets this long after its cancel (run_bounded)


def target_settings(spec: str, base: Settings) -> Settings:
    """`[user@]host[:port][/ct]` (the grammar of every command) or `local` ->
    a copy of the settings for that target."""
    if spec == "local":
        return dataclasses.replace(base, local=True, host=None, ct_id=None)
    try:
        t = parse_target(spec)
    except ValueError as err:
        raise GputuiError(
            f"watch target {err}",
            f"write {TARGET_GRAMMAR}, e.g. gputui watch root@10.1.2.6/200 gpu2 local",
        ) from None
    s = dataclasses.replace(
        base,
        host=t.host,
        user=t.user or base.user,
        port=t.port if t.port is not None else base.port,
        ct_id=t.ct_id if t.ct_id is not None else base.ct_id,
        local=False,
    )
    if t.place is not None:  # host/docker:NAME (podman:, pod:): its kind's field
        s = settings_naming(s, parse_container(t.place))
    return s


@dataclass
class Watched:
    settings: Settings
    transport: Transport
    monitor: WatchedRun
    recorder: RunRecorder
    task: asyncio.Task[None] | None = None


class Watch:
    """Several targets, one history, one alert sender, one /metrics."""

    def __init__(
        self,
        targets: Sequence[Settings],
        *,
        prometheus: str | None = None,
        prometheus_public: bool = False,
        out: TextIO | None = None,
        writer: HistoryWriter | None = None,
    ) -> None:
        if not targets:
            raise GputuiError("nothing to watch", "name targets: gputui watch HOST[/CT] ...")
        if prometheus:
            from gputui.record.prometheus import parse_address

            parse_address(prometheus, prometheus_public)  # a bad address: one line, at once
        base = targets[0]
        self.out = out if out is not None else sys.stdout
        self.writer = writer
        if self.writer is None:
            self.writer = open_history(base)
        self.sender = AppriseSender(list(base.alert_urls))
        self.exporter = None
        self.prometheus = prometheus
        self.prometheus_public = prometheus_public
        self.address: tuple[str, int] | None = None
        if prometheus:
            from gputui.record.prometheus import Exporter

            self.exporter = Exporter()
        self.watched = [self._build(s) for s in targets]
        self._stop = asyncio.Event()
        self._terminal_fds: list[int] = []  # stdin/stdout/stderr that are a terminal

    def _build(self, settings: Settings) -> Watched:
        from gputui.monitor import watch_run
        from gputui.remote.target import make_target

        monitor = watch_run(make_target(settings), settings)
        recorder = RunRecorder.for_settings(
            monitor,
            self.writer,
            settings,
            sinks=[self._print_alert],
            shared_sinks=[self.sender.send] if self.sender.enabled else [],
        )
        if self.exporter is not None:
            exporter = self.exporter
            recorder.tick_listeners.append(
                lambda snap, findings: exporter.update(
                    recorder.name, snap, findings, time.time(), key=id(recorder)
                )
            )
        # one name per target (issue 46): the recorder's, which alerts and the
        # history use — once connected `root@10.1.2.6:22 ct 200`, not the alias
        # as typed in /metrics and these lines while the webhook said the other
        recorder.error_listeners.append(lambda text: self.say(f"{recorder.name}: {text}"))
        # the run against its last one (issue 49): a line when the verdict changes
        recorder.verdict_listeners.append(lambda vs: self.say(f"{recorder.name}: {summary(vs)}"))
        return Watched(settings, monitor.target.transport, monitor, recorder)

    def _print_alert(self, alert: Alert) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(alert.time))
        print(f"{stamp} {alert.state} {alert.subject}", file=self.out, flush=True)

    def say(self, text: str) -> None:
        print(visible(text)[:500], file=self.out, flush=True)

    async def _keep_connected(self, w: Watched) -> None:
        """Connect, retrying with backoff; once up the monitor reconnects itself."""
        delay = RETRY_START_S
        while True:
            try:
                await w.transport.connect()
                await w.monitor.start()
                self.say(self._started_line(w))
                return
            except asyncio.CancelledError:
                raise
            except GputuiError as err:
                snap = w.monitor.snapshot
                snap.connection = ConnectionState.FAILED
                snap.connection_error = str(err)
                self.say(f"{w.monitor.target.label}: {err} — retrying in {delay:.0f} s")
            await asyncio.sleep(delay)
            delay = min(RETRY_MAX_S, delay * 2)

    @staticmethod
    def _started_line(w: Watched) -> str:
        """`watching TARGET`, or, when its container does not exist or is
        stopped, that problem and its fix (the watch goes on: the alert
        fires, and clears when the CT is back)."""
        target = w.monitor.target
        problem = target.container.not_running(w.monitor.snapshot.ct_status, w.transport.label)
        if problem is not None:
            return str(problem)
        return f"watching {target.label}"

    def stop(self) -> None:
        self._stop.set()

    def hung_up(self) -> None:
        """SIGHUP: the terminal is gone; a write to it would fail (EIO), so
        whatever of stdin/stdout/stderr was that terminal becomes /dev/null,
        then stop as SIGTERM does."""
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in self._terminal_fds:  # a hung-up terminal no longer says it is one
            os.dup2(devnull, fd)
        os.close(devnull)
        self.stop()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self._terminal_fds = [fd for fd in (0, 1, 2) if os.isatty(fd)]
        handlers = {signal.SIGTERM: self.stop, signal.SIGINT: self.stop}
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup: keep ignoring it
            handlers[signal.SIGHUP] = self.hung_up
        for sig, handler in handlers.items():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, handler)
        if self.exporter is not None and self.prometheus:
            from gputui.record.prometheus import PUBLIC_WARNING, is_loopback

            self.address = self.exporter.serve(self.prometheus, self.prometheus_public)
            host, port = self.address
            self.say(
                f"serving /metrics on http://{host}:{port}/metrics"
                + ("" if is_loopback(host) else f" — not loopback: {PUBLIC_WARNING}")
            )
        try:
            for w in self.watched:
                await w.recorder.start()
                w.task = asyncio.create_task(self._keep_connected(w))
            await self._stop.wait()
        finally:
            await self.close()
            for sig in handlers:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        self.say("stopped")
        return 0

    async def close(self) -> None:
        """Every target closed at once, within CLOSE_LIMIT_S in all: SIGTERM
        (or the terminal closing) ends watch in bounded time, whatever one
        target's remote commands do (under a full test suite on two busy
        cores, closing them one after another overran 30 s)."""
        closes = [asyncio.ensure_future(_close_watched(w)) for w in self.watched]
        if closes:
            # asyncio.wait, not wait_for: wait_for waits for the cancelled
            # closes to end, and a close that swallows its cancel (an await of
            # a task under suppress(CancelledError), deep in a monitor) would
            # hold watch past its limit, for ever.
            _, late = await asyncio.wait(closes, timeout=CLOSE_LIMIT_S)
            for t in late:  # cancelled, not waited for: run_bounded lets them go
                t.cancel()
        if self.writer is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.writer.close)
        if self.exporter is not None:
            self.exporter.close()


async def _close_watched(w: Watched) -> None:
    """One target's task, recorder, monitor and connection, each bounded."""
    if w.task is not None:
        w.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await w.task
    with contextlib.suppress(Exception):
        await w.recorder.stop()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(w.monitor.stop(), 15)
    with contextlib.suppress(Exception):
        await w.transport.close()


def watch_targets(
    specs: Sequence[str], base: Settings, flag_hosts: list[str] | None = None
) -> list[Settings]:
    """What `gputui watch` watches: the TARGETs on its command line, else the
    hosts the dashboard and `doctor` would take (`--host` given more than
    once, the config's `[[targets]]`, the one host or `local`)."""
    if base.demo:
        raise GputuiError(
            "watch takes no --demo: the demo run lives only as long as the dashboard that starts it",
            "see it with `gputui --demo`; watch a real target, or `local`",
        )
    if specs:
        return [target_settings(s, base) for s in specs]
    hosts = host_settings(base, flag_hosts)
    if len(hosts) > 1 or base.host or base.local or base.targets:
        return hosts
    raise GputuiError(
        "no target to watch",
        "name them: gputui watch [user@]host[/ct] ... (or `local`), or add [[targets]] to the config",
    )


def main(
    specs: Sequence[str],
    base: Settings,
    prometheus: str | None,
    flag_hosts: list[str] | None = None,
    prometheus_public: bool = False,
) -> int:
    targets = watch_targets(specs, base, flag_hosts)
    watch = Watch(targets, prometheus=prometheus, prometheus_public=prometheus_public)
    return run_bounded(watch.run())


def run_bounded(main: Coroutine[Any, Any, int], linger_s: float = LINGER_S) -> int:
    """asyncio.run(main), except that tasks left when main returns (closes
    past their limit) get linger_s to end after their cancel, not for ever:
    asyncio.run waits for every cancelled task, so one that swallows its
    cancel would keep the process alive after it said "stopped". The
    commands they held end with the process (local ones through their
    guards, remote ones with the connection)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in left:
            t.cancel()
        if left:
            loop.run_until_complete(asyncio.wait(left, timeout=linger_s))
        if any(not t.done() for t in left):  # abandoned: no "Task was destroyed" on the way out
            loop.set_exception_handler(lambda _loop, _context: None)
        for ending in (loop.shutdown_asyncgens(), loop.shutdown_default_executor()):
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(ending, linger_s))
        asyncio.set_event_loop(None)
        loop.close()
