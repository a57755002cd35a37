"""End to end: the four failures from the field, reproduced on the test bed
(real sshd, stand-in pct with PID/mount namespaces, real tmux, real python3
runs writing real logs, stand-in nvidia-smi listing the runs by HOST pid),
and `gputui doctor --host gpuhost --ct N --json` run as a user would. Each
diagnosis must name the failure with its evidence, exit 1, and come back
within 10 s of the stale threshold.

All scenarios live in their own CTs on a test bed of their own and are set
up at once; their doctors run concurrently (one GPU state serves them all:
each run owns its GPU, found through the compute-apps list), in waves. The
whole set-up (~30 s, mostly waiting) starts in its own process as the
session starts (tests/early.py); the tests only read what the doctors said.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import early
import scenarios as sc
from gputui.diagnose import IDLE_SHORT_S
from gputui.doctor.run import IDLE_EXTRA_S, SETTLE_S
from scenarios import DoctorResult, Run
from slowdown import SlowdownProbe, stretched
from testbed import Testbed

STALE_AFTER = 3.0  # --stale-after for every doctor here
DEADLINE_S = 10.0  # each diagnosis within this long after the stale threshold (on a free CPU)
START_AFTER_S = 0.3  # each doctor starts this long after its run passed the threshold
CT_BASE = 300

TOP_KEYS = {"schema_version", "time", "target", "ok", "exit_code", "facts", "snapshot", "findings"}
SNAPSHOT_KEYS = {
    "time",
    "target",
    "connection",
    "ct",
    "tools",
    "gpus",
    "session",
    "sessions",
    "pane_tail",
    "log",
    "process",
    "processes",
    "metrics",
}
FINDING_KEYS = {
    "kind",
    "severity",
    "title",
    "evidence",
    "action",
    "action_label",
    "alt_action",
    "alt_action_label",
    "fix",
}


class Field:
    """The runs and what the doctor said about each."""

    def __init__(self) -> None:
        self.runs: dict[str, Run] = {}
        self.results: dict[str, DoctorResult] = {}
        self.stale_at: dict[str, float] = {}  # monotonic time the stale threshold passed
        self.slowdown: dict[str, float] = {}  # the machine's, while each doctor ran


# Each scenario: (name, CT offset, GPU (index, MiB, util %) it owns or None).
# They run in waves of WAVE_SIZE doctors (2 cores: 7 at once would measure
# the machine, not gputui); a wave's runs start while the previous wave's
# doctors work, and each doctor starts once its own run passed the threshold.
SCENARIOS: list[tuple[str, int, tuple[int, float, float] | None]] = [
    ("buffered", 0, (0, 45_000, 98)),  # busy, 45 GB, log silent
    ("crash", 1, None),
    ("crashgone", 2, None),
    ("drift", 3, (1, 44_000, 96)),
    ("healthy", 5, (3, 45_500, 100)),
    ("stopped", 6, None),
    ("hung", 4, (2, 46_000, 0)),  # memory held, idle: the longest watch, last
]
WAVE_SIZE = 3


def run_field() -> Field:
    """Every scenario and its doctor, on a test bed of its own (the runs take
    ~30 s, mostly waiting for their thresholds): tests/early.py starts this in
    its own process as the session starts."""
    testbed = Testbed().start()
    try:
        return _field_on(testbed)
    finally:
        testbed.stop()  # the CTs and everything in them too


@pytest.fixture(scope="module")
def field() -> Field:
    if not (Path(__file__).parent / "standins" / "nvidia-smi").exists():
        pytest.skip("the test bed has no nvidia-smi stand-in yet")
    return early.result("field")


def _field_on(testbed: Testbed) -> Field:
    f = Field()
    cts = {name: CT_BASE + off for name, off, _ in SCENARIOS}
    for name, n in cts.items():
        testbed.ct_create(n, running=name != "stopped")
    gpus: dict[int, dict[str, Any]] = {}
    apps: list[dict[str, Any]] = []
    waves = [SCENARIOS[i : i + WAVE_SIZE] for i in range(0, len(SCENARIOS), WAVE_SIZE)]
    pending: dict[str, tuple[list[str], float]] = {}
    with SlowdownProbe() as probe:
        for wave in waves:
            for name, _, gpu in wave:
                flags, pid = _start(testbed, f, name, cts[name])
                if gpu is not None:
                    idx, mib, util = gpu
                    gpus[idx] = sc.gpu(idx, mib, util)
                    assert pid is not None
                    apps.append(sc.app(pid, idx, mib - 200))
                launched = f.runs[name].launched if name in f.runs else time.monotonic()
                pending[name] = (flags, launched + STALE_AFTER)
            testbed.set_gpus({"gpus": [gpus[i] for i in sorted(gpus)], "apps": apps})
            _diagnose(testbed, f, cts, pending)
            pending = {}
    for name, r in f.results.items():
        f.slowdown[name] = probe.between(r.finished - r.elapsed, r.finished)
        print(f"doctor {name}: machine slowdown {f.slowdown[name]:.2f}× while it ran")
    # One human-readable report too (text mode; not timed: it runs after the waves).
    text = sc.start_doctor(testbed, cts["buffered"], *_flags(f, "buffered"), "--stale-after", "3")
    f.results["buffered-text"] = sc.finish_doctor(text)
    return f


def _flags(f: Field, name: str) -> list[str]:
    run = f.runs[name]
    return ["--session", run.session, "--log", str(run.log)]


def _start(testbed: Any, f: Field, name: str, ct: int) -> tuple[list[str], int | None]:
    """Start one scenario's run; its doctor flags and the training process's host PID."""
    if name == "stopped":
        return [], None
    session = "crash" if name == "crash" else "dflash"
    log = "crash.log" if name == "crash" else "train.log"
    run = sc.prepare(testbed, ct, name, session, log=log)
    f.runs[name] = run
    if name == "buffered":  # 1. block-buffered behind `| tee`, the field's launch line
        sc.launch(testbed, run, sc.tee_command(run.path("start_training.sh"), str(run.log)))
        pid: int | None = sc.wait_python(run, "train.py")
    elif name == "crash":  # 2a. ImportError at start, remain-on-exit in the same tmux call
        sc.launch(testbed, run, f"bash {run.path('start_crash.sh')}", remain_on_exit=True)
        pid = None
    elif name == "crashgone":  # 2b. same, no remain-on-exit: only the log keeps the traceback
        sc.launch(testbed, run, sc.tee_command(run.path("start_crash.sh"), str(run.log)))
        pid = None
    elif name == "drift":  # 3. the start script still writes train-old.log
        sc.launch(testbed, run, f"bash {run.path('start_old_log.sh')}")
        pid = sc.wait_python(run, "train.py")
    elif name == "hung":  # 4. -u, a few steps, then deadlocked holding its GPU
        sc.launch(testbed, run, sc.tee_command(run.path("start_deadlock.sh"), str(run.log)))
        pid = sc.wait_python(run, "deadlock.py")
    else:  # healthy: -u, a line every 0.2 s, GPU busy
        sc.launch(testbed, run, sc.tee_command(run.path("start_healthy.sh"), str(run.log)))
        pid = sc.wait_python(run, "train.py")
    return ["--session", session, "--log", str(run.log)], pid


def _diagnose(
    testbed: Any, f: Field, cts: dict[str, int], wave: dict[str, tuple[list[str], float]]
) -> None:
    """Run the wave's doctors concurrently, each once its threshold has passed."""
    stale = ["--stale-after", f"{STALE_AFTER:g}", "--json"]
    started = {}
    for name, (flags, stale_at) in sorted(wave.items(), key=lambda kv: kv[1][1]):
        f.stale_at[name] = stale_at
        wait = stale_at + START_AFTER_S - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        started[name] = sc.start_doctor(testbed, cts[name], *flags, *stale)
    with ThreadPoolExecutor(len(started)) as pool:
        done = {name: pool.submit(sc.finish_doctor, h) for name, h in started.items()}
        for name, fut in done.items():
            r = f.results[name] = fut.result()
            late = r.finished - f.stale_at[name]
            print(
                f"doctor {name}: exit {r.rc} in {r.elapsed:.1f} s, {late:.1f} s after the threshold"
            )


