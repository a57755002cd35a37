"""Bad input on the command line (issue #11 item 9), through the real CLI in
a subprocess, for the dashboard entry and `doctor`: each is one line naming
the problem and the fix, exit status 2, within 2 s, no traceback."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import run_on_a_terminal

ENTRIES = {"dashboard": [], "doctor": ["doctor"]}


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def within_2_s(took: float, cpu: float) -> bool:
    """The 2 s target, wall clock. A hang (a FIFO opened, an endless timeout)
    never ends, a busy loop burns CPU; on a starved shared machine Python's
    start-up alone can pass 2 s, so there a run that used < 1 s of CPU and
    ended within 6 s passes too."""
    return took < 2.0 or (took < 6.0 and cpu < 1.0)


def gputui(argv: list[str], home: Path) -> tuple[int, str, float]:
    """The dashboard on a terminal (on a pipe it would print doctor's report), doctor on pipes."""
    t0 = time.monotonic()
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state")}
    cmd = [sys.executable, "-m", "gputui", *argv]
    if argv[:1] != ["doctor"]:
        r = run_on_a_terminal(cmd, env, 30, stdin=subprocess.DEVNULL)
    else:
        r = subprocess.run(
            cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL, env=env
        )
    return r.returncode, r.stderr, time.monotonic() - t0


def one_line(err: str) -> str:
    assert "Traceback" not in err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("gputui: ")
    return err.strip()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # opening it would block until someone writes
    (tmp_path / "keydir").mkdir()
    return {
        "fifo": str(fifo),
        "dir": str(tmp_path / "keydir"),
        "missing": str(tmp_path / "no_known_hosts"),
    }


# flags -> words the one line must contain (the problem and the fix)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "config-fifo": (["--config", "{fifo}"], ["is a FIFO (named pipe), not a file", "--config"]),
    "config-dev-zero": (["--config", "/dev/zero"], ["/dev/zero is a device", "--config"]),
    "connect-timeout-inf": (
        ["--connect-timeout", "inf"],
        ["--connect-timeout", "'inf' is not a finite number", "--help`"],
    ),
    "connect-timeout-nan": (["--connect-timeout", "nan"], ["'nan' is not a finite number"]),
    "connect-timeout-huge": (["--connect-timeout", "1e9"], ["out of range", "at most 600"]),
    "interval-tiny": (["--interval", "1e-9"], ["--interval", "out of range", "use 0.2 to"]),
    "interval-nan": (["--interval", "nan"], ["--interval", "not a finite number"]),
    "stale-after-inf": (["--stale-after", "inf"], ["--stale-after", "not a finite number"]),
    "known-hosts-missing": (
        ["--known-hosts", "{missing}"],
        ["known_hosts file {missing} does not exist", "ssh-keyscan", "--accept-new-host-key"],
    ),
    "known-hosts-dir": (["--known-hosts", "{dir}"], ["is a directory, not a file"]),
    "identity-dir": (["-i", "{dir}"], ["identity file {dir} is a directory", "private key"]),
    "ct-unicode-digits": (["--ct", "２００"], ["is not a CT number", "digits 0-9"]),
    "port-unicode-digits": (["--port", "２２"], ["is not a port number"]),
    "log-relative": (["--log", "train.log"], ["--log train.log is not a full path", "/workspace/"]),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_exit_2(
    entry: str, case: str, files: dict[str, str], tmp_path: Path
) -> None:
    flags, words = CASES[case]
    argv = [*ENTRIES[entry], "--host", "127.0.0.1", *(f.format(**files) for f in flags)]
    cpu0 = child_cpu()
    rc, err, took = gputui(argv, tmp_path)
    line = one_line(err)
    assert rc == 2
    for w in words:
        assert w.format(**files) in line, line
    assert within_2_s(took, child_cpu() - cpu0), f"{took:.2f} s"


def test_config_file_values_are_checked_too(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('host = "127.0.0.1"\n[ssh]\nconnect_timeout = inf\n[ui]\ninterval = nan\n')
    rc, err, _ = gputui(["doctor", "--config", str(cfg)], tmp_path)
    assert rc == 2 and f"{cfg}:5: `ui.interval`" in one_line(err)
    cfg.write_text('host = "127.0.0.1"\n[ssh]\nconnect_timeout = inf\n')
    rc, err, _ = gputui(["doctor", "--config", str(cfg)], tmp_path)
    assert rc == 2 and f"{cfg}:3: `ssh.connect_timeout`: inf s is out of range" in one_line(err)


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_a_relative_run_log_in_the_config_is_refused_as_log_is(entry: str, tmp_path: Path) -> None:
    """`[run] log = "train.log"` on a remote target was looked for in the ssh
    user's home in the CT: refused as --log is, naming the file and line."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('host = "127.0.0.1"\nct = 200\n[run]\ncommand = "python train.py"\n')
    with cfg.open("a") as f:
        f.write('log = "train.log"\n')
    rc, err, _ = gputui([*ENTRIES[entry], "--config", str(cfg)], tmp_path)
    line = one_line(err)
    assert rc == 2
    assert f"{cfg}:5: `run.log`: 'train.log' is not a full path: in CT 200" in line, line
    assert "e.g. /workspace/train.log" in line, line
    # --local reads it where gputui runs: a relative path is fine there
    cfg.write_text('[run]\nlog = "train.log"\n')
    rc, err, _ = gputui(["doctor", "--local", "--config", str(cfg)], tmp_path)
    assert "not a full path" not in err


def test_known_hosts_may_be_missing_with_accept_new(tmp_path: Path) -> None:
    """--accept-new-host-key creates the file, as OpenSSH does: not refused up front."""
    from gputui.config import Settings, check_local_files

    s = Settings(host="h", known_hosts=str(tmp_path / "new"), accept_new_host_key=True)
    check_local_files(s)


VISIBLE = re.compile(r"\x1b(\[[0-9;?<>=$]*[A-Za-z]|\][^\x07\x1b]*(\x07|\x1b\\)|[=>()][0-9A-Za-z]?)")


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("log", ["DIR", "/dev/zero"])
def test_log_that_is_not_a_file(entry: str, log: str, tmp_path: Path) -> None:
    """--log a directory or /dev/zero on this machine (--local): one line, exit 2.
    The dashboard draws its screen first, so the line is the last thing on stderr."""
    path = str(tmp_path) if log == "DIR" else log
    rc, err, took = gputui([*ENTRIES[entry], "--local", "--log", path], tmp_path)
    assert rc == 2 and "Traceback" not in err
    last = VISIBLE.sub("", err).strip().splitlines()[-1]
    assert re.search(r"gputui: log \S+ is a (directory|character special file), not a file", last)
    assert last.endswith("— pass the file the run writes with --log (or [run] log in the config)")
    assert last[last.index("gputui: ") :].startswith(f"gputui: log {path} is a ")
    if entry == "doctor":
        assert err.count("\n") == 1
    # 2 s is the target (measured: see README); the bound leaves room for a loaded CI machine
    assert took < 4.0 if entry == "doctor" else took < 10.0, f"{took:.2f} s"


def test_log_directory_in_a_container_on_the_test_bed(testbed, ct: int, tmp_path: Path) -> None:
    """The same through ssh and `pct exec`: the check runs where the log is."""
    flags = [
        "--host", testbed.host, "--port", str(testbed.port), "--user", testbed.user,
        "-i", str(testbed.key_path), "--known-hosts", str(testbed.known_hosts_path),
        "--ct", str(ct), "--log", str(testbed.workspace),
    ]  # fmt: skip
    rc, err, took = gputui(["doctor", *flags], tmp_path)
    line = one_line(err)
    assert rc == 2
    assert line.startswith(f"gputui: log {testbed.workspace} is a directory, not a file")
    assert took < 8.0, f"{took:.2f} s"  # idle: ~1 s; pct costs 0.3 s a call here
