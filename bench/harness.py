"""Bench harness: the real-sshd test bed set up like a real Proxmox host.

- `BenchBed`: starts `tests/testbed.py`'s Testbed (real OpenSSH sshd on
  127.0.0.1 + stand-in `pct` and `nvidia-smi`), sets the pct start-up delay
  to a real host's (0.4 s), and puts two thin wrappers in the test bed's own
  bin dir (copies; the stand-ins themselves are untouched):
  `pct` appends one line per call to `pct-calls.log` (so calls can be
  counted), `nvidia-smi` timestamps every streamed row in `smi-rows.log`
  (so a GPU row can be followed to the screen).
- A CT with a tmux session `bench` running `bench/writer.py` with its stdout
  redirected to the log (so gputui finds the log from the process's fd 1,
  as it would on a real host), driven through a JSON control file.
- `remote_cpu_s`: CPU seconds of the sshd process tree (what runs on the
  "remote" side: sshd, shells, pct, nsenter, the agent, tail, nvidia-smi).
- `baseline_loop`: the workflow gputui replaces, one
  `ssh host pct exec CT -- tail -n 20 LOG` per check, then `sleep`.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from testbed import Testbed  # noqa: E402

PCT_DELAY_S = 0.4  # a real `pct` (Perl) costs a few hundred ms per call
N_GPUS = 8
CLK_TCK = os.sysconf("SC_CLK_TCK")
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"

PCT_WRAPPER = """#!/bin/sh
echo "$1 $2" >> {log}
exec "$(dirname "$0")/pct.real" "$@"
"""

SMI_WRAPPER = '''#!/usr/bin/env python3
"""Bench wrapper: runs the stand-in, stamps every streamed row (-l/-lms) in a log."""
import os, signal, subprocess, sys, time
real = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nvidia-smi.real")
args = sys.argv[1:]
stream = any(a in ("-lms", "-l") or a.startswith(("-lms=", "--loop")) for a in args)
if not stream:
    os.execv(real, [real] + args)
p = subprocess.Popen([real] + args, stdout=subprocess.PIPE)
signal.signal(signal.SIGTERM, lambda *a: (p.kill(), os._exit(143)))
log = open({log!r}, "a", buffering=1)
for line in iter(p.stdout.readline, b""):
    try:
        os.write(1, line)
    except BrokenPipeError:
        p.kill()
        break
    log.write("%.6f %s\\n" % (time.time(), line.decode("utf-8", "replace").rstrip()))
sys.exit(p.wait())
'''


def gpu_state(marker: int = 0) -> dict[str, Any]:
    """8 busy H200s; GPU 0's used memory carries `marker` (to follow a row to the screen)."""
    gpus = []
    for i in range(N_GPUS):
        gpus.append(
            {
                "index": i,
                "name": "NVIDIA H200",
                "uuid": f"GPU-bench-{i:04d}",
                "memory.total": 143771,
                "memory.used": 90000 + i * 100 + (marker if i == 0 else 0),
                "utilization.gpu": 97,
                "temperature.gpu": 61 + i,
                "power.draw": 650.5,
                "power.limit": 700.0,
            }
        )
    return {"gpus": gpus, "apps": [], "events": [], "lost": False}


def marker_of(mem_used_mib: float | None) -> int | None:
    if mem_used_mib is None:
        return None
    return round(mem_used_mib) - 90000


@dataclass
class BenchBed:
    """The test bed with one CT running the stand-in training run."""

    ct: int = 977
    pct_delay: float = PCT_DELAY_S
    tb: Testbed = field(init=False)
    dir: Path = field(init=False)
    has_smi: bool = field(init=False, default=False)

    def start(self) -> BenchBed:
        self.tb = Testbed().start()
        self.tb.set_pct_delay(self.pct_delay)
        self.dir = Path(self.tb.workspace) / "bench"
        self.dir.mkdir(exist_ok=True)
        self._wrap()
        self.tb.set_gpus(gpu_state())
        self.tb.ct_create(self.ct, running=True)
        (self.dir / "writer.py").write_text((Path(__file__).parent / "writer.py").read_text())
        self.control(rate=0)
        self.log_path.touch()
        cmd = shlex.join(["python3", str(self.dir / "writer.py"), str(self.ctl_path)])
        cmd = f"exec {cmd} >> {shlex.quote(str(self.log_path))} 2>&1"
        r = self.tb.ct_exec(
            self.ct,
            ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "tmux", "new", "-d", "-s", "bench",
             "sh", "-c", cmd],
        )  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"could not start the bench run in CT {self.ct}: {r.stderr}")
        return self

    def stop(self) -> None:
        try:
            self.control(stop=True)
        finally:
            self.tb.stop()

    def _wrap(self) -> None:
        bin_dir = Path(self.tb.bin_dir)
        os.replace(bin_dir / "pct", bin_dir / "pct.real")
        (bin_dir / "pct").write_text(PCT_WRAPPER.format(log=shlex.quote(str(self.pct_log))))
        (bin_dir / "pct").chmod(0o755)
        self.has_smi = (bin_dir / "nvidia-smi").exists()
        if self.has_smi:
            os.replace(bin_dir / "nvidia-smi", bin_dir / "nvidia-smi.real")
            (bin_dir / "nvidia-smi").write_text(
                SMI_WRAPPER.replace("{log!r}", repr(str(self.smi_log)))
            )
            (bin_dir / "nvidia-smi").chmod(0o755)

    # ---------------------------------------------------------------- paths

    @property
    def log_path(self) -> Path:
        return self.dir / "train.log"

    @property
    def ctl_path(self) -> Path:
        return self.dir / "ctl.json"

    @property
    def pct_log(self) -> Path:
        return Path(self.tb.state_dir) / "pct-calls.log"

    @property
    def smi_log(self) -> Path:
        return Path(self.tb.state_dir) / "smi-rows.log"

    @property
    def sshd_pid(self) -> int:
        assert self.tb._sshd is not None
        return self.tb._sshd.pid

    def control(self, **kw: Any) -> None:
        write_control(self.ctl_path, kw)

    def child_config(self) -> dict[str, Any]:
        """What a separate UI process needs to reach this bed."""
        return {
            "ct": self.ct,
            "transport": self.tb.transport_kwargs(),
            "path": self.tb.env()["PATH"],
            "state_dir": str(self.tb.state_dir),
            "ctl": str(self.ctl_path),
            "log": str(self.log_path),
            "pct_log": str(self.pct_log),
            "smi_log": str(self.smi_log),
            "gpus_json": str(Path(self.tb.state_dir) / "gpus.json"),
            "sshd_pid": self.sshd_pid,
            "has_smi": self.has_smi,
        }