def _in_time(f: Field, name: str) -> None:
    """The diagnosis was out within DEADLINE_S of the stale threshold passing,
    on a free CPU. The doctor's deliberate waiting (its start after the
    threshold, its watch) is not stretched; the rest, CPU work (interpreter
    start, ssh handshake, parsing), is stretched by the slowdown measured
    while this doctor ran (tests/slowdown.py), so a loaded machine does not
    fail the test and a slow doctor on a free one does."""
    r = f.results[name]
    late = r.finished - f.stale_at[name]
    watch = IDLE_SHORT_S + IDLE_EXTRA_S if name == "hung" else SETTLE_S  # the hang rule's watch
    slow = f.slowdown[name]
    bound = stretched(DEADLINE_S, START_AFTER_S + watch, slow)
    assert late < bound, (
        f"{name}: named {late:.1f} s after the threshold; bound {DEADLINE_S:g} s on a free CPU,"
        f" {bound:.1f} s at the slowdown measured meanwhile ({slow:.2f}×) ({_show(r)})"
    )


def _show(r: DoctorResult) -> str:
    return f"rc={r.rc} in {r.elapsed:.1f}s\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


# ------------------------------------------------------------------ 1. buffered


def test_buffered_behind_tee_is_busy_but_silent(field: Field) -> None:
    r = field.results["buffered"]
    run = field.runs["buffered"]
    assert r.rc == 1, _show(r)
    assert r.kinds()[0] == "busy_but_silent", _show(r)
    ev = r.evidence("busy_but_silent")
    assert "pipe into tee" in ev
    assert str(run.log) in ev
    assert "PYTHONUNBUFFERED unset" in ev and "no -u" in ev
    assert "held_but_idle" not in r.kinds()
    _in_time(field, "buffered")


