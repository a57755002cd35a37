"""Finding a run that is not in tmux, by the log it writes, and the log a
program writes by itself.

Agent level: real processes started the ways users start them — `nohup
python train.py > log 2>&1 &`, `python train.py | tee log` from a shell that
is gone, a program logging through `logging.FileHandler` while its stdout is
a tty or another file. Monitor level: a buffered nohup run inside a stand-in
CT, no tmux, `--log` given; the stand-in nvidia-smi says its GPU is busy.
"""

from __future__ import annotations

import contextlib
import os
import pty
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.collect.procs import proc_from_agent
from gputui.diagnose import Context, Thresholds, diagnose
from gputui.model import Snapshot
from gputui.remote.agent import ProcReader, log_writers
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

PY = sys.executable  # a real interpreter (a pyenv shim would add a parent process)
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"

# One line per step, no -u: block-buffered behind a file or a pipe.
TRAIN = """\
import sys, time
step_s = float(sys.argv[1]) if len(sys.argv) > 1 else 0.5
i = 0
while True:
    i += 1
    print("step %d | loss %.4f" % (i, 8.0 / i))
    time.sleep(step_s)
"""

# Logs through logging.FileHandler to argv[1]; prints progress to stdout.
FILE_HANDLER = """\
import logging, sys, time
log = logging.getLogger("train")
log.addHandler(logging.FileHandler(sys.argv[1]))
log.setLevel(logging.INFO)
i = 0
while True:
    i += 1
    log.info("step %d loss %.3f", i, 1.0 / i)
    print("progress", i, flush=True)
    time.sleep(0.05)
"""


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TMUX"))}


@pytest.fixture
def work() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gtd-"))
    (d / "train.py").write_text(TRAIN)
    (d / "fh.py").write_text(FILE_HANDLER)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def groups() -> Iterator[list[int]]:
    """Process groups started here; killed afterwards (the runs outlive their shell)."""
    pgids: list[int] = []
    yield pgids
    for g in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(g, signal.SIGKILL)


