"""Fixed, hand-made Snapshots ("scenes") and a monitor that serves them.

Used by the UI tests, the snapshot tests and `scripts/screenshots.py` where
a live demo would not be the same twice. `SceneMonitor` has the Monitor API.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from gputui.containers import ProxmoxLXC
from gputui.diagnose.compare import RunPoint, compare
from gputui.model import (
    ConnectionState,
    CtStatus,
    Finding,
    GpuOwners,
    GpuProcess,
    GpuSample,
    GpuState,
    LogState,
    MetricPoint,
    Metrics,
    Pane,
    Proc,
    Program,
    Session,
    Severity,
    Snapshot,
    StdoutTarget,
    Tools,
)

T0 = 1_800_000_000.0  # a fixed "now" so ages and staleness never move
LOG = "/workspace/train.log"


def gpus(t0: float, *, busy: bool, n: int = 8, points: int = 600) -> GpuState:
    """Ten minutes at 1 Hz: the run ramps up over its first minute, and GPU 5
    stalls for half a minute four minutes ago (a data-loader hiccup)."""
    g = GpuState(source="nvidia-smi (host)")
    for k in range(points):
        t = t0 - points + k
        for i in range(n):
            ramp = min(1.0, k / 60)
            stall = i == 5 and points - 270 <= k < points - 240
            util = (97 + 2 * math.sin(k / 5 + i)) * ramp * (0.05 if stall else 1) if busy else 0.0
            mem = (4200 + 88000 * ramp + 300 * i) if busy else 1.0
            g.add(
                GpuSample(
                    index=i,
                    time=t,
                    name="NVIDIA H200",
                    uuid=f"GPU-{i:08d}",
                    mem_used_mib=mem,
                    mem_total_mib=143771.0,
                    util_pct=round(util),
                    temp_c=(62 + i) if busy else 31,
                    power_w=(655 + 4 * i) if busy else 118,
                    power_limit_w=700,
                    sm_clock_mhz=1980 if busy else 345,
                )
            )
    return g


def train_proc(*, buffered: bool) -> Proc:
    return Proc(
        pid=4242,
        ppid=4240,
        cmdline=(["python3", "train.py"] if buffered else ["python3", "-u", "train.py"]),
        cwd="/workspace",
        state="R",
        cpu_pct=99.0,
        rss_bytes=6_400_000_000,
        threads=24,
        is_python=True,
        stdout=StdoutTarget(
            kind="pipe",
            path="pipe:[88231]",
            readers=[(4243, "tee -a /workspace/train.log")],
            reader_files=[LOG],
        ),
        python_u_flag=not buffered,
        env_pythonunbuffered=not buffered,
    )


def session(
    name: str, *, alive: bool, created: float, command: str, status: int | None = None
) -> Session:
    return Session(
        name=name,
        created=created,
        panes=[
            Pane(
                session=name,
                window_index=0,
                pane_index=0,
                pid=4240,
                dead=not alive,
                dead_status=status,
                current_command="bash" if alive else "",
                start_command=command,
                current_path="/workspace",
            )
        ],
    )


def metrics(t0: float, steps: int) -> Metrics:
    m = Metrics(preset="step | loss | tok/s")
    m.throughput_unit = "tok/s"
    for k in range(steps):
        m.add(
            MetricPoint(
                time=t0 - steps + k,
                step=k + 1,
                loss=4.0 * math.exp(-k / 150) + 1.1,
                throughput=48000 + 1500 * math.sin(k / 3),
                throughput_unit="tok/s",
            )
        )
    return m


def base(t0: float = T0) -> Snapshot:
    return Snapshot(
        time=t0,
        target="root@10.1.2.6 ct 200",
        connection=ConnectionState.CONNECTED,
        rtt_ms=12.0,
        container=ProxmoxLXC(200),
        ct_status=CtStatus.RUNNING,
        tools=Tools(
            tmux="3.3a", python3="3.11.2", py_spy="0.4.0", nvidia_smi_host=True, probed=True
        ),
        started=t0 - 300,
    )


CMD = "bash /root/start_training.sh 2>&1 | tee /workspace/train.log"
HEALTHY_LINES = [
    f"step {k} | loss {4.0 * math.exp(-k / 150) + 1.1:.4f} | tok/s {48000 + 1500 * math.sin(k / 3):,.0f}"
    for k in range(560, 600)
]


def healthy(t0: float = T0) -> tuple[Snapshot, list[str], list[Finding]]:
    s = base(t0)
    s.gpus = gpus(t0, busy=True)
    s.sessions = [
        session(
            "dflash",
            alive=True,
            created=t0 - 3 * 3600 - 420,
            command=CMD.replace("start_training", "start_training"),
        ),
        session("notebook", alive=True, created=t0 - 2 * 86400, command="jupyter lab --no-browser"),
    ]
    s.sessions[0].panes[
        0
    ].start_command = "bash /root/start_training.sh 2>&1 | tee -a -i /workspace/train.log"
    s.session_name = "dflash"
    p = train_proc(buffered=False)
    s.procs = [p]
    s.log = LogState(
        path=LOG,
        exists=True,
        size=912_345,
        mtime=t0 - 1,
        offset=912_345,
        lines_total=18_204,
        last_line_time=t0 - 0.4,
    )
    s.metrics = metrics(t0, 600)
    return s, HEALTHY_LINES, []


def buffered(t0: float = T0) -> tuple[Snapshot, list[str], list[Finding]]:
    s = base(t0)
    s.gpus = gpus(t0, busy=True)
    s.sessions = [session("dflash", alive=True, created=t0 - 190, command=CMD)]
    s.session_name = "dflash"
    s.procs = [train_proc(buffered=True)]
    s.log = LogState(
        path=LOG,
        exists=True,
        size=61,
        mtime=t0 - 184,
        offset=61,
        lines_total=1,
        last_line_time=t0 - 184,
    )
    # what the log showed: a line cut at a 4 KiB boundary, its rest held back
    s.log.cut_at, s.log.cut_written, s.log.cut_offset = t0 - 184, t0 - 184, 8192
    finding = Finding(
        kind="busy_but_silent",
        severity=Severity.ERROR,
        title="GPUs are busy but the log has been silent for 3 m: stdout is block-buffered",
        evidence=[
            "8 GPUs at 97 % util, 90 GiB held; /workspace/train.log last grew 184 s ago",
            "pid 4242 python3 train.py: fd 1 is pipe:[88231] → tee; no -u, no PYTHONUNBUFFERED",
        ],
        action="relaunch",
        action_label="relaunch unbuffered",
    )
    return s, ["loading model from /models/llama-8b (this takes a while)"], [finding]


def dead(t0: float = T0) -> tuple[Snapshot, list[str], list[Finding]]:
    s = base(t0)
    s.gpus = gpus(t0, busy=False)
    s.sessions = [session("dflash", alive=False, created=t0 - 95, command=CMD, status=1)]
    s.session_name = "dflash"
    s.log = LogState(
        path=LOG,
        exists=True,
        size=2_114,
        mtime=t0 - 88,
        offset=2_114,
        lines_total=9,
        last_line_time=t0 - 88,
    )
    lines = [
        "Traceback (most recent call last):",
        '  File "/workspace/train.py", line 12, in <module>',
        "    import flash_attn",
        '  File "/usr/lib/python3/dist-packages/flash_attn/__init__.py", line 3, in <module>',
        "    from flash_attn.flash_attn_interface import flash_attn_func",
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    ]
    finding = Finding(
        kind="session_dead",
        severity=Severity.ERROR,
        title="Session dflash is dead (exit status 1) and the GPUs are idle",
        evidence=["last log line: ImportError: libcudart.so.12: cannot open shared object file"],
        action="launch",
        action_label="launch again",
    )
    return s, lines, [finding]


def shared(t0: float = T0) -> tuple[Snapshot, list[str], list[Finding]]:
    """The healthy run on 8 GPUs (root's), sharing GPU 0 with alice's eval run
    in another session of the same CT and GPU 7 with a run in CT 201 (eval-box)."""
    s, lines, findings = healthy(t0)
    ct200, ct201 = ProxmoxLXC(200).listing_key, ProxmoxLXC(201).listing_key
    s.container_names = {ct200: "train-box", ct201: "eval-box"}
    s.sessions.append(session("eval", alive=True, created=t0 - 1800, command="python3 eval.py"))
    s.sessions[-1].panes[0].pid = 5300
    s.gpus.processes = [
        GpuProcess(
            f"GPU-{i:08d}", 14242, 85_800 + 300 * i, "python3", ct_pid=4242, in_container=True
        )
        for i in range(8)
    ]
    s.gpus.processes += [
        GpuProcess("GPU-00000000", 15310, 5_222, "python3", ct_pid=5310, in_container=True),
        GpuProcess("GPU-00000007", 91822, 10_035, "python3", in_container=False, ct_id=201),
    ]
    s.gpus.processes[8].ancestors = [5300]
    s.procs[0].uid = 0
    # whose each holder in CT 200 is, as the agent there reads it (CT 201's is not its to read)
    s.gpu_owners = GpuOwners({4242: (0, "root"), 5310: (1001, "alice")}, me=0, at=t0)
    return s, lines, findings


LAST_ARGV = ("python3", "train.py", "--batch-size", "32")
THIS_ARGV = ("python3", "-u", "train.py", "--batch-size", "64", "--compile")


def last_run_points(t0: float, steps: int = 800, rate: float = 42_400.0) -> list[RunPoint]:
    """The run before the relaunch (a fixed, noisy, slower one)."""
    out, t = [], t0 - 7200.0
    for k in range(1, steps + 1):
        r = rate * (1 + 0.02 * math.sin(k * 1.7) + 0.015 * math.cos(k * 0.37))
        t += 2048 * 16 / r
        out.append(RunPoint(k, t, 4.0 * math.exp(-k / 150) + 1.12 + 0.01 * math.sin(k), r))
    return out


def vs_last(t0: float = T0) -> tuple[Snapshot, list[str], list[Finding]]:
    """The healthy run, relaunched with a larger batch: 400 steps in, against
    the last run of train.py at the same step (issue 49)."""
    s, lines, findings = healthy(t0)
    m = Metrics(preset="step | loss | tok/s")
    m.throughput_unit = "tok/s"
    for k in range(1, 401):
        r = 47_500 * (1 + 0.02 * math.sin(k * 1.3) + 0.01 * math.cos(k * 0.41))
        m.add(MetricPoint(t0 - (400 - k) * 0.69, k, 4.0 * math.exp(-k / 150) + 1.1, r, "tok/s"))
    s.metrics = m
    this = [
        RunPoint(int(st or 0), t, lo, th)
        for (t, st), (_, lo), (_, th) in zip(
            m.step.points(), m.loss.points(), m.throughput.points(), strict=True
        )
    ]
    s.vs_last = compare(
        last_run_points(t0),
        this,
        this_run=14,
        last_run=12,
        old=Program(LAST_ARGV, "/workspace", "train.py", t0 - 9000.0),
        new=Program(THIS_ARGV, "/workspace", "train.py", t0 - 600.0, ("PYTHONUNBUFFERED=1",)),
        first_step=(41.0, 38.0),
        unit="tok/s",
    )
    return s, lines, findings


SCENES: dict[str, Callable[[float], tuple[Snapshot, list[str], list[Finding]]]] = {
    "healthy": healthy,
    "buffered": buffered,
    "dead": dead,
    "shared": shared,
    "vs_last": vs_last,
}


PY_SPY_OUTPUT = """Process 4242: python3 train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 4242 (active): "MainThread"
    matmul (train.py:21)
    forward (train.py:34)
    train_step (train.py:52)
    main (train.py:77)
    <module> (train.py:90)
Thread 4260 (idle): "pin_memory"
    wait (threading.py:327)
    get (queue.py:180)
    _pin_memory_loop (torch/utils/data/_utils/pin_memory.py:49)
"""
