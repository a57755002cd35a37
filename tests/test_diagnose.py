"""Table-driven tests for gputui.diagnose: every rule firing, and its near misses.

`run(...)` builds a snapshot of a healthy run (GPUs busy, lines flowing, steps
advancing, unbuffered); each case changes the few things that make it sick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.containers import Container, Host, ProxmoxLXC
from gputui.diagnose import (
    STALE_CAP_S,
    STALE_FLOOR_S,
    Thresholds,
    diagnose,
    last_error_line,
    snapshot_holders,
    stale_threshold,
)
from gputui.model import (
    UNREADABLE,
    ConnectionState,
    CtStatus,
    GpuEvent,
    GpuProcess,
    GpuSample,
    GpuState,
    LogState,
    Metrics,
    Pane,
    Proc,
    Session,
    Severity,
    Snapshot,
    StdoutTarget,
    Tools,
)

NOW = 1_700_000_000.0
LOG = "/workspace/train.log"
UUID = "GPU-aaaa"
FULL_TOOLS = Tools(
    tmux="3.3a",
    python3="3.11",
    py_spy="0.4.0",
    nvidia_smi_host=True,
    nvidia_smi_ct=False,
    probed=True,
)
Curve = Callable[[float], float | None]  # seconds before NOW -> value
MIB = 1 << 20
GIB = 1 << 30
TEE_ENOSPC = "tee: /workspace/train.log: No space left on device"
SAVE_ENOSPC = (
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 88, in <module>',
    "    torch.save(state, f'/workspace/ckpt/step{step}.pt')",
    "OSError: [Errno 28] No space left on device",
)


def const(v: float | None) -> Curve:
    return lambda age: v


def run(
    *,
    util: float | Curve | None = 96.0,
    mem: float | Curve | None = 45_000.0,
    hist_s: int = 120,
    gpus: int = 1,
    buffered: bool = False,
    env_unbuffered: bool | str | None = "auto",  # "auto": the opposite of `buffered`
    stdout: str = "pipe",
    stdout_files: tuple[str, ...] = (LOG,),
    proc: bool = True,
    started_ago: float | None = 3600.0,
    cpu: float | None = 40.0,
    state: str = "S",
    sources: tuple[tuple[str, float], ...] = (),  # (path, mtime seconds after start)
    log_exists: bool | None = True,
    silent: float | None = 2.0,  # seconds since the last line (None: no line seen)
    log_mtime_ago: float | None = None,
    line_gaps: tuple[float, ...] = (5.0,) * 20,
    steps: bool = True,
    last_step_ago: float = 2.0,
    step_interval: float = 5.0,
    session: str = "alive",  # alive | dead | gone | missing | none
    dead_status: int | None = None,
    dead_signal: int | None = None,
    start_command: str = "bash /root/start_training.sh 2>&1 | tee /workspace/train.log",
    pane_tail: tuple[str, ...] = (),
    log_tail: tuple[str, ...] = (),
    ct_status: CtStatus = CtStatus.RUNNING,
    connection: ConnectionState = ConnectionState.CONNECTED,
    tools: Tools = FULL_TOOLS,
    gpu_procs: list[GpuProcess] | None = None,
    gpu_procs_pending: bool = False,  # the GPU feed has not listed the processes yet
    events: tuple[GpuEvent, ...] = (),
    gpu_error: str | None = None,
    extra_procs: tuple[Proc, ...] = (),
    write_files: tuple[str, ...] = (),  # files the python process has open for writing
    run_found_by: str = "session",
    gpu_util: tuple[float | Curve | None, ...] | None = None,  # per GPU, overrides util
    fs_free: int | None = None,  # bytes free on the log's file system (None: unknown)
    fs_total: int | None = 32 * GIB,
    container: Container | None = None,  # None: CT 200
    # what the log showed of the writes (diagnose/buffering.py): "blocks" (a
    # line cut at a 4 KiB boundary, its rest held back), "lines" (appends
    # one by one, each ending a line), "" nothing yet; "auto": blocks when
    # `buffered` (the old cases: a buffered run whose log has shown it)
    log_shows: str = "auto",
) -> Snapshot:
    util_c = util if callable(util) else const(util)
    per_gpu = [u if callable(u) else const(u) for u in (gpu_util or ())]
    mem_c = mem if callable(mem) else const(mem)
    g = GpuState(source="nvidia-smi (host)")
    for age in range(hist_s, -1, -1):
        for i in range(gpus):
            g.add(
                GpuSample(
                    index=i,
                    time=NOW - age,
                    name="NVIDIA H200",
                    uuid=f"{UUID}{i}",
                    mem_used_mib=mem_c(age),
                    mem_total_mib=143_771.0,
                    util_pct=(per_gpu[i] if i < len(per_gpu) else util_c)(age),
                )
            )
    g.processes = gpu_procs if gpu_procs is not None else []
    g.processes_pending = gpu_procs_pending
    for e in events:
        g.events.append(e)
    g.error = gpu_error

    procs: list[Proc] = [Proc(pid=10, cmdline=["bash", "/root/start_training.sh"], state="S")]
    if proc:
        if stdout == "pipe":
            target = StdoutTarget(
                kind="pipe",
                path="pipe:[4242]",
                readers=[(13, "tee /workspace/train.log")],
                reader_files=list(stdout_files),
            )
        elif stdout == "file":
            target = StdoutTarget(kind="file", path=stdout_files[0])
        else:
            target = StdoutTarget(kind="tty", path="/dev/pts/3")
        start = NOW - started_ago if started_ago is not None else None
        procs.append(
            Proc(
                pid=12,
                ppid=10,
                cmdline=["python", "train.py"],
                cwd="/workspace",
                state=state,
                cpu_pct=cpu,
                start_time=start,
                is_python=True,
                stdout=target,
                python_u_flag=False,
                env_pythonunbuffered=(
                    (not buffered) if env_unbuffered == "auto" else env_unbuffered  # type: ignore[arg-type]
                ),
                fd1_pos=0 if buffered else 123_456,
                source_files=[(p, (start or NOW) + dt) for p, dt in sources],
                write_files=list(write_files),
            )
        )
    procs += list(extra_procs)

    log = LogState(path=LOG, exists=log_exists, size=1000 if log_exists else None)
    if fs_free is not None:
        log.fs_free, log.fs_total = fs_free, fs_total
    log.line_gaps.extend(line_gaps)
    if silent is not None:
        log.last_line_time = NOW - silent
        log.mtime = NOW - silent
    if log_mtime_ago is not None:
        log.mtime = NOW - log_mtime_ago
    shows = ("blocks" if buffered else "") if log_shows == "auto" else log_shows
    written = NOW - (silent if silent is not None else 30.0)
    if shows == "blocks":
        log.appends.append((written - 30.0, "block", 8177, 30.0, 8177))
        log.cut_at, log.cut_written, log.cut_offset = written, written, 16384
    elif shows == "lines":
        log.appends.extend((written - k, "line", 1000 - 45 * k, 0.0, 45) for k in range(5))

    metrics = Metrics()
    if steps:
        metrics.step_intervals.extend([step_interval] * 20)
        metrics.last_step = 100
        metrics.last_step_time = NOW - last_step_ago

    sessions: list[Session] = []
    gone = session == "gone"
    if session in ("alive", "dead"):
        pane = Pane(
            session="dflash",
            window_index=0,
            pane_index=0,
            pid=10,
            dead=session == "dead",
            dead_status=dead_status,
            dead_signal=dead_signal,
            start_command=start_command,
        )
        sessions.append(Session(name="dflash", panes=[pane]))
    if session in ("dead", "gone"):
        procs = []
    sessions.append(Session(name="other", panes=[Pane("other", 0, 0, 99)]))

    s = Snapshot(
        time=NOW,
        target="root@10.1.2.6 ct 200",
        connection=connection,
        container=container if container is not None else ProxmoxLXC(200),
        ct_status=ct_status,
        tools=tools,
        gpus=g,
        sessions=sessions,
        session_name=None if session == "none" else "dflash",
        session_gone=gone,
        pane_tail=list(pane_tail),
        procs=procs,
        log=log,
        metrics=metrics,
        started=NOW - 600,
        run_found_by=run_found_by if procs else "",
    )
    s.log_tail.extend(log_tail)
    return s


IMPORT_TB = (
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 3, in <module>',
    "    import flash_attn",
    "ModuleNotFoundError: No module named 'flash_attn'",
)


@dataclass
class Case:
    name: str
    snap: dict[str, Any]
    first: str | None  # kind of the first finding (None: no finding at all)
    severity: Severity | None = None
    title_has: tuple[str, ...] = ()
    evidence_has: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    action: str | None = None
    stale_after: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def rising(start: float, per_s: float) -> Curve:
    return lambda age: start + per_s * (120 - age)


CASES = [
    # ---------------------------------------------------------------- healthy
    Case("healthy run: no finding", {}, None),
    # a block-buffered stdout into the watched log is never "nothing wrong"
    Case(
        "buffered run with lines flowing (stderr/tqdm): still a warning with its fix",
        {"buffered": True},
        "buffered_output",
        Severity.WARNING,
        title_has=("block-buffered", "reach the log late"),
        action="relaunch",
    ),
    # argv/env only make a suspicion: the log decides (issue 31)
    Case(
        "no -u behind tee, but the log shows the program flushes its lines: no word",
        {"buffered": True, "log_shows": "lines"},
        None,
        absent=("buffered_output", "busy_but_silent"),
    ),
    Case(
        "no -u behind tee, the log has told nothing yet, not silent: not yet known",
        {"buffered": True, "log_shows": ""},
        None,
        absent=("buffered_output", "busy_but_silent"),
    ),
    Case(
        "no -u behind tee, nothing told, the log silent while the GPUs work: the seed",
        {"buffered": True, "log_shows": "", "silent": 240.0, "steps": False},
        "busy_but_silent",
        Severity.WARNING,
    ),
    Case(
        "a run that flushes its lines, then silent while the GPUs work: stalled, not buffered",
        {"buffered": True, "log_shows": "lines", "silent": 600.0, "steps": False},
        "progress_stalled",
        Severity.WARNING,
        absent=("busy_but_silent", "buffered_output"),
    ),
    Case(
        "buffered, silent, but within the threshold: warning, not silent yet",
        {"buffered": True, "silent": 60.0, "steps": False},
        "buffered_output",
        Severity.WARNING,
        evidence_has=("last line 60 s ago (stale after 2 min)",),
        absent=("busy_but_silent",),
    ),
    # ------------------------------------------------------- buffered_output
    # a fast buffered run: 8 KiB (~200 lines) every ~27 s, never silent for
    # long — what the real H200 run looked like (docs/real-gpu.md)
    Case(
        "buffered, lines arrive in 8 KiB bursts",
        {"buffered": True, "line_gaps": ((0.0,) * 99 + (27.0,)) * 2},
        "buffered_output",
        Severity.WARNING,
        title_has=("bursts up to 27 s late", "PID 12", "PYTHONUNBUFFERED unset"),
        evidence_has=("~100 lines at once",),
        action="relaunch",
    ),
    Case(
        "unbuffered, bursty writer (a progress dump): not called buffered",
        {"line_gaps": ((0.0,) * 99 + (27.0,)) * 2},
        None,
        absent=("buffered_output",),
    ),
    # ------------------------------------------------------- busy_but_silent
    Case(
        "busy but silent: buffered behind tee",
        {"buffered": True, "silent": 240.0, "steps": False},
        "busy_but_silent",
        Severity.WARNING,
        title_has=(
            "GPUs busy, log silent 4 min",
            "PID 12",
            "a pipe into tee (PID 13) writing /workspace/train.log",
            "PYTHONUNBUFFERED unset",
            "block-buffered",
        ),
        evidence_has=("no -u on its command line", "stale after 2 min", "GPU 0: 43.9 GiB"),
        action="relaunch",
    ),
    Case(
        "busy but silent: memory held and util unknown counts as busy",
        {"buffered": True, "silent": 300.0, "steps": False, "util": None},
        "busy_but_silent",
    ),
    Case(
        "busy but silent: stdout a file",
        {"buffered": True, "silent": 300.0, "steps": False, "stdout": "file"},
        "busy_but_silent",
        title_has=("the file /workspace/train.log",),
    ),
    Case(
        "unbuffered run silent with GPUs busy: stalled, not called buffered",
        {"buffered": False, "silent": 600.0, "steps": False},
        "progress_stalled",
        Severity.WARNING,
        title_has=("stalled: no new line for 10 min", "GPU 0 stay busy"),
        absent=("busy_but_silent", "buffered_output"),
    ),
    Case(
        "environ unreadable: buffering unknown, no claim",
        {"buffered": True, "env_unbuffered": None, "silent": 600.0, "steps": False},
        None,
    ),
    Case(
        "--stale-after wins over the adaptive default",
        {"buffered": True, "silent": 100.0, "steps": False},
        "busy_but_silent",
        stale_after=60.0,
    ),
    Case(
        "slow cadence (one line per 5 min): 4 min silence is normal",
        {
            "buffered": True,
            "silent": 240.0,
            "line_gaps": (300.0,) * 10,
            "step_interval": 300.0,
            "last_step_ago": 240.0,
        },
        "buffered_output",
        Severity.WARNING,
        absent=("busy_but_silent",),
    ),
    # ---------------------------------------------------------- held_but_idle
    Case(
        "hung: memory held, util 0 for 2 min, no step",
        {"util": 0.0, "silent": 300.0, "last_step_ago": 300.0, "cpu": 0.0},
        "held_but_idle",
        Severity.ERROR,
        title_has=("probably hung", "43.9 GiB", "idle 2 min", "no new step for 5 min"),
        evidence_has=("state S", "last step 100 arrived 5 min ago"),
        action="dump",
    ),
    Case(
        "hung AND buffered: called hung, not buffered",
        {"util": 0.0, "silent": 300.0, "last_step_ago": 300.0, "cpu": 0.0, "buffered": True},
        "held_but_idle",
        Severity.ERROR,
        evidence_has=("buffering does not make GPUs idle",),
        absent=("busy_but_silent",),
    ),
    Case(
        "idle only 30 s (short dip): not hung",
        {"util": lambda age: 0.0 if age < 30 else 95.0, "silent": 40.0, "last_step_ago": 40.0},
        None,
    ),
    Case(
        "doctor's short history: 6 s idle, no progress for 5 min → hung",
        {"util": 0.0, "hist_s": 6, "silent": 300.0, "last_step_ago": 300.0, "cpu": 0.0},
        "held_but_idle",
        Severity.ERROR,
        title_has=("idle for all 6 s sampled, no new step for 5 min",),
    ),
    Case(
        "doctor's short history, but steps 10 s ago: not hung",
        {"util": 0.0, "hist_s": 6, "silent": 10.0, "last_step_ago": 10.0},
        None,
    ),
    Case(
        "idle GPUs but steps still advancing: not hung",
        {"util": 0.0, "silent": 2.0, "last_step_ago": 2.0},
        None,
        absent=("held_but_idle",),
    ),
    Case(
        "idle GPUs, process busy on CPU (checkpoint?): warning, not error",
        {"util": 0.0, "silent": 300.0, "last_step_ago": 300.0, "cpu": 100.0, "state": "R"},
        "held_but_idle",
        Severity.WARNING,
        title_has=("saving a checkpoint",),
    ),
    # ---------------------------------------------------------------- loading
    Case(
        "loading: memory rising, util 0, young process",
        {
            "util": 0.0,
            "mem": rising(1000, 100),
            "started_ago": 130.0,
            "steps": False,
            "silent": None,
        },
        "loading",
        Severity.INFO,
        title_has=("loading (12.7 GiB so far)",),
    ),
    Case(
        "buffered run still loading: loading noted, buffering still a warning",
        {
            "util": 2.0,
            "mem": rising(1000, 100),
            "started_ago": 300.0,
            "steps": False,
            "silent": 290.0,
            "buffered": True,
        },
        "buffered_output",
        Severity.WARNING,
        absent=("busy_but_silent", "held_but_idle"),
        extra={"also": "loading"},
    ),
    Case(
        "memory rising in an old process with util high: training, not loading",
        {"mem": rising(1000, 100), "started_ago": 7200.0},
        None,
    ),
    # ------------------------------------------------------------ session_dead
    Case(
        "tmux lost the dead pane's status: the wrapper's [gputui] exit line has it",
        {
            "session": "dead",
            "dead_status": None,
            "pane_tail": (*IMPORT_TB, "[gputui] exit 1 at 2026-11-29 19:00:00"),
            "util": 0.0,
            "mem": 0.0,
        },
        "session_dead",
        Severity.ERROR,
        title_has=("exit status 1",),
        evidence_has=("exit status 1 (from the log's [gputui] exit line)",),
    ),
    Case(
        "tmux lost the status and the output ends without an error: ended, not 'died'",
        {
            "session": "dead",
            "dead_status": None,
            "pane_tail": ("step 99 | loss 0.1", "training done"),
            "util": 0.0,
            "mem": 0.0,
        },
        "run_ended",
        Severity.WARNING,
        title_has=("ended; tmux kept no exit status", "finished, or killed (OOM?)"),
        evidence_has=("exit status unknown: tmux loses a dead pane's status at times (3.3a)",),
        absent=("session_dead",),
        action="relaunch",
    ),
    Case(
        "tmux lost the status, the output ends in an error: died",
        {"session": "dead", "dead_status": None, "pane_tail": IMPORT_TB, "util": 0.0, "mem": 0.0},
        "session_dead",
        Severity.ERROR,
        title_has=("died (exit status unknown): ModuleNotFoundError",),
    ),
    Case(
        "pane dead with ImportError",
        {"session": "dead", "dead_status": 1, "pane_tail": IMPORT_TB, "util": 0.0, "mem": 0.0},
        "session_dead",
        Severity.ERROR,
        title_has=("exit status 1", "ModuleNotFoundError: No module named 'flash_attn'"),
        evidence_has=(
            "exit status 1",
            "  │ ModuleNotFoundError",
            '  │   File "/workspace/train.py"',
        ),
        action="relaunch",
    ),
    Case(
        "pane killed by SIGKILL: OOM killer?",
        {"session": "dead", "dead_signal": 9, "util": 0.0, "mem": 0.0},
        "session_dead",
        Severity.ERROR,
        title_has=("killed (signal 9, SIGKILL) — OOM killer?",),
    ),
    Case(
        "exit status 137 read as SIGKILL",
        {"session": "dead", "dead_status": 137, "util": 0.0, "mem": 0.0},
        "session_dead",
        title_has=("signal 9",),
    ),
    Case(
        "finished run (exit 0): finished, not crashed",
        {
            "session": "dead",
            "dead_status": 0,
            "pane_tail": ("step 1000 loss 1.2", "done"),
            "util": 0.0,
            "mem": 0.0,
        },
        "run_finished",
        Severity.INFO,
        absent=("session_dead",),
    ),
    Case(
        "exit 0 behind tee with a traceback: crashed (tee's status)",
        {"session": "dead", "dead_status": 0, "pane_tail": IMPORT_TB, "util": 0.0, "mem": 0.0},
        "session_dead",
        Severity.ERROR,
        evidence_has=("set -o pipefail",),
    ),
    Case(
        "session gone, traceback in the log",
        {"session": "gone", "log_tail": IMPORT_TB, "util": 0.0, "mem": 0.0},
        "session_dead",
        Severity.ERROR,
        title_has=("is gone", "No module named 'flash_attn'"),
        action="launch",
    ),
    Case(
        "session never there, log ends in a traceback (doctor, no remain-on-exit)",
        {"session": "missing", "log_tail": IMPORT_TB, "util": 0.0, "mem": 0.0, "proc": False},
        "session_dead",
        Severity.ERROR,
        title_has=("not running", "ModuleNotFoundError"),
    ),
    Case(
        "session name wrong, no traceback",
        {"session": "missing", "util": 0.0, "mem": 0.0, "proc": False},
        "session_missing",
        Severity.WARNING,
        evidence_has=("tmux sessions in CT 200: other",),
    ),
    Case(
        "pane alive (shell), Python gone, traceback in the pane",
        {"proc": False, "pane_tail": IMPORT_TB, "util": 0.0, "mem": 0.0},
        "run_exited",
        Severity.ERROR,
        title_has=("no Python process left in session dflash", "flash_attn"),
        action="relaunch",
    ),
    Case(
        "pane alive, no Python, no error in the output: no claim",
        {"proc": False, "pane_tail": ("$ ls",), "util": 0.0, "mem": 0.0},
        None,
    ),
    Case(
        "buffered, old log from an earlier run, process started 60 s ago: not yet silent",
        {"buffered": True, "silent": 7200.0, "started_ago": 60.0, "steps": False},
        None,  # the old log's 8 KiB blocks were an earlier process's: not yet known
        absent=("busy_but_silent", "buffered_output"),
    ),
    # ---------------------------------------------------------- log_missing/drift
    Case(
        "log missing; the process writes another file",
        {"log_exists": False, "silent": None, "stdout_files": ("/workspace/train_old.log",)},
        "log_missing",
        Severity.WARNING,
        title_has=("/workspace/train.log does not exist", "PID 12 writes /workspace/train_old.log"),
        action="watch_log",
    ),
    Case(
        "log missing, nothing else known",
        {"log_exists": False, "silent": None, "stdout": "tty"},
        "log_missing",
        Severity.WARNING,
    ),
    Case(
        "log drift: an old log exists, the process writes a new name",
        {
            "silent": 7200.0,
            "stdout_files": ("/workspace/train_v2.log",),
            "buffered": True,
            "steps": False,
        },
        "log_drift",
        Severity.WARNING,
        title_has=("watching /workspace/train.log, but PID 12 writes /workspace/train_v2.log",),
        absent=("busy_but_silent",),
        action="watch_log",
    ),
    Case(
        "same file by another spelling: no drift",
        {"stdout_files": ("/workspace/./train.log",)},
        None,
    ),
    Case(
        "FileHandler log: stdout goes to stdout.txt, the process writes the log itself",
        {
            "stdout": "file",
            "stdout_files": ("/workspace/stdout.txt",),
            "write_files": ("/workspace/stdout.txt", LOG),
            "silent": 7200.0,
            "buffered": True,
            "steps": False,
        },
        "busy_but_silent",  # no drift: the log is the run's; stdout.txt is still buffered
        Severity.WARNING,
        absent=("log_drift",),
    ),
    Case(
        "FileHandler log, stdout to another file, lines flowing: no finding",
        {
            "stdout": "file",
            "stdout_files": ("/workspace/stdout.txt",),
            "write_files": ("/workspace/stdout.txt", "/workspace/./train.log"),
        },
        None,
    ),
    Case(
        "the log is written by a child of the training process (a logger process)",
        {
            "stdout": "file",
            "stdout_files": ("/workspace/stdout.txt",),
            "extra_procs": (
                Proc(pid=14, ppid=12, cmdline=["python", "logger.py"], write_files=[LOG]),
            ),
        },
        None,
    ),
    Case(
        "near miss: the process writes other files (a checkpoint), not the log: drift",
        {
            "silent": 7200.0,
            "stdout": "file",
            "stdout_files": ("/workspace/stdout.txt",),
            "write_files": ("/workspace/stdout.txt", "/workspace/ckpt.pt"),
            "buffered": True,
            "steps": False,
        },
        "log_drift",
        Severity.WARNING,
        title_has=("PID 12 writes /workspace/stdout.txt",),
    ),
    Case(
        "log missing; stdout a tty, the process writes its own log elsewhere",
        {
            "log_exists": False,
            "silent": None,
            "stdout": "tty",
            "write_files": ("/workspace/ckpt.pt", "/workspace/runs/7/train.log", "/w/x.log"),
        },
        "log_missing",
        Severity.WARNING,
        title_has=("PID 12 writes /workspace/runs/7/train.log",),
        evidence_has=("has open for writing: /workspace/runs/7/train.log, /w/x.log",),
        action="watch_log",
    ),
    # ------------------------------------------------- run found by its log (no tmux)
    Case(
        "nohup run found by its log, no tmux session: buffered and silent",
        {
            "session": "none",
            "run_found_by": "log",
            "stdout": "file",
            "buffered": True,
            "silent": 240.0,
            "steps": False,
        },
        "busy_but_silent",
        Severity.WARNING,
        absent=("session_missing", "session_dead", "run_exited"),
        action="relaunch",
    ),
    Case(
        "--session names a missing session but the run was found by its log: a note, no launch",
        {
            "session": "missing",
            "run_found_by": "log",
            "stdout": "file",
            "buffered": True,
            "silent": 240.0,
            "steps": False,
        },
        "busy_but_silent",
        Severity.WARNING,
        absent=("session_dead",),
        extra={"also": "session_missing"},
    ),
    # ---------------------------------------------------------- progress_stalled
    Case(
        "lines flow, step stuck for 3 min at 5 s/step",
        {"silent": 3.0, "last_step_ago": 180.0},
        "progress_stalled",
        Severity.WARNING,
        title_has=("step 100 has not advanced for 3 min",),
        action="dump",
    ),
    Case(
        "step stuck 40 s at 5 s/step: under the 60 s floor",
        {"silent": 3.0, "last_step_ago": 40.0},
        None,
    ),
    Case(
        "slow steps (60 s/step), 5 min since the last: within 10 × median",
        {"silent": 3.0, "last_step_ago": 300.0, "step_interval": 60.0},
        None,
    ),
    # --------------------------------------------------------------- stale_code
    Case(
        "train.py modified 3 min after start",
        {"sources": (("/workspace/train.py", 180.0), ("/workspace/model.py", -60.0))},
        "stale_code",
        Severity.WARNING,
        title_has=("deploy has not taken effect: train.py modified 3 min after PID 12 started",),
        action="relaunch",
    ),
    Case(
        "files older than the process: no stale code", {"sources": (("/w/train.py", -5.0),)}, None
    ),
    # -------------------------------------------------------- gpu_memory_orphaned
    Case(
        "memory held by a leftover process in the CT (parent gone, idle 90 s on its GPU)",
        {
            "gpu_procs": [
                GpuProcess(UUID + "0", 5012, 40_000, "python", ct_pid=12, in_container=True),
                GpuProcess(
                    UUID + "0",
                    5099,
                    20_000,
                    "python",
                    ct_pid=77,
                    in_container=True,
                    util=[(NOW - 90.0 + 5.0 * i, 0.0) for i in range(19)],
                    state="S",
                    ancestors=[],
                ),
            ]
        },
        "gpu_memory_orphaned",
        Severity.WARNING,
        title_has=("PID 77",),
        # whose it is not known (no `owners` answer): how to check, never a kill (issue 45)
        extra={
            "fix_has": "its owner unknown: check `pct exec 200 -- ps -o pid,user,etime,cmd -p 77`"
        },
    ),
    Case(
        "run exited 9 s ago (log quiet 9 s), memory still in the last reading: not orphaned yet",
        {"session": "dead", "dead_status": 0, "util": 0.0, "silent": 9.0},
        "run_finished",
        Severity.INFO,
        absent=("gpu_memory_orphaned",),
    ),
    Case(
        "memory held, session dead, no process listed",
        {"session": "dead", "dead_status": 0, "util": 0.0, "silent": 10.0},
        "gpu_memory_orphaned",
        Severity.WARNING,
        title_has=("43.9 GiB of GPU memory held with no process listed and no run alive",),
        extra={"also": "run_finished", "fix_has": "fuser -v /dev/nvidia*"},
    ),
    Case(
        "memory held, session dead, processes not listed yet: no claim",
        {
            "session": "dead",
            "dead_status": 0,
            "util": 0.0,
            "silent": 10.0,
            "gpu_procs_pending": True,
        },
        "run_finished",
        Severity.INFO,
        absent=("gpu_memory_orphaned",),
    ),
    Case(
        "a --session that is not there, a live run in another session holds the GPU: no claim",
        {
            "session": "missing",
            "proc": False,
            "silent": 60.0,
            "gpu_procs": [
                GpuProcess(UUID + "0", 5099, 40_000, "python", ct_pid=99, in_container=True),
            ],
        },
        "session_missing",
        Severity.WARNING,
        absent=("gpu_memory_orphaned",),
    ),
    Case(
        "memory held, no session watched: no claim",
        {"session": "none", "proc": False},
        None,
    ),
    # ---------------------------------------------------------------- CT
    Case(
        "CT stopped",
        {"ct_status": CtStatus.STOPPED, "proc": False, "util": 0.0, "mem": 0.0},
        "ct_stopped",
        Severity.ERROR,
        extra={"fix_has": "pct start 200"},
    ),
    Case(
        "CT missing",
        {"ct_status": CtStatus.MISSING, "proc": False, "util": 0.0, "mem": 0.0},
        "ct_missing",
        Severity.ERROR,
        extra={"fix_has": "pct list"},
    ),
    # ---------------------------------------------------------------- tools
    Case(
        "py-spy missing: info with the install command",
        {"tools": Tools(tmux="3.3a", python3="3.11", nvidia_smi_host=True, probed=True)},
        "tools_missing",
        Severity.INFO,
        extra={"fix_has": "pct exec 200 -- pip install py-spy"},
    ),
    Case(
        "tmux missing: warning",
        {
            "tools": Tools(python3="3.11", py_spy="0.4", nvidia_smi_host=True, probed=True),
            "session": "none",
        },
        "tools_missing",
        Severity.WARNING,
        extra={"fix_has": "apt-get install -y tmux"},
    ),
    Case("tools not probed yet: no claim", {"tools": Tools()}, None),
    # ---------------------------------------------------------------- GPU
    Case(
        "GPU lost (no reading since)",
        {
            "events": (GpuEvent(NOW, "Unable to determine the device handle for GPU0", lost=True),),
        },
        "gpu_lost",
        Severity.ERROR,
    ),
    Case(
        "GPU was lost but readings came back: no stale alarm",
        {
            "events": (
                GpuEvent(NOW - 5, "Unable to determine the device handle for GPU0", lost=True),
            ),
        },
        None,
        absent=("gpu_lost",),
    ),
    Case(
        "Xid event",
        {"events": (GpuEvent(NOW - 5, "Xid (PCI:0000:1b:00): 79, GPU has fallen off"),)},
        "gpu_xid",
        Severity.WARNING,
    ),
    Case(
        "GPU reading error",
        {"gpu_error": "nvidia-smi exited 9: NVML error"},
        "gpu_unreadable",
        Severity.WARNING,
    ),
    # -------------------------------------------------------------- disk_full
    Case(
        "disk full under a buffered, silent run: the disk, not the buffer",
        {
            "buffered": True,
            "silent": 240.0,
            "steps": False,
            "fs_free": 0,
            "pane_tail": ("step 4000 loss 1.2", TEE_ENOSPC),
        },
        "disk_full",
        Severity.ERROR,
        title_has=(
            "the disk holding /workspace/train.log is full: 0 B free of 32.0 GiB",
            "writes to the log and checkpoints fail",
        ),
        evidence_has=(
            "in CT 200: 0 B free of 32.0 GiB (0.0 % free)",
            "/workspace/train.log was last written 4 min ago",
            f"the pane says: {TEE_ENOSPC}",
            "tee (PID 13) stops writing a file after a failed write",
        ),
        absent=("busy_but_silent", "buffered_output"),
        extra={"fix_has": "pct resize 200 rootfs +50G"},
    ),
    Case(
        "disk full under an unbuffered run with busy GPUs: not 'stalled'",
        {"silent": 600.0, "steps": False, "fs_free": 12 * MIB},
        "disk_full",
        Severity.ERROR,
        title_has=("is full: 12 MiB free of 32.0 GiB",),
        absent=("progress_stalled",),
        extra={"fix_has": "du -xsh /workspace/* | sort -h"},
    ),
    Case(
        "disk full while lines still flow (a checkpoint will fail): still an ERROR",
        {"fs_free": 99 * MIB},
        "disk_full",
        Severity.ERROR,
    ),
    Case(
        "disk space unknown (no statvfs), tee says No space left on device",
        {"buffered": True, "silent": 240.0, "steps": False, "pane_tail": (TEE_ENOSPC,)},
        "disk_full",
        Severity.ERROR,
        title_has=("the disk holding /workspace/train.log is full", "No space left on device"),
        evidence_has=("free space of CT 200's file system unknown", TEE_ENOSPC),
        absent=("busy_but_silent", "buffered_output"),
    ),
    Case(
        "checkpoint save died of ENOSPC: the death named as the write that found no room",
        {"session": "dead", "dead_status": 1, "log_tail": SAVE_ENOSPC},
        "out_of_space",  # issue 47: over the dead session, which only quoted it
        Severity.ERROR,
        title_has=("died: a write found no space left on the device",),
        extra={"also": "disk_full"},
    ),
    Case(
        "disk nearly full (below disk_low_pct): a warning",
        {"fs_free": 300 * MIB},
        "disk_low",
        Severity.WARNING,
        title_has=("nearly full: 300 MiB free of 32.0 GiB (0.9 %)",),
        absent=("disk_full",),
    ),
    Case(
        "plenty of space: no disk finding",
        {"fs_free": 20 * GIB},
        None,
        absent=("disk_full", "disk_low"),
    ),
    Case(
        "space freed since tee failed, log silent: tee will not write again",
        {
            "buffered": True,
            "silent": 240.0,
            "steps": False,
            "fs_free": 20 * GIB,
            "pane_tail": (TEE_ENOSPC,),
        },
        "disk_full",
        Severity.WARNING,
        title_has=("failed for lack of space; 20.0 GiB free now",),
        absent=("busy_but_silent", "buffered_output"),
        extra={"fix_has": "restart the run"},
    ),
    Case(
        "an old ENOSPC line while the log moves and space is free: nothing",
        {"fs_free": 20 * GIB, "pane_tail": (TEE_ENOSPC, "step 5 loss 1.0")},
        None,
        absent=("disk_full",),
    ),
    Case(
        "a plain host is not told to pct resize",
        {"fs_free": 0, "container": Host()},
        "disk_full",
        Severity.ERROR,
        evidence_has=("in the host: 0 B free",),
        extra={"fix_has": "move the run's output to a larger disk"},
    ),
    # ------------------------------------------------------------- connection
    Case(
        "reconnecting: only the connection, no silence alarm",
        {"connection": ConnectionState.RECONNECTING, "buffered": True, "silent": 900.0},
        "connection",
        Severity.WARNING,
        absent=("busy_but_silent",),
    ),
    Case(
        "connection failed",
        {"connection": ConnectionState.FAILED},
        "connection",
        Severity.ERROR,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rules(case: Case) -> None:
    findings = diagnose(run(**case.snap), NOW, Thresholds(stale_after=case.stale_after))
    kinds = [f.kind for f in findings]
    serious = [f for f in findings if f.severity != Severity.INFO]
    if case.first is None:
        assert serious == [], [f.title for f in serious]
        for k in ("loading", "run_finished", "session_dead"):
            assert k not in kinds
    else:
        assert kinds, "expected a finding"
        f = findings[0]
        assert f.kind == case.first, [x.title for x in findings]
        if case.severity is not None:
            assert f.severity == case.severity
        for s in case.title_has:
            assert s in f.title, f.title
        for s in case.evidence_has:
            assert any(s in e for e in f.evidence), f.evidence
        if case.action is not None:
            assert f.action == case.action
            assert f.action_label and not f.action_label.startswith("[")  # keys are the UI's
        if "fix_has" in case.extra:
            assert case.extra["fix_has"] in f.fix, f.fix
        assert f.title and "\n" not in f.title
        assert f.action or f.fix or f.severity == Severity.INFO, f"{f.kind}: no key and no fix"
    for k in case.absent:
        assert k not in kinds, [x.title for x in findings]
    if "also" in case.extra:
        assert case.extra["also"] in kinds


def test_orphaned_memory_names_only_the_watched_containers_processes() -> None:
    """A run that died in CT 200 leaves memory; a live process of another
    container on the same GPU is not named as a leftover to kill."""
    snap = run(
        session="dead",
        dead_status=1,
        util=0.0,
        silent=10.0,
        gpu_procs=[
            GpuProcess(UUID + "0", 5012, 30_000, "python", ct_pid=12, in_container=True),
            GpuProcess(UUID + "0", 6000, 10_000, "python", ct_pid=None, in_container=False),
        ],
    )
    (orphan,) = [f for f in diagnose(snap, NOW) if f.kind == "gpu_memory_orphaned"]
    said = " ".join([orphan.title, *orphan.evidence, orphan.fix or ""])
    assert "5012" in said and "6000" not in said, said


def test_session_missing_for_a_run_found_by_its_log_offers_no_launch() -> None:
    snap = run(session="missing", run_found_by="log", stdout="file")
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "session_missing"]
    assert f.severity == Severity.INFO and f.action == ""
    assert "runs outside tmux (PID 12)" in f.title and LOG in f.title
    # the same without the run: a warning offering to launch
    (g,) = [
        f
        for f in diagnose(run(session="missing", proc=False, util=0.0, mem=0.0), NOW)
        if f.kind == "session_missing"
    ]
    assert g.severity == Severity.WARNING and g.action == "launch"


def test_busy_but_silent_offers_flush_too() -> None:
    (f,) = [
        f
        for f in diagnose(run(buffered=True, silent=240.0, steps=False), NOW)
        if f.kind == "busy_but_silent"
    ]
    assert (f.alt_action, f.alt_action_label) == ("flush", "flush live")


@pytest.mark.parametrize(
    "kind, facts",
    [
        ("busy_but_silent", {"buffered": True, "silent": 240.0, "steps": False}),
        ("buffered_output", {"buffered": True, "line_gaps": ((0.0,) * 99 + (27.0,)) * 2}),
    ],
)
def test_a_buffering_title_says_its_cause_within_80_columns(kind: str, facts: Any) -> None:
    """The banner at 80×24 shows the title's first ~76 columns: the cause
    (block-buffered) comes first, the evidence (which pipe, which flags)
    after (issue 46: '…pipe into tee (PID 2176…', the cause cut off)."""
    (f,) = [f for f in diagnose(run(**facts), NOW) if f.kind == kind]
    assert "block-buffered" in f.title[:76], f.title


def test_sorted_by_severity_then_specificity() -> None:
    snap = run(
        session="dead",
        dead_status=1,
        pane_tail=IMPORT_TB,
        tools=Tools(tmux="3.3a", python3="3", nvidia_smi_host=True, probed=True),
        events=(GpuEvent(NOW - 5, "Xid 13"),),
    )
    sev = [f.severity for f in diagnose(snap, NOW)]
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    assert sev == sorted(sev, key=order.__getitem__)
    assert sev[0] == Severity.ERROR and sev[-1] == Severity.INFO


# ------------------------------------------------------------- stale threshold


@pytest.mark.parametrize(
    ("gaps", "step", "configured", "expected"),
    [
        ((), None, None, STALE_FLOOR_S),  # nothing known: the floor
        ((1.0,) * 50, 2.0, None, STALE_FLOOR_S),  # fast run: the floor
        ((30.0,) * 9, None, None, 300.0),  # 10 × median gap
        ((0.0,) * 99 + (360.0,), None, None, STALE_FLOOR_S),  # one buffered burst
        ((5.0,), 45.0, None, 450.0),  # the step interval, when larger
        ((600.0,) * 5, None, None, STALE_CAP_S),  # capped
        ((600.0,) * 5, None, 90.0, 90.0),  # configured wins
    ],
)
def test_stale_threshold(
    gaps: tuple[float, ...], step: float | None, configured: float | None, expected: float
) -> None:
    snap = Snapshot(time=NOW, target="t")
    snap.log.line_gaps.extend(gaps)
    if step is not None:
        snap.metrics.step_intervals.append(step)
    assert stale_threshold(snap, Thresholds(stale_after=configured)) == pytest.approx(expected)


def test_the_stale_threshold_is_kept_while_its_lines_and_steps_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked three times a second (the diagnosis, the log's state line, the
    recorder), it sorts its lines' gaps and steps once for each new line or
    step, not for each asking — and it follows every new line and step."""
    from gputui.diagnose import thresholds
    from gputui.model import MetricPoint

    made: list[float] = []
    adaptive = thresholds._adaptive
    monkeypatch.setattr(
        thresholds, "_adaptive", lambda *a: made.append(1) or adaptive(*a)
    )  # counted
    snap, th = Snapshot(time=NOW, target="t"), Thresholds()
    for t in range(0, 300, 30):
        snap.log.note_line(float(t))
    first = stale_threshold(snap, th)
    assert first == pytest.approx(300.0)  # 10 × the 30-s gaps
    assert [stale_threshold(snap, th) for _ in range(5)] == [first] * 5
    assert len(made) == 1
    snap.log.note_line(300.0 + 60.0)  # a new line: looked at again
    snap.log.note_line(300.0 + 120.0)
    snap.log.note_line(300.0 + 180.0)
    assert stale_threshold(snap, th) == pytest.approx(300.0)  # (the median moved not)
    for t in range(9):
        snap.log.note_line(540.0 + 60.0 * (t + 1))
    assert stale_threshold(snap, th) == pytest.approx(600.0)  # 10 × the 60-s gaps
    snap.metrics.add(MetricPoint(time=1000.0, step=1))
    snap.metrics.add(MetricPoint(time=1090.0, step=2))  # a 90-s step, larger than the gaps
    assert stale_threshold(snap, th) == pytest.approx(900.0)
    other = Snapshot(time=NOW, target="u")  # another run's: its own
    assert stale_threshold(other, th) == pytest.approx(STALE_FLOOR_S)
    assert stale_threshold(snap, Thresholds(stale_after=42.0)) == 42.0
    assert len(made) == 5


