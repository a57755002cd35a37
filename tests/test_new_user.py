"""What a new user meets on a Proxmox host, through the real CLI and the
test bed (real sshd, real tmux, stand-in pct and nvidia-smi): each case is
one clear line or one clear finding, never "nothing wrong" by mistake."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import scenarios as sc
from helpers import wait_for
from testbed import closed_port
from ui_scenarios import make_app, screen_text, settings_for, until


def test_a_ct_without_tmux_and_python3_is_not_nothing_wrong(testbed: Any, ct: int) -> None:
    """No python3, so no agent to say which tools the CT has: doctor asked
    none and said "nothing wrong", exit 0. Now a plain command asks once."""
    sc.without_commands(testbed, ct, "tmux", "python3*")
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"))
    assert r.rc == 1, r.stdout + r.stderr
    missing = r.finding("tools_missing")
    assert missing["severity"] == "warning"
    assert "tmux" in missing["title"] and "python3" in missing["title"]
    assert f"pct exec {ct} -- apt-get install -y tmux" in missing["fix"]


LOOP = "import time\ni = 0\nwhile True:\n    i += 1\n    print(f'step {i} | loss 1.0')\n    time.sleep(0.1)"


def test_a_log_deleted_while_the_run_writes_it_is_read_on_and_said(testbed: Any, ct: int) -> None:
    """`rm train.log` in the CT while `python | tee train.log` runs: doctor
    said "log … (deleted) does not exist — check the path, or wait for the
    run to create it", and no line written after the rm was seen. Now the
    log is read on through tee's fd, and a warning says it was deleted and
    how to keep its lines."""
    run = sc.prepare(testbed, ct, "deleted", "job")
    cmd = f"python3 -u -c {shlex.quote(LOOP)} | tee {shlex.quote(str(run.log))}"
    sc.launch(testbed, run, cmd)
    wait_for(lambda: run.log.exists() and run.log.read_text().count("\n") >= 3, 15, "lines")
    before = run.log.read_text().splitlines()
    run.log.unlink()
    last_before = int(before[-1].split()[1])
    time.sleep(1.0)  # the run writes on into the deleted file
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"))
    assert r.rc == 1, r.stdout + r.stderr
    f = r.finding("log_deleted")
    assert f["severity"] == "warning" and str(run.log) in f["title"]
    log = r.doc["snapshot"]["log"]  # type: ignore[index]
    assert log["path"] == str(run.log) and log["read_via"].startswith("/proc/")
    assert f"pct exec {ct} -- cp {log['read_via']} {run.log}.saved" in f["fix"]
    steps = [int(line.split()[1]) for line in log["tail"] if line.startswith("step ")]
    assert steps and steps[-1] > last_before + 5, (last_before, log["tail"])
    assert steps == list(range(steps[0], steps[-1] + 1))  # no line twice, none lost
    assert "log_missing" not in r.kinds()


def _tails_of(path: Path) -> list[int]:
    """PIDs of the `tail … PATH` processes on this machine."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if argv[0] == b"tail" and str(path).encode() in argv:
                    out.append(int(entry))
    return out


