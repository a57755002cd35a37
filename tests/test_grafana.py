"""The Grafana board for `gputui watch --prometheus` (docs/grafana-dashboard.json,
issue 36): it shows per-GPU utilization, memory and power, tok/s, loss,
findings by kind, each per target; and every metric its panels query — with
the labels its legends name — is on the /metrics of a real `gputui watch
--prometheus` process watching a real run over the test bed's sshd."""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

import scenarios
from helpers import wait_for
from ui_scenarios import prepare_run, tmux_in_ct

ROOT = Path(__file__).resolve().parent.parent
BOARD = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
METRIC = re.compile(r"\bgputui_[a-z_]+")
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
# a run that logs like a trainer: step, loss and tok/s on each line
TRAINER = """\
import sys, time
for i in range(1, 100000):
    print("step %d loss %.4f | %d tok/s" % (i, 10.0 / i, 900 + i % 7), flush=True)
    time.sleep(0.2)
"""


def queries() -> list[tuple[str, str, str]]:
    """(panel title, PromQL, legend) of every panel."""
    return [
        (p["title"], t["expr"], t.get("legendFormat", ""))
        for p in BOARD["panels"]
        for t in p.get("targets", [])
    ]


def test_the_board_covers_what_a_fleet_needs() -> None:
    exprs = {title: expr for title, expr, _ in queries()}
    legends = {title: legend for title, _, legend in queries()}
    wanted = {  # metric: the label its legend must split it by
        "gputui_gpu_utilization_percent": "gpu",
        "gputui_gpu_memory_used_bytes": "gpu",
        "gputui_gpu_power_watts": "gpu",
        "gputui_run_throughput": "unit",
        "gputui_run_loss": "target",
        "gputui_finding": "kind",
    }
    for metric, label in wanted.items():
        titles = [t for t, e in exprs.items() if metric in e]
        assert titles, f"no panel queries {metric}"
        assert any(f"{{{{{label}}}}}" in legends[t] for t in titles), (metric, label, titles)
    variables = {v["name"]: v for v in BOARD["templating"]["list"]}
    assert variables["target"]["multi"] and variables["target"]["includeAll"]
    for title, expr, _ in queries():  # every panel follows the target picker
        assert 'target=~"$target"' in expr, (title, expr)


def scrape(port: int) -> dict[str, list[dict[str, str]]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out: dict[str, list[dict[str, str]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s.labels)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_queried_metric_is_on_a_live_watch(testbed: Any, ct: int, tmp_path: Path) -> None:
    run = prepare_run(testbed, ct, "grafana")
    run.script.write_text(TRAINER)
    cmd = f"python3 {shlex.quote(str(run.script))} > {shlex.quote(str(run.log))} 2>&1"
    tmux_in_ct(testbed, ct, "new", "-d", "-s", run.session, "-c", str(run.dir), cmd)
    config = tmp_path / "gputui.toml"
    config.write_text(f"[history]\npath = {json.dumps(str(tmp_path / 'h.sqlite'))}\n")
    port = free_port()
    argv = [sys.executable, "-m", "gputui", "watch", "--config", str(config)]
    argv += ["-F", str(testbed.ssh_config_path), f"{testbed.alias}/{ct}"]
    argv += ["--log", str(run.log), "--prometheus", f"127.0.0.1:{port}"]
    env = scenarios.doctor_env(testbed)
    env["PYTHONPATH"] = str(ROOT / "src")  # this checkout's gputui
    watch = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    needed: dict[str, set[str]] = {}  # metric -> the labels the panels' legends use
    for _, expr, legend in queries():
        for metric in METRIC.findall(expr):
            needed.setdefault(metric, set()).update(LEGEND_LABEL.findall(legend))

    def missing() -> dict[str, Any]:
        live = scrape(port)
        gone: dict[str, Any] = {}
        for metric, labels in needed.items():
            samples = live.get(metric, [])
            if not samples:
                gone[metric] = "absent"
            elif not any(labels <= set(s) for s in samples):
                gone[metric] = f"no sample has labels {sorted(labels)}: {samples[:2]}"
        return gone

    try:
        wait_for(lambda: not missing(), 90, "every metric the board queries on /metrics")
    except AssertionError:
        watch.send_signal(signal.SIGTERM)
        said = watch.communicate(timeout=60)[0]
        raise AssertionError(f"missing on /metrics: {missing()}; watch said {said!r}") from None
    watch.send_signal(signal.SIGTERM)
    out, _ = watch.communicate(timeout=60)
    assert watch.returncode == 0, out