def test_gpu_views_walk_back_from_the_newest_readings_not_the_whole_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each GPU holds up to 600 readings (10 min); the rules judge the last
    30 s, the idle streak and the loading window, read walking back from the
    newest — a copy of every GPU's whole history, twice, each second was
    most of a diagnosis on a long run (2.5 ms for 8 GPUs, here)."""
    from gputui.diagnose.context import Context
    from gputui.model import Ring

    def whole(*_a: object) -> object:
        raise AssertionError("a GPU's whole history was copied")

    snap = Snapshot(time=NOW, target="t")
    for k in range(700):  # busy, then the last 45 readings idle; memory rising lately
        t = NOW - 699 + k
        util = 95.0 if k < 655 else 2.0
        for i in range(2):
            mem = 60000.0 + (100.0 * (k - 680) if k > 680 else 0.0)
            snap.gpus.add(
                GpuSample(index=i, time=t, uuid=f"GPU-{i}", mem_used_mib=mem, util_pct=util)
            )
    assert len(snap.gpus.util_history[0]) == 600
    monkeypatch.setattr(Ring, "points", whole)
    monkeypatch.setattr(Ring, "since", whole)
    views = Context(snap, NOW, 60.0, Thresholds()).gpu_views
    assert len(views) == 2
    v = views[0]
    assert v.recent_util == [2.0] * 31  # the readings of the last 30 s
    assert v.idle_for == pytest.approx(44.0) and v.idle_samples == 45
    assert not v.idle_whole_history
    assert v.span_s == pytest.approx(599.0)
    assert v.mem_rise_mib == pytest.approx(1900.0)  # within the loading window


def test_log_note_line_records_gaps() -> None:
    log = LogState(path=LOG)
    for t in (10.0, 15.0, 15.0, 45.0):
        log.note_line(t)
    assert list(log.line_gaps) == [5.0, 0.0, 30.0]
    assert log.last_line_time == 45.0 and log.lines_total == 4


# ------------------------------------------------------------- tracebacks


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (IMPORT_TB, "ModuleNotFoundError: No module named 'flash_attn'"),
        (
            (
                "Traceback (most recent call last):",
                '  File "a.py", line 1',
                "KeyError: 'x'",
                "",
                "During handling of the above exception, another exception occurred:",
                "",
                "Traceback (most recent call last):",
                '  File "a.py", line 3',
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            ),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ),
        (("step 1", "Killed"), "Killed"),
        (("step 1", TEE_ENOSPC, "step 2"), TEE_ENOSPC),
        (("RuntimeError: NCCL error in: ...", "bash: exiting"), "RuntimeError: NCCL error in: ..."),
        (("step 1 loss 2.0", "done"), None),
        ((), None),
    ],
)
def test_last_error_line(lines: tuple[str, ...], expected: str | None) -> None:
    assert last_error_line(lines) == expected


# ------------------------------------------------------ never raises (property)

opt_f = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=32))
opt_i = st.one_of(st.none(), st.integers(-5, 300))
text = st.text(max_size=30)


@st.composite
def partial_snapshots(draw: st.DrawFn) -> Snapshot:
    snap = Snapshot(
        time=NOW,
        target=draw(text),
        connection=draw(st.sampled_from(ConnectionState)),
        connection_error=draw(st.one_of(st.none(), text)),
        container=draw(st.one_of(st.none(), st.builds(ProxmoxLXC, st.integers(-5, 300)))),
        ct_status=draw(st.sampled_from(CtStatus)),
        tools=Tools(
            tmux=draw(st.one_of(st.none(), text)),
            py_spy=draw(st.one_of(st.none(), text)),
            nvidia_smi_host=draw(st.one_of(st.none(), st.booleans())),
        ),
        session_name=draw(st.one_of(st.none(), st.sampled_from(["dflash", "x"]))),
        session_gone=draw(st.booleans()),
        started=draw(st.floats(0, NOW)),
    )
    for _ in range(draw(st.integers(0, 12))):
        snap.gpus.add(
            GpuSample(
                index=draw(st.integers(0, 2)),
                time=NOW - draw(st.floats(0, 200)),
                uuid=draw(st.sampled_from(["", "GPU-a", "GPU-b"])),
                mem_used_mib=draw(opt_f),
                mem_total_mib=draw(opt_f),
                util_pct=draw(opt_f),
            )
        )
    snap.gpus.processes = [
        GpuProcess(
            draw(st.sampled_from(["", "GPU-a"])),
            draw(st.integers(1, 9)),
            draw(opt_f),
            draw(text),
            draw(opt_i),
            draw(st.one_of(st.none(), st.booleans())),
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    for _ in range(draw(st.integers(0, 2))):
        snap.gpus.events.append(
            GpuEvent(NOW - draw(st.floats(0, 1e4)), draw(text), draw(st.booleans()))
        )
    snap.gpus.error = draw(st.one_of(st.none(), text))
    snap.sessions = [
        Session(
            name=draw(st.sampled_from(["dflash", "x"])),
            panes=[
                Pane(
                    "dflash",
                    0,
                    0,
                    draw(opt_i),
                    dead=draw(st.booleans()),
                    dead_status=draw(opt_i),
                    dead_signal=draw(opt_i),
                    start_command=draw(text),
                )
                for _ in range(draw(st.integers(0, 2)))
            ],
        )
        for _ in range(draw(st.integers(0, 2)))
    ]
    snap.pane_tail = draw(st.lists(text, max_size=4))
    snap.procs = [
        Proc(
            pid=draw(st.integers(1, 99)),
            cmdline=draw(st.lists(text, max_size=3)),
            state=draw(st.sampled_from(["", "R", "S", "D", "Z"])),
            cpu_pct=draw(opt_f),
            start_time=draw(st.one_of(st.none(), st.floats(NOW - 1e5, NOW + 100))),
            is_python=draw(st.booleans()),
            stdout=StdoutTarget(
                kind=draw(st.sampled_from(["file", "pipe", "tty", "unknown", "null"])),
                path=draw(st.one_of(st.none(), text)),
                readers=[(draw(st.integers(1, 9)), draw(text))],
                reader_files=draw(st.lists(text, max_size=2)),
            ),
            python_u_flag=draw(st.booleans()),
            env_pythonunbuffered=draw(st.one_of(st.none(), st.booleans())),
            source_files=[(draw(text), draw(st.floats(NOW - 1e5, NOW + 100)))],
        )
        for _ in range(draw(st.integers(0, 3)))
    ]
    snap.log = LogState(
        path=draw(text),
        exists=draw(st.one_of(st.none(), st.booleans())),
        mtime=draw(st.one_of(st.none(), st.floats(NOW - 1e5, NOW + 10))),
        last_line_time=draw(st.one_of(st.none(), st.floats(NOW - 1e5, NOW + 10))),
    )
    snap.log.line_gaps.extend(draw(st.lists(st.floats(0, 1e4), max_size=5)))
    snap.log_tail.extend(draw(st.lists(text, max_size=4)))
    for _ in range(draw(st.integers(0, 4))):
        snap.metrics.step_intervals.append(draw(st.floats(0, 1e3)))
        snap.metrics.last_step = draw(opt_i)
        snap.metrics.last_step_time = draw(st.one_of(st.none(), st.floats(NOW - 1e5, NOW)))
    return snap


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=partial_snapshots(), stale=st.one_of(st.none(), st.floats(0, 1e4)))
def test_diagnose_never_raises(snap: Snapshot, stale: float | None) -> None:
    findings = diagnose(snap, NOW, Thresholds(stale_after=stale))
    for f in findings:
        assert f.kind and f.title
        assert isinstance(f.severity, Severity)
        f.to_dict()


def test_diagnose_survives_missing_parts() -> None:
    snap = Snapshot(time=NOW, target="t")
    snap.gpus = None  # type: ignore[assignment]
    snap.log = None  # type: ignore[assignment]
    snap.metrics = None  # type: ignore[assignment]
    snap.tools = None  # type: ignore[assignment]
    snap.procs = None  # type: ignore[assignment]
    snap.sessions = None  # type: ignore[assignment]
    assert diagnose(snap, NOW) == []


# ------------------------------------------------- escalation: each threshold's edges


def idle_last(seconds: float, busy: float = 96.0) -> Curve:
    """util 0 for the last `seconds` (readings once a second), busy before."""
    return lambda age: 0.0 if age <= seconds else busy


@dataclass
class Edge:
    name: str
    snap: dict[str, Any]
    kind: str | None  # the first non-INFO finding's kind (None: nothing serious)
    severity: Severity | None = None
    title_has: tuple[str, ...] = ()
    stale_after: float | None = 10.0
    th: dict[str, float] = field(default_factory=dict)


def fast(no_step: float, idle: float, **more: Any) -> dict[str, Any]:
    """A run stepping every 0.5 s that stopped `no_step` s ago; GPUs idle `idle` s."""
    return {
        "step_interval": 0.5,
        "line_gaps": (0.5,) * 20,
        "last_step_ago": no_step,
        "silent": no_step,
        "util": idle_last(idle),
        "cpu": 0.0,
        **more,
    }


EDGES = [
    # the step is overdue at max(k × median, stale threshold) = max(10 × 0.5, 10) = 10 s
    Edge("no step for 9 s, GPUs idle 9 s: not yet overdue", fast(9.0, 9), None),
    Edge(
        "no step for 10 s, GPUs idle 9 s: stalled, a warning at once",
        fast(10.0, 9),
        "held_but_idle",
        Severity.WARNING,
        ("stalled: no step for 10 s, median 0.5 s; GPUs idle 9 s",),
    ),
    # the GPUs have "gone idle" after gpu_idle_after_s (5 s)
    Edge(
        "no step for 12 s, GPUs idle 4 s: not gone idle yet, so no hang word",
        fast(12.0, 4),
        "progress_stalled",
        Severity.WARNING,
        ("stalled: no step for 12 s, median 0.5 s",),
    ),
    Edge(
        "no step for 12 s, GPUs idle 5 s: stalled",
        fast(12.0, 5),
        "held_but_idle",
        Severity.WARNING,
        ("GPUs idle 5 s",),
    ),
    # the hang window (hang_after_s, 60 s) promotes it to an error
    Edge(
        "GPUs idle 59 s: still a warning",
        fast(61.0, 59),
        "held_but_idle",
        Severity.WARNING,
        ("stalled",),
    ),
    Edge(
        "GPUs idle 60 s: probably hung",
        fast(61.0, 60),
        "held_but_idle",
        Severity.ERROR,
        ("probably hung", "idle 60 s", "no new step for 61 s"),
    ),
    Edge(
        "hang_after_s = 30 from the config: an error at 30 s",
        fast(31.0, 30),
        "held_but_idle",
        Severity.ERROR,
        ("probably hung",),
        th={"hang_after_s": 30.0},
    ),
    Edge(
        "gpu_idle_after_s = 10 from the config: 9 s idle is not idle yet",
        fast(12.0, 9),
        "progress_stalled",
        th={"gpu_idle_after_s": 10.0},
    ),
    # while the log still moves, k × median wins over a shorter stale
    # threshold: median 2 s → overdue after 20 s
    Edge(
        "median 2 s, no step for 19 s, a line 1 s ago: not overdue (k × median = 20 s)",
        {**fast(19.0, 19), "step_interval": 2.0, "silent": 1.0},
        None,
    ),
    # a log silent past the user's --stale-after is stale, whatever the
    # step interval (issue 44: the pane said "stale", the rules waited)
    Edge(
        "--stale-after 10, median 2 s, log silent 11 s, GPUs idle 11 s: stalled",
        {**fast(11.0, 11), "step_interval": 2.0},
        "held_but_idle",
        Severity.WARNING,
        ("stalled: no step for 11 s, median 2 s; GPUs idle 11 s",),
    ),
    Edge(
        "--stale-after 10, median 5 s, log silent 9 s, GPUs busy: not stale yet",
        {**fast(9.0, 0), "util": 96.0, "step_interval": 5.0, "line_gaps": (5.0,) * 20},
        None,
    ),
    Edge(
        "--stale-after 10, median 5 s, log silent 15 s, GPUs busy: stalled",
        {**fast(15.0, 0), "util": 96.0, "step_interval": 5.0, "line_gaps": (5.0,) * 20},
        "progress_stalled",
        Severity.WARNING,
        ("stalled: no step for 15 s, median 5 s",),
    ),
    Edge(
        "median 2 s, no step for 20 s: stalled",
        {**fast(20.0, 20), "step_interval": 2.0},
        "held_but_idle",
        Severity.WARNING,
        ("no step for 20 s, median 2 s",),
    ),
    Edge(
        "step_overdue_factor = 5 from the config: overdue after max(5 × 2, 10) = 10 s",
        {**fast(10.0, 10), "step_interval": 2.0},
        "held_but_idle",
        Severity.WARNING,
        th={"step_overdue_factor": 5.0},
    ),
    # the stale threshold is the floor: adaptive (2 min) when not configured
    Edge(
        "adaptive threshold 2 min: 60 s without a step is not overdue",
        fast(60.0, 59),
        None,
        None,
        (),
        None,
    ),
    # one rank stuck, the others spinning in NCCL: GPU 2 idle, 0/1/3 busy
    Edge(
        "4 ranks, GPU 2 idle 11 s: stalled, names the stuck rank",
        {**fast(12.0, 0), "gpus": 4, "gpu_util": (96.0, 96.0, idle_last(11), 96.0)},
        "held_but_idle",
        Severity.WARNING,
        ("GPU 2 idle 11 s while GPUs 0, 1, 3 stay busy", "NCCL"),
    ),
    Edge(
        "4 ranks, GPU 2 idle 61 s: probably hung",
        {**fast(62.0, 0), "gpus": 4, "gpu_util": (96.0, 96.0, idle_last(61), 96.0)},
        "held_but_idle",
        Severity.ERROR,
        ("probably hung: GPU 2 idle 61 s while GPUs 0, 1, 3 spin",),
    ),
    # pauses: loading holds everything back; a checkpoint names itself
    Edge(
        "loading: memory rising, no step yet, 30 s silent: no warning",
        {
            "util": 0.0,
            "mem": rising(1000, 100),
            "started_ago": 40.0,
            "steps": False,
            "silent": 30.0,
        },
        None,
    ),
    Edge(
        "gputui just started (2 s of GPU readings), log silent 15 s: too early to call a stall",
        {
            "util": 2.0,
            "hist_s": 2,
            "steps": False,
            "silent": 15.0,
            "mem": 9000.0,
            "started_ago": 20.0,
            "cpu": 0.0,
            "line_gaps": (0.5,) * 20,
        },
        None,
    ),
    Edge(
        "6 s of readings, memory flat, util 2 %, log silent 15 s: stalled",
        {
            "util": 2.0,
            "hist_s": 6,
            "steps": False,
            "silent": 15.0,
            "mem": 9000.0,
            "started_ago": 20.0,
            "cpu": 0.0,
            "line_gaps": (0.5,) * 20,
        },
        "held_but_idle",
        Severity.WARNING,
        ("stalled: no new line for 15 s", "still starting up?"),
    ),
    Edge(
        "checkpoint pause shorter than the threshold: no warning",
        {**fast(40.0, 40), "cpu": 100.0, "state": "D"},
        None,
        stale_after=60.0,
    ),
    Edge(
        "checkpoint pause past the threshold: a warning that says checkpoint",
        {**fast(70.0, 70), "cpu": 100.0, "state": "D"},
        "held_but_idle",
        Severity.WARNING,
        ("saving a checkpoint",),
        stale_after=60.0,
    ),
    Edge(
        "eval pause (GPUs busy, no step) shorter than the threshold: no warning",
        {**fast(40.0, 0), "silent": 40.0},
        None,
        stale_after=60.0,
    ),
]


@pytest.mark.parametrize("edge", EDGES, ids=[e.name for e in EDGES])
def test_escalation_edges(edge: Edge) -> None:
    from gputui.diagnose import Thresholds

    th = Thresholds(stale_after=edge.stale_after, **edge.th)
    findings = diagnose(run(**edge.snap), NOW, th)
    serious = [f for f in findings if f.severity != Severity.INFO]
    if edge.kind is None:
        assert serious == [], [f.title for f in serious]
        return
    assert serious, [f.title for f in findings]
    f = serious[0]
    assert f.kind == edge.kind, [x.title for x in findings]
    if edge.severity is not None:
        assert f.severity == edge.severity, f.title
    for s in edge.title_has:
        assert s in f.title, f.title
    assert f.action == "dump"


def test_probe_not_answered_is_not_missing() -> None:
    """The start-up false word: the GPU feed knows nvidia-smi is on the host
    before the CT's tools were probed; tmux, py-spy, python3 are unknown, not missing."""
    early = Tools(nvidia_smi_host=True)
    assert [f for f in diagnose(run(tools=early), NOW) if f.kind == "tools_missing"] == []
    nothing = Tools(nvidia_smi_host=False)  # no nvidia-smi on the host; the CT not asked yet
    assert [f for f in diagnose(run(tools=nothing), NOW) if f.kind == "tools_missing"] == []
    answered = Tools(nvidia_smi_host=True, tmux="3.3a", python3="3.11", probed=True)
    missing = [f for f in diagnose(run(tools=answered), NOW) if f.kind == "tools_missing"]
    assert missing and missing[0].title == "missing in CT 200: py-spy"


