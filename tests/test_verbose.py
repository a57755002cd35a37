"""`gputui -v` (issue 36): a debug log a user can attach to a bug report —
a new private file under the state directory, named on stderr at exit, with
the command line, each command run and its exit status, the connection's
states and the error that ended gputui; never a secret of the config."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def gputui(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), XDG_CONFIG_HOME=str(tmp))
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run(
        [sys.executable, "-m", "gputui", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def logs(tmp: Path) -> list[Path]:
    return sorted((tmp / "state" / "gputui").glob("debug-*.log"))


def test_verbose_writes_a_private_debug_log_and_says_where(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        '[run]\ncommand = "python3 train.py"\nenv = { WANDB_API_KEY = "sekrit-42" }\n'
    )
    r = gputui(tmp_path, "doctor", "--demo", "-v", "--config", str(config))
    assert r.returncode in (0, 1), r.stderr
    (path,) = logs(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert r.stderr.strip().splitlines()[-1].startswith(f"gputui: debug log in {path} — attach")
    text = path.read_text()
    assert f"command: gputui doctor --demo -v --config {config}" in text
    assert "demo=True" in text
    assert "ran on local" in text and "exit 0:" in text  # each command, its status
    assert ": connected" in text
    assert f"exit status {r.returncode}" in text
    assert "sekrit-42" not in text
    assert "debug log" not in r.stdout  # the report's output stays clean


def test_a_failed_connection_is_in_the_log(tmp_path: Path) -> None:
    r = gputui(tmp_path, "-v", "doctor", "--host", "gpu1.invalid", "--connect-timeout", "5")
    assert r.returncode == 2, r
    (path,) = logs(tmp_path)
    text = path.read_text()
    assert "gpu1.invalid: connecting" in text, text
    assert "failed (unknown host 'gpu1.invalid'" in text, text  # the reason, as the user saw it
    assert "exit status 2" in text


def test_without_verbose_no_log(tmp_path: Path) -> None:
    r = gputui(tmp_path, "config", "--path")
    assert r.returncode == 0 and "debug log" not in r.stderr
    assert logs(tmp_path) == []
