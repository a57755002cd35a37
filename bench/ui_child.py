"""The UI process under test: the real GputuiApp (headless `run_test`) fed by
the real Monitor, watching the bench bed through ssh + pct.

Run by bench/run.py as `python bench/ui_child.py CONFIG.json OUT.json`, so
its CPU and RSS are its own. Hooks are wrappers set on widget instances
(nothing in src/ is changed):
- the Log widget's `write_lines`: when a stamped line lands in it;
- GpuTable.show / SessionList.show: when GPUs and sessions reach the screen.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gputui.config import Settings
from gputui.model import GpuState, Session
from gputui.monitor.engine import Monitor
from gputui.remote.base import CommandResult, RemoteProcess, Transport
from gputui.remote.target import Target
from gputui.ui.app import GputuiApp
from gputui.ui.widgets.gpus import GpuTable
from gputui.ui.widgets.logview import LogPanel
from gputui.ui.widgets.sessions import SessionList
from harness import (
    gpu_state,
    marker_of,
    parse_stamp,
    pct_calls,
    remote_cpu_s,
    rss_mb,
    summary,
    write_control,
    write_json,
)

PHASE_PROFILE: Any = None  # a cProfile.Profile on during the rate phases (config "cprofile")


class CountingTransport(Transport):
    """Delegates to the real transport; counts every command gputui starts."""

    def __init__(self, inner: Transport) -> None:
        super().__init__()
        self.inner = inner
        self.label = inner.label
        self.runs = 0
        self.opens = 0
        self.connects = 0
        inner.on_state(self._set_state)

    @property  # type: ignore[override]
    def rtt_ms(self) -> float | None:
        return self.inner.rtt_ms

    @rtt_ms.setter
    def rtt_ms(self, value: float | None) -> None:
        pass

    async def connect(self) -> None:
        self.connects += 1
        await self.inner.connect()

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        self.runs += 1
        return await self.inner.run(argv, timeout=timeout, input=input)

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        self.opens += 1
        return await self.inner.open(argv, watchdog=watchdog)

    async def close(self) -> None:
        await self.inner.close()


def make_transport(cfg: dict[str, Any]) -> tuple[Transport, str]:
    try:
        from gputui.remote.ssh import SshTransport
    except ImportError:
        from gputui.remote.local import LocalTransport

        os.environ["PATH"] = cfg["path"]
        os.environ["GPUTUI_STANDIN_STATE"] = cfg["state_dir"]
        cfg["sshd_pid"] = None  # the "remote" commands are this process's children
        return LocalTransport(), "local (no ssh: gputui.remote.ssh not landed)"
    return SshTransport(**cfg["transport"]), "ssh (asyncssh) to the real sshd"


class Probe:
    """Timestamps of what reached the widgets."""

    def __init__(self, n_gpus: int) -> None:
        self.n_gpus = n_gpus
        self.lat: list[float] = []
        self.collect = False
        self.log_lines = 0
        self.first_log: float | None = None
        self.first_gpus: float | None = None
        self.first_sessions: float | None = None
        self.burst_end: dict[int, float] = {}
        self.gpu_seen: dict[int, float] = {}  # GPU 0 marker -> first time on screen
        self.screen_lat: list[float] = []  # stamp -> the first frame sent after its write
        self._unpainted: list[float] = []  # stamps written to the Log, no frame sent since

    def install(self, app: GputuiApp) -> None:
        log = app._q(LogPanel).log
        orig_write = log.write_lines

        def write_lines(lines: Any, scroll_end: bool | None = None) -> Any:
            lines = list(lines)
            now = time.time()
            if lines:
                self.log_lines += len(lines)
                if self.first_log is None:
                    self.first_log = now
                for line in lines:
                    if line[:2] == "t=":
                        st = parse_stamp(line)
                        if st is None:
                            continue
                        if self.collect:
                            self.lat.append(now - st[0])
                            self._unpainted.append(st[0])
                        if "BURST-END" in line:
                            self.burst_end[int(line.rsplit(" ", 1)[1])] = now
            return orig_write(lines, scroll_end)

        log.write_lines = write_lines  # type: ignore[method-assign]

        # line -> screen: the first frame the app sends after the line's write
        # (App._display gets every frame; headless, it writes nothing)
        orig_display = app._display

        def display(screen: Any, renderable: Any) -> None:
            orig_display(screen, renderable)
            if renderable is not None and self._unpainted:
                now = time.time()
                self.screen_lat.extend(now - t for t in self._unpainted)
                self._unpainted = []

        app._display = display  # type: ignore[method-assign]

        gt = app._q(GpuTable)
        orig_show = gt.show

        def show(gpus: GpuState, *a: Any, **kw: Any) -> None:
            orig_show(gpus, *a, **kw)
            now = time.time()
            if self.first_gpus is None and len(gpus.latest) >= self.n_gpus:
                self.first_gpus = now
            s0 = gpus.latest.get(0)
            m = marker_of(s0.mem_used_mib) if s0 is not None else None
            if m is not None and m not in self.gpu_seen:
                self.gpu_seen[m] = now

        gt.show = show  # type: ignore[method-assign]

        sl = app._q(SessionList)
        orig_sessions = sl.show

        def show_sessions(sessions: list[Session], *a: Any, **kw: Any) -> None:
            orig_sessions(sessions, *a, **kw)
            if self.first_sessions is None and sessions:
                self.first_sessions = time.time()

        sl.show = show_sessions  # type: ignore[method-assign]

    def complete_at(self, need_gpus: bool) -> float | None:
        parts = [self.first_log, self.first_sessions] + ([self.first_gpus] if need_gpus else [])
        return None if any(p is None for p in parts) else max(parts)  # type: ignore[type-var]


async def wait_for(fn: Any, timeout: float, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        await asyncio.sleep(step)
    return False


async def key_response(app: GputuiApp) -> tuple[float, bool]:
    """Send `p` (pause/resume the log) as the terminal driver would ->
    (seconds until the app has acted on it, whether it paused). Resuming
    re-renders the kept lines, so pause and resume are reported apart."""
    from textual import events

    panel = app._q(LogPanel)
    before = panel.paused
    t0 = time.perf_counter()
    ev = events.Key("p", "p")
    ev.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(ev)
    while panel.paused == before:
        await asyncio.sleep(0.002)
        if time.perf_counter() - t0 > 30:
            break
    return time.perf_counter() - t0, panel.paused


async def rate_phase(
    app: GputuiApp, probe: Probe, cfg: dict[str, Any], tr: CountingTransport, ph: dict[str, Any]
) -> dict[str, Any]:
    write_control(cfg["ctl"], {"rate": ph["rate"]})
    await asyncio.sleep(ph.get("warmup", 3.0))
    probe.lat = []
    probe.screen_lat = []
    probe.collect = True
    if PHASE_PROFILE is not None:  # steady state only: not start-up, not warm-up
        PHASE_PROFILE.enable()
    slices: list[float] = []
    rss: list[float] = []
    t_begin = time.monotonic()
    cpu_begin = time.process_time()
    pct0 = pct_calls(cfg["pct_log"])
    dropped0 = app._dropped_lines()  # the monitor's and the view's
    ch0 = tr.runs + tr.opens
    rcpu0 = remote_cpu(cfg)
    markers = ph.get("gpu_markers") and cfg["has_smi"]
    gpu_lat: list[float] = []
    set_at: dict[int, float] = {}
    marker = 1000 * ph.get("marker_base", 1)
    next_marker = time.monotonic()
    slice_s = ph.get("slice_s", 5.0)
    while time.monotonic() - t_begin < ph["seconds"]:
        c0, w0 = time.process_time(), time.monotonic()
        while time.monotonic() - w0 < slice_s:
            if markers and time.monotonic() >= next_marker:
                marker += 1
                write_json(cfg["gpus_json"], gpu_state(marker))
                set_at[marker] = time.time()
                next_marker = time.monotonic() + 1.7
            await asyncio.sleep(0.1)
            rss.append(rss_mb()[0])
        slices.append(100.0 * (time.process_time() - c0) / (time.monotonic() - w0))
    elapsed = time.monotonic() - t_begin
    if PHASE_PROFILE is not None:
        PHASE_PROFILE.disable()
    minutes = elapsed / 60
    probe.collect = False
    res: dict[str, Any] = {
        "rate": ph["rate"],
        "seconds": elapsed,
        "cpu_pct_slices": slices,
        "cpu_pct": 100.0 * (time.process_time() - cpu_begin) / elapsed,
        "rss_mb_max": max(rss) if rss else None,
        "rss_mb_end": rss_mb()[0],
        "latency_s": summary(probe.lat),
        "screen_latency_s": summary(probe.screen_lat),
        "log_frame_s": getattr(getattr(app, "_log_pacer", None), "cost", None),
        "dropped_lines": app._dropped_lines() - dropped0,
        "pct_exec_per_min": (pct_calls(cfg["pct_log"]) - pct0) / minutes,
        "channels_per_min": (tr.runs + tr.opens - ch0) / minutes,
        "remote_cpu_s_per_min": (remote_cpu(cfg) - rcpu0) / minutes,
    }
    if markers:
        gpu_lat = gpu_sample_latency(cfg["smi_log"], probe.gpu_seen, set_at)
        res["gpu_to_screen_s"] = summary(gpu_lat)
        res["gpu_set_to_screen_s"] = summary(
            [probe.gpu_seen[m] - set_at[m] for m in set_at if m in probe.gpu_seen]
        )
    return res


def remote_cpu(cfg: dict[str, Any]) -> float:
    """CPU seconds of the remote side: the sshd tree, or (local transport)
    this process's descendants."""
    if cfg.get("sshd_pid"):
        return remote_cpu_s(cfg["sshd_pid"])
    t = os.times()
    return remote_cpu_s(os.getpid()) - (t.user + t.system)


