"""Issue 32 on a real GPU: every health field read from the driver and shown
by gputui, what reading them costs, and the kernel-log reader at work.

`python3 bench/gpu/health_probe.py OUTDIR` (bench/gpu/health_check.sh runs
it on the lent H200). Writes OUTDIR/health_probe.json and prints a report:

1. the raw answers of nvidia-smi to every query gputui makes (the stream's
   fields, the named reasons, the health listing's, --query-remapped-rows);
2. gputui's parse of them: the GPU row, the `g` zoom's health line, the
   issues (all clear is an answer), the idle reason not called a throttle;
3. the cost, same scene, side by side for 20 s: `nvidia-smi -lms 1000` with
   the old fields vs with the reasons and max clock; the health listing's
   two one-shot queries (run 5 times each); the kernel-log reader (CPU of
   its process tree) and what it says (refused? following?);
4. the feed itself (NvidiaSmiFeed on this machine, as on a host) idle, then
   under a bf16 matmul load: readings, reasons, power vs limit, and the
   hardware findings — a busy H200 at its SW power cap is no finding.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gputui.collect.gpuhealth import (
    HEALTH_TAG,
    REMAP_TAG,
    health_argv,
    kernel_log_argv,
    parse_health,
    remap_argv,
)
from gputui.collect.nvidiasmi import GPU_FIELDS, STREAM_FIELDS, parse_gpu_line, query_gpu_argv
from gputui.diagnose import diagnose
from gputui.diagnose.hardware import gpu_issues, gpu_marks, health_summary
from gputui.model import GpuSample, Snapshot
from gputui.monitor.gpufeed import NvidiaSmiFeed
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

REASONS = [
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
]
HW = {"gpu_throttled", "gpu_power_capped", "gpu_ecc", "gpu_pcie_link", "gpu_xid"}
CLK = os.sysconf("SC_CLK_TCK")


def sh(argv: list[str], timeout: float = 20.0) -> dict[str, Any]:
    t = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return {"argv": argv, "rc": p.returncode, "out": p.stdout, "err": p.stderr,
                "wall_s": round(time.monotonic() - t, 3)}  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"argv": argv, "rc": None, "out": "", "err": str(e)}


def raw_answers() -> dict[str, Any]:
    smi = "nvidia-smi"
    fmt = "--format=csv"
    return {
        "stream": sh([smi, "--query-gpu=" + ",".join(STREAM_FIELDS), fmt]),
        "stream_nounits": sh(query_gpu_argv(None, STREAM_FIELDS)),
        "named_reasons": sh([smi, "--query-gpu=index,clocks_event_reasons.active,"
                             + ",".join("clocks_event_reasons." + r for r in REASONS), fmt]),
        "throttle_alias": sh([smi, "--query-gpu=index,clocks_throttle_reasons.active", fmt]),
        "counters": sh([smi, "--query-gpu=index,"
                        + ",".join("clocks_event_reasons_counters." + r for r in REASONS[2:8]), fmt]),
        "health": sh([smi, *health_argv()]),
        "health_header": sh([smi, *health_argv()[:1], fmt]),
        "remap": sh([smi, *remap_argv()]),
        "remap_header": sh([smi, "--query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,"
                            "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure", fmt]),
        "pcie_more": sh([smi, "--query-gpu=index,pcie.link.gen.gpucurrent,pcie.link.gen.gpumax,"
                         "pcie.link.gen.hostmax", fmt]),
        "power": sh([smi, "--query-gpu=index,power.draw,power.limit,enforced.power.limit,"
                     "power.default_limit,power.min_limit,power.max_limit", fmt]),
    }  # fmt: skip


def parsed(raw: dict[str, Any]) -> dict[str, Any]:
    now = time.time()
    from gputui.model import GpuState

    st = GpuState()
    for line in raw["stream_nounits"]["out"].splitlines():
        s = parse_gpu_line(line, now, STREAM_FIELDS)
        if isinstance(s, GpuSample):
            st.add(s)
    lines = [HEALTH_TAG + x for x in raw["health"]["out"].splitlines()]
    lines += [REMAP_TAG + x for x in raw["remap"]["out"].splitlines()]
    st.health, err = parse_health(lines, now)
    return {
        "samples": {i: vars(s) for i, s in st.latest.items()},
        "health": {i: vars(h) for i, h in st.health.items()},
        "health_error": err,
        "summary": [health_summary(st, i) for i in sorted(st.latest)],
        "issues": [vars(x) for x in gpu_issues(st, now)],
        "marks": gpu_marks(st, now),
    }


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants (their reaped children too)."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                w = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in w[11:15]) / CLK
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def one_shot_cost(argv: list[str], n: int = 5) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    for _ in range(n):
        subprocess.run(argv, capture_output=True, timeout=30)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "cpu_ms_each": round(1000 * cpu / n, 1),
        "wall_ms_each": round(1000 * (time.monotonic() - t) / n, 1),
    }


def cost_window(seconds: float) -> dict[str, Any]:
    """The old stream, the new stream and the kernel-log reader, side by side."""
    procs = {
        "stream_old_fields": subprocess.Popen(query_gpu_argv(1000, GPU_FIELDS), stdout=subprocess.DEVNULL),
        "stream_new_fields": subprocess.Popen(query_gpu_argv(1000, STREAM_FIELDS), stdout=subprocess.DEVNULL),
        "kernel_log_reader": subprocess.Popen(kernel_log_argv(), stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True,
                                              start_new_session=True),
    }  # fmt: skip
    time.sleep(1.0)  # started: count from here
    start = {k: tree_cpu(p.pid) for k, p in procs.items()}
    time.sleep(seconds)
    end = {k: tree_cpu(p.pid) for k, p in procs.items()}
    out: dict[str, Any] = {"window_s": seconds}
    for k in procs:
        out[k] = {"cpu_s": round(end[k] - start[k], 4),
                  "pct_of_a_core": round(100 * (end[k] - start[k]) / seconds, 3)}  # fmt: skip
    klog = procs["kernel_log_reader"]
    for p in procs.values():
        p.terminate()
    os.killpg(klog.pid, 15)  # the reader's dmesg/journalctl too: they hold the pipe
    try:
        text, _ = klog.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(klog.pid, 9)
        text, _ = klog.communicate()
    out["kernel_log_reader"]["first_lines"] = text.splitlines()[:8]
    out["kernel_log_reader"]["xid_lines"] = [x for x in text.splitlines() if "Xid" in x][-5:]
    out["kernel_log_reader"]["lines"] = len(text.splitlines())
    return out


def load(seconds: float) -> subprocess.Popen[bytes]:
    code = (
        "import torch,time\n"
        "a=torch.randn(16384,16384,device='cuda',dtype=torch.bfloat16)\n"
        "b=torch.randn(16384,16384,device='cuda',dtype=torch.bfloat16)\n"
        f"t=time.time()\nwhile time.time()-t<{seconds}:\n  c=a@b\n  torch.cuda.synchronize()\n"
    )
    return subprocess.Popen([sys.executable, "-c", code])


def feed_view(feed: NvidiaSmiFeed, label: str) -> dict[str, Any]:
    now = time.time()
    st = feed.state
    snap = Snapshot(time=now, target="local")
    snap.gpus = st
    found = [f for f in diagnose(snap, now) if f.kind in HW]
    s = st.latest.get(0)
    from gputui.ui.widgets.gpus import gpu_rows

    return {
        "label": label,
        "t": round(now, 1),
        "reasons": None if s is None else s.event_reasons,
        "power_w": None if s is None else s.power_w,
        "limit_w": None if s is None else s.power_limit_w,
        "util": None if s is None else s.util_pct,
        "sm": None if s is None else s.sm_clock_mhz,
        "sm_max": None if s is None else s.sm_clock_max_mhz,
        "pcie": None
        if 0 not in st.health
        else [st.health[0].pcie_gen, st.health[0].pcie_width, st.health[0].util_pct],
        "row": [t.plain for t in gpu_rows(st, 120, now)],
        "summary": [health_summary(st, i) for i in sorted(st.latest)],
        "issues": [x.line for x in gpu_issues(st, now)],
        "findings": [f"{f.severity.value} {f.kind}: {f.title}" for f in found],
        "kernel_log": st.kernel_log,
        "channels": feed.channels,
    }


async def watch_feed(idle_s: float, load_s: float) -> list[dict[str, Any]]:
    tr = LocalTransport()
    await tr.connect()
    feed = NvidiaSmiFeed(Target(tr, None), where="host")
    await feed.start()
    views = []
    try:
        t = time.monotonic()
        while time.monotonic() - t < idle_s:
            await asyncio.sleep(3)
            views.append(feed_view(feed, "idle"))
        job = load(load_s)
        t = time.monotonic()
        while time.monotonic() - t < load_s + 2:
            await asyncio.sleep(3)
            views.append(feed_view(feed, "load"))
        job.wait(timeout=30)
        views.append({"fields": list(feed.fields), "health_error": feed.health_error})
    finally:
        await feed.stop()
        await tr.close()
    return views


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/health-probe")
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"uid": os.getuid()}
    doc["env"] = {
        "dmesg_restrict": sh(["cat", "/proc/sys/kernel/dmesg_restrict"])["out"].strip(),
        "virt": sh(["systemd-detect-virt"])["out"].strip(),
        "dockerenv": os.path.exists("/.dockerenv"),
        "dmesg_once": sh(["sh", "-c", "dmesg 2>&1 | tail -3"]),
        "dmesg_xid_history": sh(["sh", "-c", "dmesg 2>&1 | grep -i xid | tail -5"]),
        "journalctl": sh(["sh", "-c", "journalctl -k -n 3 2>&1 | tail -4"]),
    }
    doc["raw"] = raw_answers()
    doc["parsed"] = parsed(doc["raw"])
    doc["one_shot"] = {
        "health_query": one_shot_cost(["nvidia-smi", *health_argv()]),
        "remap_query": one_shot_cost(["nvidia-smi", *remap_argv()]),
        "compute_apps": one_shot_cost(["nvidia-smi", "--query-compute-apps=pid", "--format=csv"]),
    }
    doc["cost"] = cost_window(20.0)
    doc["feed"] = asyncio.run(watch_feed(9.0, 30.0))
    (out / "health_probe.json").write_text(json.dumps(doc, indent=1, default=str))
    for key in ("raw",):
        for name, r in doc[key].items():
            print(f"--- {name}: rc {r['rc']} {' '.join(r['argv'])[:150]}")
            print((r["out"] + r["err"]).rstrip()[:1500])
    print(json.dumps({k: doc[k] for k in ("uid", "env", "parsed", "one_shot", "cost")}, indent=1,
                     default=str)[:12000])  # fmt: skip
    for v in doc["feed"]:
        print(json.dumps(v, default=str))


if __name__ == "__main__":
    main()
