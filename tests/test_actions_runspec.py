"""Pure parts of the actions: command recovery, tmux quoting both ways
(checked against the real tmux), attach argv, plan rendering, audit lines."""

from __future__ import annotations

import json
import os
import pty
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from gputui.actions import ActionPlan, ActionResult, attach_argv, audit_path, plan_attach
from gputui.actions.plan import ActionsDisabled, audit, check_allowed
from gputui.actions.runspec import (
    WRAPPER,
    RunSpec,
    add_python_u,
    new_session_argv,
    spec_from_start_command,
    split_log_pipe,
    tmux_arg,
)
from gputui.collect.tmux import split_start_command, start_command_text
from gputui.config import Settings
from gputui.remote.target import make_target
from helpers import wait_for

NASTY_VALUES = [
    "plain",
    "with space",
    "semi;",
    "ends with backslash-semi \\;",
    "quote ' and \" and $(touch PWNED) `id` $HOME ~ #{pane_id} %1 {x}",
    "~tilde",
    "tab\there\nnewline",
    "ünïcødé ✓",
    "",
    ";",
    "#",
]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "bash /root/start_training.sh 2>&1 | tee /workspace/train.log",
            ("bash /root/start_training.sh", "/workspace/train.log"),
        ),
        ("python3 t.py 2>&1 | tee 'train;log.txt'", ("python3 t.py", "train;log.txt")),
        ("python3 t.py |& tee -a -i 'my log'", ("python3 t.py", "my log")),
        ("a || b | tee x.log", ("a || b", "x.log")),
        ("python3 t.py > out.log 2>&1", ("python3 t.py", "out.log")),
        ("python3 t.py | grep loss", ("python3 t.py | grep loss", None)),
        ("python3 t.py | tee $HOME/x.log", ("python3 t.py | tee $HOME/x.log", None)),
        ("python3 t.py", ("python3 t.py", None)),
    ],
)
def test_split_log_pipe(command: str, expected: tuple[str, str | None]) -> None:
    assert split_log_pipe(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("python3 train.py --lr 1", "python3 -u train.py --lr 1"),
        ("/opt/venv/bin/python3.11 train.py", "/opt/venv/bin/python3.11 -u train.py"),
        ("python -u train.py", "python -u train.py"),
        ("python -Bu train.py", "python -Bu train.py"),
        ("torchrun --nproc 8 train.py", "torchrun --nproc 8 train.py"),
        ("pythonista x", "pythonista x"),
    ],
)
def test_add_python_u(command: str, expected: str) -> None:
    assert add_python_u(command) == expected


def test_tmux_arg_escapes_only_trailing_semicolon() -> None:
    assert tmux_arg("a;") == "a\\;"
    assert tmux_arg("a;b") == "a;b"
    assert tmux_arg("x\\;") == "x\\\\;"


