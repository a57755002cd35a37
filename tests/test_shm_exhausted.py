"""DataLoader workers out of shared memory (/dev/shm: Docker's and a pod's
64 MB, a CT's memory limit) get a word of their own: torch's three lines
(the worker's bus error, the main process's "killed by signal: Bus error",
a tensor that could not be written to /dev/shm), each container kind's way
to a larger /dev/shm, and the shm file's "No space left on device" never
called the log's disk full. End to end: a CT whose /dev/shm is a 1 MiB
tmpfs, a run whose forked worker fills it and dies of a real SIGBUS,
`gputui doctor`. Each fails on the old code (no such kind: the session's
death, or "the disk holding the log is full")."""

from __future__ import annotations

from typing import Any

import pytest

import scenarios as sc
from gputui.containers import parse_container
from gputui.diagnose import KINDS, diagnose
from gputui.model import Finding, Severity, Snapshot
from helpers import wait_for
from test_diagnose import NOW, run

WORKER = (
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared memory (shm)."
)
MAIN = (
    "RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible "
    "that dataloader's workers are out of shared memory. Please try to raise your shared "
    "memory limit."
)
SHM_FILE = (
    "RuntimeError: unable to write to file </torch_45_2891062353_0>: No space left on device (28)"
)


def _shm(snap: Snapshot) -> Finding | None:
    return next((f for f in diagnose(snap, NOW) if f.kind == "shm_exhausted"), None)


def test_the_workers_bus_error_is_named_first_with_its_pid_and_signal() -> None:
    tail = (WORKER, "Traceback (most recent call last):", '  File "train.py"', MAIN)
    snap = run(session="dead", dead_status=1, log_tail=tail)
    first = next(f for f in diagnose(snap, NOW) if f.severity != Severity.INFO)
    assert first.kind == "shm_exhausted" and first.severity == Severity.ERROR, first
    assert "ran out of shared memory (/dev/shm)" in first.title
    assert "worker PID 4321 killed by signal: Bus error" in first.title
    assert len(first.evidence) == 1, first.evidence  # the main's line, once
    assert "`pct exec 200 -- df -h /dev/shm`" in first.fix
    assert "pct set 200 --memory" in first.fix and "num_workers" in first.fix
    assert KINDS["shm_exhausted"].alerts and KINDS["shm_exhausted"].host_word == "dead"


def test_the_worker_line_alone_and_the_shm_file_line_are_each_the_word() -> None:
    f = _shm(run(log_tail=("step 10 | loss 2.0", WORKER)))
    assert f is not None and "a worker died of a bus error" in f.title
    assert f.severity == Severity.WARNING  # the run goes on (yet)
    f = _shm(run(session="dead", dead_status=1, log_tail=(SHM_FILE,)))
    assert f is not None and "a tensor could not be written to /dev/shm" in f.title


def test_the_shm_files_no_space_is_not_the_logs_disk() -> None:
    """With the log's free space unknown (no statvfs), a "No space left on
    device" line made the disk of the log full; torch's shm file is not it."""
    kinds = [
        f.kind
        for f in diagnose(
            run(session="dead", dead_status=1, log_tail=(SHM_FILE,), fs_free=None), NOW
        )
    ]
    assert "disk_full" not in kinds and "shm_exhausted" in kinds
    tee_said = "tee: /workspace/train.log: No space left on device"
    kinds = [
        f.kind
        for f in diagnose(
            run(session="dead", dead_status=1, log_tail=(tee_said,), fs_free=None), NOW
        )
    ]
    assert "disk_full" in kinds and "shm_exhausted" not in kinds


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("docker:trainer", "`docker run --shm-size=16g …` (or `--ipc=host`)"),
        ("podman:trainer", "`podman run --shm-size=16g …`"),
        ("pod:ml/trainer-0", "emptyDir with `medium: Memory`"),
    ],
)
def test_each_container_kind_says_how_to_get_a_larger_dev_shm(spec: str, words: str) -> None:
    snap = run(session="dead", dead_status=1, log_tail=(MAIN,))
    snap.container = parse_container(spec)
    f = _shm(snap)
    assert f is not None and words in f.fix, f.fix


def test_on_a_plain_host_the_fix_is_a_remount() -> None:
    snap = run(session="dead", dead_status=1, log_tail=(MAIN,))
    snap.container = None
    f = _shm(snap)
    assert f is not None and "`mount -o remount,size=32G /dev/shm`" in f.fix, f.fix


def test_lines_about_shared_memory_that_are_not_exhaustion_are_nothing() -> None:
    tail = ("using shared memory for the dataset cache", "step 10 | loss 2.0")
    assert _shm(run(log_tail=tail)) is None


@pytest.mark.timeout(90)
def test_doctor_names_a_real_bus_error_in_a_ct_with_a_small_dev_shm(testbed: Any, ct: int) -> None:
    """The CT's /dev/shm is a 1 MiB tmpfs; the run's worker writes an 8 MiB
    batch there and the kernel kills it with SIGBUS; the run dies as torch
    does. doctor: shm_exhausted first, with the worker's real PID."""
    r = testbed.ct_exec(ct, ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", "/dev/shm"])
    assert r.returncode == 0, r.stderr
    run_ = sc.prepare(testbed, ct, "shm", "loader")
    cmd = f"python3 -u loader_shm.py {8 << 20} 2>&1 | tee {run_.log}"
    sc.launch(testbed, run_, cmd, remain_on_exit=True)
    wait_for(lambda: run_.log.exists() and "Bus error" in run_.log.read_text(), 30, "the bus error")
    line = next(ln for ln in run_.log.read_text().splitlines() if "killed by signal" in ln)
    worker = line.split("(pid ")[1].split(")")[0]
    flags = ("--json", "--session", "loader", "--log", str(run_.log))
    doc = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags), timeout=60)
    f = doc.finding("shm_exhausted")
    assert f["severity"] == "error" and doc.kinds()[0] == "shm_exhausted", doc.kinds()
    assert f"worker PID {worker} killed by signal: Bus error" in f["title"], f["title"]
    assert f"pct set {ct} --memory" in f["fix"]


def test_another_programs_out_of_shared_memory_is_not_the_loaders() -> None:
    """PostgreSQL's "out of shared memory" (its lock table) is not /dev/shm."""
    tail = ("psycopg2.errors.OutOfMemory: out of shared memory", "HINT: increase max_locks")
    assert _shm(run(session="dead", dead_status=1, log_tail=tail)) is None
