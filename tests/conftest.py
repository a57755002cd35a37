"""Shared fixtures: the real-sshd test bed and fresh containers in it (see tests/testbed.py)."""

from __future__ import annotations

import fcntl
import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import early
import workload
from testbed import Testbed

_ct_numbers = itertools.count(200)


def is_worker(config: pytest.Config) -> bool:
    """A pytest-xdist worker (the controller and a plain session are not)."""
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): two workers per core, at most 4. Each
    worker has its own test bed; most tests wait (on runs, sshd, tmux, a
    stale threshold) more than they compute. On 2 cores, a fresh clone's
    `.ci/run` beside a soak (one core's load): 14.4 min of tests with 2
    workers, 8.3 min with 4, both green."""
    return max(1, min(4, 2 * len(os.sched_getaffinity(0))))


def pytest_configure(config: pytest.Config) -> None:
    if not is_worker(config):
        early.configure()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (tests/workload.py): pytest-xdist hands the
    files out in this order (pyproject: --no-loadscope-reorder)."""
    workload.order(items)


@pytest.hookimpl(tryfirst=True)  # a worker's notes are written before xdist reports
def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if is_worker(session.config):
        early.note_for(session.items)  # for the controller, which starts them
    else:
        early.start_for(session.items)  # slow waiting set-ups overlap the tests before them


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    early.start_noted()  # the controller: once, for every worker


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not is_worker(session.config):
        early.stop_all()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under pytest-xdist, a test marked `alone` (it loads every core on
    purpose) runs while no other worker runs a test, and waits for the one
    running; the other tests share. The lock is taken before the test's
    timeout starts (pytest-timeout wraps this same hook, inside this one).

    A turnstile in front of the shared lock: once an `alone` test holds it,
    no other worker starts a test, so it waits only for the tests already
    running. (flock grants a shared lock beside a waiting exclusive one: with
    three workers taking turns, the `alone` test and the files queued behind
    it on its worker waited until the others ran out of tests.)"""
    if not is_worker(item.config):
        yield
        return
    root = early.session_dir()
    with open(root / "turnstile.lock", "a") as gate, open(root / "cores.lock", "a") as lock:
        if item.get_closest_marker("alone"):
            fcntl.flock(gate, fcntl.LOCK_EX)  # held to the end: no test starts meanwhile
            fcntl.flock(lock, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)  # passes at once unless an `alone` test holds it
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


@pytest.fixture(autouse=True, scope="session")
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """gputui's state (run history, audit log) goes to a temporary directory
    during tests, never the tester's ~/.local/state; a test may still set
    its own XDG_STATE_HOME. Likewise the config: an empty XDG_CONFIG_HOME,
    never the tester's $XDG_CONFIG_HOME/gputui/config.toml."""
    old = {k: os.environ.get(k) for k in ("XDG_STATE_HOME", "XDG_CONFIG_HOME")}
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("state"))
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config"))
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """A real OpenSSH sshd on 127.0.0.1 serving the stand-in pct and nvidia-smi."""
    tb = Testbed().start()
    try:
        yield tb
    finally:
        tb.stop()


@pytest.fixture
def ct(testbed: Testbed) -> Iterator[int]:
    """A fresh running container number (200, 201, ...); destroyed with its processes afterwards."""
    number = next(_ct_numbers)
    while testbed.ct_conf_path(number).exists():  # taken by a test that picked its own number
        number = next(_ct_numbers)
    testbed.ct_create(number, running=True)
    try:
        yield number
    finally:
        testbed.ct_destroy(number)


@pytest.fixture
def unprivileged_ct(testbed: Testbed) -> Iterator[int]:
    """A fresh running unprivileged container (`unprivileged: 1`): a user
    namespace of its own, its uid 0 the host's 100000."""
    number = next(_ct_numbers)
    while testbed.ct_conf_path(number).exists():
        number = next(_ct_numbers)
    try:
        testbed.ct_create(number, running=True, unprivileged=True)
        probe = testbed.ct_exec(number, ["id", "-u"], timeout=30)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        testbed.ct_destroy(number)
        pytest.skip(f"this machine cannot run the stand-in's unprivileged CT: {err}")
    if probe.returncode != 0 and any(
        w in probe.stderr for w in ("user namespace", "idmap", "mount_setattr", "open_tree")
    ):  # a kernel or filesystem without user namespaces or idmapped mounts
        testbed.ct_destroy(number)
        pytest.skip(f"no unprivileged CT on this machine: {probe.stderr.strip()[:300]}")
    try:
        yield number
    finally:
        testbed.ct_destroy(number)


@pytest.fixture
def pct_without_delay(testbed: Testbed) -> Iterator[None]:
    """`pct` called through ssh starts at once instead of after the 0.3 s the
    Perl original takes: for tests of what actions do, not of how long they
    take (nor of what a slower `pct` lets a watcher see)."""
    testbed.set_pct_delay(0)
    try:
        yield
    finally:
        testbed.set_pct_delay(0.3)


@pytest.fixture
def testbed_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, testbed: Testbed, pct_without_delay: None
) -> None:
    """gputui's commands in this process reach the CT through the test bed's
    stand-in pct, at once; no PYTHON*/TMUX* setting of this machine leaks into
    the runs (it sets PYTHONUNBUFFERED); the audit log goes under tmp_path."""
    monkeypatch.setenv("PATH", f"{testbed.bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("GPUTUI_STANDIN_STATE", str(testbed.state_dir))
    monkeypatch.setenv("GPUTUI_PCT_DELAY", "0")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for k in list(os.environ):
        if k.startswith(("PYTHON", "TMUX")):
            monkeypatch.delenv(k)
