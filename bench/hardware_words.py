"""The hardware's own words (issue 32) on the test bed: time to the word for
each signal, and the CPU cost of reading the health fields, before/after in
the same scene. `python bench/hardware_words.py [--trials 3] [--seconds 30]`.

The scene: 8 stand-in H200s busy at their SW power cap (690 of 700 W, 0x4 —
a normal busy GPU), read over SSH from the test bed's real sshd with the
production paces (the stream every 1 s, the compute-apps listing with the
health queries every 5 s, the kernel log followed).

- time to the word: a fault injected on one GPU (the stand-in's state, or a
  line appended to the stand-in kernel log) until `gpu_issues` names it on
  that GPU and `diagnose` says its finding; median and max of N trials;
- CPU, each window the same scene: "before" reads as before issue 32 (the
  old stream fields, the listing without the health queries, no kernel-log
  reader); "after" as now. gputui's own CPU (this process: ssh client,
  parsing, and one diagnose a second, as the dashboard's tick) and the
  host side's (every process under the test bed's sshd, reaped children
  included). The stand-in nvidia-smi is a Python script (~40 ms a start):
  the host side here is the stand-in's price, not the driver's — the H200's
  figures are bench/gpu/health_probe.py's (docs/real-gpu.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "gpu"))

from health_probe import tree_cpu  # noqa: E402  (CPU of a process tree, as on the H200)

from gputui.collect import gpuhealth  # noqa: E402
from gputui.collect.nvidiasmi import GPU_FIELDS  # noqa: E402
from gputui.diagnose import diagnose  # noqa: E402
from gputui.diagnose.hardware import gpu_issues  # noqa: E402
from gputui.model import Snapshot  # noqa: E402
from gputui.monitor import gpufeed  # noqa: E402
from gputui.monitor.gpufeed import NvidiaSmiFeed  # noqa: E402
from gputui.remote.target import Target  # noqa: E402
from testbed import Testbed  # noqa: E402

H200 = {"utilization.gpu": 100, "power.draw": 690.0, "memory.used": 100000,
        "clocks.sm": 1605, "clocks_event_reasons.active": 0x4}  # fmt: skip
N_GPUS = 8
FAULTS: dict[str, tuple[int, str, dict[str, Any]]] = {
    "thermal throttle": (3, "gpu_throttled", {"clocks_event_reasons.active": 0x40}),
    "HW slowdown": (5, "gpu_throttled", {"clocks_event_reasons.active": 0x8}),
    "uncorrectable ECC": (1, "gpu_ecc", {"ecc.errors.uncorrected.volatile.total": 2}),
    "row remap pending": (6, "gpu_ecc", {"remapped_rows.pending": 1}),
    "PCIe x8 of x16": (2, "gpu_pcie_link", {"pcie.link.width.current": 8}),
    "PCIe gen 3 of 5 under load": (4, "gpu_pcie_link", {"pcie.link.gen.current": 3}),
    "power limit set low": (7, "gpu_power_capped", {"power.limit": 400.0, "power.draw": 399.0}),
}


def said(feed: NvidiaSmiFeed, kind: str, gpu: int) -> bool:
    now = time.time()
    if not any(x.kind == kind and x.index == gpu for x in gpu_issues(feed.state, now)):
        return False
    snap = Snapshot(time=now, target="bench")
    snap.gpus = feed.state
    return any(f.kind == kind for f in diagnose(snap, now))


async def wait(cond: Any, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return time.monotonic() - t0
        await asyncio.sleep(0.05)
    return None


async def time_to_word(bed: Testbed, feed: NvidiaSmiFeed, trials: int) -> dict[str, Any]:
    gpus = [dict(H200) for _ in range(N_GPUS)]
    bed.set_gpus({"gpus": gpus})
    await wait(lambda: len(feed.state.health) == N_GPUS, 20)
    out: dict[str, Any] = {}
    for name, (gpu, kind, change) in FAULTS.items():
        took = []
        for _ in range(trials):
            gpus[gpu] = {**H200, **change}
            bed.set_gpus({"gpus": gpus})
            took.append(await wait(lambda g=gpu, k=kind: said(feed, k, g), 30))
            gpus[gpu] = dict(H200)
            bed.set_gpus({"gpus": gpus})
            await wait(lambda: not gpu_issues(feed.state, time.time()), 30)
        out[name] = took
    took = []
    for _ in range(trials):
        bed.kernel_says(
            "NVRM: Xid (PCI:0000:68:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
        )
        took.append(await wait(lambda: said(feed, "gpu_xid", 5), 30))
        feed.state.events.clear()  # the next trial's word is its own
    out["Xid 79 in the kernel log"] = took
    return out


async def cpu_window(bed: Testbed, tr: Any, seconds: float, before: bool) -> dict[str, float]:
    saved = gpufeed.APPS_SCRIPT
    if before:  # as before issue 32: the listing without the health queries
        gpufeed.APPS_SCRIPT = saved.replace(gpuhealth.HEALTH_LISTING, "")
    feed = NvidiaSmiFeed(Target(tr, None), where="host", kernel_log=not before)
    if before:
        feed.fields = GPU_FIELDS
    await feed.start()
    try:
        await wait(
            lambda: len(feed.state.latest) == N_GPUS and not feed.state.processes_pending, 20
        )
        await asyncio.sleep(6.0)  # every channel up and one listing done
        sshd = bed.sshd_pid
        host0, me0, t0 = tree_cpu(sshd), time.process_time(), time.monotonic()
        while time.monotonic() - t0 < seconds:
            snap = Snapshot(time=time.time(), target="bench")
            snap.gpus = feed.state
            diagnose(snap, time.time())  # the dashboard's tick: once a second
            await asyncio.sleep(1.0)
        wall = time.monotonic() - t0
        host, me = tree_cpu(sshd) - host0, time.process_time() - me0
        assert not gpu_issues(feed.state, time.time()), "the scene is all clear"
    finally:
        await feed.stop()
        gpufeed.APPS_SCRIPT = saved
    return {"gputui_pct": 100 * me / wall, "host_pct": 100 * host / wall,
            "channels_fields": len(feed.fields)}  # fmt: skip


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    bed = Testbed(container_tool=False).start()
    try:
        bed.set_gpus({"gpus": [dict(H200) for _ in range(N_GPUS)]})
        (Path(bed.state_dir) / "kmsg").write_text("")
        tr = bed.transport()
        await tr.connect()
        try:
            res: dict[str, Any] = {"cpu": {"before": [], "after": []}}
            for _ in range(args.rounds):  # alternate: the same scene, the machine's load shared
                res["cpu"]["before"].append(await cpu_window(bed, tr, args.seconds, True))
                res["cpu"]["after"].append(await cpu_window(bed, tr, args.seconds, False))
            feed = NvidiaSmiFeed(Target(tr, None), where="host")
            await feed.start()
            try:
                res["time_to_word"] = await time_to_word(bed, feed, args.trials)
            finally:
                await feed.stop()
        finally:
            await tr.close()
    finally:
        bed.stop()
    return res


def report(res: dict[str, Any]) -> str:
    lines = ["| signal (injected on one of 8 GPUs) | median s | max s | trials |",
             "| --- | --- | --- | --- |"]  # fmt: skip
    for name, took in res["time_to_word"].items():
        ok = [t for t in took if t is not None]
        med = f"{statistics.median(ok):.1f}" if ok else "—"
        top = f"{max(ok):.1f}" if ok else "—"
        lines.append(f"| {name} | {med} | {top} | {len(ok)}/{len(took)} named |")
    lines += [
        "",
        "| reading | gputui CPU % (median) | host side CPU % (median) |",
        "| --- | --- | --- |",
    ]
    for when in ("before", "after"):
        w = res["cpu"][when]
        g = statistics.median(x["gputui_pct"] for x in w)
        h = statistics.median(x["host_pct"] for x in w)
        lines.append(f"| {when} | {g:.2f} | {h:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    res = asyncio.run(main_async(args))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    print(report(res))


if __name__ == "__main__":
    main()
