"""/metrics served on 127.0.0.1, scraped over HTTP and parsed with
prometheus-client's own parser."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.errors import GputuiError
from gputui.model import (
    ConnectionState,
    Finding,
    GpuHealth,
    GpuSample,
    MetricPoint,
    Severity,
    Snapshot,
)
from gputui.record.prometheus import Exporter, parse_address


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_metrics_endpoint_scraped_and_parsed() -> None:
    snap = Snapshot(time=100.0, target='root@h ct 200 "x"\n')
    snap.connection = ConnectionState.CONNECTED
    for i in range(2):
        snap.gpus.add(
            GpuSample(
                i,
                99.0,
                name="NVIDIA H200",
                uuid=f"GPU-{i}",
                mem_used_mib=1024.0 * (i + 1),
                mem_total_mib=143771.0,
                util_pct=97.0 - i,
                temp_c=60.0,
                power_w=650.0,
            )
        )
    snap.metrics.add(
        MetricPoint(time=95.0, step=1200, loss=1.75, throughput=5100.0, throughput_unit="tok/s")
    )
    snap.log.path = "/workspace/train.log"
    snap.log.note_line(90.0)
    hung = Finding("held_but_idle", Severity.ERROR, "hung")
    ex = Exporter()
    ex.update(snap.target, snap, [hung], now=100.0)
    other = Snapshot(time=100.0, target="gpu2")
    other.connection = ConnectionState.RECONNECTING
    ex.update("gpu2", other, [], now=100.0)
    _host, port = ex.serve("127.0.0.1:0")
    try:
        m = scrape(port)
    finally:
        ex.close()
    name = 'root@h ct 200 "x"\n'  # escaped on the wire, the same after parsing
    util = {(lab["target"], lab["gpu"]): v for lab, v in m["gputui_gpu_utilization_percent"]}
    assert util == {(name, "0"): 97.0, (name, "1"): 96.0}
    mem = {lab["gpu"]: v for lab, v in m["gputui_gpu_memory_used_bytes"]}
    assert mem["1"] == 2048.0 * 1024 * 1024
    assert m["gputui_run_step"] == [({"target": name}, 1200.0)]
    assert m["gputui_run_loss"] == [({"target": name}, 1.75)]
    assert m["gputui_run_throughput"] == [({"target": name, "unit": "tok/s"}, 5100.0)]
    assert m["gputui_log_seconds_since_last_line"] == [({"target": name}, 10.0)]
    up = {lab["target"]: v for lab, v in m["gputui_connection_up"]}
    assert up == {name: 1.0, "gpu2": 0.0}
    findings = {(lab["target"], lab["kind"]): v for lab, v in m["gputui_finding"]}
    assert findings[(name, "held_but_idle")] == 1.0
    assert findings[(name, "session_dead")] == 0.0  # alerting kinds are always listed
    assert findings[("gpu2", "held_but_idle")] == 0.0
    states = {lab["state"]: v for lab, v in m["gputui_connection_state"] if lab["target"] == "gpu2"}
    assert states["reconnecting"] == 1.0 and states["connected"] == 0.0


def test_a_target_renamed_once_connected_keeps_one_series() -> None:
    """/metrics named the target as typed (`gpu1 ct 200`) while the webhook
    and the history named it once connected (`root@10.1.2.6:22 ct 200`): one
    name per target now — the recorder's — and its alias's series goes when
    the name changes (issue 46)."""
    snap = Snapshot(time=100.0, target="gpu1 ct 200")
    snap.connection = ConnectionState.CONNECTED
    ex = Exporter()
    source = object()
    ex.update("gpu1 ct 200", snap, [], now=100.0, key=source)
    ex.update("root@10.1.2.6:22 ct 200", snap, [], now=101.0, key=source)
    assert list(ex._targets) == ["root@10.1.2.6:22 ct 200"]
    ex.update("other", snap, [], now=101.0)  # no key: left as it is
    assert sorted(ex._targets) == ["other", "root@10.1.2.6:22 ct 200"]


def test_address_errors_are_one_line() -> None:
    assert parse_address(":9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)
    with pytest.raises(GputuiError, match="HOST:PORT"):
        parse_address("9464x")
    ex = Exporter()
    _, port = ex.serve("127.0.0.1:0")
    try:
        with pytest.raises(GputuiError, match="cannot serve /metrics"):
            Exporter().serve(f"127.0.0.1:{port}")
    finally:
        ex.close()


def test_docs_use_only_exported_metric_names() -> None:
    """The shipped Grafana dashboard and alert rules name metrics that exist."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    used = set()
    for name in ("grafana-dashboard.json", "prometheus-alerts.yml"):
        used |= set(re.findall(r"gputui_[a-z_]+", (docs / name).read_text()))
    snap = Snapshot(time=1.0, target="t")
    snap.gpus.add(
        GpuSample(
            0, 1.0, mem_used_mib=1.0, mem_total_mib=2.0, util_pct=3.0, temp_c=4.0, power_w=5.0,
            sm_clock_mhz=1980.0, sm_clock_max_mhz=1980.0, event_reasons=0x40,
        )
    )  # fmt: skip
    snap.gpus.health[0] = GpuHealth(
        0, 1.0, ecc_uncorrected=0, remap_pending=False, remap_failure=False,
        pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16,
    )  # fmt: skip
    snap.metrics.add(
        MetricPoint(time=1.0, step=1, loss=1.0, throughput=1.0, throughput_unit="it/s")
    )
    snap.log.path = "/l"
    snap.log.note_line(1.0)
    ex = Exporter()
    ex.update("t", snap, [], now=2.0)
    exported = {s.name for fam in ex.collect() for s in fam.samples}
    assert used and used <= exported, used - exported