def test_thresholds_default_to_the_documented_constants() -> None:
    from gputui import diagnose as d

    th = d.Thresholds()
    assert th.hang_after_s == d.IDLE_FOR_S == 60.0
    assert th.step_overdue_factor == d.STALL_FACTOR == 10.0
    assert th.gpu_idle_after_s == d.IDLE_AFTER_S == 5.0
    assert th.stale_floor_s == STALE_FLOOR_S


def test_disk_thresholds_are_settings() -> None:
    from gputui.diagnose import Thresholds

    snap = run(fs_free=300 * MIB)  # 0.9 % of 32 GiB
    kinds = [f.kind for f in diagnose(snap, NOW, thresholds=Thresholds(disk_low_pct=0.0))]
    assert "disk_low" not in kinds and "disk_full" not in kinds
    full = diagnose(snap, NOW, thresholds=Thresholds(disk_full_below_mib=512.0))
    assert full[0].kind == "disk_full" and full[0].severity == Severity.ERROR
    plain = [f for f in diagnose(run(fs_free=0, container=Host()), NOW) if f.kind == "disk_full"]
    assert plain and "pct" not in plain[0].fix


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (512 * 1024, "512 KiB"),
        (87 * MIB, "87 MiB"),
        (int(31.9 * GIB), "31.9 GiB"),
        (250 * GIB, "250 GiB"),
        (int(1.8 * 1024 * GIB), "1.8 TiB"),
        (None, "? B"),
    ],
)
def test_size_words(n: int | None, words: str) -> None:
    from gputui.text.words import size_words

    assert size_words(n) == words


