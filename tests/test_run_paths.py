"""Every reader of a path the run supplied reads it with the right hands
(issue 45, MED): the owner's, or root's without following a link another
user could change.

uid 65534 owns the run and the directory of its log. While `gputui watch
--local` records it, the owner swaps that directory for a link to a
root-only directory holding a file of the same name (`mv e e.old; ln -s
/root/secret e`). The history's reader ran `tail` as root and the agent's
stat followed the link as root: `step 4242 loss 0.1337` of the root-only
file came back in `gputui history --json`, its size in the snapshot. Now
no byte of it does. And a test reads the code: every open or stat of a
path in the agent, and every shell script that reads a path, goes through
the one helper (remote/identity.py HANDS_SH, remote/agent.py
open_run_path / stat_run_path) or says why it needs none.
Real processes, real files, real gputui watch; no mocks."""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import helpers
from gputui.remote import agent

UID = 65534
DROP = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
SECRET = "".join(f"step {4242 + i} loss 0.1337 | 7777 tok/s\n" for i in range(400))


@pytest.fixture
def swappable() -> Iterator[tuple[Path, Path]]:
    """(the owner's directory holding e/train.log, root's 0700 directory
    holding a 0600 train.log larger than the owner's)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    user = Path(tempfile.mkdtemp(prefix="grp-", dir="/var/tmp"))
    secret = Path(tempfile.mkdtemp(prefix="grp-root-", dir="/var/tmp"))
    secret.chmod(0o700)
    (secret / "train.log").write_text(SECRET)
    (secret / "train.log").chmod(0o600)
    user.chmod(0o755)
    os.chown(user, UID, UID)
    lines = "".join(f"step {i} loss 2.0 | 100 tok/s\\n" for i in range(1, 6))
    as_owner(user, f'mkdir e && printf "{lines}" > e/train.log')
    try:
        yield user, secret
    finally:
        shutil.rmtree(user, ignore_errors=True)
        shutil.rmtree(secret, ignore_errors=True)


def as_owner(cwd: Path, script: str) -> None:
    subprocess.run([*DROP, "sh", "-c", script], cwd=cwd, check=True)


def swap(user: Path, secret: Path) -> None:
    as_owner(user, f"mv e e.old && ln -s {secret} e")


@pytest.mark.timeout(120)
def test_a_swapped_directory_puts_no_byte_of_a_root_file_in_history(
    swappable: tuple[Path, Path], tmp_path: Path
) -> None:
    user, secret = swappable
    log = user / "e" / "train.log"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
    env.pop("TMUX", None)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[history]\nlog_every = 1\n")
    gputui = [sys.executable, "-m", "gputui"]
    watch = [*gputui, "watch", "local", "--log", str(log), "--config", str(cfg)]
    proc = subprocess.Popen(watch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def history() -> str:
        argv = [*gputui, "history", "--json", "--config", str(cfg), "--since", "1h"]
        return subprocess.run(argv, env=env, capture_output=True, text=True).stdout

    try:
        helpers.wait_for(lambda: '"step": 5' in history(), 40, "the owner's 5 steps recorded")
        swap(user, secret)
        # the root file holds 400 steps past the owner's: the old reader took them in seconds
        with open(user / "e.old" / "train.log", "a") as f:
            f.write("step 6 loss 1.9 | 100 tok/s\n")
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            assert "4242" not in history()
            time.sleep(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    got = history()
    assert '"step": 5' in got
    assert "4242" not in got and "0.1337" not in got and "7777" not in got, got[-2000:]
    assert b"4242" not in out and b"0.1337" not in out


def test_the_agents_stat_and_read_follow_no_link_of_the_owner_as_root(
    swappable: tuple[Path, Path],
) -> None:
    user, secret = swappable
    log = str(user / "e" / "train.log")
    a = agent.Agent()
    before = a.op_stat({"paths": [log]})[0]
    assert before["exists"] and before["size"] < len(SECRET)
    swap(user, secret)
    after = a.op_stat({"paths": [log]})[0]
    assert after.get("size") != len(SECRET), after  # the root file's size is not told
    assert not after["exists"], after  # the owner may not read it: neither may we for them
    with pytest.raises(OSError):
        a.op_read({"path": log, "offset": 0, "max_bytes": 100})
    # a link of root's in a directory of root's is root's own way: followed
    assert agent.stat_run_path("/proc/self/root/etc/hostname").st_size >= 0


def test_the_walk_without_openat2_refuses_the_owners_link_and_follows_roots(
    swappable: tuple[Path, Path],
) -> None:
    user, secret = swappable
    swap(user, secret)
    with pytest.raises(agent.UntrustedLink) as err:
        agent._walk_open(str(user / "e" / "train.log"), os.O_RDONLY)
    assert err.value.uid == UID
    fd = agent._walk_open(str(user / "e.old" / "train.log"), os.O_RDONLY)
    try:
        assert os.read(fd, 7) == b"step 1 "
    finally:
        os.close(fd)


# ------------------------------------------------------------ every reader

# Agent functions that open or stat a path and why no run-supplied path
# reaches them as root. Any other function that does fails the test below.
AGENT_NOT_RUN_PATHS = {
    "_read_bytes": "/proc/PID/… and /sys files the agent names itself",
    "_module_file": "isfile of a candidate under the run's cwd: only whether it exists",
    "_file_id": "the identity (dev, inode) of a file a process has open, kept in the agent",
    "root_owned": "checks that root owns every component before root runs a tool",
    "tmux_server_argv": "lstat of a tmux socket and its directory: links refused",
    "other_tmux_sockets": "lstat of tmux sockets under TMUX_TMPDIR: links refused",
    "oom_kills": "cgroup files under /sys/fs/cgroup",
    "_owner_uid": "/proc/PID",
    "_walk_open": "the helper itself",
    "open_run_path": "the helper itself",
    "stat_run_path": "the helper itself",
    "_trust_link": "the helper itself",
    "tool_version": "tools on the fixed PATH",
    "list_pids": "/proc",
    "read_cmdline": "/proc/PID/cmdline",
    "op_pidmap": "/proc/PID/…",
    "op_hello": "the agent's own files",
    "pid_tree_stats": "/proc",
    "tty_read": "/proc/PID/syscall",
    "written_files": "/proc/PID/fd links, read as links",
    "env_value": "/proc/PID/environ",
    "written_fds": "/proc/PID/fd",
    "file_writers": "/proc/PID/fd",
    "_reads_pipe": "/proc/PID/fd",
    "stdout_target": "/proc/PID and /proc/PID/fd",
    "_children": "/proc/PID/task",
    "links_hex": "/proc/PID/fd",
    "run_facts": "lstat of the tmux socket tmux_server_argv checked (links refused)",
    "_fds": "/proc/PID/fd",
    "sockets": "/proc/PID/fd",
    "fixed": "/proc/PID/environ",
    "oom_kill_count": "cgroup files under /sys/fs/cgroup (a path with .. is dropped)",
}
RAW = {
    ("os", "stat"),
    ("os", "lstat"),
    ("os", "open"),
    ("os", "statvfs"),
    ("os", "access"),
    ("os", "walk"),
    ("os", "listdir"),
    ("os", "scandir"),
    ("path", "isfile"),
    ("path", "exists"),
    ("path", "getsize"),
    ("path", "getmtime"),
    ("path", "isdir"),
}


def _raw_calls(fn: ast.FunctionDef) -> list[str]:
    """The plain open/stat calls in `fn`'s own body (not in a function it defines)."""
    out = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(node))
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if any(k.arg == "dir_fd" for k in node.keywords):
            continue  # relative to a directory's fd, opened through the helper
        if isinstance(f, ast.Name) and f.id == "open":
            out.append("open")
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name | ast.Attribute):
            owner = f.value.id if isinstance(f.value, ast.Name) else f.value.attr
            if (owner, f.attr) in RAW:
                out.append(f"{owner}.{f.attr}")
    return out