def write_control(path: Path | str, ctl: dict[str, Any]) -> None:
    p = Path(path)
    tmp = p.with_name(p.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(ctl))
    os.replace(tmp, p)


def write_json(path: Path | str, obj: Any) -> None:
    write_control(path, obj)


# -------------------------------------------------------------------- counting


def pct_calls(pct_log: Path | str, kind: str = "exec") -> int:
    try:
        lines = Path(pct_log).read_text().splitlines()
    except OSError:
        return 0
    return sum(1 for x in lines if x.split(" ", 1)[0] == kind)


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, utime+stime+cutime+cstime in ticks) of a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def remote_cpu_s(root_pid: int) -> float:
    """CPU seconds used so far by `root_pid` and every descendant, live or reaped
    (reaped children are in their parent's cutime/cstime). Work done by
    processes that left the tree (daemonized, reparented) is not counted."""
    table: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                table[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in table:
            total += table[pid][1]
        todo.extend(children.get(pid, []))
    return total / CLK_TCK


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB."""
    rss = hwm = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    return rss, hwm


def parse_stamp(line: str) -> tuple[float, int] | None:
    """(t, seq) of a writer line `t=... seq=... ...`."""
    if not line.startswith("t="):
        return None
    try:
        a, b = line.split(" ", 2)[:2]
        return float(a[2:]), int(b[4:])
    except (ValueError, IndexError):
        return None


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 0.5),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else float("nan"),
    }


# -------------------------------------------------------------------- baseline


def baseline_loop(
    bed: BenchBed, interval: float, duration: float, min_checks: int = 1
) -> dict[str, Any]:
    """The user's loop: `ssh host "pct exec CT -- tail -n 20 LOG"; sleep interval`,
    with the writer at whatever rate is set, for `duration` s and at least
    `min_checks` checks (however long a loaded machine makes them). Latency of
    a line = when the check that first shows it returns minus when it was
    written."""
    argv = bed.tb.ssh_argv(
        shlex.join(["pct", "exec", str(bed.ct), "--", "tail", "-n", "20", str(bed.log_path)])
    )
    seen: dict[int, float] = {}
    written: dict[int, float] = {}
    call_s: list[float] = []
    pct0 = pct_calls(bed.pct_log)
    cpu0 = remote_cpu_s(bed.sshd_pid)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t_begin = time.monotonic()
    t_wall0 = time.time()
    checks = 0
    while checks < min_checks or time.monotonic() - t_begin < duration:
        t0 = time.monotonic()
        out = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        done = time.time()
        call_s.append(time.monotonic() - t0)
        checks += 1
        if out.returncode != 0:
            raise RuntimeError(f"baseline check failed: {out.stderr.strip()}")
        for line in out.stdout.splitlines():
            st = parse_stamp(line)
            if st is not None and st[0] >= t_wall0 and st[1] not in seen:
                seen[st[1]] = done
                written[st[1]] = st[0]
        time.sleep(interval)
    elapsed = time.monotonic() - t_begin
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    lat = [seen[s] - written[s] for s in seen]
    if seen:
        lo, hi = min(seen), max(seen)
        missed = (hi - lo + 1) - len(seen)
        total = hi - lo + 1
    else:
        missed = total = 0
    minutes = elapsed / 60
    return {
        "interval_s": interval,
        "duration_s": elapsed,
        "checks": checks,
        "call_s": summary(call_s),
        "call_samples": call_s,
        "latency_s": summary(lat),
        "lines_missed": missed,
        "lines_total": total,
        "pct_exec_per_min": (pct_calls(bed.pct_log) - pct0) / minutes,
        "ssh_conn_per_min": checks / minutes,
        "channels_per_min": checks / minutes,
        "remote_cpu_s_per_min": (remote_cpu_s(bed.sshd_pid) - cpu0) / minutes,
        "client_cpu_s_per_min": ((ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime))
        / minutes,
    }


def baseline_model(call_samples: list[float], interval: float, n: int = 20000) -> dict[str, float]:
    """Latency of the loop at `interval` from measured per-call costs, for
    lines arriving uniformly at random: a check reads the file near the end
    of its call and the next one starts `interval` after it returns, so a
    line waits U(0, interval + call) (the few ms from `tail` reading to ssh
    returning are left out: a slight lower bound)."""
    rng = random.Random(7)
    lat = []
    for _ in range(n):
        c = rng.choice(call_samples)
        lat.append(rng.uniform(0.0, interval + c))
    s = summary(lat)
    s["model"] = 1.0
    return s


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