def test_a_found_log_it_may_not_read_is_a_finding() -> None:
    """The log found from the run's stdout, unreadable to gputui: the log
    panel said "cannot read" and doctor said nothing. A warning naming the
    path, the error and the fix, as the one line for a named log does."""
    snap = run()
    snap.log = LogState(
        path=LOG, not_a_file=UNREADABLE, error=f"cannot read {LOG}: permission denied"
    )
    (f,) = [f for f in diagnose(snap, NOW) if f.kind == "log_unreadable"]
    assert f.severity == Severity.WARNING
    assert LOG in f.title and "permission denied" in f.title
    assert f"cannot read {LOG}: permission denied" in f.evidence
    assert f"ls -l {LOG}" in f.fix and "a user that can read it" in f.fix
    snap.log = LogState(path=LOG, exists=True, size=10)  # readable: no such finding
    assert "log_unreadable" not in [f.kind for f in diagnose(snap, NOW)]


# ------------------------------------------- shared GPUs: whose processes, whose hang


def _readings(
    busy: float, idle_s: float, span_s: float = 120.0, every: float = 5.0
) -> list[tuple[float, float]]:
    """Per-process SM readings every `every` s over `span_s`: `busy` %, then
    0 % for the last `idle_s` seconds (oldest first)."""
    n = int(span_s / every)
    return [
        (NOW - span_s + every * i, 0.0 if NOW - span_s + every * i > NOW - idle_s else busy)
        for i in range(n + 1)
    ]


