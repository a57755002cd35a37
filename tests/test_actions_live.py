"""Actions against real runs: real tmux and real Python processes inside a
stand-in container (the test bed's `pct`: own PID + mount namespaces,
private /tmp, so the tmux server is the container's own)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.actions import (
    ActionsDisabled,
    audit_path,
    execute,
    plan_dump,
    plan_flush,
    plan_kill,
    plan_launch,
    plan_relaunch,
)
from gputui.actions.runspec import WRAPPER, tmux_arg
from gputui.config import RunConfig, Settings
from gputui.model import GpuProcess
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

PY = os.path.realpath(sys.executable)  # an absolute python3.x the CT can run
PY_SPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or "/work/venv/bin/py-spy"

# Short lines, 10 a second: block-buffered they stay in the 8 KiB buffer for ~40 s.
TRAIN = """\
import signal, sys, time
if "--ignore-int" in sys.argv:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
if "--ignore-term" in sys.argv:  # also the SIGHUP a closing tmux pane sends
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
print("started", file=sys.stderr)  # stderr is line-buffered: reaches the log at once

def train_step(i):
    time.sleep(0.1)
    return 1.0 / (i + 1)

def training_loop():
    i = 0
    while True:
        loss = train_step(i)
        print("step %d loss %.4f t=%.3f" % (i, loss, time.time()))
        i += 1

training_loop()
"""

NASTY = "run 'q\" ; $(touch PWNED) `id` x;"  # a tmux session name may not hold ':' or '.'


@pytest.fixture
async def target(testbed_commands: None, ct: int, testbed: Any) -> AsyncIterator[Target]:
    """The CT through the real sshd once SshTransport exists (set
    GPUTUI_TEST_TRANSPORT=local to force the local transport), else through
    LocalTransport running the same stand-in `pct` on this machine."""
    try:
        from gputui.remote import ssh  # the transport helper's module
    except ImportError:
        ssh = None
    if ssh is None or os.environ.get("GPUTUI_TEST_TRANSPORT") == "local":
        yield Target(LocalTransport(), ct)
        return
    transport = testbed.transport()
    await transport.connect()
    try:
        yield Target(transport, ct)
    finally:
        await transport.close()


@pytest.fixture
def py_spy(testbed: Any) -> str:
    """py-spy where the CT can see it: the venv may live under /tmp (a CI
    clone), which is private inside the CT, so copy the static binary under
    the test bed's root (root's alone: root runs only a py-spy root owns,
    and the workspace is writable by anyone)."""
    dest = Path(testbed.root) / "tools" / "py-spy"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PY_SPY, dest)
    return str(dest)


@pytest.fixture
def work(testbed: Any, tmp_path: Path) -> Path:
    """A directory with a nasty name, visible inside the CT."""
    d = Path(testbed.workspace) / tmp_path.name / "dir $(touch PWNED); 'q\" x;"
    d.mkdir(parents=True)
    (d / "train.py").write_text(TRAIN)
    return d


def settings(**kw: Any) -> Settings:
    return Settings(**kw)


def start_buffered(testbed: Any, ct: int, session: str, work: Path, *flags: str) -> Path:
    """The user's original launch: `python3 train.py 2>&1 | tee LOG` in tmux."""
    log = work / "train;log.txt"
    cmd = f"{PY} train.py {' '.join(flags)} 2>&1 | tee '{log.name}'"
    # tmux reads an argument ending in ";" as a command separator: escape it
    r = testbed.ct_exec(
        ct, ["tmux", "new-session", "-d", "-s", tmux_arg(session), "-c", tmux_arg(str(work)), cmd]
    )
    assert r.returncode == 0, r.stderr
    wait_for(lambda: log.exists() and b"started" in log.read_bytes(), what="run start")
    return log


def wait_for(fn: Any, timeout: float = 8.0, what: str = "condition") -> Any:
    return helpers.wait_for(fn, timeout, what)


