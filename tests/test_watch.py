"""`gputui watch` as a user runs it: a real process watching this machine
and a real log, /metrics scraped, the history written, SIGTERM stops it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.cli.watch import target_settings
from gputui.config import Settings
from gputui.errors import GputuiError
from helpers import wait_for


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """A `gputui watch` that is killed if the test fails before it stops."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def sigterm(proc: subprocess.Popen[str]) -> str:
    """Stop it as systemd would; the rest of its output."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    return {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_watch_records_exports_and_stops_on_sigterm(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i} loss {2.0 - i / 100:.3f} | 900 tok/s\n" for i in range(30)))
    port = free_port()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
    cfg = tmp_path / "c.toml"
    cfg.write_text("[history]\nlog_every = 1\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "watch",
            "local",
            "--log",
            str(log),
            "--config",
            str(cfg),
            "--prometheus",
            f"127.0.0.1:{port}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    with reaped(proc):
        wait_for(lambda: scrape(port).get("gputui_run_step") == 29.0, 30, "step 29 on /metrics")
        with open(log, "a") as f:
            f.write("step 30 loss 1.5 | 950 tok/s\n")
        wait_for(lambda: scrape(port).get("gputui_run_step") == 30.0, 30, "step 30 on /metrics")
        db = tmp_path / "state" / "gputui" / "history.sqlite"

        def steps() -> list[int]:
            with sqlite3.connect(db) as c:
                return [r[0] for r in c.execute("SELECT step FROM metric_points ORDER BY offset")]

        wait_for(lambda: steps() == list(range(31)), 30, "31 metric points in the history")
        out = sigterm(proc)
    assert proc.returncode == 0, out
    assert "stopped" in out and "Traceback" not in out
    assert scrape(port) == {}  # the endpoint is gone with the process


STACKS_ON_USR2 = """\
import faulthandler, os, signal
_stacks = open(os.environ["GPUTUI_TEST_STACKS"], "w")
faulthandler.register(signal.SIGUSR2, file=_stacks, all_threads=True)
"""


def wait_or_dump(proc: subprocess.Popen[bytes], timeout: float, what: str, stacks: Path) -> int:
    """The exit code; past the timeout, fail with where every thread of the
    still-running process is (faulthandler, registered on SIGUSR2 by a
    sitecustomize the test put on its PYTHONPATH), so a failure names its cause."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR2)
        wait_for(lambda: stacks.exists() and "File" in stacks.read_text(), 10, "the stacks")
        raise AssertionError(
            f"watch ({what}) still running {timeout:.0f} s after the signal:\n{stacks.read_text()}"
        ) from None


def test_watch_stops_cleanly_when_its_terminal_closes_and_not_under_nohup(
    tmp_path: Path,
) -> None:
    """SIGHUP (the terminal went away) stops `watch` as SIGTERM does, exit 0;
    started with SIGHUP ignored (`nohup`), it goes on watching."""
    import pty

    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(STACKS_ON_USR2)
    stacks = tmp_path / "stacks.txt"
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(site),
        "GPUTUI_TEST_STACKS": str(stacks),
    }
    argv = [sys.executable, "-m", "gputui", "watch", "local", "--log", str(log)]

    def ignore_hup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def default_hup() -> None:
        # Not inherited: a suite started under `nohup` (or by a runner that
        # ignores SIGHUP) hands SIG_IGN down, and watch rightly keeps going
        # then — this test's two loaded-CI failures were that, not watch.
        signal.signal(signal.SIGHUP, signal.SIG_DFL)

    nohup_out = tmp_path / "nohup.out"
    for nohup in (False, True):
        master, slave = pty.openpty()  # a terminal, as in a tmux window
        out = open(nohup_out, "w") if nohup else None  # noqa: SIM115
        proc = subprocess.Popen(  # nohup: SIGHUP ignored, output to nohup.out
            argv,
            env=env,
            stdin=slave,
            stdout=out or slave,
            stderr=out or slave,
            preexec_fn=ignore_hup if nohup else default_hup,
        )
        os.close(slave)
        try:
            if out is not None:
                out.close()
                wait_for(lambda: "watching" in nohup_out.read_text(), 30, "watching")
            else:
                seen = b""
                while b"watching" not in seen:
                    seen += os.read(master, 4096)
            os.close(master)  # the terminal goes away: a write to it now fails
            master = -1
            proc.send_signal(signal.SIGHUP)
            if nohup:
                with pytest.raises(subprocess.TimeoutExpired):
                    proc.wait(timeout=3)
                proc.send_signal(signal.SIGTERM)
            code = wait_or_dump(proc, 30, f"nohup={nohup}", stacks)
            assert code == 0  # not killed by the signal, no traceback exit 1
        finally:
            if master >= 0:
                os.close(master)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "stopped" in nohup_out.read_text()


