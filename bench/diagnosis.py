"""Diagnosis benchmark: is the banner on time, and never wrong at a glance?

    .venv/bin/python bench/diagnosis.py                 # the full corpus, ~4 min
    .venv/bin/python bench/diagnosis.py --only hung-unbuffered,healthy
    .venv/bin/python bench/diagnosis.py --scale 0.5     # every duration and window halved
    .venv/bin/python bench/diagnosis.py --write         # also the section in bench/RESULTS.md

Each scenario is a real run on its own test bed (tests/testbed.py: a real
OpenSSH sshd on 127.0.0.1, a stand-in `pct` with its own PID and mount
namespace, real tmux inside the CT, real python3 processes writing real logs
through `| tee`) with its own stand-in `nvidia-smi` state. `diag_run.py` is
the run: it prints steps, then hangs, crashes, pauses or finishes, and notes
every phase change in `phases.log`; a driver turns the phase into GPU
readings (memory held, utilization) for the run's HOST pids, as nvidia-smi on
a Proxmox host lists them. gputui watches each run with the real `Monitor`
over ssh, and `diagnose()` (with the scenario's --stale-after) is read twice a
second — the word the banner would show (the most severe finding).

Scored per scenario: label right or wrong (the right word shown after the
event, and no wrong word at the end), seconds from the event to the first
right word, and every wrong word (WARNING/ERROR) shown before it; any
"missing" before the container's tools were probed. Scenarios run a few at a
time (--parallel); with --scale every duration, the stale thresholds and the
[diagnosis] windows are multiplied by the factor (said in the results).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from gputui.diagnose import Thresholds, diagnose  # noqa: E402
from gputui.model import Finding, Severity  # noqa: E402
from gputui.monitor.engine import Monitor  # noqa: E402
from gputui.remote.target import Target  # noqa: E402
from results_md import write_block  # noqa: E402
from testbed import Testbed  # noqa: E402

RUN_SCRIPT = Path(__file__).resolve().parent / "diag_run.py"
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
H200_MIB = 143_771
SAMPLE_S = 0.5  # diagnose() is read this often
GPU_TICK_S = 0.5  # the stand-in GPU state is rewritten this often
CT = 200

# GPU readings per phase: (memory MiB, utilization %)
BUSY = (45_000.0, 98.0)
IDLE_HELD = (45_000.0, 0.0)
FREE = (0.0, 0.0)

RANKS_SH = """#!/bin/bash
# torchrun-like: four ranks; when the first one exits the others are stopped.
cd "$(dirname "$0")"
for r in 0 1 2 3; do python3 -u diag_run.py {mode} {step} {pre} {pause} "$r" & done
wait -n
rc=$?
kill $(jobs -p) 2>/dev/null
wait
exit "$rc"
"""


@dataclass
class Scenario:
    name: str
    label: str  # the expected label, in words
    mode: str  # diag_run.py MODE
    right: frozenset[str]  # finding kinds that name it
    event: str  # the phase that is the event ("start": the launch)
    duration: float  # seconds watched after the launch
    stale_after: float = 10.0
    unbuffered: bool = True
    step_s: float = 0.5
    pre_s: float = 20.0
    pause_s: float = 0.0
    quiet: bool = False  # no WARNING/ERROR may ever show (pauses, healthy, finished)
    allowed_before: frozenset[str] = frozenset()  # right words before the event
    # true words after the event until the right one comes (never before it)
    allowed_after: frozenset[str] = frozenset()
    remain_on_exit: bool = False
    drift: bool = False  # the start script writes another log than the one watched
    touch_at: float | None = None  # stale code: the script is modified at this time
    ranks: int = 1
    gpu: Callable[[str, float, int], tuple[float, float]] = lambda ph, t, r: BUSY
    hang_or_silent: bool = False  # target: first right word <= stale threshold + 5 s
    final: frozenset[str] | None = None  # the words right at the end ("": none); None: `right`
    # a second run on the same GPU: "" none · "session" (another tmux session
    # in the CT) · "ct" (a tmux session in CT 201) · "host" (a host process)
    other: str = ""
    other_mode: str = "train"  # diag_run.py MODE of the other run ("hang": it hangs)
    cgroup_mib: int = 0  # > 0: the run's pane lives in a memory cgroup this small (OOM)


def _loading_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    if phase == "loading":
        return (1_500.0 + 44_000.0 * min(1.0, t / 60.0), 2.0)
    return BUSY if phase == "train" else FREE


def _pause_gpu(util: float) -> Callable[[str, float, int], tuple[float, float]]:
    def f(phase: str, t: float, r: int) -> tuple[float, float]:
        if phase in ("checkpoint", "eval"):
            return (45_000.0, util)
        return BUSY if phase in ("train", "start") else FREE

    return f


def _hang_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    return IDLE_HELD if phase == "hang" else BUSY if phase in ("train", "start") else FREE


def _exit_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    return FREE if phase in ("crashed", "exited", "cudaoom") else BUSY


def _small_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    """NCCL-style init: a CUDA context and a few buffers, no kernel ever."""
    return (620.0, 0.0)


def _loader_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    return IDLE_HELD if phase == "loader" else BUSY if phase in ("train", "start") else FREE


def _prompt_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    """A run at a prompt holds its memory, its GPU idle: a hang's readings."""
    return IDLE_HELD if phase == "prompt" else BUSY if phase in ("train", "start") else FREE