def audit_lines() -> list[dict[str, Any]]:
    p = audit_path()
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def no_pwned(work: Path) -> None:
    assert not list(Path(work).parent.rglob("PWNED")), "a value was run as shell code"
    assert not Path("PWNED").exists() and not Path("/root/PWNED").exists()


# ------------------------------------------------------------------ relaunch


async def test_relaunch_turns_buffered_run_unbuffered_and_keeps_old_log(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    log = start_buffered(testbed, ct, NASTY, work)
    time.sleep(1.0)
    old = log.read_bytes()
    assert b"step" not in old  # block-buffered: steps are stuck in the 8 KiB buffer

    plan = await plan_relaunch(target, settings(), NASTY)
    assert plan.session == NASTY and plan.ct == ct and plan.pids
    assert "tee -a -i" in plan.display and "remain-on-exit" in plan.display
    start = plan.commands[-1]
    assert start[:2] == ["tmux", "new-session"] and ";" in start  # one tmux call

    t0 = time.monotonic()
    result = await execute(target, plan)
    relaunch_s = time.monotonic() - t0
    assert result.ok, (result.summary, result.details)
    assert result.data["alive"] and result.data["log_grew"]

    # The old log was moved aside, nothing lost: its bytes are a prefix, and
    # the SIGINT made Python flush the buffered steps into it (tee -i / tee
    # spared from the SIGINT kept copying).
    moved = Path(result.data["moved_log"])
    assert moved.parent == log.parent and moved.name.startswith(log.name + ".")
    moved_bytes = moved.read_bytes()
    assert moved_bytes.startswith(old)
    assert b"step 0 loss" in moved_bytes and b"KeyboardInterrupt" in moved_bytes

    # New run: each line reaches the log within a second of being printed.
    seen: dict[str, float] = {}
    watch_from = time.time()
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        now = time.time()
        for line in log.read_text(errors="replace").splitlines():
            if (
                line.startswith("step ")
                and line not in seen
                and float(line.rsplit("t=", 1)[1]) >= watch_from
            ):
                seen[line] = now
        time.sleep(0.05)
    assert len(seen) >= 5, log.read_text()
    lags = [arrived - float(line.rsplit("t=", 1)[1]) for line, arrived in seen.items()]
    assert max(lags) < 1.0, lags
    text = log.read_text()
    assert text.startswith("[gputui] start ")

    # Same session name, cwd, command (+ -u), wrapper with remain-on-exit.
    panes = testbed.ct_exec(
        ct,
        ["tmux", "list-panes", "-t", f"={NASTY}:", "-F", "#{pane_current_path}|#{remain-on-exit}"],
    )
    assert panes.stdout.strip() == f"{work}|on", panes
    again = await plan_relaunch(target, settings(), NASTY)  # recovered from our own wrapper
    assert again.params["spec"]["source"] == "gputui wrapper"
    assert again.params["spec"]["log"] == str(log)
    assert again.params["spec"]["cwd"] == str(work)
    assert again.commands[-1][again.commands[-1].index("-c", 6) + 1] == WRAPPER
    no_pwned(work)
    entries = audit_lines()
    assert entries[-1]["action"] == "relaunch" and entries[-1]["ok"] is True
    assert entries[-1]["session"] == NASTY and entries[-1]["commands"] == plan.commands
    print(
        f"relaunch total {relaunch_s:.2f} s, phases {result.data['phases']}; "
        f"first log growth {result.data['first_growth_s']} s"
    )


async def test_relaunch_instant_crash_keeps_pane_and_exit_code(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    log = work / "crash.log"
    run = RunConfig(
        command=f"{PY} -c 'import sys; print(\"boom\"); sys.exit(3)'",
        cwd=str(work),
        session="crash",
        log=str(log),
        env={"MY_VAR": "a b $(touch PWNED);"},
    )
    plan = await plan_launch(target, settings(run=run))
    assert plan.action == "launch"
    result = await execute(target, plan)
    assert not result.ok  # it exited
    assert "exited" in result.summary
    text = log.read_text()
    assert "boom" in text and "[gputui] exit 3" in text
    # remain-on-exit landed before the exit: the pane is kept, dead. Its
    # status is 3 — or empty when tmux 3.3a lost it (it sometimes marks a
    # pane dead and never records the status; 3–7 of 15 instant exits here),
    # which is why the wrapper writes "[gputui] exit 3" into the log above.
    seen: list[str] = []

    def pane_state() -> bool:
        fmt = "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}"
        r = testbed.ct_exec(ct, ["tmux", "list-panes", "-t", "=crash:", "-F", fmt])
        seen.append(r.stdout.strip() + r.stderr.strip())
        return seen[-1] == "1 3"

    try:
        wait_for(pane_state, timeout=3.0, what="dead pane with exit status 3")
    except AssertionError:
        assert seen[-1] == "1", f"pane states seen: {seen[-3:]}"  # kept, status lost by tmux
    no_pwned(work)


async def test_launch_env_and_refuses_running(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    log = work / "env.log"
    run = RunConfig(
        command='echo "v=$MY_VAR u=$PYTHONUNBUFFERED"; sleep 30',
        cwd=str(work),
        session="envrun",
        log="env.log",  # relative: to cwd
        env={"MY_VAR": "a b $(touch PWNED);"},
    )
    plan = await plan_launch(target, settings(run=run))
    result = await execute(target, plan)
    assert result.ok, result.details
    wait_for(lambda: "v=" in log.read_text(), what="env line")
    assert "v=a b $(touch PWNED); u=1" in log.read_text()
    with pytest.raises(Exception, match="already running"):
        await plan_launch(target, settings(run=run))
    no_pwned(work)


# ------------------------------------------------------------------ kill


async def test_kill_sigint_flushes_and_reports_gpu(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    log = start_buffered(testbed, ct, "train", work)
    time.sleep(0.6)
    assert b"step" not in log.read_bytes()
    plan = await plan_kill(target, settings(), "train")
    assert "SIGINT" in plan.display and plan.pids
    held = [GpuProcess("GPU-0000", 999999, 1024.0, "python3", ct_pid=plan.pids[0])]

    async def still_holding() -> list[GpuProcess]:
        return held

    result = await execute(target, plan, gpu_processes=still_holding)
    assert result.ended_by == "SIGINT"
    assert not result.ok and "still held" in result.summary  # names who holds it
    assert any(str(plan.pids[0]) in d for d in result.details)
    # the SIGINT flushed Python's buffer into the log through tee
    assert b"step 0 loss" in log.read_bytes()


async def test_kill_escalates_when_sigint_ignored(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    start_buffered(testbed, ct, "stubborn", work, "--ignore-int")
    time.sleep(0.3)
    plan = await plan_kill(target, settings(), "stubborn", int_wait=1.0, term_wait=1.0)
    progress: list[str] = []

    async def none_left() -> list[GpuProcess]:
        return []

    result = await execute(target, plan, progress.append, gpu_processes=none_left)
    assert result.ok and result.ended_by == "SIGTERM", (result.summary, result.details)
    assert "GPU memory freed" in result.summary
    assert [p.split(" ")[0] for p in progress] == ["SIGINT", "SIGTERM"]
    assert 1.0 <= (result.elapsed_s or 0) < 4.0
    ps = testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout
    assert "train.py" not in ps
    print(f"kill escalation SIGINT->SIGTERM: {result.elapsed_s:.2f} s")


async def test_force_kill_reaches_sigkill(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    start_buffered(testbed, ct, "hard", work, "--ignore-int", "--ignore-term")
    time.sleep(0.3)
    plan = await plan_kill(target, settings(), "hard", force=True)
    assert "SIGINT" not in plan.notes[0]
    result = await execute(target, plan)
    assert result.ok and result.ended_by == "SIGKILL", (result.summary, result.details)
    assert (result.elapsed_s or 0) < 4.0
    print(f"force kill SIGTERM->SIGKILL: {result.elapsed_s:.2f} s")


# ------------------------------------------------------------------ dump / flush


async def test_py_spy_dump_shows_training_loop(
    target: Target, testbed: Any, ct: int, work: Path, py_spy: str
) -> None:
    start_buffered(testbed, ct, "spy", work)
    plan = await plan_dump(target, settings(), "spy", py_spy=py_spy)
    assert plan.commands[0][0] == py_spy and plan.commands[0][1:3] == ["dump", "--pid"]
    result = await execute(target, plan)
    if "ptrace refused" in result.summary:
        pytest.skip(f"ptrace is refused here: {result.details}")
    assert result.ok, (result.summary, result.output)
    assert "train_step" in result.output and "training_loop" in result.output
    # the dump runs without a confirm box, so its result says what ran, and where
    assert f"ran in CT {ct}: {py_spy} dump --pid {plan.pids[0]}" in result.details, result.details
    assert result.saved_path and "train_step" in Path(result.saved_path).read_text()
    assert Path(result.saved_path).parent == audit_path().parent / "dumps"


async def test_py_spy_missing_says_how_to_install(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    start_buffered(testbed, ct, "nospy", work)
    with pytest.raises(Exception, match="pip install py-spy"):
        await plan_dump(target, settings(), "nospy", py_spy="/nonexistent/py-spy")


async def test_flush_live_makes_pending_lines_appear(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed here")
    log = start_buffered(testbed, ct, "flushme", work)
    time.sleep(1.0)
    before = log.read_bytes()
    assert b"step" not in before
    plan = await plan_flush(target, settings(), "flushme")
    assert str(log) in plan.display and "pauses" in plan.display
    result = await execute(target, plan)
    if why := helpers.flush_cannot_work_here(result):
        pytest.skip(why)
    assert result.ok, result.details
    assert result.data["bytes"] > 0
    after = log.read_bytes()
    assert after.startswith(before) and b"step 0 loss" in after
    # now line-buffered: the next lines arrive within a second
    n = after.count(b"\n")
    wait_for(lambda: log.read_bytes().count(b"\n") > n, timeout=1.0, what="next line")


# ------------------------------------------------------------------ read-only


async def test_read_only_refuses_every_action(target: Target) -> None:
    ro = settings(read_only=True, session="x")
    for plan in (plan_relaunch, plan_kill, plan_dump, plan_flush, plan_launch):
        with pytest.raises(ActionsDisabled, match="read-only"):
            await plan(target, ro, "x")
    assert audit_lines() == []


async def test_kill_refuses_changed_run(target: Target, testbed: Any, ct: int, work: Path) -> None:
    start_buffered(testbed, ct, "changed", work)
    plan = await plan_kill(target, settings(), "changed")
    plan.params["leader_args"] = "something else entirely"
    result = await execute(target, plan)
    assert not result.ok and "plan the action again" in result.summary
    assert "train.py" in testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout  # untouched
    assert audit_lines()[-1]["ok"] is False


def test_asyncio_imported() -> None:  # keeps `asyncio` import honest for helpers above
    assert asyncio.iscoroutinefunction(execute)


# ------------------------------------------------------------------ CLI


async def test_cli_confirms_before_acting(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    import argparse
    import io

    from gputui.cli.actions import run_async

    start_buffered(testbed, ct, "cli", work)
    args = argparse.Namespace(session="cli", yes=False, force=False)
    out = io.StringIO()
    rc = await run_async("kill", args, settings(), target=target, out=out, ask=lambda _: "n")
    assert rc == 1 and "gputui-kill" in out.getvalue()  # the plan was shown
    assert "train.py" in testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout  # nothing ran
    assert audit_lines() == []

    out = io.StringIO()
    args.yes = True
    rc = await run_async("kill", args, settings(), target=Target(LocalTransport(), ct), out=out)
    assert rc == 0, out.getvalue()
    assert "ok: run in 'cli' ended by SIGINT" in out.getvalue()
    assert "train.py" not in testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout
    assert audit_lines()[-1]["action"] == "kill"

    out = io.StringIO()
    rc = await run_async(
        "dump", args, settings(read_only=True), target=Target(LocalTransport(), ct), out=out
    )
    assert rc == 2 and "read-only" in out.getvalue()


def _json_after_text(text: str) -> Any:
    """The JSON document at the end of text that also holds the plan's lines."""
    import json

    return json.loads(text if text.startswith("{") else text[text.index("\n{") + 1 :])


async def test_cli_json_has_the_plan_and_what_happened(
    target: Target, testbed: Any, ct: int, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json: stdout is one JSON document (plan, ran, result); the plan text
    and progress go to stderr. Not confirmed: ran false, exit 1; an error:
    its line in "error", exit 2."""
    import argparse
    import io
    import json

    from gputui.cli.actions import run_async

    start_buffered(testbed, ct, "cjs", work)
    args = argparse.Namespace(session="cjs", yes=False, force=False, json=True)
    out = io.StringIO()
    rc = await run_async("kill", args, settings(), target=target, out=out, ask=lambda _: "n")
    doc = _json_after_text(out.getvalue())
    assert rc == 1 and doc["ran"] is False and doc["result"] is None
    assert doc["plan"]["action"] == "kill" and doc["plan"]["session"] == "cjs"

    args.yes = True
    capsys.readouterr()
    rc = await run_async("kill", args, settings(), target=Target(LocalTransport(), ct))
    cap = capsys.readouterr()
    doc = json.loads(cap.out)  # nothing but the document on stdout
    assert rc == 0, cap
    assert doc["ran"] and doc["ok"] and doc["result"]["ended_by"] == "SIGINT"
    assert doc["plan"]["pids"] and "gputui-kill" in cap.err  # the plan was shown on stderr

    out = io.StringIO()
    rc = await run_async(
        "dump", args, settings(read_only=True), target=Target(LocalTransport(), ct), out=out
    )
    doc = _json_after_text(out.getvalue())
    assert rc == 2 and doc["ran"] is False and doc["error"].startswith("actions are disabled")


async def test_relaunch_run_typed_into_shell_recovers_exact_argv(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    """No start command (a shell the user typed into): command from
    /proc/PID/cmdline (argv with spaces kept), log from fd 1."""
    (work / "my train.py").write_text(TRAIN)
    r = testbed.ct_exec(
        ct, ["tmux", "new-session", "-d", "-s", "typed", "-c", tmux_arg(str(work)), "bash"]
    )
    assert r.returncode == 0, r.stderr
    keys = f"{PY} 'my train.py' > 'out log.txt' 2>&1"
    testbed.ct_exec(ct, ["tmux", "send-keys", "-t", "=typed:", "-l", keys])
    testbed.ct_exec(ct, ["tmux", "send-keys", "-t", "=typed:", "Enter"])
    log = work / "out log.txt"
    wait_for(lambda: log.exists() and b"started" in log.read_bytes(), what="typed run")
    plan = await plan_relaunch(target, settings(), "typed")
    spec = plan.params["spec"]
    assert spec["command"] == f"{PY} 'my train.py'"
    assert spec["log"] == str(log) and spec["cwd"] == str(work)
    assert "environment variables" in spec["source"]
    # before the kill the old run held 28.2 GiB; after it 0.2 GiB; then the new one loads
    readings = iter([28_876.8 + 204.8, 204.8])

    async def gpu_mem() -> float | None:  # what the monitor's GPU feed would say
        return next(readings, 40_204.8)

    result = await execute(target, plan, gpu_memory=gpu_mem)
    assert result.ok, result.details
    assert "GPU memory rising (+40000 MiB)" in result.summary
    # what happened, in words: measured against the reading before the kill
    assert "old run freed 28.2 GiB of GPU memory" in result.summary, result.summary
    assert re.search(r"new log \d+ bytes after \d s", result.summary), result.summary
    assert "->" not in result.summary and not any("->" in d for d in result.details)
    wait_for(lambda: b"step 3" in log.read_bytes(), timeout=3.0, what="unbuffered steps")
    assert b"step 0" in Path(result.data["moved_log"]).read_bytes()  # SIGINT flushed the old run


def host_pid_of(ct_pid: int, needle: str, pid_ns: str) -> int:
    """The host PID of a CT process (NSpid's last field is its CT PID). Only
    processes in the CT's PID namespace count: other test beds on the same
    machine run their own CTs with the same small PIDs and the same script."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
            cmd = (d / "cmdline").read_bytes()
            ns_link = os.readlink(d / "ns" / "pid")
        except OSError:
            continue
        ns = [ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")]
        if (
            ns_link == pid_ns
            and ns
            and len(ns[0]) > 1
            and int(ns[0][-1]) == ct_pid
            and needle.encode() in cmd
        ):
            return int(d.name)
    raise AssertionError(f"no host process for CT pid {ct_pid}")


async def test_gpu_readers_map_host_pids_into_the_ct(
    target: Target, testbed: Any, ct: int, work: Path
) -> None:
    from gputui.actions.gpureaders import memory_reader, process_reader

    start_buffered(testbed, ct, "gpu", work)
    plan = await plan_kill(target, settings(), "gpu", int_wait=2.0)
    leader = plan.params["leader"]
    ct_ns = testbed.ct_exec(ct, ["readlink", "/proc/self/ns/pid"]).stdout.strip()
    host_pid = host_pid_of(leader, "train.py", ct_ns)
    assert host_pid != leader  # really another PID namespace
    testbed.set_gpus(
        {
            "gpus": [{"index": 0, "memory.used": 40000}, {"index": 1, "memory.used": 1000}],
            "apps": [{"pid": host_pid, "process_name": "python3", "used_memory": 39000}],
        }
    )
    assert await memory_reader(target)() == 41000
    procs = await process_reader(target)()
    assert [(p.host_pid, p.ct_pid) for p in procs] == [(host_pid, leader)]
    # The stand-in keeps listing it after the kill: the report names it.
    result = await execute(target, plan, gpu_processes=process_reader(target))
    assert result.ended_by == "SIGINT" and "still held" in result.summary
    assert any(f"pid {leader}" in d and "39000 MiB" in d for d in result.details), result.details


LAUNCHER = """\
import subprocess, sys, time
ranks = [subprocess.Popen([sys.executable, "train.py"]) for _ in range(2)]  # like torchrun
try:
    for r in ranks:
        r.wait()
except KeyboardInterrupt:
    for r in ranks:
        r.wait()  # the ranks got the SIGINT too (same process group)
    raise
"""


async def test_ranks_dumped_and_stopped_together(
    target: Target, testbed: Any, ct: int, work: Path, py_spy: str
) -> None:
    (work / "launch.py").write_text(LAUNCHER)
    log = work / "ddp.log"
    cmd = f"{PY} launch.py 2>&1 | tee ddp.log"
    r = testbed.ct_exec(
        ct, ["tmux", "new-session", "-d", "-s", "ddp", "-c", tmux_arg(str(work)), cmd]
    )
    assert r.returncode == 0, r.stderr
    wait_for(lambda: log.exists() and log.read_bytes().count(b"started") == 2, what="two ranks")
    plan = await plan_dump(target, settings(), "ddp", py_spy=py_spy)
    assert len(plan.commands) == 3  # launcher + 2 ranks, each its own py-spy call
    result = await execute(target, plan)
    if "ptrace refused" in result.summary:
        pytest.skip(f"ptrace is refused here: {result.details}")
    assert result.ok and result.output.count("train_step") == 2, result.output
    # Only the chosen rank when asked
    one = await plan_dump(target, settings(), "ddp", pids=[plan.pids[1]], py_spy=py_spy)
    assert [c[3] for c in one.commands] == [str(plan.pids[1])]

    kill = await plan_kill(target, settings(), "ddp")
    assert len(kill.params["pgids"]) == 1 and len(kill.pids) >= 4  # sh, launcher, 2 ranks (+tee)
    res = await execute(target, kill)
    assert res.ok and res.ended_by == "SIGINT", (res.summary, res.details)
    ps = testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout
    assert "train.py" not in ps and "launch.py" not in ps
    assert log.read_bytes().count(b"KeyboardInterrupt") >= 2  # each rank flushed on SIGINT
