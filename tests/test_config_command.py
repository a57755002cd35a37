"""`gputui config` (issue 36): the example config ships in the package and a
command prints it; `gputui config` says which file is read and whether it
parses. (tests/test_install.py runs `config --example` from a built wheel.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.cli.main import main
from gputui.config import parse_config

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "src" / "gputui" / "config.example.toml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_example_is_the_shipped_file_and_parses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["config", "--example"], capsys)
    assert code == 0 and err == ""
    assert out == SHIPPED.read_text()
    parse_config(out, Path("example.toml"))  # the example is a valid config


def test_says_where_the_config_is_read_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "gputui" / "config.toml"
    code, out, _ = run(["config"], capsys)
    assert code == 0
    assert f"config file: {path} (from $XDG_CONFIG_HOME)" in out
    assert "does not exist" in out and "gputui config --example >" in out
    assert run(["config", "--path"], capsys)[1] == f"{path}\n"
    path.parent.mkdir()
    path.write_text('host = "gpu1"\n')
    code, out, _ = run(["config"], capsys)
    assert code == 0 and "exists and parses" in out
    assert "`gputui` alone watches: the host on gpu1" in out, out
    path.write_text('host = "gpu1"\nct = 200\nsession = "train"\n')
    assert "alone watches: CT 200 on gpu1 (session train)" in run(["config"], capsys)[1]
    path.write_text('hots = "gpu1"\n')  # a typo: named, with the fix, exit 2
    code, out, err = run(["config"], capsys)
    assert code == 2 and f"config file: {path}" in out
    assert "unknown key" in err and "`host`" in err and err.count("\n") == 1
    monkeypatch.delenv("XDG_CONFIG_HOME")
    code, out, _ = run(["config"], capsys)
    assert "(the default)" in out and str(Path("~/.config/gputui").expanduser()) in out


def test_config_flag_names_the_file_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.toml"
    code, out, err = run(["config", "--config", str(missing)], capsys)
    assert code == 2 and f"{missing} (given with --config)" in out
    assert "does not exist" in err


def test_errors_point_to_the_command_not_a_clone_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old errors said "see config.example.toml", a file only a clone has."""
    bad = tmp_path / "c.toml"
    bad.write_text("[ui]\ninterval = 'fast'\n")
    code, _, err = run(["--config", str(bad), "--demo"], capsys)
    assert code == 2 and "gputui config --example" in err, err
    assert "config.example.toml" not in err