def _oom_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    return BUSY if phase in ("train", "start") else FREE


OTHER = (10_000.0, 98.0)  # the other run on the same GPU: busy
OTHER_HUNG = (10_000.0, 0.0)


def _low_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    """A data-loader-bound run: memory held, the GPU mostly waiting."""
    return (45_000.0, 30.0) if phase in ("train", "start") else FREE


def _rank_gpu(phase: str, t: float, r: int) -> tuple[float, float]:
    if phase == "hang":  # rank 2 is stuck on the CPU; the others spin in NCCL
        return IDLE_HELD if r == 2 else (45_000.0, 100.0)
    return FREE if phase == "timeout" else BUSY


CORPUS: list[Scenario] = [
    # issue 31: the run's own failures, and a run that flushes its own lines
    Scenario(
        "flushed-tee",
        "no -u behind tee, but print(flush=True): healthy, no buffering word",
        "flushed",
        frozenset(),
        "start",
        40,
        unbuffered=False,
        quiet=True,
    ),
    Scenario(
        "cuda-oom",
        "CUDA out of memory (torch's traceback), exit 1",
        "cudaoom",
        frozenset({"cuda_oom"}),
        "cudaoom",
        30,
        pre_s=10,
        remain_on_exit=True,
        gpu=_exit_gpu,
    ),
    # round 9: a run that waits for an answer is not a hang
    *[
        Scenario(
            name,
            f"{what}: GPU memory held, idle, the log silent",
            mode,
            frozenset({"waiting_for_input"}),
            "prompt",
            40,
            pre_s=5,
            gpu=_prompt_gpu,
            hang_or_silent=True,
        )
        for name, mode, what in (
            ("wandb-prompt", "prompt", "wandb's \"Enter your choice:\" on the run's terminal"),
            ("pdb-breakpoint", "breakpoint", "a breakpoint() left in the code: a pdb prompt"),
        )
    ],
    Scenario(
        "nan-loss",
        "the loss turns NaN; the run goes on",
        "nan",
        frozenset({"loss_nan"}),
        "nan",
        30,
        pre_s=10,
    ),
    Scenario(
        "loader-bound",
        "data-loader bound: GPU at 30 %, a loader worker at 100 % CPU",
        "loaderbound",
        frozenset({"loader_bound"}),
        "start",
        45,
        gpu=_low_gpu,
    ),
    Scenario(
        "straggler",
        "4 ranks, rank 2's own step time 1.9× the others' after 20 s",
        "straggler",
        frozenset({"straggler"}),
        "straggle",
        40,
        pre_s=20,
        ranks=4,
    ),
    Scenario(
        "buffered-slow",
        "block-buffered, slow printer: log silent",
        "train",
        frozenset({"busy_but_silent", "buffered_output"}),
        "start",
        40,
        unbuffered=False,
        hang_or_silent=True,
    ),
    Scenario(
        "buffered-fast",
        "block-buffered, fast printer: lines in late bursts",
        "train",
        frozenset({"buffered_output"}),
        "start",
        40,
        unbuffered=False,
        step_s=0.02,
    ),
    Scenario(
        "hung-unbuffered",
        "hung (unbuffered)",
        "hang",
        frozenset({"held_but_idle"}),
        "hang",
        90,
        gpu=_hang_gpu,
        hang_or_silent=True,
        # the step falls overdue while the GPU's first idle readings are still
        # arriving (a slow GPU feed on a loaded machine): "stalled: no step for
        # 5 s" for a moment, then held_but_idle adds the idle GPUs (loaded CI)
        allowed_after=frozenset({"progress_stalled"}),
    ),
    Scenario(
        "hung-buffered",
        "hung (block-buffered)",
        "hang",
        frozenset({"held_but_idle"}),
        "hang",
        90,
        unbuffered=False,
        gpu=_hang_gpu,
        allowed_before=frozenset({"busy_but_silent", "buffered_output"}),
        hang_or_silent=True,
    ),
    Scenario(
        "loading",
        "loading: memory rising for 60 s, then training",
        "loading",
        frozenset({"loading"}),
        "start",
        80,
        pause_s=60,
        quiet=True,
        gpu=_loading_gpu,
        final=frozenset({"", "loading"}),  # training by the end: nothing to say
    ),
    Scenario(
        "checkpoint",
        "checkpoint pause: GPUs idle 40 s, file growing, then steps",
        "checkpoint",
        frozenset(),
        "checkpoint",
        75,
        stale_after=60,
        pause_s=40,
        quiet=True,
        gpu=_pause_gpu(0.0),
    ),
    Scenario(
        "eval",
        "evaluation pause: no step for 40 s, GPUs busy",
        "eval",
        frozenset(),
        "eval",
        75,
        stale_after=60,
        pause_s=40,
        quiet=True,
        gpu=_pause_gpu(90.0),
    ),
    Scenario(
        "crash-cuda",
        "crash mid-run with a CUDA error",
        "crash",
        frozenset({"session_dead"}),
        "crashed",
        35,
        remain_on_exit=True,
        gpu=_exit_gpu,
    ),
    Scenario(
        "import-error",
        "ImportError at start",
        "import",
        frozenset({"session_dead"}),
        "start",
        15,
        remain_on_exit=True,
        gpu=lambda ph, t, r: FREE,
    ),
    Scenario(
        "log-drift",
        "log drift: the start script writes another file",
        "train",
        frozenset({"log_drift"}),
        "start",
        25,
        drift=True,
    ),
    Scenario("healthy", "healthy", "train", frozenset(), "start", 40, quiet=True),
    Scenario(  # run_ended: tmux (3.3a) lost the exit status, and says so
        "finished",
        "finished (exit 0)",
        "finish",
        frozenset({"run_finished", "run_ended"}),
        "exited",
        30,
        pre_s=15,
        remain_on_exit=True,
        gpu=_exit_gpu,
    ),
    Scenario(
        "stale-code",
        "stale code: train script changed after start",
        "train",
        frozenset({"stale_code"}),
        "touched",
        35,
        touch_at=12.0,
    ),
    Scenario(
        "hang-5s",
        "hang 5 s after start",
        "hang",
        frozenset({"held_but_idle"}),
        "hang",
        45,
        pre_s=5,
        gpu=_hang_gpu,
        hang_or_silent=True,
    ),
    Scenario(  # issue 31: named in 7 of 8 runs, never in the eighth (a busy machine)
        "hang-3s",
        "hang 3 s after the first step (step 6)",
        "hang",
        frozenset({"held_but_idle"}),
        "hang",
        45,
        pre_s=3,
        gpu=_hang_gpu,
        hang_or_silent=True,
    ),
    Scenario(
        "hang-60s",
        "hang 60 s after start",
        "hang",
        frozenset({"held_but_idle"}),
        "hang",
        100,
        pre_s=60,
        gpu=_hang_gpu,
        hang_or_silent=True,
    ),
    Scenario(
        "hang-long",
        "hang 150 s after start",
        "hang",
        frozenset({"held_but_idle"}),
        "hang",
        190,
        pre_s=150,
        gpu=_hang_gpu,
        hang_or_silent=True,
    ),
    *[
        Scenario(
            f"shared-{where}-watched-hangs",
            f"two runs on one GPU ({label}): the watched one hangs, the other keeps it at 98 %",
            "hang",
            frozenset({"held_but_idle"}),
            "hang",
            90,
            gpu=_hang_gpu,
            hang_or_silent=True,
            other=where,
        )
        for where, label in (
            ("session", "another session, same CT"),
            ("ct", "another CT"),
            ("host", "a host process"),
        )
    ],
    *[
        Scenario(
            f"shared-{where}-other-hangs",
            f"two runs on one GPU ({label}): the other one hangs, the watched one trains",
            "train",
            frozenset(),
            "start",
            60,
            quiet=True,
            other=where,
            other_mode="hang",
        )
        for where, label in (
            ("session", "another session, same CT"),
            ("ct", "another CT"),
            ("host", "a host process"),
        )
    ],
    Scenario(
        "loader-stall",
        "data-loader stall: CPU busy 40 s, GPU idle, then steps",
        "loader",
        frozenset({"held_but_idle", "progress_stalled"}),
        "loader",
        75,
        pause_s=40,
        gpu=_loader_gpu,
        final=frozenset({""}),
    ),
    Scenario(
        "nccl-init-hang",
        "hang in NCCL-style init: 620 MiB, no step ever",
        "nccl",
        frozenset({"held_but_idle", "progress_stalled"}),
        "init",
        45,
        gpu=_small_gpu,
        hang_or_silent=True,
    ),
    Scenario(
        "oom-kill",
        "killed by the OOM killer (a 128 MiB memory cgroup)",
        "oom",
        frozenset({"oom_killed"}),
        "oom",
        35,
        pre_s=10,
        gpu=_oom_gpu,
        remain_on_exit=True,
        cgroup_mib=128,
    ),
    Scenario(
        "rank-hang",
        "4 ranks, one hangs (NCCL-timeout style)",
        "rank",
        frozenset({"held_but_idle", "session_dead", "nccl_timeout"}),
        "hang",
        80,
        pre_s=20,
        pause_s=45,
        ranks=4,
        gpu=_rank_gpu,
        hang_or_silent=True,
    ),
]