def test_closing_the_terminal_leaves_no_tail_behind(tmp_path: Path) -> None:
    """`gputui --local --log L` whose terminal closes (SIGHUP): the `tail -F`
    of a quiet log used to outlive it for good, and gputui died of the
    signal; now it quits as `q` does (streams stopped), exit 129, no crash."""
    log = tmp_path / "quiet.log"
    log.write_text("step 1 | loss 1.0\n")
    (tmp_path / "none.toml").write_text("")
    argv = [sys.executable, "-m", "gputui", "--local", "--log", str(log)]
    argv += ["--config", str(tmp_path / "none.toml")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env.update(HOME=str(tmp_path), TERM="xterm-256color", XDG_STATE_HOME=str(tmp_path))
    pid, fd = pty.fork()
    if pid == 0:  # the child: gputui on the pty
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # not a suite run under nohup's SIG_IGN
        os.execve(sys.executable, argv, env)
    try:
        buf = bytearray()

        def tail_started() -> bool:
            while select.select([fd], [], [], 0)[0]:  # keep the terminal drained
                try:
                    buf.extend(os.read(fd, 65536))
                except OSError:
                    break
            return bool(_tails_of(log))

        wait_for(tail_started, 30, f"gputui following the log; screen: {bytes(buf[-300:])!r}")
    finally:
        os.close(fd)  # the terminal goes away: the kernel sends SIGHUP
        _, status = os.waitpid(pid, 0)
    try:
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGHUP
        assert not list((tmp_path / "gputui").glob("crash-*")), "a crash file"
        wait_for(lambda: not _tails_of(log), 8, "no tail left following the log")
    finally:  # a failure leaves nothing either (its batcher ends with its tail)
        for left in _tails_of(log):
            with contextlib.suppress(OSError):
                os.kill(left, signal.SIGKILL)


def _run_in_terminal(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """argv on a pty as a user's terminal: (exit code, what it showed)."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(argv[0], argv, env)
    seen = bytearray()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                seen.extend(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), seen.decode("utf-8", "replace")


def unprivileged() -> list[str]:
    """A command prefix under which gputui may not read a file its mode
    forbids: as root, setpriv drops the right to read any file."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root here, and no setpriv to drop the right to read any file")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("command", [["doctor"], []])
def test_a_log_it_may_not_read_is_one_line(tmp_path: Path, command: list[str]) -> None:
    """A named log that exists but this user may not read (an unprivileged
    CT's root and a file of the host's root): one line naming it, exit 2 —
    the dashboard showed "catching up 0 of 18 bytes" for good and doctor
    said nothing. As root, the read permission is taken away with setpriv."""
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 1.0\n")
    log.chmod(0)
    prefix = unprivileged()
    (tmp_path / "none.toml").write_text("")
    argv = [*prefix, sys.executable, "-m", "gputui", *command, "--local", "--log", str(log)]
    argv += ["--config", str(tmp_path / "none.toml")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env.update(HOME=str(tmp_path), TERM="xterm-256color", XDG_STATE_HOME=str(tmp_path))
    code, shown = _run_in_terminal(argv, env, 30)
    assert code == 2, shown[-600:]
    # what stays on the terminal: after the dashboard's screen (if any) is gone
    left = re.sub(r"\x1b\[[0-9;?<>=]*[a-zA-Z]", "", shown.rpartition("\x1b[?1049l")[2])
    lines = [line for line in left.splitlines() if line.strip()]
    assert lines == [
        f"gputui: log {log} cannot be read (permission denied) — check its owner and mode "
        f"(ls -l {log}); in an unprivileged CT root cannot read files owned by the host's root"
    ], shown[-600:]


@pytest.mark.parametrize("case", ["missing", "no tmux"])
async def test_the_run_line_says_why_there_is_nothing_to_pick(
    testbed: Any, ct: int, case: str
) -> None:
    """A CT that does not exist, or one with no tmux session: the run line
    said "pick one in the sessions list", and the log view "select a
    session", a list with nothing in it."""
    number = 9999 if case == "missing" else ct
    app, parts = make_app(settings_for(testbed, number, interval=0.5))
    want = (
        f"nothing to watch: CT {number} is missing"
        if case == "missing"
        else f"no tmux session in CT {number}"
    )
    try:
        async with app.run_test(size=(80, 24)):
            await until(lambda: want in screen_text(app), 20, repr(want))
            assert "pick one in the sessions list" not in screen_text(app)
            # the log view says the same, not "select a session" with none to select
            await until(lambda: f"no log: {want}" in screen_text(app), 5, "the log's state")
            assert "select a session" not in screen_text(app)
    finally:
        await parts.on_exit()


def test_doctor_takes_a_config_with_one_target(tmp_path: Path) -> None:
    """One [[targets]] host: the dashboard showed it, doctor said "no target
    given". Now it is a list of one report, as for several (gputui/doctor/doctor-json.md)."""
    config = tmp_path / "gputui.toml"
    config.write_text(f'[[targets]]\nhost = "root@127.0.0.1:{closed_port()}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env["HOME"] = str(tmp_path)
    argv = [sys.executable, "-m", "gputui", "doctor", "--config", str(config), "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    (doc,) = json.loads(done.stdout)
    assert "connection refused by 127.0.0.1" in doc["facts"]["error"], doc


def test_watch_of_a_missing_ct_says_so_first(testbed: Any) -> None:
    """`gputui watch --ct 9999` printed "watching … ct 9999" before its alert
    said the CT is missing; now its first line is the problem and the fix."""
    argv = sc.doctor_argv(testbed, 9999)
    argv[argv.index("doctor")] = "watch"
    proc = subprocess.Popen(
        argv,
        env=sc.doctor_env(testbed),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd="/",
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=30)
    where = f"{testbed.user}@127.0.0.1:{testbed.port}"
    assert first == (
        f"container 9999 does not exist on {where} — check the number with `pct list` on the host"
    ), first + rest
    assert "watching" not in rest
    assert proc.returncode == 0, rest


def test_a_found_log_it_may_not_read_is_a_doctor_finding(tmp_path: Path) -> None:
    """The log gputui finds from the run's stdout (no --log), which this user
    may not read: only the log panel said "cannot read"; doctor said nothing
    of it. Now a log_unreadable warning names it, the error and the fix. A
    real run in a real tmux session writes the file; as root, the read
    permission is taken away from gputui with setpriv."""
    prefix = unprivileged()
    log = tmp_path / "out.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTUI", "TMUX"))}
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path), TMUX_TMPDIR=str(tmp_path))
    loop = (
        "import time\nwhile True:\n    print('step 1 | loss 1.0', flush=True)\n    time.sleep(0.5)"
    )
    run = f"exec {shlex.quote(sys.executable)} -c {shlex.quote(loop)} > {shlex.quote(str(log))}"
    tmux = ["tmux", "new-session", "-d", "-s", "run", run]
    subprocess.run(tmux, env=env, check=True, timeout=10)
    try:
        wait_for(lambda: log.exists() and log.stat().st_size > 0, 10, "the run writing its log")
        log.chmod(0)
        (tmp_path / "none.toml").write_text("")
        argv = [*prefix, sys.executable, "-m", "gputui", "doctor", "--local"]
        argv += ["--session", "run", "--json", "--config", str(tmp_path / "none.toml")]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, timeout=10, capture_output=True)
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    found = [f for f in doc["findings"] if f["kind"] == "log_unreadable"]
    assert len(found) == 1, doc["findings"]
    f = found[0]
    assert f["severity"] == "warning"
    assert str(log) in f["title"] and f"cannot read {log}: permission denied" in f["evidence"]
    assert f"ls -l {log}" in f["fix"]


