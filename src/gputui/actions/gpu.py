"""GPU readers the actions take for their reports (CLI use; the TUI passes
readers backed by the monitor's live feed instead).

`host_memory_used(target)`: total used MiB over all GPUs, from nvidia-smi on
the host (falling back to the CT). `host_gpu_processes(target)`: processes
holding GPU memory, with `ct_pid` filled from the host's /proc NSpid.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from gputui.collect.gpu import (
    compute_apps_argv,
    parse_compute_apps,
    parse_gpu_output,
    query_gpu_argv,
)
from gputui.model import GpuProcess, GpuSample
from gputui.remote.target import Target

# Lines "pid<TAB>NSpid:<TAB>a<TAB>b…" for each host pid given.
NSPID_SCRIPT = """for p in "$@"; do
  printf '%s\\t%s\\n' "$p" "$(grep '^NSpid:' "/proc/$p/status" 2>/dev/null)"
done
"""


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
            if target.ct is None:
                break
        return None

    return read


def process_reader(target: Target) -> Callable[[], Awaitable[list[GpuProcess]]]:
    async def read() -> list[GpuProcess]:
        res = await target.run_host(compute_apps_argv(), timeout=10.0)
        if not res.ok:
            return []
        procs = parse_compute_apps(res.out)
        if target.ct is not None and procs:
            ns = await target.run_host(
                ["sh", "-c", NSPID_SCRIPT, "gputui-nspid", *[str(p.host_pid) for p in procs]]
            )
            inner: dict[int, int] = {}
            for line in ns.out.splitlines():
                pid, _, rest = line.partition("\t")
                ids = rest.split()[1:]
                if pid.isdigit() and len(ids) > 1 and ids[-1].isdigit():
                    inner[int(pid)] = int(ids[-1])
            for p in procs:
                p.ct_pid = inner.get(p.host_pid)
        elif target.ct is None:
            for p in procs:
                p.ct_pid = p.host_pid
        return procs

    return read