def _two_runs(run_util: list[tuple[float, float]], other_util: float = 98.0) -> list[GpuProcess]:
    """The watched run (CT PID 12) and a live run of session "other" (its
    pane is PID 99; CT PID 491) on one GPU."""
    run_gp = GpuProcess(UUID + "0", 5012, 40_000, "python", ct_pid=12, in_container=True)
    run_gp.util, run_gp.state, run_gp.cpu_s, run_gp.ancestors = run_util, "S", 300.0, [10]
    other = GpuProcess(UUID + "0", 5491, 5_200, "python", ct_pid=491, in_container=True)
    other.util, other.state, other.ancestors = _readings(other_util, 0.0), "R", [120, 99]
    return [run_gp, other]


def test_two_runs_on_one_gpu_no_kill_advice_and_the_other_named_by_its_session() -> None:
    """Field: 'GPU memory held by PID 491 … fix: kill 491' for the other live
    run of the CT, in a session the dashboard itself listed."""
    snap = run(gpu_procs=_two_runs(_readings(96.0, 0.0)))
    findings = diagnose(snap, NOW)
    said = [" ".join([f.title, f.fix or "", *f.evidence]) for f in findings]
    assert not any("kill" in s for s in said), said
    assert "gpu_memory_orphaned" not in [f.kind for f in findings]
    held = snapshot_holders(snap, NOW)
    assert held[(UUID + "0", 5491)] == "held by session other (PID 491)"
    assert held[(UUID + "0", 5012)] == "the watched run"


