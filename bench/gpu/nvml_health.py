"""Issue 32 through NVML (`--local`) on a real GPU: the local reader's
health fields, and its feed following this machine's kernel log.
`python3 bench/gpu/nvml_health.py` (prints JSON lines)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

from gputui.collect.gpuhealth import kernel_log_argv
from gputui.collect.nvml import NvmlReader
from gputui.diagnose.hardware import gpu_issues, health_summary
from gputui.monitor.gpufeed import NvmlFeed
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target


def reader() -> None:
    with NvmlReader() as r:
        t = time.perf_counter()
        samples = r.read(time.time())
        read_ms = 1000 * (time.perf_counter() - t)
        t = time.perf_counter()
        health = r.health(time.time())
        health_ms = 1000 * (time.perf_counter() - t)
    print(json.dumps({"samples": [vars(s) for s in samples], "read_ms": round(read_ms, 2),
                      "health": [vars(h) for h in health], "health_ms": round(health_ms, 2)}))  # fmt: skip


async def feed(seconds: float) -> None:
    tr = LocalTransport()
    await tr.connect()
    f = NvmlFeed(kernel_log=Target(tr, None))
    await f.start()
    await asyncio.sleep(seconds)
    now = time.time()
    print(json.dumps({"kernel_log": f.state.kernel_log, "channels": f.channels,
                      "summary": [health_summary(f.state, i) for i in sorted(f.state.latest)],
                      "issues": [x.line for x in gpu_issues(f.state, now)],
                      "xid_events": [e.text for e in f.state.events if e.xid is not None]}))  # fmt: skip
    await f.stop()
    await tr.close()


def main() -> None:
    help_text = subprocess.run(["dmesg", "--help"], capture_output=True, text=True).stdout
    print(json.dumps({"dmesg_has_W": "--follow-new" in help_text,
                      "dmesg_version": subprocess.run(["dmesg", "--version"], capture_output=True,
                                                      text=True).stdout.strip()}))  # fmt: skip
    p = subprocess.Popen(
        kernel_log_argv(), stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    time.sleep(3)
    import os

    os.killpg(p.pid, 15)
    out, _ = p.communicate(timeout=5)
    print(json.dumps({"reader_first_lines": out.splitlines()[:5], "lines": len(out.splitlines())}))
    try:
        reader()
    except Exception as e:  # no GPU here: say so, and go on
        print(json.dumps({"reader_error": str(e)}))
    asyncio.run(feed(8.0))


if __name__ == "__main__":
    main()
