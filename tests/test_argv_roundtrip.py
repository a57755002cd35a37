"""Relaunch from /proc/PID/cmdline runs the same arguments again, byte for
byte (issue #11 item 8): every byte 1-255 in any argument, newlines, 0x1e and
0x1f, empty arguments, bytes that are not UTF-8. Real processes: one is
started with the argv, read back with the reader relaunch uses, and the
relaunch command is run through the real wrapper; the new process records
its argv and the two are compared."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import helpers
from gputui.actions import execute, plan_relaunch
from gputui.actions.inspect import argv_from_cmdline, read_links
from gputui.actions.runspec import RunSpec, add_python_u, wrapper_argv
from gputui.config import Settings
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

# Appends one line to record.txt beside itself: the hex of each argument as
# the kernel gave it; sleeps when asked (the run to relaunch must be alive).
RECORD = """import os, sys, time
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "record.txt"), "a") as f:
    f.write(" ".join(os.fsencode(a).hex() or "-" for a in sys.argv[1:]) + "\\n")
here = os.path.dirname(os.path.abspath(__file__))
if os.environ.get("RECORD_SLEEP") or os.path.exists(os.path.join(here, "sleep")):
    time.sleep(60)
"""

ARG = st.binary(max_size=12).map(lambda b: b.replace(b"\0", b"")) | st.sampled_from(
    [b"", b"\n", b"a\nb", b"\x1e", b"\x1f", b"x\x1fy\x1e", b"end\n", b"\xff\xfe", b"semi;"]
)
ALL_BYTES = bytes(range(1, 256))


def recorded(d: Path) -> list[list[bytes]]:
    lines = (d / "record.txt").read_text().splitlines() if (d / "record.txt").exists() else []
    return [
        [b"" if h == "-" else bytes.fromhex(h) for h in line.split(" ")] if line else []
        for line in lines
    ]


def lines_in(d: Path) -> int:
    """Complete lines in record.txt so far."""
    p = d / "record.txt"
    return p.read_bytes().count(b"\n") if p.exists() else 0


def test_cmdline_decoding_is_exact() -> None:
    assert argv_from_cmdline(b"python3\0a\nb\0\0\x1e\x1f\0\xff\0") == [
        "python3", "a\nb", "", "\x1e\x1f", os.fsdecode(b"\xff"),
    ]  # fmt: skip
    assert argv_from_cmdline(b"") == []
    assert [os.fsencode(a) for a in argv_from_cmdline(b"x\0" + ALL_BYTES + b"\0")] == [
        b"x",
        ALL_BYTES,
    ]


async def roundtrip(d: Path, args: list[bytes]) -> None:
    script = d / "record.py"
    if not script.exists():
        script.write_text(RECORD)
    (d / "record.txt").unlink(missing_ok=True)
    env = {**os.environ, "RECORD_SLEEP": "1"}
    py = os.fsencode(sys.executable)  # not a pyenv shim: it would exec another argv
    proc = subprocess.Popen([py, os.fsencode(script), *args], env=env)
    try:
        helpers.wait_for(lambda: lines_in(d) >= 1, 10, "first run")
        assert recorded(d) == [args]  # the kernel's view of what we started
        tr = LocalTransport()
        await tr.connect()
        try:
            _, argvs, _ = await read_links(Target(tr), [proc.pid])
        finally:
            await tr.close()
    finally:
        proc.kill()
        proc.wait()
    argv = argvs[proc.pid]
    assert [os.fsencode(a) for a in argv] == [py, os.fsencode(script), *args]
    import shlex

    spec = RunSpec("s", str(d), shlex.join(argv), str(d / "out.log"))
    assert spec.effective_command.startswith(f"{sys.executable} -u ")  # the point of a relaunch
    env.pop("RECORD_SLEEP")
    r = subprocess.run(wrapper_argv(spec), env=env, cwd=d, capture_output=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert recorded(d) == [args, args]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(args=st.lists(ARG, max_size=5))
async def test_relaunch_argv_roundtrips_every_byte(tmp_path: Path, args: list[bytes]) -> None:
    await roundtrip(tmp_path, args)


async def test_every_byte_in_one_argument(tmp_path: Path) -> None:
    await roundtrip(tmp_path, [ALL_BYTES, b"", ALL_BYTES[::-1], b"\n"])


def test_add_python_u_keeps_quoted_arguments() -> None:
    assert add_python_u("python3 x.py $'\\n' 'a\nb'") == "python3 -u x.py $'\\n' 'a\nb'"


# ------------------------------------------------------------ through ssh, pct and tmux


HOSTILE = [
    b"a\nb", b"\x1e", b"\x1f", b"x\x1fy\x1e", b"", b"trailing\n", b"\xff\xfe",
    b"tab\there", b"semi;", b"#(touch PWNED)", b"$(touch PWNED)", b"'\"`", ALL_BYTES,
]  # fmt: skip

# execs python with the exact bytes from the hex file (a shell cannot type them)
LAUNCHER = """import os, sys
args = [bytes.fromhex(h) if h != "-" else b"" for h in open(sys.argv[1]).read().split()]
os.execvp("python3", [b"python3", sys.argv[2].encode(), *args])
"""


async def test_relaunch_on_the_test_bed_runs_the_same_bytes(
    testbed: Any, ct: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pct_without_delay: None
) -> None:
    """A run typed into a tmux shell in the CT (no start command: the argv
    comes from /proc/PID/cmdline), relaunched through ssh + pct + tmux."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    d = Path(testbed.workspace) / f"argv-{tmp_path.name}"
    d.mkdir()
    (d / "record.py").write_text(RECORD)
    (d / "launch.py").write_text(LAUNCHER)
    (d / "args.hex").write_text(" ".join(a.hex() or "-" for a in HOSTILE))
    (d / "sleep").write_text("")  # the relaunched run keeps running too
    r = testbed.ct_exec(ct, ["tmux", "new-session", "-d", "-s", "typed", "-c", str(d), "bash"])
    assert r.returncode == 0, r.stderr
    keys = f"RECORD_SLEEP=1 exec python3 launch.py args.hex {d / 'record.py'}"
    testbed.ct_exec(ct, ["tmux", "send-keys", "-t", "=typed:", "-l", keys])
    testbed.ct_exec(ct, ["tmux", "send-keys", "-t", "=typed:", "Enter"])
    helpers.wait_for(lambda: lines_in(d) >= 1, 10, "typed run")
    assert recorded(d) == [HOSTILE]
    tr = testbed.transport()
    await tr.connect()
    try:
        target = Target(tr, ct)
        plan = await plan_relaunch(target, Settings(), "typed")
        assert "environment variables" in plan.params["spec"]["source"]  # from /proc
        result = await execute(target, plan)
        assert result.ok, result.details
    finally:
        await tr.close()
    t0 = time.monotonic()
    while lines_in(d) < 2 and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert recorded(d) == [HOSTILE, HOSTILE]
    assert not (d / "PWNED").exists()


@pytest.mark.parametrize(
    "name", ["ends-in-newline\n", "two\nlines", "tab\there", "\n", "x\x1fy\x1e"]
)
async def test_cwd_and_fd_links_come_back_exactly(tmp_path: Path, name: str) -> None:
    """The working directory and an fd's file come back byte for byte: a
    directory whose name ended in a newline came back without it (`$(…)`
    strips it), so the relaunch ran in /root (loaded CI, hypothesis's
    `1#{pane_pid}_9\\n`); one with a newline inside was cut at it."""
    d = tmp_path / name
    d.mkdir()
    log = d / f"log{name}.txt"
    with open(log, "w") as out:
        proc = subprocess.Popen(["sleep", "30"], cwd=d, stdout=out)
    try:
        tr = LocalTransport()
        await tr.connect()
        try:
            cwds, argvs, fds = await read_links(Target(tr), [proc.pid, 2**22 + 7])
        finally:
            await tr.close()
    finally:
        proc.kill()
        proc.wait()
    assert cwds[proc.pid] == str(d)
    assert fds[proc.pid][1] == str(log)
    assert argvs[proc.pid] == ["sleep", "30"]
    assert 2**22 + 7 not in argvs  # a pid that is gone gives no argv