def test_a_live_run_whose_parent_is_gone_but_busy_on_its_gpu_is_not_a_leftover() -> None:
    """A `nohup` run whose shell exited is reparented to init and still
    works: no live parent is not enough for kill advice."""
    procs = _two_runs(_readings(96.0, 0.0))
    procs[1].ancestors = []
    findings = diagnose(run(gpu_procs=procs), NOW)
    assert "gpu_memory_orphaned" not in [f.kind for f in findings], [f.title for f in findings]


def test_watched_run_hangs_while_another_run_keeps_the_gpu_at_98_pct_probably_hung() -> None:
    """Field (H200): the watched run deadlocked (S, 0 % CPU, memory held)
    while the other run kept GPU 0 at 98 %: 76 s later the banner still said
    'stalled … GPU 0 stay busy'. Its own processes are idle: probably hung."""
    snap = run(
        util=98.0,
        silent=70.0,
        last_step_ago=70.0,
        step_interval=0.5,
        line_gaps=(0.5,) * 20,
        cpu=0.0,
        gpu_procs=_two_runs(_readings(95.0, 68.0)),
    )
    f = diagnose(snap, NOW, Thresholds(stale_after=10.0))[0]
    assert f.kind == "held_but_idle" and f.severity == Severity.ERROR, f.title
    assert f.title.startswith("probably hung"), f.title
    assert any("the run's own: 0 %" in e for e in f.evidence), f.evidence
    # its words are about its own processes: their memory (39.1 GiB, not the
    # GPU's total with the other run's), their GPU work — never "GPUs idle"
    assert "its processes hold 39.1 GiB on GPU 0" in f.title, f.title
    assert "idle" not in f.title, f.title


