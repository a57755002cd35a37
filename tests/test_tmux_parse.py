"""tmux argv and parsing (gputui.collect.tmux) against a REAL tmux server on
a private socket: sessions with odd names, a pane that exits 3 with
remain-on-exit, one killed by SIGTERM, several windows/panes, a start
command with quotes, a working directory with a 0x1f byte in its name."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.collect.tmux import (
    LIST_PANES_FORMAT,
    capture_argv,
    decode_format_output,
    is_no_server,
    list_panes_argv,
    pane_target,
    parse_panes,
    sessions_from_result,
    start_command_text,
)
from gputui.errors import GputuiError
from gputui.model import Session
from helpers import dead_pane_with_status

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

WEIRD = "a b;\"q'é 日本"
QUOTED_CMD = "echo 'it''s' \"x\" $HOME; sleep 300"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    return env


def dead3_cmd(flag: str) -> str:
    """The dead3 pane: prints a line, waits for `flag`, exits 3."""
    return f"sh -c 'echo hello-from-pane; while [ ! -e {flag} ]; do sleep 0.05; done; exit 3'"


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=check, env=_env())


@pytest.fixture(scope="module")
def tmux_sock() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="gt-tmux-", dir="/tmp")  # short: socket paths max ~107 bytes
    sock = os.path.join(d, "s")
    odd_dir = os.path.join(d, "odd\x1fdir")
    os.mkdir(odd_dir)
    t = ["tmux", "-S", sock]
    try:
        run([*t, "new-session", "-d", "-s", "plain", "-x", "80", "-y", "24", "sleep 300"])
        tmux = lambda args: run([*t, *args], check=False)  # noqa: E731

        flag = os.path.join(d, "exit-now")

        def dead3() -> None:
            # The pane exits only once tmux shows its line: a pane that exits
            # at once can lose its output on a loaded machine (the pty closes
            # before tmux has read it), and test_capture_dead_pane is about
            # capturing a dead pane, not about that race.
            if os.path.exists(flag):
                os.unlink(flag)
            run([*t, "new", "-d", "-s", "dead3", dead3_cmd(flag),
                 ";", "set", "-p", "-t", "dead3", "remain-on-exit", "on"])  # fmt: skip
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline:
                shown = run([*t, "capture-pane", "-p", "-t", "=dead3:0.0"], check=False).stdout
                if "hello-from-pane" in shown:
                    break
                time.sleep(0.05)
            open(flag, "w").close()

        def sig() -> None:
            run([*t, "new", "-d", "-s", "sig", "sleep 300",
                 ";", "set", "-p", "-t", "sig", "remain-on-exit", "on"])  # fmt: skip
            pid = run([*t, "list-panes", "-t", "=sig:", "-F", "#{pane_pid}"]).stdout.strip()
            os.kill(int(pid), signal.SIGTERM)

        # tmux 3.3a can mark a pane dead and never record its status: retry
        assert dead_pane_with_status(tmux, "dead3", dead3) == "1|3|"
        assert dead_pane_with_status(tmux, "sig", sig) == "1||15"
        run([*t, "new", "-d", "-s", WEIRD, "-c", odd_dir, QUOTED_CMD])
        run([*t, "new", "-d", "-s", "multi", "sleep 300"])
        run([*t, "split-window", "-t", "=multi:0", "sleep 301"])
        run([*t, "new-window", "-t", "=multi:", "sleep 302"])
        yield sock
    finally:
        run([*t, "kill-server"], check=False)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def sessions(tmux_sock: str) -> dict[str, Session]:
    res = run(list_panes_argv(tmux_sock))
    parsed = sessions_from_result(res.returncode, res.stdout, res.stderr)
    return {s.name: s for s in parsed}


def test_argv_shapes() -> None:
    assert list_panes_argv() == ["tmux", "list-panes", "-a", "-F", LIST_PANES_FORMAT]
    assert list_panes_argv("/tmp/x")[:3] == ["tmux", "-S", "/tmp/x"]
    assert capture_argv("=s:0.0", 200) == [
        "tmux",
        "capture-pane",
        "-p",
        "-J",
        "-S",
        "-200",
        "-t",
        "=s:0.0",
    ]
    assert pane_target("my run", 1, 2) == "=my run:1.2"
    with pytest.raises(ValueError):
        capture_argv("=s:0.0", 0)


def test_all_sessions_found(sessions: dict[str, Session]) -> None:
    assert set(sessions) == {"plain", "dead3", "sig", WEIRD, "multi"}


def test_running_pane(sessions: dict[str, Session]) -> None:
    s = sessions["plain"]
    assert s.windows == 1 and not s.attached and s.alive
    assert s.created is not None and abs(s.created - time.time()) < 600
    (p,) = s.panes
    assert p.pid is not None and p.pid > 1 and not p.dead
    assert p.dead_status is None and p.dead_signal is None
    assert p.start_command == "sleep 300" and p.current_command == "sleep"
    assert (p.window_index, p.pane_index, p.session) == (0, 0, "plain")
    assert os.path.isdir(p.current_path)


def test_dead_pane_keeps_exit_status(tmux_sock: str, sessions: dict[str, Session]) -> None:
    s = sessions["dead3"]
    p = s.main_pane
    assert p is not None and p.dead and p.dead_status == 3 and p.dead_signal is None
    assert not s.alive
    assert p.start_command == dead3_cmd(os.path.join(os.path.dirname(tmux_sock), "exit-now"))


def test_pane_killed_by_signal(sessions: dict[str, Session]) -> None:
    p = sessions["sig"].panes[0]
    assert p.dead and p.dead_signal == signal.SIGTERM and p.dead_status is None


def test_weird_name_quoted_command_and_odd_path(sessions: dict[str, Session]) -> None:
    p = sessions[WEIRD].panes[0]
    assert p.session == WEIRD
    assert p.start_command == QUOTED_CMD
    assert p.current_path.endswith("odd?dir")  # tmux replaced the control character


def test_several_windows_and_panes(sessions: dict[str, Session]) -> None:
    s = sessions["multi"]
    assert s.windows == 2
    assert sorted((p.window_index, p.pane_index) for p in s.panes) == [(0, 0), (0, 1), (1, 0)]
    assert {p.start_command for p in s.panes} == {"sleep 300", "sleep 301", "sleep 302"}


def test_capture_dead_pane(tmux_sock: str, sessions: dict[str, Session]) -> None:
    res = run(capture_argv(pane_target("dead3"), 50, tmux_sock))
    assert "hello-from-pane" in res.stdout


def test_capture_weird_session_by_exact_target(tmux_sock: str) -> None:
    res = run(capture_argv(pane_target(WEIRD), 10, tmux_sock), check=False)
    assert res.returncode == 0, res.stderr


def test_no_server_is_empty_not_error(tmp_path: Path) -> None:
    d = tempfile.mkdtemp(prefix="gt-none-", dir="/tmp")
    try:
        res = run(list_panes_argv(os.path.join(d, "nothing")), check=False)
        assert res.returncode != 0
        assert is_no_server(res.stderr), res.stderr
        assert sessions_from_result(res.returncode, res.stdout, res.stderr) == []
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize(
    "stderr",
    [
        "no server running on /tmp/tmux-0/default",
        "error connecting to /tmp/tmux-0/default (No such file or directory)",
    ],
)
def test_no_server_texts(stderr: str) -> None:
    assert sessions_from_result(1, "", stderr + "\n") == []


def test_tmux_missing_is_a_clear_error() -> None:
    with pytest.raises(GputuiError) as ei:
        sessions_from_result(127, "", "sh: 1: tmux: not found")
    assert "apt install tmux" in str(ei.value)
    with pytest.raises(GputuiError):
        sessions_from_result(1, "", "unknown option -- Z")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('"sleep 100"', "sleep 100"),
        ("sleep", "sleep"),
        ("\"echo 'it''s' \\\"x\\\" \\$HOME; sleep 100\"", "echo 'it''s' \"x\" $HOME; sleep 100"),
        ("'say \"hi\"'", 'say "hi"'),
        ('sh -c "sleep 100" "a b"', 'sh -c "sleep 100" "a b"'),  # several args: as printed
        ('"tab\\there"', "tab\there"),
        ('"oct\\037al"', "oct\x1fal"),
        ('"unterminated', '"unterminated'),
        ("", ""),
    ],
)
def test_start_command_text(raw: str, expected: str) -> None:
    assert start_command_text(raw) == expected


def test_parse_synthetic_records() -> None:
    fields = [
        "s",
        "1",
        "1700000000",
        "2",
        "0",
        "0",
        "123",
        "0",
        "",
        "",
        '"python train.py"',
        "python3",
        "/root",
        "/work",
    ]
    text = "\x1f".join(fields) + "\x1e\n" + "garbage line\x1e\n"
    (s,) = parse_panes(text)
    assert s.attached and s.created == 1700000000.0
    p = s.panes[0]
    assert (p.pid, p.start_command, p.current_command, p.current_path, p.start_path) == (
        123,
        "python train.py",
        "python3",
        "/root",
        "/work",
    )
    assert parse_panes("") == []


def test_a_record_with_a_control_character_is_not_one_of_ours() -> None:
    """tmux replaces every control character of a text field with '?'
    (LIST_PANES_FORMAT): one in a record means the record is not ours."""
    fields = ["s", "1", "1", "0", "0", "0", "5", "0", "", "", "bash", "bash", "/tmp/a\nb", "/"]
    assert parse_panes("\x1f".join(fields) + "\x1e\n") == []
    fields[-2] = "/tmp/a?b"
    (s,) = parse_panes("\x1f".join(fields) + "\x1e\n")
    assert s.panes[0].current_path == "/tmp/a?b"


def tmux34_escaped(raw: str) -> str:
    """What tmux 3.4 prints for the same panes: control characters in -F
    output as octal escapes, a backslash doubled (as seen on the lent H200
    machine's tmux 3.4, where the raw separators made every session vanish)."""
    out = []
    for ch in raw:
        if ch == "\\":
            out.append("\\\\")
        elif ch != "\n" and ord(ch) < 32:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return "".join(out)


def test_tmux34_escaped_separators_parse_the_same(tmux_sock: str) -> None:
    raw = run(list_panes_argv(tmux_sock)).stdout
    assert "\x1f" in raw
    escaped = tmux34_escaped(raw)
    assert "\x1f" not in escaped and "\\037" in escaped
    assert parse_panes(escaped) == parse_panes(raw)
    assert len(parse_panes(escaped)) >= 3


def test_raw_output_with_backslashes_is_left_alone() -> None:
    assert decode_format_output("a\x1fC:\\037\\x") == "a\x1fC:\\037\\x"
    assert decode_format_output("a\\037b\\\\c") == "a\x1fb\\c"


def test_a_pane_started_by_the_launch_wrapper_shows_the_users_command(tmux_sock: str) -> None:
    """After a relaunch the sessions pane shows `python3 -u train.py …`, not
    the wrapper script (`bash -c "set -o pipefail\\nlog=$1; …`)."""
    from gputui.actions.runspec import RunSpec, new_session_argv

    spec = RunSpec(
        session="relaunched",
        cwd=os.path.dirname(tmux_sock),
        command="python3 train.py --lr 3e-4 'a b'",
        log=os.path.join(os.path.dirname(tmux_sock), "relaunched.log"),
        env={"WANDB_MODE": "offline"},
    )
    run(new_session_argv(spec, ["tmux", "-S", tmux_sock], env_file="/nonexistent/env"))
    res = run(list_panes_argv(tmux_sock))
    by_name = {s.name: s for s in sessions_from_result(res.returncode, res.stdout, res.stderr)}
    pane = by_name["relaunched"].panes[0]
    assert pane.start_command == "python3 -u train.py --lr 3e-4 'a b'"
    assert "set -o pipefail" in pane.start_command_raw  # what relaunch reads back is kept
