"""A run the kernel's OOM killer took (issue 47): its process vanished with
no word in its output (SIGKILL; behind `| tee` no "Killed"), and the kernel
log's "Killed process …" line names it — PID, anon-rss, host RAM or a
cgroup's limit. The kernel log is read by the real script (the stand-in
dmesg/journalctl in tests/standins hold the kernel's texts); where it could
not be read, the words say what could not be read, never "nothing".

The kernel's lines below are real texts from public threads, their numbers
and names kept, their stamps moved to the test's clock:
- global OOM, kernel 5.14 (`dmesg --time-format iso | grep oom`):
  https://github.com/equinor/ert/issues/7797
- a Proxmox VE 9 LXC's memory limit (CONSTRAINT_MEMCG, /lxc/703):
  https://github.com/rcourtman/Pulse/issues/734
- kernels before 4.19 ("Kill process … or sacrifice child", then a bare
  "Killed process"): https://github.com/intel/platform-resource-manager/issues/42
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from gputui.collect.oomkills import oom_read_argv, parse_oom_read
from gputui.diagnose import diagnose
from gputui.model import KernelOomRead, Severity, Snapshot
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target
from test_diagnose import NOW
from test_real_log_words import BAR, ended

STANDINS = Path(__file__).resolve().parent / "standins"
UP = 100_000.0  # the kernel's uptime when the log was read

GLOBAL = [
    "[ {s:.6f}] python invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, "
    "oom_score_adj=0",
    "[ {s:.6f}] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
    "global_oom,task_memcg=/lxc/200/ns/user.slice/user-0.slice/session-3.scope,task=python,"
    "pid=1440763,uid=100000",
    "[ {s:.6f}] Out of memory: Killed process 1440763 (python) total-vm:87033376kB, "
    "anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:100000 pgtables:169956kB "
    "oom_score_adj:0",
    "[ {s:.6f}] oom_reaper: reaped process 1440763 (python), now anon-rss:0kB, file-rss:0kB, "
    "shmem-rss:0kB",
]
MEMCG = [
    "[ {s:.6f}] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=ns,mems_allowed=0,"
    "oom_memcg=/lxc/200,task_memcg=/lxc/200/ns/user.slice/user-0.slice/session-3.scope,"
    "task=pt_main_thread,pid=3783517,uid=100999",
    "[ {s:.6f}] Memory cgroup out of memory: Killed process 3783517 (pt_main_thread) "
    "total-vm:14204856kB, anon-rss:10461428kB, file-rss:10240kB, shmem-rss:0kB, UID:100999 "
    "pgtables:23156kB oom_score_adj:0",
]
OLD = [
    "[ {s:.6f}] Out of memory: Kill process 89746 (python) score 1031 or sacrifice child",
    "[ {s:.6f}] Killed process 89746 (python) total-vm:118026216kB, anon-rss:109819332kB, "
    "file-rss:3324kB, shmem-rss:0kB",
]


def kmsg(lines: list[str], ago: float) -> str:
    """The kernel's lines stamped `ago` seconds before UP."""
    return "\n".join(ln.format(s=UP - ago) for ln in lines)


def read_of(lines: list[str], ago: float, via: str = "dmesg") -> KernelOomRead:
    out = f"@gputui up {UP}\n@gputui via {via}\n" + kmsg(lines, ago)
    return parse_oom_read(out, "the host", NOW)


def vanished(
    read: KernelOomRead | None, log: tuple[str, ...] = ("step 41 | loss 2.31",)
) -> Snapshot:
    """The pane back at its shell, the log's last write 30 s ago, CT 200."""
    snap = ended(log, pane=(*log, BAR + "root@ct:~# "))
    snap.kernel_oom = read
    return snap


def test_the_kernels_lines_are_read_in_each_form() -> None:
    g = read_of(GLOBAL, 20.0).kills
    assert [(k.pid, k.name, k.anon_rss_kib, k.cgroup_limit) for k in g] == [
        (1440763, "python", 60356340, False)
    ]
    assert g[0].memcg.startswith("/lxc/200/ns/") and g[0].t == pytest.approx(NOW - 20.0)
    m = read_of(MEMCG, 5.0).kills[0]
    assert (m.pid, m.name, m.cgroup_limit, m.limit_cgroup) == (
        3783517,
        "pt_main_thread",
        True,
        "/lxc/200",
    )
    o = read_of(OLD, 5.0).kills
    assert [(k.pid, k.anon_rss_kib) for k in o] == [(89746, 109819332)]  # the bare line
    journal = parse_oom_read(
        f"@gputui up {UP}\n@gputui via journalctl\n"
        + kmsg([ln.replace("] ", "] gpu1 kernel: ", 1) for ln in GLOBAL], 3.0),
        "the host",
        NOW,
    )
    assert [k.pid for k in journal.kills] == [1440763]
    absurd = parse_oom_read(
        "@gputui up 9" * 3 + "\n[ 1.0] Out of memory: Killed process " + "9" * 5000 + " (python) "
        "total-vm:1kB, anon-rss:1kB\n@gputui via dmesg",
        "the host",
        NOW,
    )
    assert absurd.kills == [] and absurd.via == "dmesg"


