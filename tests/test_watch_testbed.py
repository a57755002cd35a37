"""`gputui watch` with two targets in one process, over the real-sshd test
bed: two stand-in CTs, each with a real run in tmux; both recorded into one
history, both on /metrics (8 stand-in GPUs each), nothing left running on
the host after the stop."""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.cli.watch import Watch
from gputui.record.query import HistoryReader
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

        await until(
            lambda: len([v for v in steps().values() if v >= 5]) == 2, 60, "both runs' steps"
        )
        await until(lambda: len(gpus()) == 16, 60, "8 GPUs of each target")
        # read once connected: before, a label lacks the user and port ssh
        # resolves ('127.0.0.1 ct 234' against the recorded 'root@…:port ct
        # 234': a loaded fresh-clone run read it that early)
        labels = [w.monitor.target.label for w in watch.watched]
        assert len(set(labels)) == 2

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


def test_history_finds_a_target_by_the_name_given_to_watch(
    testbed: Any, ct: int, tmp_path: Path
) -> None:
    """`gputui watch -F CFG --host gpuhost --ct N` (an ssh config alias for
    127.0.0.1), then `gputui history gpuhost` and `history gpuhost/N`: the
    name the user typed finds the target recorded under its address (it
    said "no history for target 'gpuhost' — recorded targets: root@…")."""
    import json
    import os
    import signal
    import sqlite3
    import subprocess
    import sys

    import scenarios
    from gputui.errors import GputuiError

    run = prepare_run(testbed, ct, f"named{os.getpid()}")
    start_unbuffered(testbed, run, 400, 0.2)
    db = tmp_path / "history.sqlite"
    config = tmp_path / "gputui.toml"
    config.write_text(f"[history]\npath = {json.dumps(str(db))}\nlog_every = 1\n")
    env = scenarios.doctor_env(testbed)
    gputui = [sys.executable, "-m", "gputui"]
    ssh = ["--config", str(config), "-F", str(testbed.ssh_config_path)]
    watch = subprocess.Popen(
        [*gputui, "watch", *ssh, "--host", testbed.alias, "--ct", str(ct)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    address = f"{testbed.user}@127.0.0.1:{testbed.port} ct {ct}"

    def recorded() -> bool:
        if watch.poll() is not None or not db.exists():
            return False
        try:
            r = HistoryReader(db)
        except GputuiError:
            return False
        try:
            return address in r.targets() and len(r.metrics(address, 0, 2e9)) >= 3
        except sqlite3.OperationalError:  # its tables are not made yet
            return False
        finally:
            r.close()

    def held() -> str:
        """What the history holds: its targets, runs and points."""
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        except sqlite3.Error as e:
            return f"no history: {e}"
        try:
            tables = [
                r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            counts = {
                t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in tables
                if t.isidentifier()
            }
            targets = con.execute("SELECT * FROM targets").fetchall() if "targets" in tables else []
            runs = con.execute("SELECT * FROM runs").fetchall() if "runs" in tables else []
            return f"rows {counts}; targets {targets}; runs {runs}"
        except sqlite3.Error as e:
            return f"history unreadable: {e}"
        finally:
            con.close()

    try:
        asyncio.run(until(recorded, 90, "the run in the history"))
    except AssertionError:
        early_exit = watch.poll()
        watch.send_signal(signal.SIGTERM)
        said = watch.communicate(timeout=60)[0]
        log = run.log.read_text()[-300:] if run.log.exists() else "(no log)"
        raise AssertionError(
            f"watch said: {said!r}; exited early: {early_exit}; then {watch.returncode}; "
            f"{held()}; the log ends {log!r}"
        ) from None
    watch.send_signal(signal.SIGTERM)
    out, _ = watch.communicate(timeout=60)
    assert watch.returncode == 0, out

    def history(*words: str) -> subprocess.CompletedProcess[str]:
        argv = [*gputui, "history", "--config", str(config), *words]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

    for name in (testbed.alias, f"{testbed.alias}/{ct}", f"127.0.0.1/{ct}"):
        done = history(name, "--json")
        assert done.returncode == 0, (name, done.stderr)
        assert json.loads(done.stdout)["target"] == address, (name, done.stdout)
    done = history("--host", testbed.alias, "--ct", str(ct))  # the flags mean the same
    assert done.returncode == 0 and f"history of {address}" in done.stdout, done.stderr
    missing = history(f"{testbed.alias}/{ct + 1}")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert f"{address} (as {testbed.alias}/{ct})" in missing.stderr, missing.stderr


async def test_watch_stops_in_bounded_time_when_the_host_froze(
    testbed: Any, ct: int, tmp_path: Path
) -> None:
    """The host stops answering (every sshd session of the test bed frozen
    with SIGSTOP: a hung kernel, a cut link that never resets) and then watch
    is told to stop (SIGTERM, the terminal closing): it exits within its
    close limit, whatever its ssh channels wait for."""
    import os
    import signal
    import time

    from gputui.cli.watch import CLOSE_LIMIT_S

    run = prepare_run(testbed, ct, "frozen")
    start_unbuffered(testbed, run, 400, 0.2)
    db = tmp_path / "history.sqlite"
    watch = Watch([settings_for(testbed, ct, history_path=str(db))])
    task = asyncio.create_task(watch.run())
    frozen: list[int] = []
    try:
        await until(
            lambda: watch.watched[0].monitor.snapshot.sessions, 60, "the run's session listed"
        )
        assert testbed.sshd_pid is not None
        frozen = testbed._children(testbed.sshd_pid)
        assert frozen, "no ssh session to freeze"
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        watch.stop()
        done, _ = await asyncio.wait({task}, timeout=CLOSE_LIMIT_S + 15)
        assert done, f"watch still closing {time.monotonic() - t0:.0f} s after the stop"
        assert task.result() == 0
    finally:
        for pid in frozen:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
        if not task.done():
            task.cancel()
