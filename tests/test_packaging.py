"""What a user reads matches what the code does (issue 25): the config under
$XDG_CONFIG_HOME, the help and README for `K`, the version flag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputui import __version__
from gputui.actions.kill import FORCE_TERM_WAIT_S
from gputui.cli.main import main
from gputui.config import default_config_path, load_config
from gputui.verbs import VERB_BY_ID

ROOT = Path(__file__).resolve().parent.parent


def test_config_under_xdg_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gputui").mkdir()
    (tmp_path / "gputui" / "config.toml").write_text('host = "gpu-from-xdg"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_config_path() == tmp_path / "gputui" / "config.toml"
    assert load_config().host == "gpu-from-xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")  # the XDG spec: ignored
    assert default_config_path() == Path("~/.config/gputui/config.toml").expanduser()
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_config_path() == Path("~/.config/gputui/config.toml").expanduser()


def test_force_kill_help_says_what_kill_py_does() -> None:
    text = VERB_BY_ID["force_kill"].help
    assert "at once" not in text
    assert "SIGTERM" in text and f"SIGKILL after {FORCE_TERM_WAIT_S:g} s" in text, text
    readme = (ROOT / "README.md").read_text()
    assert f"`K` forces: no SIGINT, SIGTERM then SIGKILL after {FORCE_TERM_WAIT_S:g} s" in readme


def test_version_flags(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("-V", "--version"):
        with pytest.raises(SystemExit) as done:
            main([flag])
        assert done.value.code == 0
        assert capsys.readouterr().out.strip() == f"gputui {__version__}"
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "-V"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == f"gputui {__version__}", r