def test_target_specs() -> None:
    base = Settings(user="me", log="/l")
    s = target_settings("root@10.1.2.6/200", base)
    assert (s.host, s.user, s.ct_id, s.log) == ("10.1.2.6", "root", 200, "/l")
    s = target_settings("gpu2", base)
    assert (s.host, s.user, s.ct_id) == ("gpu2", "me", None)
    assert target_settings("local", base).local is True
    s = target_settings("root@10.1.2.6:2222/200", base)  # the grammar of every command
    assert (s.host, s.user, s.port, s.ct_id) == ("10.1.2.6", "root", 2222, 200)
    with pytest.raises(GputuiError, match="not \\[user@\\]host\\[:port\\]\\[/ct\\]"):
        target_settings("a b", base)


def test_watch_with_no_target_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    (tmp_path / "empty.toml").write_text("")
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "watch", "--config", str(tmp_path / "empty.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no target to watch" in r.stderr, r.stderr


def test_watch_takes_the_configs_targets(tmp_path: Path) -> None:
    """No TARGET on the command line: the config's [[targets]], as the
    dashboard and doctor take them — each host tried (and retried) on its own."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[[targets]]\nhost = "gpu1.invalid"\n[[targets]]\nhost = "root@gpu2.invalid:2222"\n'
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "gputui", "watch", "--config", str(cfg)]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    with reaped(proc):
        assert proc.stdout is not None
        while not all(any(h in line for line in lines) for h in ("gpu1.invalid", "gpu2.invalid")):
            line = proc.stdout.readline()
            assert line, f"watch ended before trying both targets: {lines}"
            lines.append(line)
        out = sigterm(proc)
    text = "".join(lines) + out
    assert proc.returncode == 0, text
    assert "retrying" in text and "Traceback" not in text, text


async def _stubborn(*_args: object) -> None:
    """A close that swallows its cancel, as an await of a task under
    suppress(CancelledError) deep in a monitor does."""
    import asyncio

    while True:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)


def _within(seconds: float, fn: object) -> object:
    """fn() in a thread; AssertionError if it has not returned in `seconds`."""
    import threading

    box: list[object] = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)  # type: ignore[operator]
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    return box[0]


def test_watch_stops_even_when_a_close_swallows_its_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target's close that never ends, and does not end when cancelled:
    watch still says "stopped" and returns within its close limit (before,
    the close limit waited for the cancelled closes, for ever), and the
    process is not held by it afterwards."""
    import asyncio
    import io

    from gputui.cli import watch as watch_mod

    real_close = watch_mod._close_watched

    async def close_then_hang(w: object) -> None:
        await real_close(w)  # type: ignore[arg-type]  # nothing left running on the target
        await _stubborn()

    monkeypatch.setattr(watch_mod, "_close_watched", close_then_hang)
    monkeypatch.setattr(watch_mod, "CLOSE_LIMIT_S", 3.0)
    out = io.StringIO()
    settings = Settings(local=True, history_path=str(tmp_path / "h.sqlite"))
    w = watch_mod.Watch([settings], out=out)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, w.stop)
        return await w.run()

    code = _within(15, lambda: watch_mod.run_bounded(main(), linger_s=0.5))
    assert code == 0 and "stopped" in out.getvalue(), out.getvalue()


def test_a_recording_error_is_said_on_watchs_output_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder that fails at every tick: watch says the error with its
    target's name (before, it was kept in the recorder where no one read it),
    once while it repeats, and goes on."""
    import asyncio
    import io

    from gputui.cli import watch as watch_mod
    from gputui.record import recorder as recorder_mod

    async def failing_tick(self: object) -> None:
        raise GputuiError("cannot read the log: Permission denied")

    monkeypatch.setattr(recorder_mod.RunRecorder, "tick", failing_tick)
    out = io.StringIO()
    settings = Settings(local=True, history_path=str(tmp_path / "h.sqlite"))
    w = watch_mod.Watch([settings], out=out)
    recorder = w.watched[0].recorder
    recorder.tick_s = 0.05

    async def main() -> int:
        loop = asyncio.get_running_loop()
        loop.call_later(1.0, w.stop)
        return await w.run()

    assert _within(30, lambda: watch_mod.run_bounded(main(), linger_s=0.5)) == 0
    said = out.getvalue().splitlines()
    errors = [line for line in said if "cannot read the log: Permission denied" in line]
    assert len(recorder.errors) == 1 and len(errors) == 1, said
    assert (
        errors[0] == f"{w.watched[0].monitor.target.label}: cannot read the log: Permission denied"
    )