def test_values_survive_real_tmux_both_ways(tmp_path: Path) -> None:
    """Each nasty value goes through a real tmux as an argv element (escaped
    by tmux_arg), reaches the pane's program unchanged, and split_start_command
    reads pane_start_command back to the same argv — the one parser both the
    dashboard's start-command text and relaunch's recovery use."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env["TMUX_TMPDIR"] = str(tmp_path)
    out = tmp_path / "argv.json"
    script = "import json,sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))"
    prog = ["python3", "-c", script, str(out), *NASTY_VALUES]
    argv = [
        "tmux",
        "new-session",
        "-d",
        "-s",
        "q",
        *[tmux_arg(a) for a in prog],
        ";",
        "set-option",
        "-p",
        "-t",
        "=q:",
        "remain-on-exit",
        "on",
    ]
    try:
        subprocess.run(argv, env=env, check=True, timeout=10)
        deadline = time.monotonic() + 5
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(out.read_text())[1:] == NASTY_VALUES
        shown = subprocess.run(
            ["tmux", "list-panes", "-t", "=q:", "-F", "#{pane_start_command}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.rstrip("\n")
        assert split_start_command(shown) == prog
        assert start_command_text(shown) == shown  # several arguments: shown as printed
        cmd, _log, _env, source = spec_from_start_command(shown, "q", "/w")
        assert cmd == shlex.join(prog) and source == "pane start command"
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)


def test_one_command_string_through_real_tmux(tmp_path: Path) -> None:
    """`tmux new "CMD | tee LOG"` (one argument, run by sh -c): the dashboard
    shows CMD as written and relaunch recovers the command and the log from
    the same split of what tmux prints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env["TMUX_TMPDIR"] = str(tmp_path)
    line = "echo 'it''s' \"ünï\" $HOME ~ a#x; sleep 30 2>&1 | tee -a /w d/t.log"
    line = line.replace("/w d/t.log", "'/w d/t.log'")
    try:
        new = ["tmux", "new-session", "-d", "-s", "one", tmux_arg(line), ";"]
        keep = ["set-option", "-p", "-t", "=one:", "remain-on-exit", "on"]
        subprocess.run(new + keep, env=env, check=True, timeout=10)
        shown = subprocess.run(
            ["tmux", "list-panes", "-t", "=one:", "-F", "#{pane_start_command}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.rstrip("\n")
        assert split_start_command(shown) == [line]
        assert start_command_text(shown) == line
        cmd, log, _env, _source = spec_from_start_command(shown, "one", "/w")
        assert cmd == "echo 'it''s' \"ünï\" $HOME ~ a#x; sleep 30"  # 2>&1 | tee: gputui's own
        assert log == "/w d/t.log"
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)


@pytest.mark.parametrize(
    ("printed", "argv"),
    [
        ('"sleep 100"', ["sleep 100"]),
        ("sleep", ["sleep"]),
        ('sh -c "sleep 100" "a b"', ["sh", "-c", "sleep 100", "a b"]),
        ("'say \"hi\"'", ['say "hi"']),
        ('"tab\\there" \\~x', ["tab\there", "~x"]),
        ('"oct\\037al" "nul\\0"', ["oct\x1fal", "nul\x00"]),
        ('"\\303\\274ber"', ["über"]),  # UTF-8 bytes escaped one by one
        ("'a\\\\b' ''", ["a\\b", ""]),
        ('"unterminated', None),
        ("'open", None),
        ("", []),
    ],
)
def test_split_start_command(printed: str, argv: list[str] | None) -> None:
    assert split_start_command(printed) == argv


def test_unreadable_start_command_recovers_nothing_from_it() -> None:
    """A start command that does not parse is not guessed at: relaunch falls
    back to the process's exact argv; the dashboard shows it as printed."""
    assert spec_from_start_command('"python train.py', "s", "/w") == ("", None, {}, "")
    assert start_command_text('"python train.py') == '"python train.py'


def test_wrapper_recognised_from_start_command(tmp_path: Path) -> None:
    """Relaunching a run gputui started finds log/cmd from its own wrapper; the
    env's values are in no command line, so tmux cannot show them (only names)."""
    spec = RunSpec("s;x", "/w d", "python3 t.py 'a b'", "/w d/l;og", {"A": "1 $(x);"})
    argv = new_session_argv(spec, env_file="/tmp/gputui-env-test")
    assert not any("1 $(x);" in a for a in argv)
    # what tmux shows = the unescaped pane argv, rendered the tmux way
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env["TMUX_TMPDIR"] = str(tmp_path)
    (tmp_path / "w d").mkdir()
    argv[argv.index("-c") + 1] = str(tmp_path / "w d")
    try:
        subprocess.run(argv, env=env, check=True, timeout=10)
        shown = subprocess.run(
            ["tmux", "list-panes", "-t", "=s;x:", "-F", "#{pane_start_command}"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.rstrip("\n")
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
    assert "1 $(x);" not in shown and "/tmp/gputui-env-test" in shown
    cmd, log, got_env, source = spec_from_start_command(shown, "s;x", "/w d")
    assert (cmd, log, got_env, source) == (
        "python3 -u t.py 'a b'",
        "/w d/l;og",
        {},
        "gputui wrapper (env A not carried over: set it in [run] env)",
    )


def test_spec_from_plain_start_command() -> None:
    cmd, log, env, source = spec_from_start_command(
        '"bash /root/start_training.sh 2>&1 | tee train.log"', "dflash", "/workspace"
    )
    assert (cmd, log, env, source) == (
        "bash /root/start_training.sh",
        "/workspace/train.log",
        {},
        "pane start command",
    )


def test_new_session_argv_is_one_tmux_call_with_remain_on_exit() -> None:
    argv = new_session_argv(RunSpec("train", "/root", "python3 train.py", "/root/t.log"))
    i = argv.index(";")
    assert argv[:5] == ["tmux", "new-session", "-d", "-s", "train"]
    assert argv[i + 1 :] == ["set-option", "-p", "-t", "=train:", "remain-on-exit", "on"]
    assert argv[argv.index("-c") + 2 : argv.index("-c") + 4] == ["bash", "-c"]
    assert WRAPPER in argv and "python3 -u train.py" in argv
    assert "PYTHONUNBUFFERED=1" in WRAPPER and "tee -a -i" in WRAPPER and "pipefail" in WRAPPER


@pytest.mark.parametrize("bad", ["a:b", "a.b", "", "x\ny"])
def test_bad_session_names_refused(bad: str) -> None:
    with pytest.raises(Exception, match="session name"):
        new_session_argv(RunSpec(bad, "/", "true", "/tmp/l"))


def test_bad_env_name_refused() -> None:
    with pytest.raises(Exception, match="env name"):
        new_session_argv(RunSpec("s", "/", "true", "/tmp/l", {"A B": "1"}))


def test_attach_argv_ssh_and_local(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings(
        host="127.0.0.1",
        port=2222,
        user="root",
        identity_file="/k/id",
        ct_id=200,
        session="my run;",
    )
    argv = attach_argv(make_target(s), s.session)
    assert argv[:8] == ["ssh", "-t", "-p", "2222", "-i", "/k/id", "root@127.0.0.1", "--"]
    assert shlex.split(argv[-1]) == [
        "pct",
        "exec",
        "200",
        "--",
        "tmux",
        "attach-session",
        "-t",
        "=my run\\;",
    ]
    monkeypatch.delenv("TMUX", raising=False)
    local = Settings(local=True, session="s")
    assert attach_argv(make_target(local), "s") == ["tmux", "attach-session", "-t", "=s"]
    monkeypatch.setenv("TMUX", "/tmp/x,1,0")
    assert attach_argv(make_target(local), "s")[:3] == ["env", "-u", "TMUX"]


def test_read_only_attaches_with_tmuxs_read_only_client(tmp_path: Path) -> None:
    """--read-only: the real tmux lists the attached client as read-only."""
    # a terminal type, as the dashboard's terminal has (CI runs with no TERM)
    env = {**os.environ, "TMUX_TMPDIR": str(tmp_path), "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    subprocess.run(["tmux", "new-session", "-d", "-s", "run", "sleep 60"], env=env, check=True)
    plan = plan_attach(make_target(Settings(local=True)), Settings(read_only=True), "run")
    assert "read-only" in plan.title and "-r" in plan.commands[0]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the plan's argv in a terminal, as the dashboard runs it
        os.execvpe(plan.commands[0][0], plan.commands[0], env)
    try:

        def clients() -> str:
            argv = ["tmux", "list-clients", "-F", "#{client_readonly}"]
            return subprocess.run(argv, env=env, capture_output=True, text=True).stdout.strip()

        assert wait_for(clients, 10, "the attached client") == "1"
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, check=False)
        os.close(fd)
        os.waitpid(pid, 0)


def test_attach_argv_through_a_jump_host() -> None:
    s = Settings(host="h", user="me", ct_id=200, jump="j@bastion:2222")
    argv = attach_argv(make_target(s), "run")
    assert argv[:6] == ["ssh", "-t", "-J", "j@bastion:2222", "me@h", "--"]
    assert shlex.split(argv[-1])[-4:] == ["tmux", "attach-session", "-t", "=run"]


def test_read_only_and_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ActionsDisabled, match="read-only"):
        check_allowed(Settings(read_only=True))
    check_allowed(Settings(read_only=False))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    plan = ActionPlan(
        "kill", "Stop?", "local · session 's'", session="s", pids=[5], commands=[["sh", "-c", "x"]]
    )
    p = audit("local", plan, ActionResult(ok=True, summary="ended by SIGINT", ended_by="SIGINT"))
    assert p == audit_path() == tmp_path / "gputui" / "audit.log"
    audit("local", plan, ActionResult(ok=False, summary="nope"))
    lines = [json.loads(x) for x in p.read_text().splitlines()]
    assert [x["ok"] for x in lines] == [True, False]
    assert lines[0]["commands"] == [["sh", "-c", "x"]] and lines[0]["ended_by"] == "SIGINT"
    assert lines[0]["target"] == "local" and lines[0]["action"] == "kill" and lines[0]["time"]


@pytest.mark.parametrize("escaped", [False, True])
@pytest.mark.parametrize(("dead", "stops_at"), [("1", "5"), ("0", "15")])
def test_verify_stops_early_on_a_dead_pane_raw_or_tmux34_escaped(
    escaped: bool, dead: str, stops_at: str
) -> None:
    """The verify loop's early stop must see a dead pane whether tmux prints
    the 0x1f separator raw (3.3a) or as the text \\037 (3.4)."""
    from gputui.actions.relaunch import DEAD_PANE_PATTERN, VERIFY_SCRIPT
    from gputui.collect.tmux import FIELD_SEP, PANE_FIELDS

    fields = ["s"] * PANE_FIELDS.index("pane_dead") + [dead, "0"]
    line = FIELD_SEP.join(fields)
    if escaped:
        line = line.replace(FIELD_SEP, "\\037")
    argv = ["sh", "-c", VERIFY_SCRIPT, "v", "/nonexistent", "15", DEAD_PANE_PATTERN]
    r = subprocess.run([*argv, "printf", "%s\n", line], capture_output=True, text=True)
    assert r.stdout.split()[3:5] == ["t", stops_at]


def test_watch_log_plan_names_the_file_and_runs_nothing_on_the_process() -> None:
    from gputui.actions import ActionError, plan_watch_log

    plan = plan_watch_log(4242, ["/w/real log.txt", "/w/other"], "/w/old.log")
    assert plan.action == "watch_log" and plan.target == "/w/real log.txt"
    assert plan.params == {"log": "/w/real log.txt"} and plan.pids == [4242]
    assert "$ tail -c +0 -F '/w/real log.txt'" in plan.display
    assert "follows /w/old.log" in plan.display and "Nothing is run" in plan.display
    with pytest.raises(ActionError):
        plan_watch_log(4242, [], None)
