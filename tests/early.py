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

RUNNER = """\
import pickle, signal, sys

def stop(*_):  # SIGTERM: unwind, so the set-up's test bed stops and cleans up
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, stop)
sys.path[:0] = [sys.argv[1]]
import importlib
value = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])()
with open(sys.argv[4], "wb") as f:
    pickle.dump(value, f)
"""


class Early:
    """One set-up running in its own process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module, self.function = SETUPS[name]
        self.dir = Path(tempfile.mkdtemp(prefix=f"gputui-early-{name}-"))
        self.out = self.dir / "result.pickle"
        self.log = self.dir / "output.txt"
        self.started = time.monotonic()
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
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(TESTS.parent),
                start_new_session=True,
            )

    def result(self, timeout: float) -> Any:
        left = timeout - (time.monotonic() - self.started)
        try:
            rc = self.proc.wait(max(left, 1.0))
        except subprocess.TimeoutExpired:
            output = self.output()
            self.stop()
            raise AssertionError(
                f"{self.name}: set-up still running after {timeout:.0f} s:\n{output}"
            ) from None
        if rc != 0 or not self.out.exists():
            raise AssertionError(f"{self.name}: set-up failed (exit {rc}):\n{self.output()}")
        with open(self.out, "rb") as f:
            return pickle.load(f)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

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


_started: dict[str, Early] = {}


def start_for(items: list[Any]) -> None:
    """Start the set-ups that collected tests need (pytest_collection_finish)."""
    for name, (module, _fn) in SETUPS.items():
        needed = any(
            Path(str(item.fspath)).stem == module and name in getattr(item, "fixturenames", ())
            for item in items
        )
        if needed and name not in _started:
            _started[name] = Early(name)


def result(name: str, timeout: float = 300.0) -> Any:
    """The set-up's value: from its early process, or (not started early) run here now."""
    early = _started.get(name)
    if early is None:
        module, fn = SETUPS[name]
        return getattr(importlib.import_module(module), fn)()
    return early.result(timeout)


def stop_all() -> None:
    for early in _started.values():
        early.stop()