def gpu_sample_latency(
    smi_log: str, seen: dict[int, float], set_at: dict[int, float]
) -> list[float]:
    """For each GPU-0 marker: screen time minus when the first row carrying it
    left nvidia-smi (the wrapper's timestamp)."""
    first_row: dict[int, float] = {}
    try:
        text = Path(smi_log).read_text()
    except OSError:
        return []
    for line in text.splitlines():
        t, _, row = line.partition(" ")
        cols = [c.strip() for c in row.split(",")]
        if len(cols) < 2 or cols[0] != "0":
            continue
        for c in cols[1:]:
            try:
                m = marker_of(float(c))
            except ValueError:
                continue
            if m is not None and m in set_at and m not in first_row:
                first_row[m] = float(t)
    return [seen[m] - first_row[m] for m in first_row if m in seen]


async def burst_phase(app: GputuiApp, probe: Probe, cfg: dict[str, Any], n: int) -> dict[str, Any]:
    write_control(cfg["ctl"], {"rate": 10})
    await asyncio.sleep(2.0)
    rss_before = rss_mb()[0]
    keys_idle = [await key_response(app) for _ in range(4)]  # pause, resume, pause, resume
    dropped0 = app._dropped_lines()  # the monitor's and the view's
    bid = 7
    t0 = time.time()
    write_control(cfg["ctl"], {"rate": 10, "burst": n, "burst_id": bid})
    keys: list[float] = []
    rss_max = rss_before
    deadline = time.monotonic() + 240
    while bid not in probe.burst_end and time.monotonic() < deadline:
        keys.append(await key_response(app))
        rss_max = max(rss_max, rss_mb()[0])
        await asyncio.sleep(0.25)
        rss_max = max(rss_max, rss_mb()[0])
    if keys and keys[-1][1]:  # leave the log unpaused
        keys.append(await key_response(app))
    drained = probe.burst_end.get(bid)
    await asyncio.sleep(1.0)
    keys_after = [await key_response(app) for _ in range(4)]
    return {
        "lines": n,
        "drain_s": (drained - t0) if drained else None,
        "rss_mb_before": rss_before,
        "rss_mb_max": max(rss_max, rss_mb()[0]),
        "rss_mb_after": rss_mb()[0],
        "vm_hwm_mb": rss_mb()[1],
        "key_idle_s": summary([k for k, paused in keys_idle if paused]),
        "key_during_s": summary([k for k, paused in keys if paused]),
        "resume_during_s": summary([k for k, paused in keys if not paused]),
        "key_after_s": summary([k for k, paused in keys_after if paused]),
        "dropped_lines": app._dropped_lines() - dropped0,
        "log_lines_in_widget": probe.log_lines,
    }