# ------------------------------------------------------------------ one run


@dataclass
class Word:
    t: float  # seconds since the launch
    kind: str
    severity: str
    title: str


@dataclass
class Outcome:
    name: str
    label: str
    stale_after: float
    event_at: float | None = None  # seconds after launch
    first_right_at: float | None = None
    wrong_before: list[Word] = field(default_factory=list)
    wrong_after: list[Word] = field(default_factory=list)
    missing_before_probe: list[Word] = field(default_factory=list)
    final: Word | None = None
    right_title: str = ""
    label_right: bool = False
    error: str = ""
    ready_at: float | None = None  # seconds after launch when gputui had its first snapshot
    timeline: list[Word] = field(default_factory=list)  # each change of the word
    probed_after: float | None = None  # seconds after launch the CT's tools were known

    @property
    def latency(self) -> float | None:
        if self.first_right_at is None or self.event_at is None:
            return None
        return max(0.0, self.first_right_at - self.event_at)


class Run:
    """One scenario on its own test bed."""

    def __init__(self, sc: Scenario, scale: float) -> None:
        self.sc = sc
        self.scale = scale
        self.bed = Testbed()
        self.dir = Path()
        self.log = Path()
        self.t0 = 0.0  # time.time() at the launch
        self.pids: dict[int, int] = {}  # rank -> host pid
        self.touched_at: float | None = None
        self.other_dir: Path | None = None  # the second run's directory (sc.other)
        self.other_pid: int | None = None
        self.other_proc: subprocess.Popen[bytes] | None = None  # a host process (other="host")
        self.cgroup: Path | None = None  # the memory cgroup of an OOM scenario

    # -- set-up ---------------------------------------------------------
    def start(self) -> None:
        bed = self.bed.start()
        bed.set_pct_delay(0.3)
        bed.ct_create(CT, running=True)
        d = Path(bed.workspace) / f"diag-{self.sc.name}"
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o777)
        shutil.copyfile(RUN_SCRIPT, d / "diag_run.py")
        self.dir, self.log = d, d / "train.log"
        s = self.sc
        k = self.scale
        args = [s.mode, f"{s.step_s:g}", f"{s.pre_s * k:g}", f"{s.pause_s * k:g}"]
        py = "python3 -u" if s.unbuffered else "python3"
        cmd = f"{py} diag_run.py {shlex.join(args)}"
        if s.ranks > 1:
            (d / "ranks.sh").write_text(
                RANKS_SH.format(mode=s.mode, step=s.step_s, pre=s.pre_s * k, pause=s.pause_s * k)
            )
            cmd = "bash ranks.sh"
        if s.drift:  # the user watches train.log (an old one); the script writes train-old.log
            self.log.write_text("step 1 | loss 9.0 | 100 tok/s\n")
            os.utime(self.log, (time.time() - 3600, time.time() - 3600))
            line = f"cd {shlex.quote(str(d))} && exec {cmd} > train-old.log 2>&1"
        else:
            line = f"cd {shlex.quote(str(d))} && {cmd} 2>&1 | tee {shlex.quote(str(self.log))}"
        if s.cgroup_mib:
            self.cgroup = memory_cgroup(f"gputui-bench-{s.name}", s.cgroup_mib)
            procs = shlex.quote(str(self.cgroup / "cgroup.procs"))
            line = f"echo $$ > {procs} || exit 97; {line}"
        tmux = ["new", "-d", "-s", "train", "-c", str(d), line]
        if s.remain_on_exit:
            tmux += [";", "set", "-p", "-t", "train", "remain-on-exit", "on"]
        self.t0 = time.time()
        env = ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "TERM=xterm", "tmux"]
        r = bed.ct_exec(CT, [*env, *tmux])
        if r.returncode != 0:
            raise RuntimeError(f"{s.name}: tmux: {r.stderr.strip()}")
        if s.other:
            self._start_other(env)

    def _start_other(self, env: list[str]) -> None:
        """The second run on the same GPU: in another tmux session of the
        CT, in a tmux session of CT 201, or a plain host process."""
        s, bed = self.sc, self.bed
        d2 = Path(bed.workspace) / f"diag-{s.name}-other"
        d2.mkdir(parents=True, exist_ok=True)
        d2.chmod(0o777)
        shutil.copyfile(RUN_SCRIPT, d2 / "diag_run.py")
        self.other_dir = d2
        cmd = f"python3 -u diag_run.py {s.other_mode} 0.5 {20 * self.scale:g} 0"
        line = f"cd {shlex.quote(str(d2))} && {cmd} 2>&1 | tee train.log"
        if s.other == "host":
            self.other_proc = subprocess.Popen(
                ["sh", "-c", line],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            return
        ct = CT
        if s.other == "ct":
            ct = CT + 1
            bed.ct_create(ct, running=True)
        r = bed.ct_exec(ct, [*env, "new", "-d", "-s", "eval", "-c", str(d2), line])
        if r.returncode != 0:
            raise RuntimeError(f"{s.name}: tmux (other run): {r.stderr.strip()}")

    def stop(self) -> None:
        if self.other_proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.other_proc.pid, signal.SIGKILL)
            self.other_proc.wait()
        self.bed.stop()
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()

    # -- the stand-in GPUs follow the run's phase -------------------------
    def phases(self) -> list[tuple[float, str]]:
        try:
            text = (self.dir / "phases.log").read_text()
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            t, _, name = line.partition(" ")
            try:
                out.append((float(t), name))
            except ValueError:
                continue
        return out

    def _find_pids(self) -> None:
        script = str(self.dir / "diag_run.py")
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            words = [a.decode(errors="replace") for a in argv if a]
            if "diag_run.py" not in words and script not in words:
                continue
            if cwd != str(self.dir):
                continue
            rank = int(words[-1]) if self.sc.ranks > 1 and words[-1].isdigit() else 0
            self.pids.setdefault(rank, int(entry))

    def gpu_state(self, now: float) -> dict[str, Any]:
        if len(self.pids) < self.sc.ranks:
            self._find_pids()
        ph = self.phases()
        rank_phase = [p for _, p in ph if p in ("hang", "timeout")] if self.sc.ranks > 1 else []
        gpus, apps = [], []
        for r in range(self.sc.ranks):
            if self.sc.ranks > 1:
                phase = rank_phase[-1] if rank_phase else "train"
                since = [t for t, p in ph if p == phase]
                t_in = now - since[-1] if since else 0.0
            elif ph:
                t_in, phase = now - ph[-1][0], ph[-1][1]
            else:
                phase, t_in = "start", 0.0
            mem, util = self.sc.gpu(phase, t_in / self.scale, r)
            if self.sc.mode == "import":
                mem, util = FREE
            uuid = f"GPU-d1a90000-0000-4000-8000-00000000000{r}"
            own = util  # the run's own SM % (pmon); the GPU's is the larger with another run
            if r == 0 and self.sc.other:
                other_app = self._other_app(uuid)
                if other_app is not None:
                    apps.append(other_app)
                    mem += other_app["used_memory"] + 200
                    util = max(util, other_app["sm"] or 0.0)
            gpus.append(
                {
                    "index": r,
                    "uuid": uuid,
                    "name": "NVIDIA H200",
                    "memory.used": mem,
                    "memory.total": H200_MIB,
                    "utilization.gpu": util,
                    "power.draw": 684.0 if util >= 50 else 118.0,
                    "clocks.sm": 1980 if util >= 50 else 345,
                }
            )
            pid = self.pids.get(r)
            if pid is not None and mem > 0 and Path(f"/proc/{pid}").exists():
                apps.append(
                    {
                        "pid": pid,
                        "process_name": "python3",
                        "used_memory": max(0.0, mem - 200) if not self.sc.other else 44_800.0,
                        "gpu_uuid": uuid,
                        "sm": own if own > 0 else None,  # pmon's "-": no sample, idle
                    }
                )
        return {"gpus": gpus, "apps": apps}

    def _other_app(self, uuid: str) -> dict[str, Any] | None:
        """The other run's row (pmon and compute-apps), from its own phases."""
        d2 = self.other_dir
        if d2 is None:
            return None
        if self.other_pid is None or not Path(f"/proc/{self.other_pid}").exists():
            self.other_pid = _pid_in(d2)
        if self.other_pid is None:
            return None
        try:
            phases = (d2 / "phases.log").read_text().split()
        except OSError:
            phases = []
        mem, util = OTHER_HUNG if phases and phases[-1] == "hang" else OTHER
        return {
            "pid": self.other_pid,
            "process_name": "python3",
            "used_memory": mem,
            "gpu_uuid": uuid,
            "sm": util if util > 0 else None,
        }

    def event_time(self) -> float | None:
        """Seconds after the launch when the scenario's event happened."""
        if self.sc.event == "start":
            return 0.0
        if self.sc.event == "touched":
            return None if self.touched_at is None else self.touched_at - self.t0
        for t, p in self.phases():
            if p == self.sc.event:
                return t - self.t0
        return None