def sh(cmd: str, cwd: Path, groups: list[int]) -> None:
    """`sh -c CMD` in its own process group, waited for: what it backgrounds
    lives on without it (as after a closed ssh shell)."""
    p = subprocess.Popen(
        ["sh", "-c", cmd],
        cwd=cwd,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    groups.append(p.pid)
    assert p.wait(timeout=10) == 0


def pids_with_arg(arg: str) -> list[int]:
    """PIDs whose argv has `arg` (a unique path), oldest first."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                argv = Path(f"/proc/{e}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if arg.encode() in argv:
                out.append(int(e))
    return sorted(out)


def python_pid(script: Path) -> int:
    def find() -> int | None:
        pids = [p for p in pids_with_arg(str(script)) if "python" in _comm(p)]
        return pids[0] if pids else None

    return helpers.wait_for(find, what=f"python {script.name}")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_nohup_run_writing_through_a_redirect(work: Path, groups: list[int]) -> None:
    log = work / "train.log"
    sh(f"nohup {PY} {work / 'train.py'} > {log} 2>&1 &", work, groups)
    pid = python_pid(work / "train.py")
    found = helpers.wait_for(lambda: log_writers(str(log))["roots"] and log_writers(str(log)))
    assert found["roots"] == [pid] and found["run"] == [pid]
    assert found["readers"] == []
    assert {w["pid"] for w in found["writers"]} == {pid}
    assert found["writers"][0]["fd"] in (1, 2)
    (root,) = ProcReader().tree(pid)
    p = proc_from_agent(root)
    assert p.stdout.kind == "file" and p.stdout.path == str(log)
    assert p.block_buffered is True
    assert str(log) in p.write_files
    # the same file by another spelling; a file nobody writes
    assert log_writers(str(work / "." / "train.log"))["roots"] == [pid]
    assert log_writers(str(work / "nobody.log"))["roots"] == []


def test_reader_is_not_a_writer(work: Path, groups: list[int]) -> None:
    """`tail -f log` reads the log: not the run."""
    log = work / "train.log"
    log.write_text("old\n")
    sh(f"tail -f {log} > /dev/null 2>&1 &", work, groups)
    helpers.wait_for(lambda: pids_with_arg(str(log)), what="tail")
    time.sleep(0.1)
    assert log_writers(str(log))["writers"] == []


def test_python_piped_to_tee_whose_shell_is_gone(work: Path, groups: list[int]) -> None:
    log = work / "train.log"
    sh(f"{PY} {work / 'train.py'} | tee -a {log} > /dev/null &", work, groups)
    pid = python_pid(work / "train.py")
    tee = helpers.wait_for(
        lambda: [p for p in pids_with_arg(str(log)) if _comm(p) == "tee"], what="tee"
    )[0]
    found = helpers.wait_for(lambda: log_writers(str(log))["roots"] and log_writers(str(log)))
    assert [w["pid"] for w in found["writers"]] == [tee]
    assert found["readers"] == [tee]  # followed back through tee's stdin pipe
    assert found["roots"] == [pid]  # the shell that started both is gone
    (root,) = ProcReader().tree(pid)
    p = proc_from_agent(root)
    assert p.stdout.kind == "pipe" and p.stdout.files == [str(log)]
    assert p.block_buffered is True
    assert p.write_files == []  # python writes no file itself; tee does


def test_start_script_under_nohup_is_the_root(work: Path, groups: list[int]) -> None:
    """`nohup bash start.sh > log &`: bash and python both write the log; the
    run's root is bash, and its tree holds python."""
    log = work / "train.log"
    start = work / "start.sh"
    start.write_text(f"{PY} {work / 'train.py'}\necho done\n")
    sh(f"nohup bash {start} > {log} 2>&1 &", work, groups)
    pid = python_pid(work / "train.py")
    bash = pids_with_arg(str(start))[0]
    found = helpers.wait_for(lambda: log_writers(str(log))["roots"] and log_writers(str(log)))
    assert found["roots"] == [bash]
    assert set(found["run"]) == {bash, pid}
    assert [d["pid"] for d in ProcReader().tree(bash)] == [bash, pid]


def _snapshot_of(procs: list[dict[str, Any]], log: Path) -> Snapshot:
    snap = Snapshot(time=time.time(), target="t")
    snap.procs = [proc_from_agent(d) for d in procs]
    snap.log.path = str(log)
    snap.log.exists = True
    return snap


def test_file_handler_log_with_stdout_to_another_file(work: Path, groups: list[int]) -> None:
    log = work / "train.log"
    other = work / "stdout.txt"
    sh(f"nohup {PY} {work / 'fh.py'} {log} > {other} 2>&1 &", work, groups)
    pid = python_pid(work / "fh.py")
    helpers.wait_for(lambda: log.exists() and log.stat().st_size > 0, what="the FileHandler log")
    found = log_writers(str(log))
    assert found["roots"] == [pid] and found["writers"][0]["fd"] > 2
    (d,) = ProcReader().tree(pid)
    assert d["write_files"][:2] == [str(other), str(log)]
    snap = _snapshot_of([d], log)
    assert Context(snap, time.time(), 120.0).drift_files == []
    assert "log_drift" not in [f.kind for f in diagnose(snap, time.time())]
    # near miss: watching a log nobody writes still reports where stdout goes
    snap = _snapshot_of([d], work / "elsewhere.log")
    assert Context(snap, time.time(), 120.0).drift_files == [str(other)]


def test_file_handler_log_with_stdout_on_a_tty(work: Path, groups: list[int]) -> None:
    log = work / "train.log"
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(
            [PY, str(work / "fh.py"), str(log)],
            cwd=work,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
        )
        groups.append(p.pid)
        os.close(slave)
        helpers.wait_for(lambda: log.exists() and log.stat().st_size > 0, what="the log")
        (d,) = ProcReader().tree(p.pid)
        assert d["stdout"]["kind"] == "tty"
        assert d["write_files"] == [str(log)]
        assert log_writers(str(log))["roots"] == [p.pid]
        assert proc_from_agent(d).block_buffered is False
        kinds = {f.kind for f in diagnose(_snapshot_of([d], log), time.time())}
        assert not kinds & {"log_drift", "log_missing", "busy_but_silent"}
    finally:
        os.close(master)


def test_write_files_are_bounded_and_skip_devices(work: Path, groups: list[int]) -> None:
    script = work / "many.py"
    script.write_text(
        "import sys, time\n"
        "fs = [open(sys.argv[1] + '/f%d.log' % i, 'a') for i in range(60)]\n"
        "r = open(sys.argv[1] + '/train.py')\n"
        "n = open('/dev/null', 'w')\n"
        "time.sleep(60)\n"
    )
    sh(f"{PY} {script} {work} < /dev/null > /dev/null 2>&1 &", work, groups)
    pid = python_pid(script)
    d = helpers.wait_for(
        lambda: (x := ProcReader().tree(pid)) and len(x[0]["write_files"]) >= 32 and x[0]
    )
    files = d["write_files"]
    assert len(files) == 32 and files[0] == str(work / "f0.log")
    assert str(work / "train.py") not in files  # open read-only
    assert not any(f.startswith("/dev/") for f in files)


# ------------------------------------------------------------------ monitor, on the test bed


settings = helpers.monitor_settings


@pytest.fixture
def standin_env(testbed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    env = testbed.env()
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", env["GPUTUI_STANDIN_STATE"])


async def test_monitor_finds_a_nohup_run_by_its_log_and_diagnoses_buffering(
    testbed: Any, ct: int, standin_env: None
) -> None:
    from gputui.monitor.engine import Monitor
    from gputui.monitor.gpufeed import NvidiaSmiFeed
    from gputui.monitor.runprocs import WRITERS_RETRY_S

    ws = Path(testbed.workspace) / f"disc-{ct}"
    ws.mkdir(exist_ok=True)
    ws.chmod(0o777)
    (ws / "train.py").write_text(TRAIN)
    log = ws / "train.log"
    cmd = f"cd {shlex.quote(str(ws))} && nohup python3 train.py 0.5 > train.log 2>&1 &"
    r = testbed.ct_exec(ct, ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "sh", "-c", cmd])
    assert r.returncode == 0, r.stderr
    host_pid = python_pid_in(ws)
    uuid = "GPU-d15c0000-0000-4000-8000-000000000000"
    testbed.set_gpus(
        {
            "gpus": [{"index": 0, "uuid": uuid, "memory.used": 45_000, "utilization.gpu": 98}],
            "apps": [
                {
                    "pid": host_pid,
                    "process_name": "python3",
                    "used_memory": 44_800,
                    "gpu_uuid": uuid,
                }
            ],
        }
    )
    tr = helpers.CountingTransport(LocalTransport())
    await tr.connect()
    target = Target(tr, ct)
    feed = NvidiaSmiFeed(target, where="auto", period_ms=200, apps_period_s=0.3)
    mon = Monitor(target, settings(log=str(log)), gpu_feed=feed)
    await mon.start()
    try:
        snap = mon.snapshot
        await helpers.until(lambda: snap.training_proc is not None, what="the nohup run")
        assert snap.run_found_by == "log" and snap.session_name is None
        assert snap.sessions == []  # no tmux at all
        p = snap.training_proc
        assert p is not None and p.pid != host_pid  # the CT's PID, not the host's
        assert p.cmdline[-2:] == ["train.py", "0.5"]
        assert p.stdout.kind == "file" and p.stdout.path == str(log)
        assert p.block_buffered is True
        assert snap.log.path == str(log)
        # steady state: no new pct exec per poll, and no new search once found
        searches, t0 = mon.run_procs.writers_searches, time.monotonic()
        polls = mon.polls
        await helpers.until(lambda: mon.polls >= polls + 4, what="four more polls")
        assert mon.run_procs.writers_searches == searches == 1
        assert tr.pct_execs(since=t0) == []
        # the diagnosis, once the log has been silent past a 2 s threshold
        await helpers.until(
            lambda: any(g.in_container for g in snap.gpus.processes), what="GPU process mapped"
        )

        def named() -> list[str]:
            return [f.kind for f in diagnose(snap, time.time(), Thresholds(stale_after=2.0))]

        kinds = await helpers.until(
            lambda: (k := named()) and k[0] == "busy_but_silent" and k, what="busy_but_silent"
        )
        assert "session_missing" not in kinds and "log_drift" not in kinds
        (f,) = [
            f
            for f in diagnose(snap, time.time(), Thresholds(stale_after=2.0))
            if f.kind == "busy_but_silent"
        ]
        assert "GPU 0: 43.9 GiB" in "\n".join(f.evidence)
        assert f"stdout is block-buffered — PID {p.pid} writes to" in f.title
        assert f.action == "relaunch"
        # a log nobody writes: searched again at most every WRITERS_RETRY_S
        mon.watch_log(str(ws / "nobody.log"))
        polls, searches, t1 = mon.polls, mon.run_procs.writers_searches, time.monotonic()
        await helpers.until(lambda: mon.polls >= polls + 6, what="six more polls")
        assert snap.procs == [] and snap.run_found_by == ""
        elapsed = time.monotonic() - t1
        assert 1 <= mon.run_procs.writers_searches - searches <= 1 + elapsed / WRITERS_RETRY_S
    finally:
        await mon.stop()
        await tr.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(host_pid, signal.SIGKILL)
    left = testbed.ct_exec(ct, ["ps", "-e", "-o", "args="]).stdout
    assert "gputui-agent" not in left


def python_pid_in(ws: Path) -> int:
    """The host PID of `python3 train.py` whose cwd is ws."""

    def find() -> int | None:
        for pid in pids_with_arg("train.py"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/cwd") == str(ws) and "python" in _comm(pid):
                    return pid
        return None

    return helpers.wait_for(find, timeout=10.0, what="python3 train.py in the CT")


def test_doctor_names_a_buffered_nohup_run_found_by_its_log(testbed: Any, ct: int) -> None:
    """`gputui doctor --host gpuhost --ct N --log LOG` as a user runs it, on a
    `nohup python3 train.py > train.log 2>&1 &` run with no tmux in the CT.
    (~6 s: the 3 s stale threshold, then the doctor's own watch.)"""
    import scenarios as sc

    if not sc.have_smi_standin(testbed):
        pytest.skip("the test bed has no nvidia-smi stand-in")
    run = sc.prepare(testbed, ct, "nohup", session="", log="train.log")
    cmd = f"cd {shlex.quote(str(run.dir))} && nohup python3 train.py > train.log 2>&1 &"
    r = testbed.ct_exec(ct, ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "sh", "-c", cmd])
    assert r.returncode == 0, r.stderr
    launched = time.monotonic()
    host_pid = sc.wait_python(run, "train.py")
    try:
        testbed.set_gpus({"gpus": [sc.gpu(0, 45_000, 98)], "apps": [sc.app(host_pid, 0, 44_800)]})
        time.sleep(max(0.0, launched + 3.3 - time.monotonic()))
        res = sc.finish_doctor(
            sc.start_doctor(testbed, ct, "--log", str(run.log), "--stale-after", "3", "--json")
        )
        out = f"rc={res.rc}\n{res.stdout}\n{res.stderr}"
        assert res.rc == 1, out
        assert res.kinds()[0] == "busy_but_silent", out
        assert "session_missing" not in res.kinds() and "log_drift" not in res.kinds()
        ev = res.evidence("busy_but_silent")
        assert str(run.log) in ev and "PYTHONUNBUFFERED unset" in ev
        assert res.doc is not None
        proc = res.doc["snapshot"]["process"]
        assert proc is not None and proc["cmdline"][-1] == "train.py"
        assert proc["buffering"]["block_buffered"] is True
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(host_pid, signal.SIGKILL)