def test_buffered_json_has_the_process_and_its_buffering(field: Field) -> None:
    r = field.results["buffered"]
    doc = r.doc
    assert doc is not None, _show(r)
    proc = doc["snapshot"]["process"]
    assert proc is not None and proc["is_python"]
    assert proc["cmdline"][-1] == "train.py" and "-u" not in proc["cmdline"]
    out = proc["stdout"]
    assert out["kind"] == "pipe" and out["path"].startswith("pipe:[")
    assert any(rd["command"].startswith("tee") for rd in out["readers"])
    assert out["reader_files"] == [str(field.runs["buffered"].log)]
    b = proc["buffering"]
    assert b["block_buffered"] is True and b["u_flag"] is False
    assert b["pythonunbuffered"] is False and b["tty"] is False
    # the GPU the run uses, mapped from the host PID to the CT PID
    gp = [p for p in doc["snapshot"]["gpus"]["processes"] if p["ct_pid"] == proc["pid"]]
    assert gp and gp[0]["host_pid"] == field.runs["buffered"].host_pid != proc["pid"]
    assert doc["snapshot"]["log"]["size"] == 0  # nothing has reached the log


def test_buffered_text_report(field: Field) -> None:
    r = field.results["buffered-text"]
    assert r.rc == 1, _show(r)
    assert "busy_but_silent" not in r.stdout  # words for people, not ids
    assert "block-buffered" in r.stdout and "tee" in r.stdout
    assert "[r] relaunch unbuffered" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


# ------------------------------------------------------------------ 2. crash


def test_crash_with_remain_on_exit_is_session_dead(field: Field) -> None:
    r = field.results["crash"]
    assert r.rc == 1, _show(r)
    assert r.kinds()[0] == "session_dead", _show(r)
    ev = r.evidence("session_dead")
    assert "exit status 1" in ev
    assert "ModuleNotFoundError: No module named 'gputui_missing_module_xyz'" in ev
    pane = r.doc["snapshot"]["sessions"][0]["panes"][0]  # type: ignore[index]
    assert pane["dead"] is True and pane["dead_status"] == 1
    _in_time(field, "crash")


def test_crash_without_remain_on_exit_quotes_the_log(field: Field) -> None:
    r = field.results["crashgone"]
    assert r.rc == 1, _show(r)
    assert r.kinds()[0] == "session_dead", _show(r)
    ev = r.evidence("session_dead")
    assert "ModuleNotFoundError: No module named 'gputui_missing_module_xyz'" in ev
    assert "Traceback (most recent call last)" in r.doc["snapshot"]["log"]["tail"][0]  # type: ignore[index]
    assert r.doc["snapshot"]["sessions"] == []  # type: ignore[index]
    _in_time(field, "crashgone")


# ------------------------------------------------------------------ 3. drift


