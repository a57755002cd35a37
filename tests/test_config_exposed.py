"""A config that holds secrets (`[alerts] urls` with tokens, `[run] env`)
and that others may read is said once, in one line, and doctor reports it
as a finding (issue 34, LOW). Real files, the real CLI and doctor."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from gputui.config import load_config
from gputui.doctor import run as doctor_run

SECRET = '[alerts]\nurls = ["json://127.0.0.1:9/hook?token=s3cr3t"]\n'


def config(tmp_path: Path, text: str, mode: int) -> Path:
    p = tmp_path / "gputui.toml"
    p.write_text(text)
    p.chmod(mode)
    return p


def warnings(cfg: Path) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "--config", str(cfg), "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [ln for ln in r.stderr.splitlines() if "warning" in ln]


@pytest.mark.parametrize(
    ("text", "mode", "said"),
    [
        (SECRET, 0o644, True),
        ('[run]\ncommand = "python3 t.py"\nenv = { TOKEN = "x" }\n', 0o640, True),
        (SECRET, 0o600, False),
        ("[ui]\ninterval = 2\n", 0o644, False),  # nothing secret in it
    ],
)
def test_a_config_with_secrets_others_may_read_is_said_once(
    tmp_path: Path, text: str, mode: int, said: bool
) -> None:
    got = warnings(config(tmp_path, text, mode))
    if not said:
        assert got == []
        return
    (line,) = got
    assert "holds secrets" in line and f"chmod 600 {tmp_path}" in line
    assert "s3cr3t" not in line  # the warning itself shows no secret


async def test_doctor_reports_it_as_a_finding(tmp_path: Path) -> None:
    settings = helpers.monitor_settings(local=True)
    settings.config_exposed = load_config(config(tmp_path, SECRET, 0o604)).config_exposed
    _, _, findings, _ = await doctor_run.inspect(settings, settle_s=0.5)
    (f,) = [f for f in findings if f.kind == "config_exposed"]
    assert f.fix.startswith("chmod 600") and "others may read it" in f.evidence[0]