def test_watched_run_hang_on_a_busy_shared_gpu_is_stalled_within_the_threshold() -> None:
    """12 s after its last step (--stale-after 10) the watched run's own
    readings are idle, the GPU busy with the other run: stalled, not 'busy'."""
    snap = run(
        util=98.0,
        silent=12.0,
        last_step_ago=12.0,
        step_interval=0.5,
        line_gaps=(0.5,) * 20,
        cpu=0.0,
        gpu_procs=_two_runs(_readings(95.0, 11.0)),
    )
    f = diagnose(snap, NOW, Thresholds(stale_after=10.0))[0]
    assert f.kind == "held_but_idle" and f.title.startswith("stalled"), f.title
    assert "no GPU work by its processes" in f.title and "GPUs idle" not in f.title, f.title


def test_hang_7_s_after_start_with_memory_still_rising_is_stalled_at_the_threshold() -> None:
    """Field (H200, --stale-after 10): a run deadlocked after 100 steps, 7 s
    into the run; memory had risen in the last minute, so `loading` held back
    every stall rule for 52 s. Loading ends at the first step."""
    snap = run(
        started_ago=19.0,
        util=lambda age: 0.0 if age <= 12.0 else (90.0 if age <= 19.0 else None),
        mem=lambda age: None if age > 19.0 else 2_000.0 + 9_000.0 * (19.0 - min(age, 19.0)) / 19.0,
        hist_s=19,
        silent=12.0,
        last_step_ago=12.0,
        step_interval=0.07,
        line_gaps=(0.07,) * 20,
        cpu=0.0,
    )
    findings = diagnose(snap, NOW, Thresholds(stale_after=10.0))
    assert "loading" not in [f.kind for f in findings]
    f = findings[0]
    assert f.kind == "held_but_idle" and f.title.startswith("stalled"), f.title


