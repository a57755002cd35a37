"""[run] env values (API keys) stay secret (issue #11 item 7), on the test bed
through real ssh, the stand-in pct and real tmux: while a run is launched and
relaunched, no process on the machine has the value in its command line;
tmux's start command, the audit log, the confirm text and the run's log do not
hold it; the run's own environment does. The env file is gone afterwards."""

from __future__ import annotations

import io
import os
import secrets
import threading
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import helpers
from gputui.actions import execute, plan_launch, plan_relaunch
from gputui.actions.plan import audit_path
from gputui.cli import actions as actions_cli
from gputui.config import RunConfig, Settings
from gputui.remote.target import Target

RUN = "import time\nprint('started', flush=True)\ntime.sleep(120)\n"


@contextmanager
def argv_watch(secret: bytes) -> Iterator[list[tuple[int, bytes]]]:
    """Reads every /proc/*/cmdline on this machine (the CT's processes are
    visible here too) as fast as it can; yields the hits holding `secret`."""
    hits: list[tuple[int, bytes]] = []
    scans = [0]
    stop = threading.Event()

    def scan() -> None:
        while not stop.is_set():
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/cmdline", "rb") as f:
                            data = f.read()
                    except OSError:
                        continue
                    if secret in data:
                        hits.append((int(entry), data))
            scans[0] += 1

    t = threading.Thread(target=scan, daemon=True)
    t.start()
    try:
        yield hits
    finally:
        stop.set()
        t.join()
        assert scans[0] > 3  # it really looked, many times


def run_pid(marker: str) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                data = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in data and b"python" in data.split(b"\0")[0]:
                return int(entry)
    return None


def environ_of(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


async def test_env_values_are_in_no_argv_screen_or_log(
    testbed: Any, ct: int, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    secret = f"wandb-{secrets.token_hex(16)}"
    work = Path(testbed.workspace) / f"secret-{tmp_path.name}"
    work.mkdir()
    script = f"run-{secrets.token_hex(4)}.py"  # finds this run's process, no other
    (work / script).write_text(RUN)
    run = RunConfig(
        command=f"python3 {script}",
        cwd=str(work),
        session="sec",
        log="sec.log",
        env={"WANDB_API_KEY": secret, "MULTI": "line one\nline two"},
    )
    settings = Settings(read_only=False, session=None, log=None, run=run)
    tr = testbed.transport()
    await tr.connect()
    try:
        target = Target(tr, ct)
        pids: list[int] = []
        for verb in ("launch", "relaunch"):
            with argv_watch(secret.encode()) as hits:
                plan = await (plan_launch if verb == "launch" else plan_relaunch)(
                    target, settings, "sec" if verb == "relaunch" else None
                )
                # the new run is checked alive for 0.5 s, not 3: its verify
                # command runs (and is watched) all the same
                plan.params["verify_s"] = 0.5
                result = await execute(target, plan)
            assert result.ok, result.details
            assert hits == [], f"{verb}: the secret was in a command line: {hits[:1]}"
            shown = plan.display + "\n" + plan.title + "\n" + plan.target
            assert secret not in shown and "line two" not in shown
            assert "WANDB_API_KEY=… MULTI=…" in shown
            # the run has the values, exactly
            pid = helpers.wait_for(
                lambda: run_pid(script) not in (None, *pids) and run_pid(script), 10, "run"
            )
            pids.append(pid)
            env = environ_of(pid)
            assert f"WANDB_API_KEY={secret}".encode() in env
            assert b"MULTI=line one\nline two" in env
            # tmux keeps the start command: names only
            panes = testbed.ct_exec(
                ct, ["tmux", "list-panes", "-a", "-F", "#{pane_start_command}"]
            ).stdout
            assert secret not in panes and "WANDB_API_KEY" in panes
            # the env file was read and deleted
            left = testbed.ct_exec(ct, ["sh", "-c", "ls -a /tmp"]).stdout
            assert "gputui-env-" not in left
        assert len(set(pids)) == 2
    finally:
        await tr.close()
    audit = audit_path().read_text()
    assert audit.count('"action": "launch"') == 1 and audit.count('"action": "relaunch"') == 1
    assert secret not in audit and "line two" not in audit
    log = (work / "sec.log").read_text() + "".join(p.read_text() for p in work.glob("sec.log.*"))
    assert "[gputui] start" in log and secret not in log


async def test_cli_confirm_text_hides_env_values(
    testbed: Any, ct: int, tmp_path: Path, monkeypatch: Any
) -> None:
    """`gputui launch` prints the plan and asks: names only, `NAME=…`."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    secret = f"key-{secrets.token_hex(16)}"
    run = RunConfig(
        command="true", cwd="/root", session="cli-sec", log="/root/x.log", env={"API_KEY": secret}
    )
    settings = Settings(read_only=False, session=None, log=None, run=run, ct_id=ct)
    out = io.StringIO()
    rc = await actions_cli.run_async(
        "launch",
        Namespace(yes=False, session=None),
        settings,
        target=Target(testbed.transport(), ct),
        out=out,
        ask=lambda _prompt: "n",
    )
    text = out.getvalue()
    assert rc == 1  # not confirmed: nothing ran
    assert secret not in text and "API_KEY=…" in text