def test_a_run_the_oom_killer_took_is_named_with_its_pid_and_rss() -> None:
    found = diagnose(vanished(read_of(GLOBAL, 20.0)), NOW)
    f = found[0]
    assert f.kind == "kernel_oom_kill" and f.severity == Severity.ERROR, found
    assert "killed by the kernel's OOM killer (host RAM)" in f.title, f.title
    assert "PID 1440763 (python)" in f.title and "anon-rss 57.6 GiB" in f.title, f.title
    assert any("Out of memory: Killed process 1440763" in e for e in f.evidence)
    assert any("dmesg on the host" in e for e in f.evidence)
    kinds = [x.kind for x in found]
    assert "run_killed" not in kinds and "run_ended" not in kinds, kinds  # it says it better
    assert "free -g" in f.fix


def test_a_containers_limit_is_not_called_host_ram() -> None:
    f = diagnose(vanished(read_of(MEMCG, 5.0)), NOW)[0]
    assert f.kind == "kernel_oom_kill", f
    assert "the memory limit of CT 200's cgroup /lxc/200" in f.title, f.title
    assert "PID 3783517 (pt_main_thread), anon-rss 10.0 GiB" in f.title, f.title
    assert "more memory" in f.fix and "CT 200" in f.fix


def test_a_plain_hosts_cgroup_limit_is_the_cgroups_not_the_hosts() -> None:
    """Seen on a real kernel (bench/gpu/oom_kill.sh, no container): the run
    in a cgroup of its own with memory.max 1 GiB — the fix said "give the
    host more memory", but it was the cgroup's limit, not the host's RAM."""
    lines = [
        ln.replace("/lxc/200/ns/user.slice/user-0.slice/session-3.scope", "/gputui-oom").replace(
            "oom_memcg=/lxc/200", "oom_memcg=/gputui-oom"
        )
        for ln in MEMCG
    ]
    snap = vanished(read_of(lines, 5.0))
    snap.container = None  # a plain host
    f = diagnose(snap, NOW)[0]
    assert f.kind == "kernel_oom_kill", f
    assert "(the memory limit of cgroup /gputui-oom)" in f.title, f.title
    assert "/sys/fs/cgroup/gputui-oom/memory.max" in f.fix and "host" not in f.fix, f.fix


@pytest.mark.parametrize(
    ("lines", "ago", "why"),
    [
        (GLOBAL, 60.0, "killed before the log's last line (30 s ago)"),
        ([ln.replace("/lxc/200/", "/lxc/201/") for ln in GLOBAL], 20.0, "another CT's process"),
        ([ln.replace("(python)", "(java)") for ln in GLOBAL], 20.0, "not a Python process"),
    ],
)
def test_a_kill_that_is_not_the_runs_is_not_its_word(
    lines: list[str], ago: float, why: str
) -> None:
    found = diagnose(vanished(read_of(lines, ago)), NOW)
    assert "kernel_oom_kill" not in [f.kind for f in found], why
    f = found[0]
    assert f.kind == "run_killed", (why, f)
    assert any(
        "names no OOM kill of this run (1 of other processes or earlier)" in e for e in f.evidence
    )


def test_an_unreadable_kernel_log_is_said_never_nothing() -> None:
    read = parse_oom_read(
        "@gputui up 100.0\n"
        "@gputui refused dmesg: dmesg: read kernel buffer failed: Operation not permitted\n"
        "@gputui refused journalctl: -- No entries --\n",
        "the run's machine",
        NOW,
    )
    assert not read.readable
    f = diagnose(vanished(read), NOW)[0]
    assert f.kind == "run_killed", f
    said = next(e for e in f.evidence if "kernel log" in e)
    assert "could not be read on the run's machine" in said, said
    assert "dmesg: read kernel buffer failed: Operation not permitted" in said, said
    assert "-- No entries --" in said and "as root on the host" in said, said


def test_a_run_that_still_runs_gets_no_look_and_no_word() -> None:
    snap = vanished(read_of(GLOBAL, 20.0))
    snap.procs[0].is_python = True  # its Python is there
    assert "kernel_oom_kill" not in [f.kind for f in diagnose(snap, NOW)]


