"""An unhandled error anywhere (the dashboard or a CLI verb): one line on
stderr naming a private crash file with the traceback, exit status 1.
Files gputui writes itself (audit log, dumps, crash files) are 0600 in 0700
directories whatever the umask."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from gputui.actions.plan import ActionPlan, ActionResult, audit
from gputui.statefiles import append_private, write_private_new
from helpers import run_on_a_terminal

# run the real CLI with one function replaced by one that raises
CRASHING_CLI = """
import sys
{patch}
from gputui.cli.main import main
sys.exit(main(sys.argv[1:]))
"""

# the dashboard crashes 0.5 s after it is up, inside Textual's message loop
TUI_PATCH = """
from gputui.ui.app import GputuiApp
mounted = GputuiApp.on_mount
def on_mount(self):
    mounted(self)
    def boom():
        raise RuntimeError("boom: WANDB_API_KEY=sekrit-in-a-local")
    self.set_timer(0.5, boom)
GputuiApp.on_mount = on_mount
"""

DOCTOR_PATCH = """
import gputui.doctor.run as d
async def inspect(settings, **kw):
    raise KeyError("boom")
d.inspect = inspect
"""

ACTION_PATCH = """
import gputui.cli.actions as a
async def run_async(*args, **kw):
    raise ZeroDivisionError("boom")
a.run_async = run_async
"""

VISIBLE = re.compile(r"\x1b(\[[0-9;?<>=$]*[A-Za-z]|\][^\x07\x1b]*(\x07|\x1b\\)|[=>()][0-9A-Za-z]?)")


def run_crashing(
    patch: str, argv: list[str], env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    if patch == TUI_PATCH:  # the dashboard is drawn on a terminal (a pipe gets doctor's text)
        return run_on_a_terminal(
            [sys.executable, "-c", CRASHING_CLI.format(patch=patch), *argv],
            env={**os.environ, "TERM": "xterm-256color", **env},
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    return subprocess.run(
        [sys.executable, "-c", CRASHING_CLI.format(patch=patch), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TERM": "xterm-256color", **env},
        stdin=subprocess.DEVNULL,
    )


def crash_line(stderr: str) -> tuple[str, Path]:
    """The one line (the last thing written) and the crash file it names."""
    assert "Traceback" not in stderr
    assert "sekrit" not in stderr
    visible = VISIBLE.sub("", stderr).strip()
    m = re.search(r"gputui: internal error \((\w+)\) — the traceback is in (\S+);[^\n]*\Z", visible)
    assert m is not None, visible[-500:]
    return m.group(1), Path(m.group(2))


def check_crash_file(path: Path, state: Path, error: str) -> str:
    assert path.parent == state / "gputui"
    assert re.fullmatch(r"crash-\d{8}-\d{6}-\d+(-\d+)?\.txt", path.name)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and error in text
    return text


def test_dashboard_crash_exits_1_naming_the_crash_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    r = run_crashing(TUI_PATCH, ["--local"], {"XDG_STATE_HOME": str(state)})
    assert r.returncode == 1, r.stderr[-2000:]
    kind, path = crash_line(r.stderr)
    assert kind == "RuntimeError"
    text = check_crash_file(path, state, "RuntimeError: boom")
    assert "sekrit" in text  # the whole story is in the private file, not on the terminal


def test_doctor_crash_exits_1_under_home_state(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    env["HOME"] = str(tmp_path)
    r = subprocess.run(
        [sys.executable, "-c", CRASHING_CLI.format(patch=DOCTOR_PATCH), "doctor", "--local"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1
    kind, path = crash_line(r.stderr)
    assert kind == "KeyError"
    check_crash_file(path, tmp_path / ".local" / "state", "KeyError: 'boom'")


def test_action_verb_crash_exits_1(tmp_path: Path) -> None:
    state = tmp_path / "xdg"
    r = run_crashing(ACTION_PATCH, ["kill", "--local", "--yes"], {"XDG_STATE_HOME": str(state)})
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1
    kind, path = crash_line(r.stderr)
    assert kind == "ZeroDivisionError"
    check_crash_file(path, state, "ZeroDivisionError: boom")


def test_state_files_are_private_whatever_the_umask(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    old = os.umask(0o022)
    try:
        loose = tmp_path / "state" / "gputui"
        loose.mkdir(parents=True, mode=0o755)
        old_log = loose / "audit.log"
        old_log.write_text("")
        old_log.chmod(0o644)  # written by an older gputui
        plan = ActionPlan(action="kill", title="Kill?", target="t", commands=[["kill", "1"]])
        p = audit("host", plan, ActionResult(True, "ok"))
        assert p == old_log
        d = write_private_new(tmp_path / "state" / "gputui" / "dumps" / "x.txt", "stack")
        a = append_private(tmp_path / "other" / "f.log", "x\n")
    finally:
        os.umask(old)
    for f in (p, d, a):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert stat.S_IMODE(f.parent.stat().st_mode) == 0o700, f.parent
