"""`gputui watch` with two targets in one process, over the real-sshd test
bed: two stand-in CTs, each with a real run in tmux; both recorded into one
history, both on /metrics (8 stand-in GPUs each), nothing left running on
the host after the stop."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.history_query import HistoryReader
from gputui.watch import Watch
from helpers import until
from ui_scenarios import gputui_processes_on_host, prepare_run, settings_for, start_unbuffered


def scrape(port: int) -> list[Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


@pytest.fixture
def second_ct(testbed: Any, ct: int) -> Any:
    number = ct + 50
    while testbed.ct_conf_path(number).exists():
        number += 1
    testbed.ct_create(number, running=True)
    yield number
    testbed.ct_destroy(number)


async def test_watch_two_targets_in_one_process(
    testbed: Any, ct: int, second_ct: int, tmp_path: Path
) -> None:
    testbed.set_gpus(
        {
            "gpus": [
                {
                    "index": i,
                    "name": "NVIDIA H200",
                    "uuid": f"GPU-w{i}",
                    "memory.used": 90_000,
                    "memory.total": 143_771,
                    "utilization.gpu": 97,
                }
                for i in range(8)
            ]
        }
    )
    runs = [prepare_run(testbed, n, "train") for n in (ct, second_ct)]
    for run in runs:
        start_unbuffered(testbed, run, 400, 0.2)
    db = tmp_path / "history.sqlite"
    targets = [
        settings_for(testbed, n, history_path=str(db), history_log_every=1.0)
        for n in (ct, second_ct)
    ]
    watch = Watch(targets, prometheus="127.0.0.1:0")
    task = asyncio.create_task(watch.run())
    try:
        await until(lambda: watch.address is not None, 30, "/metrics served")
        assert watch.address is not None
        port = watch.address[1]

        def steps() -> dict[str, float]:
            return {
                s.labels["target"]: s.value for s in scrape(port) if s.name == "gputui_run_step"
            }

        def gpus() -> set[tuple[str, str]]:
            return {
                (s.labels["target"], s.labels["gpu"])
                for s in scrape(port)
                if s.name == "gputui_gpu_utilization_percent"
            }

        labels = [w.monitor.target.label for w in watch.watched]
        assert len(set(labels)) == 2
        await until(
            lambda: len([v for v in steps().values() if v >= 5]) == 2, 60, "both runs' steps"
        )
        await until(lambda: len(gpus()) == 16, 60, "8 GPUs of each target")

        def recorded() -> bool:
            r = HistoryReader(db)
            try:
                return all(len(r.metrics(t, 0, 2e9)) >= 5 and r.gpu(t, 0, 2e9) for t in labels)
            finally:
                r.close()

        await until(recorded, 60, "both targets in the history")
    finally:
        watch.stop()
        await asyncio.wait_for(task, 60)
    assert task.result() == 0
    await until(lambda: not gputui_processes_on_host(testbed), 20, "nothing left on the host")