# ------------------------------------------------------------------ the read itself


def standin_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **permits: str) -> None:
    if not (STANDINS / "dmesg").exists() or shutil.which("sh") is None:
        pytest.skip("no dmesg stand-in")
    state = tmp_path / "state"
    state.mkdir()
    (state / "kernel.json").write_text(json.dumps(permits))
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    noise = "[ {s:.6f}] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07"
    (state / "kmsg").write_text(
        kmsg([noise], 900.0 + (UP - up)) + "\n" + kmsg(GLOBAL, 10.0 + (UP - up)) + "\n"
    )
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", str(state))
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ.get('PATH', '')}")


async def read_here() -> KernelOomRead:
    res = await Target(LocalTransport()).run_host(oom_read_argv(), timeout=15.0)
    return parse_oom_read(res.out, "the host", time.time())


@pytest.mark.parametrize(
    ("permits", "via", "refused"),
    [
        ({}, "dmesg", []),
        (
            {"dmesg": "denied"},
            "journalctl",
            ["dmesg: read kernel buffer failed: Operation not permitted"],
        ),
    ],
)
async def test_the_read_script_through_dmesg_or_journalctl(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    permits: dict[str, str],
    via: str,
    refused: list[str],
) -> None:
    standin_env(tmp_path, monkeypatch, **permits)
    read = await read_here()
    assert (read.via, read.refused) == (via, refused)
    assert [(k.pid, k.name) for k in read.kills] == [(1440763, "python")]
    assert read.kills[0].t is not None and abs(read.kills[0].t - (time.time() - 10.0)) < 5.0


@pytest.mark.parametrize(
    ("journal", "said"),
    [
        ("denied", "journalctl: Hint: You are currently not seeing messages from other users"),
        ("empty", "journalctl: -- No entries --"),  # an unprivileged container's own journal
    ],
)
async def test_the_read_refused_says_each_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str, said: str
) -> None:
    standin_env(tmp_path, monkeypatch, dmesg="denied", journalctl=journal)
    read = await read_here()
    assert not read.readable and read.kills == []
    assert read.refused[0] == "dmesg: read kernel buffer failed: Operation not permitted"
    assert read.refused[1].startswith(said), read.refused


async def test_the_monitor_looks_once_when_the_run_vanished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OomLook: nothing while the run's Python runs; one read when it is
    gone with no word; none again for the same vanishing; the kill named."""
    from gputui.model import Proc
    from gputui.monitor.oomlook import OomLook

    standin_env(tmp_path, monkeypatch)
    snap = vanished(None)
    look = OomLook(Target(LocalTransport()), clock=lambda: NOW)
    bash = snap.procs
    snap.procs = [*bash, Proc(pid=1440763, ppid=10, cmdline=["python", "train.py"], is_python=True)]
    assert not await look.after_poll(snap) and look.looks == 0
    snap.procs = bash
    assert await look.after_poll(snap) and look.looks == 1
    assert not await look.after_poll(snap) and look.looks == 1
    read = snap.kernel_oom
    assert read is not None and read.via == "dmesg" and read.run_pids == {1440763}
    f = diagnose(snap, NOW)[0]
    assert f.kind == "kernel_oom_kill" and "PID 1440763 (python)" in f.title, f


# ------------------------------------------------------------------ for real

TRAIN = (
    "import sys, time\n"
    "for i in range(1, 60):\n"
    "    print(f'step {i} | loss {2.0 / i:.4f} | tok/s 41000', flush=True)\n"
    "    time.sleep(0.05)\n"
    "sys.stdout.write('Epoch 0:  17%|#         | 117/700 [00:12<01:00]')\n"
    "sys.stdout.flush()\n"
    "time.sleep(600)\n"
)


def kernel_bed(tmp_path: Path) -> tuple[Any, Any, Path, Path, Path]:
    """bench/corpus.py's bed (a tmux server of its own, doctor --local
    --json) with the stand-in dmesg's state dir, TRAIN written beside it:
    (corpus, bed, state dir, the log's path, gputui's src)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import corpus as bc

    state = tmp_path / "state"
    state.mkdir()
    (state / "kernel.json").write_text("{}")
    (tmp_path / "train.py").write_text(TRAIN)
    bed = bc.Bed()
    bed.env["PATH"] = f"{STANDINS}{os.pathsep}{bed.env['PATH']}"
    bed.env["GPUTUI_STANDIN_STATE"] = str(state)
    src = Path(__file__).resolve().parent.parent / "src"
    return bc, bed, state, tmp_path / "train.log", src


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux")
def test_doctor_names_a_real_sigkill_behind_tee_from_the_kernels_line(tmp_path: Path) -> None:
    """A real run behind `| tee` in tmux, killed by SIGKILL mid-bar; the
    kernel's line for its PID in the (stand-in) kernel log: `gputui doctor
    --local` names the OOM kill, PID and anon-rss — before, "killed by a
    signal?". The same with the kernel log refused: the refusal is said."""
    import subprocess

    bc, bed, state, log, src = kernel_bed(tmp_path)
    try:
        bed.tmux("new-session", "-d", "-s", "run", "-x", "200", "-y", "50", "bash --norc")
        assert bc._wait(lambda: bed.tmux("capture-pane", "-p", "-t", "run").stdout.strip(), 30)
        cmd = f"python3 -u {tmp_path / 'train.py'} 2>&1 | tee {log}"
        bed.tmux("send-keys", "-t", "run", cmd, "Enter")
        assert bc._wait(lambda: log.exists() and b"117/700" in log.read_bytes(), 60)
        pane = bed.tmux("list-panes", "-t", "run", "-F", "#{pane_pid}").stdout.split()[0]
        pid = int(
            subprocess.run(
                ["pgrep", "-P", pane, "-f", "train.py"], capture_output=True, text=True
            ).stdout.split()[0]
        )
        os.kill(pid, 9)
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        kill = [ln.replace("1440763", str(pid)) for ln in GLOBAL]
        (state / "kmsg").write_text(kmsg(kill, UP - up) + "\n")
        assert bc._wait(lambda: bc._python_gone(bed, "run"), 15)
        time.sleep(0.3)
        said = bc.doctor(bed, src, "run", log)
        assert said[0][0] == "kernel_oom_kill", said
        assert f"PID {pid} (python)" in said[0][2] and "anon-rss 57.6 GiB" in said[0][2], said
        (state / "kernel.json").write_text(json.dumps({"dmesg": "denied", "journalctl": "empty"}))
        said = bc.doctor(bed, src, "run", log)
        assert said[0][0] == "run_killed", said
    finally:
        bed.stop()


