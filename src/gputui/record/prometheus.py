"""`/metrics` for Prometheus: what `gputui watch --prometheus ADDR` serves.

Each recorder tick hands `Exporter.update` its snapshot and findings; the
exporter keeps a plain copy of the numbers (built on the event loop), and
the HTTP thread of prometheus-client only reads those copies at scrape time.
Label values come from the target and are data: prometheus-client escapes
them in the exposition format.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gputui.errors import GputuiError
from gputui.model import ConnectionState, Finding, GpuSample, Snapshot
from gputui.record.alerts import ALERT_KINDS
from gputui.text.hardware import THROTTLE_MASK
from gputui.text.numbers import ascii_int

MIB = 1024 * 1024


@dataclass
class TargetNumbers:
    """One target's numbers at the last tick."""

    gpus: list[dict[str, Any]] = field(default_factory=list)
    step: float | None = None
    loss: float | None = None
    throughput: float | None = None
    throughput_unit: str = ""
    log_silent_s: float | None = None
    log_lines: int = 0
    connection: str = ""
    findings: dict[str, str] = field(default_factory=dict)  # kind -> severity


def numbers_from(snap: Snapshot, findings: Sequence[Finding], now: float) -> TargetNumbers:
    m = snap.metrics
    return TargetNumbers(
        gpus=[
            {
                "gpu": str(s.index),
                "name": s.name,
                "uuid": s.uuid,
                "util": s.util_pct,
                "mem_used": None if s.mem_used_mib is None else s.mem_used_mib * MIB,
                "mem_total": None if s.mem_total_mib is None else s.mem_total_mib * MIB,
                "temp": s.temp_c,
                "power": s.power_w,
                **_health_numbers(snap, s),
            }
            for s in sorted(snap.gpus.latest.values(), key=lambda s: s.index)
        ],
        step=m.last_step,
        loss=m.loss.last(),
        throughput=m.throughput.last(),
        throughput_unit=m.throughput_unit,
        log_silent_s=snap.log.silent_for(now) if snap.log.path else None,
        log_lines=snap.log.lines_total,
        connection=snap.connection.value,
        findings={f.kind: f.severity.value for f in findings},
    )


def _flag(v: bool | None) -> float | None:
    return None if v is None else float(v)


def _health_numbers(snap: Snapshot, s: GpuSample) -> dict[str, float | None]:
    """The hardware's own numbers for one GPU (None: not read / not supported,
    left out of /metrics)."""
    h = snap.gpus.health.get(s.index)
    mask = s.event_reasons
    return {
        "sm_clock": s.sm_clock_mhz,
        "sm_clock_max": s.sm_clock_max_mhz,
        "reasons": None if mask is None else float(mask),
        "throttled": None if mask is None else float(bool(mask & THROTTLE_MASK)),
        "ecc": None if h is None or h.ecc_uncorrected is None else float(h.ecc_uncorrected),
        "remap_pending": None if h is None else _flag(h.remap_pending),
        "remap_failure": None if h is None else _flag(h.remap_failure),
        "pcie_gen": None if h is None or h.pcie_gen is None else float(h.pcie_gen),
        "pcie_gen_max": None if h is None or h.pcie_gen_max is None else float(h.pcie_gen_max),
        "pcie_width": None if h is None or h.pcie_width is None else float(h.pcie_width),
        "pcie_width_max": None
        if h is None or h.pcie_width_max is None
        else float(h.pcie_width_max),
    }


# The hardware's gauges (issue 32): key in _health_numbers -> (name, help)
HEALTH_GAUGES = {
    "sm_clock": ("gputui_gpu_sm_clock_mhz", "GPU SM clock"),
    "sm_clock_max": ("gputui_gpu_sm_clock_max_mhz", "GPU SM clock's maximum"),
    "reasons": ("gputui_gpu_clocks_event_reasons", "clocks_event_reasons.active (bitmask)"),
    "throttled": ("gputui_gpu_throttled", "1 while a thermal/HW slowdown or power brake is active"),
    "ecc": ("gputui_gpu_ecc_uncorrected_errors", "uncorrectable ECC errors (volatile)"),
    "remap_pending": ("gputui_gpu_row_remap_pending", "1 while a row remap waits for a reset"),
    "remap_failure": ("gputui_gpu_row_remap_failure", "1 when row remapping failed"),
    "pcie_gen": ("gputui_gpu_pcie_link_gen", "PCIe link generation now"),
    "pcie_gen_max": ("gputui_gpu_pcie_link_gen_max", "PCIe link generation, max"),
    "pcie_width": ("gputui_gpu_pcie_link_width", "PCIe link width now (lanes)"),
    "pcie_width_max": ("gputui_gpu_pcie_link_width_max", "PCIe link width, max (lanes)"),
}