def test_a_run_killed_by_the_oom_killer_is_named_so_not_run_ended() -> None:
    """tmux lost the dead pane's status (3.3a) and the output ends without an
    error: the CT cgroup's memory.events oom_kill rose while it ran."""
    snap = run(session="dead", dead_status=None, util=0.0, mem=0.0, silent=5.0)
    kinds = [f.kind for f in diagnose(snap, NOW)]
    assert "run_ended" in kinds  # without the counter: the honest "ended … (OOM?)"
    snap.oom = (2, 3, NOW - 4.0)
    findings = diagnose(snap, NOW)
    assert findings[0].kind == "oom_killed" and findings[0].severity == Severity.ERROR
    assert "killed by the OOM killer" in findings[0].title
    assert "run_ended" not in [f.kind for f in findings]
    snap.oom = (3, 3, None)  # counted before gputui watched: not this run's
    assert "oom_killed" not in [f.kind for f in diagnose(snap, NOW)]


def test_the_recorder_takes_the_dashboards_diagnosis_of_the_last_second() -> None:
    """The dashboard and its recorder each diagnosed the same snapshot once a
    second: the recorder now takes the dashboard's findings while they are
    under 1.5 s old (by the same clock) and of the same snapshot object,
    and diagnoses itself otherwise — never older findings than that."""
    from gputui.diagnose import SharedDiagnosis
    from gputui.model import Finding, Severity, Snapshot

    calls: list[float] = []

    def counting(snap: Snapshot, now: float) -> list[Finding]:
        calls.append(now)
        return [Finding(kind="log_stale", severity=Severity.WARNING, title=f"at {now}")]

    shared = SharedDiagnosis(counting)
    snap, other = Snapshot(time=0.0, target="a"), Snapshot(time=0.0, target="a")
    assert shared(snap, 100.0)[0].title == "at 100.0"  # the dashboard: always afresh
    assert shared.recent(snap, 100.6)[0].title == "at 100.0"  # the recorder: the dashboard's
    # the dashboard's next tick a little late (its GPU samples' on a busy
    # machine): the recorder still takes the banner's, not a diagnosis of its own
    assert shared.recent(snap, 101.3)[0].title == "at 100.0"
    assert calls == [100.0]
    assert shared.recent(snap, 101.5)[0].title == "at 101.5"  # 1.5 s old: afresh
    assert shared.recent(other, 101.7)[0].title == "at 101.7"  # another snapshot
    assert shared.recent(other, 100.0)[0].title == "at 100.0"  # a clock that went back
    assert calls == [100.0, 101.5, 101.7, 100.0]
    got = shared.recent(other, 100.5)
    got.clear()  # the caller's own list: the kept findings stay whole
    assert shared.recent(other, 100.5)[0].title == "at 100.0"


def test_the_tail_read_again_each_second_follows_each_new_line() -> None:
    """Issue 48: the recent lines' texts and the words found in them are kept
    from one diagnosis to the next while the tail is the same (a buffered
    run writes nothing new for seconds). A line appended in place to a full
    tail — its length and the log's count unchanged, as a test may do — is
    still read: the newest line is part of what keeps them."""
    lines = tuple(f"step {i} loss 1.0" for i in range(200))
    snap = run(log_tail=lines)
    assert snap.log_tail.maxlen == len(snap.log_tail) == 200
    assert "cuda_oom" not in {f.kind for f in diagnose(snap, NOW)}
    assert "cuda_oom" not in {f.kind for f in diagnose(snap, NOW + 1)}  # kept
    snap.log_tail.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert len(snap.log_tail) == 200
    assert "cuda_oom" in {f.kind for f in diagnose(snap, NOW + 2)}
    other = run(log_tail=lines)  # another run's tail (a host view's next monitor)
    assert "cuda_oom" not in {f.kind for f in diagnose(other, NOW + 3)}


def test_a_relaunch_that_hangs_before_its_first_step_is_hung_once_past_the_last_runs() -> None:
    """A relaunched run that hangs before its first step (NCCL init, a dead
    data node): GPU idle, memory held, no step for 2 min. With no earlier
    run to go by it may still be loading ("still starting up?", a WARNING
    for up to 15 min). When the last run of the same program made its first
    step 2 s after its start, 2 min without one is a hang: "probably hung"
    (ERROR) — the full suite saw it kept a WARNING when the relaunch's fresh
    log left no old step in the metrics, and an ERROR when one was left."""
    from gputui.diagnose import Thresholds
    from gputui.model import Versus, VsLast

    th = Thresholds(stale_after=10.0, hang_after_s=20.0)
    hang = {
        "util": 0.0,
        "hist_s": 120,
        "steps": False,
        "silent": 120.0,
        "mem": 30000.0,
        "started_ago": 120.0,
        "cpu": 0.0,
        "line_gaps": (0.5,) * 20,
    }
    alone = diagnose(run(**hang), NOW, th)[0]
    assert alone.kind == "held_but_idle" and alone.severity == Severity.WARNING, alone.title
    assert "still starting up?" in alone.title
    snap = run(**hang)
    snap.vs_last = VsLast(this_run=2, last_run=1, first_step=Versus("first step", None, 2.0))
    f = diagnose(snap, NOW, th)[0]
    assert f.kind == "held_but_idle" and f.severity == Severity.ERROR, f.title
    assert "starting up" not in f.title, f.title
    slow = run(**hang)  # the last run took 60 s to its first step: 2 min is not yet 3×
    slow.vs_last = VsLast(this_run=2, last_run=1, first_step=Versus("first step", None, 60.0))
    assert diagnose(slow, NOW, th)[0].severity == Severity.WARNING