@pytest.mark.timeout(120)
def test_on_the_test_bed_the_host_kernel_log_names_the_cts_run(testbed: Any, ct: int) -> None:
    """Through ssh and the stand-in pct: a run in CT N behind `| tee`, its
    pane back at bash after a real SIGKILL; the host's kernel log (read on
    the host, where gputui's transport lands) names its host PID in CT N's
    cgroup — doctor says kernel_oom_kill, with "dmesg on the host"."""
    import scenarios as sc

    testbed.kernel_permits()  # dmesg readable on the host (another test may have refused it)
    run = sc.prepare(testbed, ct, "oomkill", "oom")
    (run.dir / "bar.py").write_text(TRAIN)
    sc.launch(testbed, run, "bash -c 'python3 -u bar.py 2>&1 | tee train.log; exec bash'")
    pid = sc.wait_python(run, "bar.py")
    deadline = time.monotonic() + 30
    while b"117/700" not in (run.log.read_bytes() if run.log.exists() else b""):
        assert time.monotonic() < deadline, "the run never reached its bar"
        time.sleep(0.1)
    os.kill(pid, 9)
    for line in GLOBAL:
        text = (
            line.split("] ", 1)[1].replace("1440763", str(pid)).replace("/lxc/200/", f"/lxc/{ct}/")
        )
        testbed.kernel_says(text)
    time.sleep(0.5)
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--session", "oom", "--json"), timeout=60)
    f = r.finding("kernel_oom_kill")
    assert r.kinds()[0] == "kernel_oom_kill", r.kinds()
    assert f"PID {pid} (python)" in f["title"] and "(host RAM)" in f["title"], f["title"]
    assert any("dmesg on the host" in e for e in f["evidence"]), f["evidence"]