async def main(cfg: dict[str, Any]) -> dict[str, Any]:
    t_start = time.time()
    inner, how = make_transport(cfg)
    tr = CountingTransport(inner)
    await tr.connect()
    t_conn = time.time()
    settings = Settings(gpu_source="host", read_only=True)
    recorder = None
    if cfg.get("history"):  # as the dashboard runs by default: history on
        settings.history_path = str(Path(cfg["history"]) / "history.sqlite")
    else:
        settings.history = False
    mon = Monitor(Target(tr, cfg["ct"]), settings)
    if cfg.get("history"):
        from gputui.ui.wiring import build_recorder

        recorder, why = build_recorder(mon, settings)
        assert why is None, why
    app = GputuiApp(mon, read_only=True, recorder=recorder)
    probe = Probe(8)
    out: dict[str, Any] = {"transport": how}
    async with app.run_test(headless=True, size=(120, 40)) as pilot:
        if recorder is not None:
            await recorder.start()
        probe.install(app)
        ok = await wait_for(lambda: probe.complete_at(cfg["has_smi"]) is not None, 30.0)
        done = probe.complete_at(cfg["has_smi"])
        out["first_screen"] = {
            "ok": ok,
            "from_start_s": (done - t_start) if done else None,
            "from_connect_s": (done - t_conn) if done else None,
            "connect_s": t_conn - t_start,
            "gpus_s": (probe.first_gpus - t_conn) if probe.first_gpus else None,
            "sessions_s": (probe.first_sessions - t_conn) if probe.first_sessions else None,
            "log_s": (probe.first_log - t_conn) if probe.first_log else None,
        }
        out["rss_mb_start"] = rss_mb()[0]
        out["phases"] = []
        for ph in cfg.get("phases", []):
            if "burst" in ph:
                out["burst"] = await burst_phase(app, probe, cfg, int(ph["burst"]))
            else:
                out["phases"].append(await rate_phase(app, probe, cfg, tr, ph))
        out["agent_starts"] = mon.agent_starts
        out["dropped_log_lines"] = app._dropped_lines()
        out["connects"] = tr.connects
        write_control(cfg["ctl"], {"rate": 0})
        if recorder is not None:
            await recorder.stop()
            if recorder.writer is not None:
                recorder.writer.close()
        await app.action_quit()
        await pilot.pause()
    await tr.close()
    return out


if __name__ == "__main__":
    config = json.loads(Path(sys.argv[1]).read_text())
    if config.get("cprofile"):
        import cProfile
        import pstats

        cp = PHASE_PROFILE = cProfile.Profile()
        result = asyncio.run(main(config))
        with open(config["cprofile"], "w") as f:
            pstats.Stats(cp, stream=f).sort_stats("tottime").print_stats(45)
            pstats.Stats(cp, stream=f).sort_stats("cumulative").print_stats(70)
    elif config.get("profile"):
        from pyinstrument import Profiler

        prof = Profiler(interval=0.002, async_mode="disabled")
        prof.start()
        result = asyncio.run(main(config))
        prof.stop()
        Path(config["profile"]).write_text(
            prof.output_text(unicode=False, color=False, show_all=False)
        )
    else:
        result = asyncio.run(main(config))
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1))