def _pid_in(d: Path) -> int | None:
    """Host PID of the diag_run.py process whose working directory is `d`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd == str(d) and any(a.endswith(b"diag_run.py") for a in argv):
            return int(entry)
    return None


def memory_cgroup(name: str, mib: int) -> Path:
    """A cgroup (v1 memory controller, else v2) limited to `mib` MiB, so the
    kernel's OOM killer ends what grows past it. RuntimeError when this
    machine gives none (say so in the results rather than fake it)."""
    for base, limit in (
        (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"),
        (Path("/sys/fs/cgroup"), "memory.max"),
    ):
        if not (base / limit).exists() and not (base / "cgroup.procs").exists():
            continue
        cg = base / name
        try:
            cg.mkdir(exist_ok=True)
            (cg / limit).write_text(str(mib * 1024 * 1024))
        except OSError:
            continue
        return cg
    raise RuntimeError("no memory cgroup can be made here: the OOM scenario cannot run")


async def watch(run: Run, th: Thresholds, started: Callable[[], None] = lambda: None) -> Outcome:
    """Follow one run with the real Monitor; score what diagnose() says."""
    sc = run.sc
    k = run.scale
    stale = sc.stale_after * k
    out = Outcome(sc.name, sc.label, stale)
    tr = run.bed.transport()
    await tr.connect()
    settings = SimpleNamespace(
        interval=1.0,
        session="train",
        log=str(run.log),
        gpu_source="host",
        metric_regexes=[],
        local=False,
        run=None,
    )
    mon = Monitor(Target(tr, CT), settings)
    words: list[tuple[Word, bool]] = []  # (banner word, tools probed)
    end = run.t0 + sc.duration * k

    async def sample() -> None:
        """diagnose() twice a second, from the monitor's start-up on (what the
        dashboard would show while the agent is still starting)."""
        while time.time() < end:
            now = time.time()
            touch = sc.touch_at
            if touch is not None and run.touched_at is None and now - run.t0 >= touch * k:
                script = run.dir / "diag_run.py"
                script.write_text(script.read_text() + "\n# fixed\n")
                run.touched_at = time.time()
            snap = mon.snapshot
            findings = diagnose(snap, now, replace(th, stale_after=stale))
            w = _word(findings, sc, now - run.t0)
            words.append((w, snap.tools.probed))
            missing = [f for f in findings if f.kind == "tools_missing"]
            if missing and not snap.tools.probed:
                out.missing_before_probe.append(
                    Word(now - run.t0, "tools_missing", missing[0].severity.value, missing[0].title)
                )
            await asyncio.sleep(SAMPLE_S)

    gpu_task = asyncio.create_task(drive_gpus(run))
    sampler = asyncio.create_task(sample())
    try:
        await mon.start()
        out.ready_at = time.time() - run.t0
        started()  # the next run may start up now
        await sampler
    except Exception as e:  # a broken run is reported, not a crash of the bench
        out.error = f"{type(e).__name__}: {e}"
    finally:
        sampler.cancel()
        gpu_task.cancel()
        await mon.stop()
        await tr.close()
    out.timeline = _changes([w for w, _ in words])
    out.probed_after = next((w.t for w, probed in words if probed), None)
    event = run.event_time()
    if sc.event == "start" and out.ready_at is not None:
        # the run's start is its event: count from when gputui could know
        # (its own start-up is bench/run.py's "first complete screen")
        event = out.ready_at
    score(out, words, event, sc)
    return out


def _word(findings: list[Finding], sc: Scenario, t: float) -> Word:
    """What the banner says (the most severe WARNING/ERROR); else the note the
    scenario expects (loading, finished) when it is listed; else nothing."""
    for f in findings:
        if f.severity != Severity.INFO:
            return Word(t, f.kind, f.severity.value, f.title)
    for f in findings:
        if f.kind in sc.right:
            return Word(t, f.kind, f.severity.value, f.title)
    return Word(t, "", "", "")  # nothing wrong


def score(out: Outcome, words: list[tuple[Word, bool]], event: float | None, sc: Scenario) -> None:
    """Right word: a kind in `sc.right`, shown at or after the event. Wrong
    word: any WARNING/ERROR that is neither right nor in `allowed_before` (the
    true word for the run before its event, e.g. "buffered" before a buffered
    run hangs) nor, between the event and the first right word, in
    `allowed_after`. Label right: named after the event (or, with nothing to name,
    no wrong word), no wrong word at all, and the last word right."""
    out.event_at = event
    for w, _probed in words:
        after = event is not None and w.t >= event
        if w.kind in sc.right and after and out.first_right_at is None:
            out.first_right_at = w.t
            out.right_title = w.title
        serious = w.severity in ("warning", "error")
        ok = (
            w.kind in sc.right
            or w.kind in sc.allowed_before
            or (after and out.first_right_at is None and w.kind in sc.allowed_after)
        )
        if serious and (sc.quiet or not ok):
            target = out.wrong_before if out.first_right_at is None else out.wrong_after
            if not target or (target[-1].kind, target[-1].severity) != (w.kind, w.severity):
                target.append(w)
    out.final = words[-1][0] if words else None
    if sc.right:
        named = out.first_right_at is not None
        final_ok = out.final is not None and out.final.kind in (sc.final or sc.right)
    else:  # healthy and the pauses: the right word is no word
        named = final_ok = True
    out.label_right = (
        named
        and final_ok
        and not out.wrong_before
        and not out.wrong_after
        and not out.missing_before_probe
        and not out.error
    )


def _changes(words: list[Word]) -> list[Word]:
    out: list[Word] = []
    for w in words:
        if not out or (out[-1].kind, out[-1].severity) != (w.kind, w.severity):
            out.append(w)
    return out


async def drive_gpus(run: Run) -> None:
    while True:
        with contextlib.suppress(OSError):
            run.bed.set_gpus(run.gpu_state(time.time()))
        await asyncio.sleep(GPU_TICK_S)


# ------------------------------------------------------------------ the corpus


async def run_corpus(
    corpus: list[Scenario], *, scale: float = 1.0, parallel: int = 5
) -> list[Outcome]:
    th = scaled_thresholds(scale)
    sem = asyncio.Semaphore(parallel)
    gate = asyncio.Lock()  # one start-up at a time: 5 at once measure the machine
    loop = asyncio.get_running_loop()

    async def one(sc: Scenario) -> Outcome:
        async with sem:
            run = Run(sc, scale)
            await gate.acquire()
            held = [True]

            def release() -> None:  # once: after gputui's start-up, or on failure
                if held[0]:
                    held[0] = False
                    gate.release()

            try:
                await loop.run_in_executor(None, run.start)
                o = await watch(run, th, release)
            except Exception as e:
                o = Outcome(sc.name, sc.label, sc.stale_after * scale, error=f"{e}")
            finally:
                release()
                await loop.run_in_executor(None, run.stop)
            print(_line(o), flush=True)
            return o

    return list(await asyncio.gather(*(one(sc) for sc in corpus)))


def scaled_thresholds(scale: float) -> Thresholds:
    th = Thresholds()
    if scale == 1.0:
        return th
    return replace(
        th,
        gpu_idle_after_s=th.gpu_idle_after_s * scale,
        hang_after_s=th.hang_after_s * scale,
        loading_window_s=th.loading_window_s * scale,
        stalled_floor_s=th.stalled_floor_s * scale,
    )


def _line(o: Outcome) -> str:
    lat = "–" if o.latency is None else f"{o.latency:.1f} s"
    wrong = "; ".join(f"{w.severity} {w.kind} at {w.t:.0f} s" for w in o.wrong_before) or "none"
    return (
        f"{o.name:16} {'RIGHT' if o.label_right else 'WRONG':5}  first right word {lat:>7}  "
        f"wrong before: {wrong}" + (f"  error: {o.error}" if o.error else "")
    )


# ------------------------------------------------------------------ report


def targets(outs: list[Outcome], corpus: list[Scenario]) -> dict[str, Any]:
    by = {s.name: s for s in corpus}
    late = [
        o.name
        for o in outs
        if by[o.name].hang_or_silent and (o.latency is None or o.latency > o.stale_after + 5.0)
    ]
    pauses = [o.name for o in outs if o.name in ("loading", "checkpoint", "eval")]
    noisy = [o.name for o in outs if o.name in pauses and (o.wrong_before or o.wrong_after)]
    return {
        "labels_right": all(o.label_right for o in outs),
        "named_in_time": not late,
        "late": late,
        "quiet_pauses": not noisy,
        "noisy": noisy,
        "no_missing_before_probe": not any(o.missing_before_probe for o in outs),
    }


def markdown(outs: list[Outcome], corpus: list[Scenario], scale: float, wall: float) -> str:
    t = targets(outs, corpus)
    by = {s.name: s for s in corpus}
    lat = [o.latency for o in outs if o.latency is not None]
    rows = []
    for o in outs:
        wb = "; ".join(f"{w.severity} `{w.kind}` at {w.t:.0f} s" for w in o.wrong_before) or "—"
        wa = "; ".join(f"{w.severity} `{w.kind}` at {w.t:.0f} s" for w in o.wrong_after) or "—"
        lat_s = "—" if o.latency is None else f"{o.latency:.1f}"
        ev = "—" if o.event_at is None else f"{o.event_at:.1f}"
        shown = (
            o.final
            if o.final is not None
            and (o.final.kind in by[o.name].right or o.final.severity in ("warning", "error"))
            else None
        )
        title = (o.right_title or (shown.title if shown else "(nothing wrong)")).replace("|", "\\|")
        ready = "—" if o.ready_at is None else f"{o.ready_at:.1f}"
        rows.append(
            f"| {o.name} | {o.label} | {o.stale_after:g} | {ready} | "
            f"{'✓' if o.label_right else '✗'} | {ev} | {lat_s} | {wb} | {wa} | {title[:90]} |"
        )
    ok = "met" if all(v is True for k, v in t.items() if isinstance(v, bool)) else "NOT met"
    lines = [
        "<!-- diagnosis:start (bench/diagnosis.py --write keeps this section) -->",
        "## Diagnosis on time (bench/diagnosis.py)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {platform.node()} · "
        f"{os.cpu_count()} cores · load avg {os.getloadavg()[0]:.1f} at the end · "
        f"{len(outs)} scripted runs, wall {wall:.0f} s"
        + (f" · **time scale {scale:g}** (durations and windows × {scale:g})" if scale != 1 else "")
        + ".",
        "",
        "Each run on its own test bed (real sshd, stand-in pct with its own PID/mount "
        "namespace, real tmux, real python3 writing through `| tee`, stand-in nvidia-smi "
        "readings that follow the run's phases), watched by the real Monitor over ssh; "
        "`diagnose()` read every 0.5 s. *event*: seconds after the launch; *first right*: "
        "seconds from the event to the first right word; wrong words are WARNING/ERROR "
        "banners that were not the expected label. *gputui ready*: seconds from the launch "
        "to the monitor's first complete snapshot (start-ups run one at a time); for runs "
        "whose event is their start, the clock starts then.",
        "",
        f"Targets {ok}: every label right: **{t['labels_right']}** · hang or silent "
        f"log named within stale + 5 s: **{t['named_in_time']}**"
        f"{' (late: ' + ', '.join(t['late']) + ')' if t['late'] else ''} · no warning during "
        f"loading/checkpoint/eval pauses: **{t['quiet_pauses']}**"
        f"{' (noisy: ' + ', '.join(t['noisy']) + ')' if t['noisy'] else ''}"
        f" · no 'missing' before a probe answered: **{t['no_missing_before_probe']}**.",
        "",
        f"First right word: median {statistics.median(lat):.1f} s, max {max(lat):.1f} s "
        f"over {len(lat)} runs with an event to name."
        if lat
        else "",
        "",
        "| run | expected | stale s | gputui ready s | label | event s | first right s | "
        "wrong before | wrong after | the word |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "<!-- diagnosis:end -->",
    ]
    return "\n".join(lines) + "\n"


def write_results(text: str) -> None:
    write_block(text, "<!-- diagnosis:start", "<!-- diagnosis:end -->")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every duration and window")
    ap.add_argument("--parallel", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="write the section in bench/RESULTS.md")
    ap.add_argument("--json", help="also write the raw outcomes here")
    ap.add_argument("--repeat", type=int, default=1, help="run each scenario this many times")
    ap.add_argument("--busy", type=int, default=0, help="busy loops on this many cores meanwhile")
    a = ap.parse_args(argv)
    corpus = CORPUS
    if a.only:
        names = set(a.only.split(","))
        corpus = [s for s in CORPUS if s.name in names]
    corpus = [
        replace(s, name=f"{s.name}#{i + 1}") if a.repeat > 1 else s
        for s in corpus
        for i in range(a.repeat)
    ]
    t0 = time.monotonic()
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    try:
        outs = asyncio.run(run_corpus(corpus, scale=a.scale, parallel=a.parallel))
    finally:
        for p in loops:
            p.kill()
            p.wait()
    wall = time.monotonic() - t0
    text = markdown(outs, corpus, a.scale, wall)
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps([o.__dict__ for o in outs], default=str, indent=1))
    if a.write:
        write_results(text)
    t = targets(outs, corpus)
    return 0 if all(v is True for v in t.values() if isinstance(v, bool)) else 1


if __name__ == "__main__":
    sys.exit(main())