def _started_through(testbed: Any) -> set[int]:
    """PIDs of the processes the test bed's sshd runs for its clients (their
    environment names its state dir), sshd's own included."""
    marker = f"GPUTUI_STANDIN_STATE={testbed.state_dir}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.add(int(entry))
    return found


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    return ""


@pytest.mark.parametrize("view", ["host", "run"])
def test_closing_the_terminal_stops_the_remote_side(testbed: Any, ct: int, view: str) -> None:
    """The host view (`--host H`) or the run view (`--ct N`) whose terminal
    closes (the ssh session to the jump box drops: SIGHUP): it died of the
    signal. Now it quits as `q` does — exit 129, and nothing it started is
    left running on the host or in the CT."""
    before = _started_through(testbed)
    argv = [sys.executable, "-m", "gputui", "--host", "gpuhost"]
    argv += ["--config", str(sc.config_file(testbed))]
    argv += ["--ct", str(ct)] if view == "run" else []
    env = {**sc.doctor_env(testbed), "TERM": "xterm-256color"}
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir("/")
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # not a suite run under nohup's SIG_IGN
        os.execve(sys.executable, argv, env)
    try:
        buf = bytearray()

        def streaming() -> bool:  # the GPU stream (and in a CT the agent) runs
            while select.select([fd], [], [], 0)[0]:
                try:
                    buf.extend(os.read(fd, 65536))
                except OSError:
                    break
            new = _started_through(testbed) - before
            return any("nvidia-smi" in _cmdline(p) for p in new)

        wait_for(streaming, 30, f"gputui streaming GPUs; screen: {bytes(buf[-300:])!r}")
    finally:
        os.close(fd)  # the terminal goes away: the kernel sends SIGHUP
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGHUP
    left = lambda: {p: _cmdline(p) for p in _started_through(testbed) - before}  # noqa: E731
    wait_for(lambda: not left(), 8, "nothing left on the host or in the CT")


def test_the_target_grammar_and_dash_f_reach_the_ct(testbed: Any, ct: int) -> None:
    """`-F SSH_CONFIG gpuhost/CT` (an alias for 127.0.0.1, as ssh -F takes
    it) names the same CT to doctor and to an action verb."""
    where = f"{testbed.user}@127.0.0.1:{testbed.port} ct {ct}"
    for words in (["doctor", "--json"], ["kill", "--json"]):
        argv = [sys.executable, "-m", "gputui", *words, "-F", str(testbed.ssh_config_path)]
        done = subprocess.run(
            [*argv, f"{testbed.alias}/{ct}"],
            env=sc.doctor_env(testbed),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
        )
        doc = json.loads(done.stdout)
        assert doc["target"] == where, (words, done.stdout, done.stderr)
        assert done.returncode in (0, 1, 2) and "Traceback" not in done.stderr
        if words[0] == "kill":  # planned on that CT, not run: no terminal to confirm on
            assert doc["ran"] is False, doc
        else:
            assert doc["exit_code"] != 2, done.stderr
