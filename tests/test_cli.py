"""The gputui command line: flags, dispatch, one-line errors, doctor end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from gputui import cli
from gputui.config import Settings


def test_no_target_says_how_to_start(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    assert cli.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "gputui --demo" in err and "--host HOST --ct N" in err


def test_flags_before_and_after_the_subcommand(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    args, s = cli.parse(["--host", "h1", "--ct", "200", "doctor", "--session", "run", "--json"])
    assert (s.host, s.ct, s.session, args.json) == ("h1", 200, "run", True)
    args, s = cli.parse(["doctor", "--host", "h2", "--port", "2222", "-i", "k"])
    assert (s.host, s.port, s.identity_file) == ("h2", 2222, "k")


def test_config_then_flags(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('host = "from-file"\nct = 201\n[ui]\ninterval = 3.0\n')
    _, s = cli.parse(["--config", str(cfg), "--interval", "0.5"])
    assert (s.host, s.ct, s.interval) == ("from-file", 201, 0.5)
    _, s = cli.parse(["--config", str(cfg), "--host", "flag"])
    assert s.host == "flag"


@pytest.mark.parametrize(
    "argv",
    [["--local", "--demo"], ["--ct", "abc"], ["--port", "0"], ["--interval", "-1"], ["doctr"]],
)
def test_bad_flags_exit_2(argv, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_dashboard_gets_the_settings(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    seen: list[Settings] = []
    import gputui.ui.app as app

    monkeypatch.setattr(app, "run_app", lambda s: seen.append(s) or 0)
    assert cli.main(["--host", "h", "--ct", "200", "--stale-after", "60"]) == 0
    assert seen[0].host == "h" and seen[0].ct == 200 and seen[0].stale_after == 60.0


def test_actions_dispatch(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    import gputui.actions_cli as actions_cli

    calls: list[tuple[str, object, Settings]] = []
    monkeypatch.setattr(actions_cli, "run", lambda c, a, s: calls.append((c, a, s)) or 0)
    assert (
        cli.main(
            ["dump", "--host", "h", "--ct", "200", "--native", "--locals", "--pid", "42", "--yes"]
        )
        == 0
    )
    command, args, s = calls[0]
    assert command == "dump" and args.native and args.locals and args.pid == [42] and args.yes
    assert s.ct == 200
    assert cli.main(["kill", "--local", "--force"]) == 0
    assert calls[1][0] == "kill" and calls[1][1].force and calls[1][2].local


def test_ctrl_c_exits_130_quietly(monkeypatch, capsys) -> None:
    from gputui import doctor_run

    def interrupted(settings, as_json=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(doctor_run, "main", interrupted)
    assert cli.main(["doctor", "--local"]) == 130
    assert capsys.readouterr() == ("", "")


def test_doctor_on_the_test_bed_via_alias(testbed, ct: int, capsys) -> None:
    base = [
        "doctor",
        "--host",
        testbed.alias,
        "--ssh-config",
        str(testbed.ssh_config_path),
        "--ct",
        str(ct),
    ]
    assert cli.main(base) == 0
    out = capsys.readouterr().out
    assert f"root@127.0.0.1:{testbed.port} ct {ct}" in out
    assert "connected (round trip" in out
    assert f"CT {ct} running" in out
    tmux = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
    assert f"tools       {tmux} · Python 3" in out
    assert cli.main([*base, "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["facts"]
    c = facts["connection"]
    assert (c["host"], c["port"], c["user"], c["state"]) == (
        "127.0.0.1",
        testbed.port,
        "root",
        "connected",
    )
    assert c["rtt_ms"] > 0
    assert facts["ct"] == {"number": ct, "status": "running"}
    assert facts["tools"]["tmux"] == tmux
    assert facts["tools"]["python3"].startswith("Python 3")
    assert facts["tools"]["nvidia_smi_host"] is True


def test_console_script_one_line_error() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gputui.cli", "doctor", "--host", "nonexistent.invalid"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert r.stderr.startswith("gputui: unknown host") and r.stderr.count("\n") == 1


def test_dashboard_on_an_unreachable_host_ends_in_one_line() -> None:
    """The TUI itself (not only doctor): unknown host -> one line, exit 2."""
    r = subprocess.run(
        [sys.executable, "-m", "gputui.cli", "--host", "nonexistent.invalid"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    assert r.returncode == 2
    # what a terminal shows: the screen's own escape codes are invisible
    visible = re.sub(r"\x1b(\[[0-9;?<>=$]*[A-Za-z]|\][^\x07]*\x07|[=>])", "", r.stderr)
    # the message is the last thing written (the screen's last frame may share its line)
    last = re.search(r"gputui: [^\n]*\Z", visible.strip())
    assert last is not None and last.group(0).startswith("gputui: unknown host")
    assert "Traceback" not in r.stderr