def test_every_open_or_stat_in_the_agent_goes_through_the_helper_or_says_why() -> None:
    """A function of the agent that opens or stats a path with the plain
    calls is either one that never gets a path the run supplied (named
    above, with why) or a bypass: fails here. Paths reach the agent's ops
    from the client (op_stat, op_read) and from the run's processes
    (source_files: its script and the .py files around it)."""
    tree = ast.parse(inspect.getsource(agent))
    bypass = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in AGENT_NOT_RUN_PATHS:
            calls = _raw_calls(node)
            if calls:
                bypass[node.name] = calls
    assert bypass == {}, f"a path opened or stat'ed as root without open_run_path: {bypass}"


def _shell_scripts() -> dict[str, str]:
    """Every module-level shell script of gputui (a str constant run by sh)."""
    import importlib
    import pkgutil

    import gputui

    found = {}
    for m in pkgutil.walk_packages(gputui.__path__, "gputui."):
        if m.name.startswith(
            ("gputui.ui", "gputui.demo", "gputui.remote.agent", "gputui.__main__")
        ):
            continue
        mod = importlib.import_module(m.name)
        for name, value in vars(mod).items():
            if name.isupper() and isinstance(value, str) and "\n" in value and "$1" in value:
                found.setdefault(name, value)  # one name per script, wherever imported
    return found


# Shell scripts that read, tail or stat a path and why it is not the run's
# (or is read another way). Any other fails the test below.
SCRIPTS_NOT_RUN_PATHS = {
    "ROOT_OWNED_SCRIPT": "checks root owns a tool before root runs it",
    "PYTHON_SCRIPT": "checks root owns the interpreter before root runs it",
    "SOCKET_OWNER_SCRIPT": "a tmux socket's owner: links refused",
    "MOVE_SCRIPT": "runs with the run owner's hands (relaunch.plan_move_log: as_owner)",
    "LOG_CHECK_SCRIPT": "runs with the run owner's hands (relaunch.plan_move_log: as_owner)",
    "WRAPPER": "runs as the run's own command, in its pane",
    "WRITE_ENV_SCRIPT": "gputui's own env file, made by mktemp; links and others refused",
    "LINKS_SCRIPT": "readlink of /proc/PID links",
    "READ_SCRIPT": "runs behind path_reader_argv (read_argv, checked below)",
    "_APPS_HEAD": "/proc/PID/status and stat of GPU processes",
    "APPS_LISTING": "/proc/PID/status and stat of GPU processes",
    "APPS_HEALTH_LISTING": "/proc/PID/status and stat of GPU processes",
    "APPS_SCRIPT": "/proc/PID/status and stat of GPU processes",
}
READS = (" tail ", "stat ", " cat ", "head -c", " dd ", " find ")


def test_every_shell_reader_of_a_path_decides_whose_hands_first() -> None:
    from gputui.record.recorder import read_argv

    readers = {
        name: text for name, text in _shell_scripts().items() if any(w in f" {text}" for w in READS)
    }
    assert "READ_SCRIPT" in readers and "FOLLOW_SCRIPT" in readers  # the scan finds them
    bypass = [
        name
        for name, text in readers.items()
        if "gputui_hands" not in text and name not in SCRIPTS_NOT_RUN_PATHS
    ]
    assert bypass == [], f"shell scripts that read a path without gputui_hands: {bypass}"
    assert "gputui_hands" in " ".join(read_argv("/x", 0, 1))  # READ_SCRIPT runs behind it