class Exporter:
    """A prometheus-client collector over the targets' latest numbers."""

    def __init__(self) -> None:
        from gputui.extras import require

        require("prometheus_client", "watch --prometheus")
        from prometheus_client.core import CollectorRegistry

        self._lock = threading.Lock()
        self._targets: dict[str, TargetNumbers] = {}
        self._names: dict[object, str] = {}  # a source's key -> the name it last reported
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # type: ignore[arg-type]
        self._server: Any = None

    def update(
        self,
        target: str,
        snap: Snapshot,
        findings: Sequence[Finding],
        now: float,
        key: object = None,
    ) -> None:
        """`target`'s numbers now. A source (`key`) whose name changed (the
        alias as typed, then the name once connected) keeps one series: its
        old name's is dropped."""
        numbers = numbers_from(snap, findings, now)
        with self._lock:
            if key is not None:
                old = self._names.get(key)
                if old is not None and old != target:
                    self._targets.pop(old, None)
                self._names[key] = target
            self._targets[target] = numbers

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            targets = dict(self._targets)
        gl = ["target", "gpu", "name", "uuid"]
        gauges = {
            "util": GaugeMetricFamily(
                "gputui_gpu_utilization_percent", "GPU utilization", labels=gl
            ),
            "mem_used": GaugeMetricFamily(
                "gputui_gpu_memory_used_bytes", "GPU memory used", labels=gl
            ),
            "mem_total": GaugeMetricFamily(
                "gputui_gpu_memory_total_bytes", "GPU memory total", labels=gl
            ),
            "temp": GaugeMetricFamily(
                "gputui_gpu_temperature_celsius", "GPU temperature", labels=gl
            ),
            "power": GaugeMetricFamily("gputui_gpu_power_watts", "GPU power draw", labels=gl),
            **{
                key: GaugeMetricFamily(metric, words, labels=gl)
                for key, (metric, words) in HEALTH_GAUGES.items()
            },
        }
        step = GaugeMetricFamily("gputui_run_step", "last step in the log", labels=["target"])
        loss = GaugeMetricFamily("gputui_run_loss", "last loss in the log", labels=["target"])
        thr = GaugeMetricFamily(
            "gputui_run_throughput", "last throughput in the log", labels=["target", "unit"]
        )
        silent = GaugeMetricFamily(
            "gputui_log_seconds_since_last_line",
            "seconds since the log last got a line",
            labels=["target"],
        )
        lines = CounterMetricFamily(
            "gputui_log_lines", "log lines read since gputui started", labels=["target"]
        )
        up = GaugeMetricFamily(
            "gputui_connection_up", "1 when the target is connected", labels=["target"]
        )
        state = GaugeMetricFamily(
            "gputui_connection_state", "1 for the connection's state", labels=["target", "state"]
        )
        finding = GaugeMetricFamily(
            "gputui_finding",
            "1 while gputui's diagnosis reports this finding, else 0 (alerting kinds always listed)",
            labels=["target", "kind"],
        )
        for name, n in targets.items():
            for g in n.gpus:
                labels = [name, g["gpu"], g["name"], g["uuid"]]
                for key, fam in gauges.items():
                    if g.get(key) is not None:
                        fam.add_metric(labels, float(g[key]))
            if n.step is not None:
                step.add_metric([name], float(n.step))
            if n.loss is not None:
                loss.add_metric([name], float(n.loss))
            if n.throughput is not None:
                thr.add_metric([name, n.throughput_unit], float(n.throughput))
            if n.log_silent_s is not None:
                silent.add_metric([name], float(n.log_silent_s))
            lines.add_metric([name], float(n.log_lines))
            up.add_metric([name], 1.0 if n.connection == ConnectionState.CONNECTED.value else 0.0)
            for s in ConnectionState:
                state.add_metric([name, s.value], 1.0 if n.connection == s.value else 0.0)
            for kind in sorted(set(ALERT_KINDS) | set(n.findings)):
                finding.add_metric([name, kind], 1.0 if kind in n.findings else 0.0)
        yield from gauges.values()
        yield from (step, loss, thr, silent, lines, up, state, finding)

    def serve(self, address: str, public: bool = False) -> tuple[str, int]:
        """Serve /metrics on ADDR (`127.0.0.1:9464`, `:9464`, `[::1]:9464`);
        an address other than loopback only when `public` (see parse_address)."""
        from prometheus_client import start_http_server

        host, port = parse_address(address, public)
        try:
            server, _thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            raise GputuiError(
                f"cannot serve /metrics on {address}: {err.strerror or err}",
                "pick a free port, e.g. --prometheus 127.0.0.1:9465",
            ) from None
        self._server = server
        return host, int(server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


PUBLIC_WARNING = "anyone who can reach it sees the runs' names and figures"


def parse_address(text: str, public: bool = False) -> tuple[str, int]:
    """(host, port) of --prometheus HOST:PORT. An address other than
    loopback (0.0.0.0, a LAN address, a host name) is refused with one
    line unless `public` (--prometheus-public): /metrics has no login."""
    host, sep, port_text = text.rpartition(":")
    port = ascii_int(port_text, 5)
    bracketed = host.startswith("[") and host.endswith("]")
    # an IPv6 address goes in brackets ([::1]:9464): a bare ':' left in the
    # host is a typo ('127.0.0.1::0'), not an address to refuse as public
    if not sep or port is None or port > 65535 or (":" in host and not bracketed):
        raise GputuiError(
            f"--prometheus {text!r} is not HOST:PORT", "e.g. --prometheus 127.0.0.1:9464"
        )
    host = host.strip("[]") or "127.0.0.1"
    if not public and not is_loopback(host):
        raise GputuiError(
            f"--prometheus {text}: not a loopback address, so {PUBLIC_WARNING}",
            "add --prometheus-public to mean it, or keep 127.0.0.1 and let Prometheus"
            " reach it through ssh -L 9464:127.0.0.1:9464",
        )
    return host, port


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or `localhost`; any other name or address is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