async def test_a_run_found_by_its_log_is_looked_for_once_its_python_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No tmux (a nohup'd run, found by the process writing its log): once
    the Python seen writing it is gone with no error, the same look, the
    same word; a run never seen alive is not looked for."""
    from gputui.model import Proc
    from gputui.monitor.oomlook import OomLook

    standin_env(tmp_path, monkeypatch)
    snap = vanished(None)
    snap.session_name, snap.sessions, snap.pane_tail, snap.procs = None, [], [], []
    snap.run_found_by = ""
    look = OomLook(Target(LocalTransport()), clock=lambda: NOW)
    assert not await look.after_poll(snap) and look.looks == 0  # nothing seen alive
    snap.run_found_by = "log"
    snap.procs = [Proc(pid=1440763, cmdline=["python", "train.py"], is_python=True)]
    assert not await look.after_poll(snap)
    snap.procs, snap.run_found_by = [], ""
    assert await look.after_poll(snap) and look.looks == 1
    f = diagnose(snap, NOW)[0]
    assert f.kind == "kernel_oom_kill" and "PID 1440763 (python)" in f.title, f


def gone_before_looked(read: KernelOomRead | None, log_ago: float) -> Snapshot:
    """`tmux new -s train "python … | tee log"`: the command ended with the
    run, so did its session — gputui, started after, finds no session named
    train (another one there), no process, and the log last written
    `log_ago` seconds ago with no error in it."""
    snap = vanished(read)
    snap.session_name = "train"
    snap.sessions = [s for s in snap.sessions if s.name != "train"]
    snap.procs, snap.pane_tail = [], []
    snap.log.mtime = NOW - log_ago
    snap.log.last_line_time = NOW - log_ago
    return snap


def test_a_session_gone_before_gputui_looked_is_named_from_the_kernels_line() -> None:
    """Seen on a real kernel (bench/gpu/oom_kill.sh, an H100, a cgroup's OOM
    kill): the session ended with its run, and doctor said only "no tmux
    session named train". The log written 3 s ago, no error in it, the kill
    1 s ago: the kernel's line names it, over session_missing."""
    found = diagnose(gone_before_looked(read_of(MEMCG, 1.0), log_ago=3.0), NOW)
    f = found[0]
    assert f.kind == "kernel_oom_kill", [x.kind for x in found]
    assert "the run in session train was killed by the kernel's OOM killer" in f.title, f.title
    assert "session_missing" not in [x.kind for x in found]
    # a log of last week under a mistyped session name: no look, no OOM word
    old = gone_before_looked(read_of(MEMCG, 1.0), log_ago=7200.0)
    kinds = [x.kind for x in diagnose(old, NOW)]
    assert "kernel_oom_kill" not in kinds and kinds[0] == "session_missing", kinds
    # a kill from before the log's last line is not this run's end
    early = diagnose(gone_before_looked(read_of(MEMCG, 60.0), log_ago=3.0), NOW)
    assert "kernel_oom_kill" not in [x.kind for x in early]


async def test_the_monitor_looks_once_for_a_session_gone_before_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gputui.monitor.oomlook import OomLook

    standin_env(tmp_path, monkeypatch)
    look = OomLook(Target(LocalTransport()), clock=lambda: NOW)
    assert not await look.after_poll(gone_before_looked(None, log_ago=7200.0))
    assert look.looks == 0  # an old log: nothing to look for
    snap = gone_before_looked(None, log_ago=3.0)
    assert await look.after_poll(snap) and look.looks == 1
    assert snap.kernel_oom is not None and snap.kernel_oom.readable
    assert not await look.after_poll(snap) and look.looks == 1  # once


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux")
def test_doctor_names_a_run_whose_session_ended_with_it(tmp_path: Path) -> None:
    """The field shape: `tmux new -d -s run "python3 -u train.py 2>&1 | tee
    LOG"`, a real SIGKILL to the Python: tee and the session end with it.
    `gputui doctor --local --session run` after: kernel_oom_kill from the
    (stand-in) kernel's line — before, session_missing."""
    import subprocess

    bc, bed, state, log, src = kernel_bed(tmp_path)
    try:
        bed.tmux("new-session", "-d", "-s", "other", "-x", "80", "-y", "24", "bash --norc")
        cmd = f"python3 -u {tmp_path / 'train.py'} 2>&1 | tee {log}"
        bed.tmux("new-session", "-d", "-s", "run", "-x", "200", "-y", "50", cmd)
        assert bc._wait(lambda: log.exists() and b"117/700" in log.read_bytes(), 60)
        out = subprocess.run(["pgrep", "-f", f"{tmp_path / 'train.py'}"], capture_output=True)
        pid = int(out.stdout.split()[0])
        os.kill(pid, 9)
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        kill = [ln.replace("1440763", str(pid)) for ln in GLOBAL]
        (state / "kmsg").write_text(kmsg(kill, UP - up) + "\n")
        gone = bc._wait(lambda: "run" not in bed.tmux("ls", "-F", "#S").stdout.split(), 15)
        assert gone, "the session outlived its command"
        said = bc.doctor(bed, src, "run", log)
        assert said[0][0] == "kernel_oom_kill", said
        assert f"PID {pid} (python)" in said[0][2], said
    finally:
        bed.stop()
