"""Set-up shared by the dashboard's pilot tests against the real-sshd test bed.

The runs are real: a python3 script writing numbered lines, started by the
real tmux inside a stand-in CT, its log in the test bed's workspace (the same
path on the host and in the CT). The app is the real one, built by
`gputui.ui.wiring.build` from Settings naming the test bed's sshd and `--ct N`,
exactly as `run_app` builds it (minus `app.run()`).
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputui.config import Settings
from gputui.ui.app import GputuiApp
from gputui.ui.wiring import Parts, build

CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
SIZE = (120, 36)

# Numbered lines naming the writer's PID (as the CT sees it), one every PERIOD s; after COUNT lines it stays alive, silent.
COUNTER = """\
import os, sys, time
count, period = int(sys.argv[1]), float(sys.argv[2])
for i in range(1, count + 1):
    print("line %05d pid %d step %d loss %.4f" % (i, os.getpid(), i, 10.0 / i))
    time.sleep(period)
time.sleep(3600)
"""

# Names that only gputui's own remote helpers carry in their argv.
GPUTUI_MARKERS = (
    "gputui-agent",
    "gputui-follow",
    "gputui-gpu-apps",
    "gputui-watchdog",
    "gputui-panes",
    "nvidia-smi",
    "tail ",
    "pct exec",
)


@dataclass
class Run:
    ct: int
    dir: Path
    session: str
    log: Path
    script: Path


def prepare_run(testbed: Any, ct: int, session: str, log: str = "train.log") -> Run:
    """A fresh directory in the workspace with the counter script in it."""
    d = Path(testbed.workspace) / f"ui-{session}-{ct}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    d.chmod(0o777)
    script = d / "count.py"
    script.write_text(COUNTER)
    return Run(ct, d, session, d / log, script)


def tmux_in_ct(testbed: Any, ct: int, *args: str) -> None:
    """tmux inside the CT with a clean environment (no PYTHONUNBUFFERED from ours)."""
    r = testbed.ct_exec(
        ct, ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "TERM=xterm", "tmux", *args]
    )
    assert r.returncode == 0, f"tmux {args}: {r.stderr}"


def start_unbuffered(testbed: Any, run: Run, count: int, period: float) -> None:
    """`python3 -u count.py N P > log 2>&1` in a tmux session in the CT."""
    cmd = (
        f"python3 -u {shlex.quote(str(run.script))} {count} {period} "
        f"> {shlex.quote(str(run.log))} 2>&1"
    )
    tmux_in_ct(testbed, run.ct, "new", "-d", "-s", run.session, "-c", str(run.dir), cmd)


def start_buffered(testbed: Any, run: Run, count: int, period: float) -> None:
    """`python3 count.py N P 2>&1 | tee log`: no -u, stdout a pipe -> block-buffered."""
    cmd = (
        f"python3 {shlex.quote(str(run.script))} {count} {period} 2>&1 "
        f"| tee {shlex.quote(str(run.log))}"
    )
    tmux_in_ct(testbed, run.ct, "new", "-d", "-s", run.session, "-c", str(run.dir), cmd)


def session_alive(testbed: Any, ct: int, session: str) -> bool:
    r = testbed.ct_exec(
        ct, ["env", "-i", f"PATH={CLEAN_PATH}", "tmux", "has-session", "-t", f"={session}"]
    )
    return r.returncode == 0


# ------------------------------------------------------------------ the app


def settings_for(testbed: Any, ct: int, **kw: Any) -> Settings:
    """What `gputui --host 127.0.0.1 --port P --ct N ...` would produce."""
    base: dict[str, Any] = dict(
        host=testbed.host,
        port=testbed.port,
        user=testbed.user,
        identity_file=str(testbed.key_path),
        known_hosts=str(testbed.known_hosts_path),
        ct_id=ct,
        connect_timeout=10.0,
    )
    base.update(kw)
    return Settings(**base)


def make_app(settings: Settings) -> tuple[GputuiApp, Parts]:
    """The real app, wired as `gputui.ui.app.run_app` wires it."""
    parts = build(settings)
    app = GputuiApp(
        parts.monitor,
        actions=parts.actions,
        read_only=bool(getattr(parts.settings, "read_only", False)),
        can_launch=parts.can_launch,
        thresholds=parts.settings.diagnosis,
        on_exit=parts.on_exit,
        start=parts.start,
        recorder=parts.recorder,  # as run_app: the user's own actions are no news on the banner
    )
    if parts.actions is not None:
        parts.actions.progress = lambda text: app.notify(text, timeout=4)
    return app, parts


async def until(
    fn: Callable[[], Any], timeout: float, what: str, detail: Callable[[], str] | None = None
) -> Any:
    """Poll `fn` (every 0.1 s) until it returns something true; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail else ""
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{extra}")
        await asyncio.sleep(0.1)


def screen_text(app: GputuiApp) -> str:
    """The screen as plain text, rebuilt from the SVG screenshot's text runs."""
    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(m[2]), []).append((float(m[1]), html.unescape(m[3])))
    out = []
    for y in sorted(rows):
        line = ""
        for x, t in sorted(rows[y]):
            line = line.ljust(round(x / 12.2)) + t
        out.append(line.replace("\xa0", " "))
    return "\n".join(out)


# ------------------------------------------------------------------ leftovers


def gputui_processes_on_host(testbed: Any) -> list[str]:
    """`pid args` of processes started through this test bed's sshd (their
    environment names its stand-in state dir) that look like gputui's helpers:
    agent, log follower, GPU streams, watchdogs, `pct exec` wrappers. The
    host sees the CT's processes too (one PID namespace above them)."""
    marker = f"GPUTUI_STANDIN_STATE={testbed.state_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker not in env.split(b"\0"):
            continue
        args = argv.replace(b"\0", b" ").decode(errors="replace").strip()
        if any(m in args for m in GPUTUI_MARKERS) and "ps -e" not in args:
            found.append(f"{entry} {args}")
    return found


def ct_process_list(testbed: Any, ct: int) -> str:
    return testbed.ct_exec(ct, ["ps", "-e", "-o", "pid=,args="]).stdout


def gputui_processes_in_ct(testbed: Any, ct: int) -> list[str]:
    return [
        line.strip()
        for line in ct_process_list(testbed, ct).splitlines()
        if any(m in line for m in GPUTUI_MARKERS) and "ps -e" not in line
    ]
