"""`gputui … | cat` (issue 36): with stdout not a terminal, gputui prints the
one-shot report doctor prints — text, no escape sequence — instead of drawing
the dashboard into the pipe (gpustat prints text the same way). A note on
stderr says why; textual-serve's children (a pipe, with TEXTUAL_DRIVER set)
still get the dashboard."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputui.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_into_a_pipe_is_doctors_text(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    env["PYTHONPATH"] = str(ROOT / "src")
    env.pop("TEXTUAL_DRIVER", None)
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "--demo"],
        capture_output=True,  # stdout a pipe, as `| cat` makes it
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode in (0, 1), r.stderr  # doctor's: 1 = the demo's buffered run
    assert "\x1b" not in r.stdout, r.stdout[:300]  # no screen drawn into the pipe
    assert r.stdout.startswith("target      demo"), r.stdout[:300]
    assert "block-buffered" in r.stdout
    assert r.stderr.startswith("gputui: stdout is not a terminal, so no dashboard"), r.stderr


def test_serve_children_and_terminals_get_the_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    class Pipe:
        def isatty(self) -> bool:
            return False

    monkeypatch.setattr(sys, "stdout", Pipe())
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert cli.draws_screen() is False
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert cli.draws_screen() is True