def test_start_script_writing_an_old_log_name(field: Field) -> None:
    r = field.results["drift"]
    run = field.runs["drift"]
    assert r.rc == 1, _show(r)
    kinds = r.kinds()
    kind = "log_missing" if "log_missing" in kinds else "log_drift"
    assert kind in kinds and kinds[0] in ("log_missing", "log_drift"), _show(r)
    ev = r.evidence(kind)
    old = str(run.dir / "train-old.log")
    assert old in r.finding(kind)["title"]
    assert str(run.log) in ev
    assert r.finding(kind)["action"] == "watch_log"
    assert "busy_but_silent" not in kinds  # -u: not buffered
    _in_time(field, "drift")


# ------------------------------------------------------------------ 4. hung


def test_unbuffered_hung_run_is_not_called_buffered(field: Field) -> None:
    """The near miss: a silent log with GPUs held is not blamed on buffering
    when the process runs with -u."""
    r = field.results["hung"]
    assert "busy_but_silent" not in r.kinds(), _show(r)
    proc = r.doc["snapshot"]["process"]  # type: ignore[index]
    assert proc["cmdline"][-2:] == ["-u", "deadlock.py"]
    assert proc["buffering"]["block_buffered"] is False and proc["buffering"]["u_flag"] is True
    gp = [p for p in r.doc["snapshot"]["gpus"]["processes"] if p["ct_pid"] == proc["pid"]]  # type: ignore[index]
    assert gp and gp[0]["gpu_uuid"] == "GPU-e2e00002"
    # the doctor watched the idle GPU long enough for the hang rule
    util = [d["util_pct"] for d in r.doc["snapshot"]["gpus"]["devices"] if d["index"] == 2]  # type: ignore[index]
    assert util == [0] and r.elapsed >= 5.0
    _in_time(field, "hung")


def test_deadlock_holding_gpus_is_held_but_idle(field: Field) -> None:
    r = field.results["hung"]
    assert r.rc == 1, _show(r)
    assert "busy_but_silent" not in r.kinds(), _show(r)  # -u: a hang is not buffering
    assert r.kinds()[0] == "held_but_idle", _show(r)
    f = r.finding("held_but_idle")
    assert f["action"] == "dump"
    ev = r.evidence("held_but_idle")
    assert "GPU 2" in ev and "last step 3" in ev
    proc = r.doc["snapshot"]["process"]  # type: ignore[index]
    assert proc["buffering"]["block_buffered"] is False and proc["buffering"]["u_flag"] is True
    _in_time(field, "hung")


# ------------------------------------------------------------------ healthy / stopped


def test_healthy_run_exits_0_with_no_finding(field: Field) -> None:
    r = field.results["healthy"]
    assert r.rc == 0, _show(r)
    doc = r.doc
    assert doc is not None and doc["ok"] is True and doc["exit_code"] == 0
    assert [f for f in doc["findings"] if f["severity"] != "info"] == []
    assert doc["snapshot"]["log"]["lines_total"] > 5
    assert doc["snapshot"]["process"]["buffering"]["block_buffered"] is False
    _in_time(field, "healthy")


def test_stopped_ct(field: Field) -> None:
    """A stopped CT cannot be inspected: one line naming it and the fix, exit 2
    (the dashboard shows the same as a `ct_stopped` banner)."""
    r = field.results["stopped"]
    assert r.rc == 2, _show(r)
    doc = r.doc
    assert doc is not None and doc["exit_code"] == 2 and doc["snapshot"] is None
    assert r.stderr.count("\n") == 1 and "stopped" in r.stderr, _show(r)
    assert f"pct start {CT_BASE + 6}" in r.stderr
    _in_time(field, "stopped")


def test_json_matches_the_documented_schema(field: Field) -> None:
    for name, r in field.results.items():
        if r.doc is None:
            assert name.endswith("-text"), _show(r)
            continue
        assert set(r.doc) >= TOP_KEYS, name
        assert r.doc["schema_version"] == 1
        assert r.doc["exit_code"] == r.rc and r.doc["ok"] == (r.rc == 0)
        for f in r.doc["findings"]:
            assert set(f) >= FINDING_KEYS and f["severity"] in ("error", "warning", "info")
        if r.doc["snapshot"] is not None:
            assert set(r.doc["snapshot"]) >= SNAPSHOT_KEYS, name


def test_gpu_memory_of_other_cts_is_not_orphaned(field: Field) -> None:
    """The GPUs are busy with the other CTs' runs: a dead run here, or a
    stopped CT, does not make that memory a leftover."""
    for name in ("crash", "crashgone", "stopped"):
        r = field.results[name]
        assert "gpu_memory_orphaned" not in r.kinds(), _show(r)
