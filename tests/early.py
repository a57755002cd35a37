"""Slow set-ups that mostly wait, started when the session starts.

Some module fixtures spend most of their time waiting on a real run (the
hang end to end waits ~50 s for a run to hang and for the hang window to
pass). Such a set-up runs here in its own process, started as soon as pytest
has collected a test that needs it, so its waiting overlaps the tests that
run before its module; the fixture then takes the result (waiting for the
rest, if any). Run alone, a test waits as long as it always did.

A set-up is a function `module.function()` in tests/ with no arguments,
returning a picklable value; it runs on its own test bed (never the
session's, which the other tests change meanwhile).

Under pytest-xdist the controller starts the set-ups (once a worker has
collected and noted which its tests need) and stops them at the end; a
worker that needs one waits for its result file in the directory the
controller named in $GPUTUI_EARLY_DIR, so each set-up runs once per session
however many workers there are.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent

# fixture name -> (module in tests/, function)
SETUPS = {
    "hang": ("test_diagnosis_e2e", "run_hang"),
    "field": ("test_field_failures", "run_field"),
}

ROOT_ENV = "GPUTUI_EARLY_DIR"  # the session's directory of set-ups (one folder each)

# Writes the result whole (a worker may be waiting for it), then `done`
# whether it succeeded or not (so nobody waits for a set-up that failed).
RUNNER = """\
import os, pickle, signal, sys

def stop(*_):  # SIGTERM: unwind, so the set-up's test bed stops and cleans up
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, stop)
sys.path[:0] = [sys.argv[1]]
import importlib
try:
    value = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])()
    with open(sys.argv[4] + ".part", "wb") as f:
        pickle.dump(value, f)
    os.replace(sys.argv[4] + ".part", sys.argv[4])
finally:
    open(sys.argv[5], "w").close()
"""


def configure() -> None:
    """A new session (plain, or pytest-xdist's controller): its directory
    of set-ups, named in the environment, which the workers inherit."""
    os.environ[ROOT_ENV] = tempfile.mkdtemp(prefix="gputui-early-")


def session_dir() -> Path:
    root = os.environ.get(ROOT_ENV)
    if not root:
        configure()
    return Path(os.environ[ROOT_ENV])


class Early:
    """One set-up running in its own process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module, self.function = SETUPS[name]
        self.dir = session_dir() / name
        self.dir.mkdir()
        self.out = self.dir / "result.pickle"
        self.log = self.dir / "output.txt"
        env = dict(os.environ)
        env.setdefault("XDG_STATE_HOME", str(self.dir / "state"))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    RUNNER,
                    str(TESTS),
                    self.module,
                    self.function,
                    str(self.out),
                    str(self.dir / "done"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(TESTS.parent),
                start_new_session=True,
            )
        started = self.dir / "started.part"  # for workers: it runs, since then
        started.write_text(f"{time.time()}\n")
        started.rename(self.dir / "started")

    def stop(self) -> None:
        """End it if still running (an interrupted session): its test bed is
        given 20 s to clean up; then the files."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for_result(name: str, where: Path, timeout: float) -> Any:
    """The value a set-up started in `where` left, waiting for it (from its
    start) up to `timeout` s: from this process or another one."""
    started = float((where / "started").read_text())
    mine = _started.get(name)
    while not (where / "done").exists():
        if mine is not None and mine.proc.poll() is not None and not (where / "done").exists():
            raise AssertionError(
                f"{name}: set-up failed (exit {mine.proc.returncode}):\n{output(where)}"
            )
        if time.time() - started > timeout:
            raise AssertionError(
                f"{name}: set-up still running after {timeout:.0f} s:\n{output(where)}"
            )
        time.sleep(0.05)
    out = where / "result.pickle"
    if not out.exists():
        raise AssertionError(f"{name}: set-up failed:\n{output(where)}")
    with open(out, "rb") as f:
        return pickle.load(f)


def output(where: Path) -> str:
    try:
        return (where / "output.txt").read_text(errors="replace")[-4000:]
    except OSError:
        return "(no output)"


_started: dict[str, Early] = {}


def start(names: set[str]) -> None:
    for name in sorted(names):
        if name not in _started:
            _started[name] = Early(name)


def needed(items: list[Any]) -> set[str]:
    """The set-ups that these collected tests ask for (by fixture name)."""
    return {
        name
        for name, (module, _fn) in SETUPS.items()
        for item in items
        if Path(str(item.fspath)).stem == module and name in getattr(item, "fixturenames", ())
    }


def start_for(items: list[Any]) -> None:
    """Start the set-ups that collected tests need (pytest_collection_finish)."""
    start(needed(items))


def note_for(items: list[Any]) -> None:
    """A pytest-xdist worker has collected: it leaves a note per set-up its
    tests need, before it tells the controller (which sees only test ids)."""
    for name in needed(items):
        (session_dir() / f"{name}.needed").touch()


def start_noted() -> None:
    """The controller, once a worker has collected: start the noted set-ups."""
    start({name for name in SETUPS if (session_dir() / f"{name}.needed").exists()})


def result(name: str, timeout: float = 300.0) -> Any:
    """The set-up's value: from its early process (started here or by
    pytest-xdist's controller), or (not started early) run here now."""
    root = os.environ.get(ROOT_ENV)
    if root and (Path(root) / name / "started").exists():
        return wait_for_result(name, Path(root) / name, timeout)
    module, fn = SETUPS[name]
    return getattr(importlib.import_module(module), fn)()


def stop_all() -> None:
    """The session ends (plain, or pytest-xdist's controller): every set-up
    still running is stopped, and the directory is removed."""
    for early in _started.values():
        early.stop()
    _started.clear()
    root = os.environ.pop(ROOT_ENV, None)
    if root:
        shutil.rmtree(root, ignore_errors=True)
