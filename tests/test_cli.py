"""The gputui command line: flags, dispatch, one-line errors, doctor end to end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from gputui.cli import main as cli
from gputui.config import Settings
from helpers import run_on_a_terminal


def test_no_target_says_how_to_start(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    assert cli.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "gputui --demo" in err and "--host HOST --ct N" in err


def test_flags_before_and_after_the_subcommand(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    args, s = cli.parse(["--host", "h1", "--ct", "200", "doctor", "--session", "run", "--json"])
    assert (s.host, s.ct_id, s.session, args.json) == ("h1", 200, "run", True)
    args, s = cli.parse(["doctor", "--host", "h2", "--port", "2222", "-i", "k"])
    assert (s.host, s.port, s.identity_file) == ("h2", 2222, "k")


def test_config_then_flags(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('host = "from-file"\nct = 201\n[ui]\ninterval = 3.0\n')
    _, s = cli.parse(["--config", str(cfg), "--interval", "0.5"])
    assert (s.host, s.ct_id, s.interval) == ("from-file", 201, 0.5)
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
    monkeypatch.setattr(cli, "draws_screen", lambda: True)  # as on a terminal
    assert cli.main(["--host", "h", "--ct", "200", "--stale-after", "60"]) == 0
    assert seen[0].host == "h" and seen[0].ct_id == 200 and seen[0].diagnosis.stale_after == 60.0


def test_actions_dispatch(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    import gputui.cli.actions as actions_cli

    calls: list[tuple[str, object, Settings]] = []
    monkeypatch.setattr(actions_cli, "run", lambda c, a, s: calls.append((c, a, s)) or 0)
    assert (
        cli.main(
            ["dump", "--host", "h", "--ct", "200", "--native", "--locals", "--pid", "42", "--yes"]
        )
        == 0
    )
    command, args, s = calls[0]
    assert command == "dump" and args.native and args.locals_ and args.pids == [42] and args.yes
    assert s.ct_id == 200
    assert cli.main(["kill", "--local", "--force"]) == 0
    assert calls[1][0] == "kill" and calls[1][1].force and calls[1][2].local


def test_ctrl_c_exits_130_quietly(monkeypatch, capsys) -> None:
    from gputui.doctor import run as doctor_run

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
    # no run in the CT (no tmux server, no process writing a log): said, exit 1
    # (issue 44: it said "✓ nothing wrong", exit 0)
    assert cli.main(base) == 1
    out = capsys.readouterr().out
    assert "no run found in CT" in out and "nothing wrong" not in out, out
    assert f"root@127.0.0.1:{testbed.port} ct {ct}" in out
    assert "connected (round trip" in out
    assert f"CT {ct} running" in out
    tmux = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
    assert f"tools       {tmux} · Python 3" in out
    assert cli.main([*base, "--json"]) == 1
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
        [sys.executable, "-m", "gputui", "doctor", "--host", "nonexistent.invalid"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert r.stderr.startswith("gputui: unknown host") and r.stderr.count("\n") == 1


def test_dashboard_on_an_unreachable_host_ends_in_one_line() -> None:
    """The TUI itself (not only doctor): unknown host -> one line, exit 2."""
    r = run_on_a_terminal(  # on a pipe, gputui prints doctor's report instead
        [sys.executable, "-m", "gputui", "--host", "nonexistent.invalid"],
        {**os.environ, "TERM": "xterm-256color"},
        60,
    )
    assert r.returncode == 2
    assert "no dashboard" not in r.stderr  # it was the dashboard
    # what a terminal shows: the screen's own escape codes are invisible
    visible = re.sub(r"\x1b(\[[0-9;?<>=$]*[A-Za-z]|\][^\x07]*\x07|[=>])", "", r.stderr)
    # the message is the last thing written (the screen's last frame may share its line)
    last = re.search(r"gputui: [^\n]*\Z", visible.strip())
    assert last is not None and last.group(0).startswith("gputui: unknown host")
    assert "Traceback" not in r.stderr


TARGET = "root@127.0.0.1:2222/200"
SAME = ("root", "127.0.0.1", 2222, 200)


def test_one_target_string_on_every_command(monkeypatch, tmp_path) -> None:
    """`[user@]host[:port][/ct]` means the same to the dashboard, doctor, the
    action verbs, watch and history, as TARGET or as --host."""
    from gputui.cli.targets import target_query
    from gputui.cli.watch import target_settings

    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    for argv in ([TARGET], ["--host", TARGET], ["doctor", TARGET], ["kill", TARGET, "--yes"]):
        _, s = cli.parse(argv)
        assert (s.user, s.host, s.port, s.ct_id) == SAME, argv
    _, s = cli.parse(["dump", "--host", TARGET])
    assert (s.user, s.host, s.port, s.ct_id) == SAME
    _, s = cli.parse(["-l", "root", "-p", "2222", "--ct", "200", "127.0.0.1"])  # the flags
    assert (s.user, s.host, s.port, s.ct_id) == SAME
    args, s = cli.parse(["watch", TARGET])
    w = target_settings(args.targets[0], s)
    assert (w.user, w.host, w.port, w.ct_id) == SAME
    args, _ = cli.parse(["history", TARGET])
    assert target_query(args) == TARGET
    args, _ = cli.parse(["history", "--host", "root@127.0.0.1:2222", "--ct", "200"])
    assert target_query(args) == TARGET


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "h/200", "--ct", "201"],  # the CT twice, differently
        ["doctor", "h", "--host", "g"],  # the target twice
        ["kill", "h/2x"],
        ["--host", "a/200", "--host", "b"],  # a CT with several hosts
    ],
)
def test_a_target_given_two_ways_is_one_line(argv, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gputui: ") and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["alert-test", "--ct", "200"], "--ct"),
        (["alert-test", "--host", "h"], "--host"),
        (["history", "--read-only"], "--read-only"),
        (["history", "--interval", "2"], "--interval"),
        (["history", "--session", "x"], "--session"),
        (["kill", "h/200", "--read-only"], "--read-only"),
        (["doctor", "h", "--read-only"], "--read-only"),
    ],
)
def test_a_flag_a_command_does_not_take_is_refused(argv, flag, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and flag in err, err


def test_ssh_dash_o_sets_the_options_gputui_honours(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    opts = ["Port=2222", "User=root", "IdentityFile=/k", "ConnectTimeout=5"]
    opts += ["StrictHostKeyChecking=accept-new", "ProxyJump=j:22", "ServerAliveInterval 7"]
    _, s = cli.parse([x for o in opts for x in ("-o", o)] + ["-F", "/cfg", "127.0.0.1/200"])
    assert (s.user, s.host, s.port, s.ct_id, s.identity_file) == (*SAME, "/k")
    assert (s.connect_timeout, s.accept_new_host_key, s.jump, s.keepalive) == (5, True, "j:22", 7)
    assert s.ssh_config == "/cfg"


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ("HostName=x", ["'HostName'", "Port, User, IdentityFile"]),
        ("Port=http", ["Port must be a port number"]),
        ("StrictHostKeyChecking=no", ["yes or accept-new"]),
    ],
)
def test_ssh_dash_o_bad_is_one_line(option, words, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    assert cli.main(["doctor", "-o", option, "h/200"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(w in err for w in words), err
    assert cli.main(["-o", "Port=2", "-p", "3", "h"]) == 2
    assert "disagree" in capsys.readouterr().err


def test_dash_o_port_closed_is_the_one_line_unreachable_error(tmp_path) -> None:
    """-o Port=N reaches the connection: a closed loopback port is the usual
    one line, on the host doctor and on an action verb alike."""
    from testbed import closed_port

    port = closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env["HOME"] = str(tmp_path)
    for words in (["doctor", "127.0.0.1"], ["kill", "127.0.0.1/200", "--yes"]):
        argv = [sys.executable, "-m", "gputui", *words, "-o", f"Port={port}", "-l", "root"]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        err = done.stderr
        assert err.count("\n") == 1 and "connection refused by 127.0.0.1" in err, err
        assert f"port {port}" in err or f":{port}" in err, err


def test_watch_demo_says_why_not_in_one_line(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")
    assert cli.main(["watch", "--demo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "watch takes no --demo" in err and "gputui --demo" in err


def test_every_command_has_its_help(capsys) -> None:
    """Each command's --help prints its usage (an empty flag group broke it)."""
    for command in [[], *([c] for c in sorted(cli._commands(cli.build_parser())))]:
        with pytest.raises(SystemExit) as e:
            cli.main([*command, "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0 and out.startswith("usage: gputui"), (command, out)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["gpu1", "gpu2"], "one TARGET only (gpu1, gpu2)"),
        (["gpu1/200", "doctor"], "the command comes first: gputui doctor gpu1/200"),
    ],
)
def test_the_dashboard_takes_one_target_and_the_command_first(argv, words, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and words in err, err
