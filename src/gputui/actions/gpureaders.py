"""GPU readers the actions take for their reports (CLI use; the TUI passes
readers backed by the monitor's live feed instead).

`host_memory_used(target)`: total used MiB over all GPUs, from nvidia-smi on
the host (falling back to the CT). `host_gpu_processes(target)`: processes
holding GPU memory, with `ct_pid` filled from the host's /proc (one listing
of the GPU feed's compute-apps script, mapped by the same parser).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from gputui.collect.nvidiasmi import parse_gpu_output, query_gpu_argv
from gputui.model import GpuProcess, GpuSample
from gputui.monitor import apps_once_argv, parse_apps_block
from gputui.remote.target import Target


def memory_reader(target: Target) -> Callable[[], Awaitable[float | None]]:
    async def read() -> float | None:
        for run in (target.run_host, target.run):
            res = await run(query_gpu_argv(), timeout=10.0)
            if res.ok:
                samples = [
                    s for s in parse_gpu_output(res.out, time.time()) if isinstance(s, GpuSample)
                ]
                used = [s.mem_used_mib for s in samples if s.mem_used_mib is not None]
                return sum(used) if used else None
            if not target.in_container:
                break
        return None

    return read


def process_reader(target: Target) -> Callable[[], Awaitable[list[GpuProcess]]]:
    async def read() -> list[GpuProcess]:
        res = await target.run_host(apps_once_argv(), timeout=10.0)
        if not res.ok:
            return []
        lines = res.out.splitlines()
        block = lines[: lines.index("@gputui end")] if "@gputui end" in lines else lines
        procs, _, _ = parse_apps_block(block, target.apps_ct)
        if any(p.in_container is None for p in procs):
            # No /lxc/<ct>/ cgroup to tell (cgroup v1, the test bed): the
            # CT's PID namespace does, as the monitor's agent hello gives it.
            ns = await target.run(["readlink", "/proc/self/ns/pid"])
            if ns.ok and ns.out.strip():
                procs, _, _ = parse_apps_block(block, target.apps_ct, ns.out.strip())
        return procs

    return read
