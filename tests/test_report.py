"""gputui.doctor.report: doctor text, the JSON document (schema v1) and the exit code."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from gputui.config import Settings
from gputui.containers import Container, Docker, Podman, ProxmoxLXC, parse_container
from gputui.diagnose import diagnose
from gputui.doctor.facts import connection_facts
from gputui.doctor.report import (
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_UNINSPECTABLE,
    SCHEMA_VERSION,
    doctor_dict,
    exit_code,
    findings_to_json,
    render_text,
    snapshot_to_dict,
)
from gputui.model import ConnectionState, CtStatus, Finding, Severity, Snapshot
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

sys.path.insert(0, str(Path(__file__).parent))
from test_diagnose import IMPORT_TB, NOW, partial_snapshots, run

FACTS = {"target": "root@10.1.2.6 ct 200", "ssh": "OpenSSH_9.2p1", "rtt_ms": 12.0}
DOC = Path(__file__).parent.parent / "src" / "gputui" / "doctor" / "doctor-json.md"


def F(sev: Severity, kind: str = "x") -> Finding:
    return Finding(kind=kind, severity=sev, title="t")


@pytest.mark.parametrize(
    ("sevs", "inspected", "code"),
    [
        ((), True, EXIT_OK),
        ((Severity.INFO, Severity.INFO), True, EXIT_OK),
        ((Severity.INFO, Severity.WARNING), True, EXIT_PROBLEM),
        ((Severity.ERROR,), True, EXIT_PROBLEM),
        ((), False, EXIT_UNINSPECTABLE),
    ],
)
def test_exit_code(sevs: tuple[Severity, ...], inspected: bool, code: int) -> None:
    assert exit_code([F(s) for s in sevs], inspected=inspected) == code


def test_json_buffered_run_has_process_stdout_and_buffering_evidence() -> None:
    snap = run(buffered=True, silent=240.0, steps=False)
    findings = diagnose(snap, NOW)
    doc = json.loads(findings_to_json(FACTS, snap, findings, now=NOW))
    assert doc["schema_version"] == SCHEMA_VERSION == 1
    assert doc["exit_code"] == 1 and doc["ok"] is False
    assert doc["target"] == "root@10.1.2.6 ct 200"
    p = doc["snapshot"]["process"]
    assert p["pid"] == 12 and p["cmdline"] == ["python", "train.py"]
    assert p["stdout"]["kind"] == "pipe"
    assert p["stdout"]["readers"] == [{"pid": 13, "command": "tee /workspace/train.log"}]
    assert p["stdout"]["files"] == ["/workspace/train.log"]
    judged = p["buffering"]
    assert judged.pop("verdict") == "buffered"  # the log showed an 8 KiB block
    (said,) = judged.pop("log_evidence")
    assert "stopped mid-line at byte 16,384 (a 4 KiB boundary)" in said, said
    assert p["buffering"] == {
        "block_buffered": True,
        "u_flag": False,
        "pythonunbuffered": False,
        "tty": False,
        "evidence": [
            "no -u on its command line",
            "PYTHONUNBUFFERED unset",
            "stdout is not a tty (pipe)",
        ],
    }
    assert doc["snapshot"]["log"]["silent_s"] == pytest.approx(240.0)
    assert doc["snapshot"]["gpus"]["devices"][0]["util_pct"] == 96.0
    assert doc["snapshot"]["session"] == {
        "name": "dflash",
        "found": True,
        "gone": False,
        "alive": True,
        "run_found_by": "session",
    }
    (f,) = doc["findings"]
    assert f["kind"] == "busy_but_silent" and f["severity"] == "warning"
    assert f["action"] == "relaunch" and f["alt_action"] == "flush"
    assert doc["facts"]["ssh"] == "OpenSSH_9.2p1"


def test_json_keys_match_the_documented_schema() -> None:
    """Every key the JSON has is named in gputui/doctor/doctor-json.md (and the doc
    names schema_version 1), so the doc cannot fall behind silently."""
    text = DOC.read_text()
    assert "schema_version" in text and "`1`" in text
    snap = run(session="dead", dead_status=1, pane_tail=IMPORT_TB)
    doc = doctor_dict(FACTS, snap, diagnose(snap, NOW), now=NOW)

    def keys(x: object, prefix: str = "") -> set[str]:
        out: set[str] = set()
        if isinstance(x, dict):
            for k, v in x.items():
                if prefix == "facts":
                    continue
                out.add(k)
                out |= keys(v, k)
        elif isinstance(x, list):
            for v in x:
                out |= keys(v, prefix)
        return out

    missing = sorted(k for k in keys(doc) if f"`{k}`" not in text)
    assert missing == []


def test_json_no_nan_and_no_snapshot() -> None:
    snap = run()
    snap.gpus.latest[0].util_pct = math.nan
    d = snapshot_to_dict(snap, NOW)
    assert d["gpus"]["devices"][0]["util_pct"] is None
    doc = json.loads(
        findings_to_json(
            {
                "target": "h",
                "connection": "failed",
                "error": "Connection refused",
                "when": object(),
            },
            None,
            [],
            inspected=False,
        )
    )
    assert doc["snapshot"] is None and doc["exit_code"] == 2 and doc["ok"] is False
    assert isinstance(doc["facts"]["when"], str)


def test_text_healthy_run_says_nothing_wrong() -> None:
    snap = run()
    snap.rtt_ms = 12.0
    snap.connection = ConnectionState.CONNECTED
    text = render_text(FACTS, snap, diagnose(snap, NOW), now=NOW)
    lines = text.splitlines()
    assert lines[0].startswith("target") and "root@10.1.2.6 ct 200" in lines[0]
    assert "connected (round trip 12 ms)" in text
    assert "CT 200 running" in text
    assert any(ln.startswith("GPU 0") and "96 %" in ln and "43.9 GiB" in ln for ln in lines)
    assert "dflash: alive, pane PID 10" in text
    assert "/workspace/train.log" in text and "last line 2 s ago" in text
    assert "PID 12 python train.py" in text
    assert "line-buffered/unbuffered" in text
    assert lines[-1] == "✓ nothing wrong"
    assert "ERROR" not in text and "WARNING" not in text


def test_text_buffered_run_names_target_verdict_and_key() -> None:
    snap = run(buffered=True, silent=240.0, steps=False)
    text = render_text(FACTS, snap, diagnose(snap, NOW), now=NOW)
    assert "a pipe into tee (PID 13) writing /workspace/train.log" in text
    assert "BLOCK-BUFFERED (no -u on its command line; PYTHONUNBUFFERED unset" in text
    assert "! WARNING: GPUs busy, log silent 4 min" in text
    assert "→ [r] relaunch unbuffered   [f] flush live" in text
    assert "✓" not in text
    assert len(text.splitlines()) < 30  # readable in five seconds


def test_text_dead_session_and_fix_lines() -> None:
    snap = run(session="dead", dead_signal=9, pane_tail=IMPORT_TB, util=0.0, mem=0.0)
    text = render_text(FACTS, snap, diagnose(snap, NOW), now=NOW)
    assert "dflash: pane dead, signal 9 (SIGKILL)" in text
    assert "✗ ERROR: session dflash died: killed (signal 9, SIGKILL) — OOM killer?" in text
    assert "  │ ModuleNotFoundError: No module named 'flash_attn'" in text
    assert "no Python process in the session" in text

    stopped = Snapshot(time=NOW, target="root@h ct 201", container=ProxmoxLXC(201))
    stopped.connection = ConnectionState.CONNECTED
    from gputui.model import CtStatus

    stopped.ct_status = CtStatus.STOPPED
    text = render_text({}, stopped, diagnose(stopped, NOW), now=NOW)
    assert "CT 201 stopped" in text
    assert "fix: pct start 201" in text


def test_text_info_only_is_nothing_wrong() -> None:
    snap = run(session="dead", dead_status=0, util=0.0, mem=0.0)
    findings = diagnose(snap, NOW)
    assert [f.kind for f in findings] == ["run_finished"]
    text = render_text(FACTS, snap, findings, now=NOW)
    assert "✓ nothing wrong" in text and "· INFO: the run in session dflash finished" in text
    assert exit_code(findings) == 0


def test_text_without_snapshot() -> None:
    facts = {"target": "root@gpuhost.invalid", "connection": "failed", "error": "name not known"}
    text = render_text(facts, None, [])
    assert "root@gpuhost.invalid" in text
    assert "failed — name not known" in text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=partial_snapshots())
def test_report_never_raises(snap: Snapshot) -> None:
    findings = diagnose(snap, NOW)
    doc = json.loads(findings_to_json({}, snap, findings))
    assert doc["exit_code"] == exit_code(findings)
    assert render_text({}, snap, findings).endswith("\n")


def test_a_log_gputui_has_not_read_says_last_written_not_last_line() -> None:
    """No line read (a log gputui may not read, or one it is behind on): its
    age is the file's mtime, "last written", never "last line 0 s ago"."""
    snap = run()
    snap.log.last_line_time = None
    snap.log.mtime = NOW - 3
    snap.log.error = "cannot read /workspace/train.log: permission denied"
    text = render_text(FACTS, snap, diagnose(snap, NOW), now=NOW)
    assert "last written 3 s ago" in text and "last line" not in text
    assert "permission denied" in text


def test_the_container_line_without_a_snapshot_reads_the_connection_facts() -> None:
    """doctor with no snapshot (the run never read) prints the connection's
    facts: a CT's number and status came as a dict and were printed as
    one ("CT {'number': 200, …} None")."""
    ct = {"target": "h/200", "ct": {"number": 200, "status": "running"}}
    assert "CT 200 running" in render_text(ct, None, [], now=0.0)
    docker = {
        "target": "h",
        "ct": None,
        "container": {"kind": "docker", "spec": "docker:trainer", "status": "running"},
    }
    assert "docker container trainer running" in render_text(docker, None, [], now=0.0)
    assert "none (plain host)" in render_text({"target": "h", "ct": None}, None, [], now=0.0)
    odd = {"target": "h", "container": {"kind": "box", "spec": "box:x", "status": "running"}}
    assert "box box:x running" in render_text(odd, None, [], now=0.0)  # a spec no kind reads


PLACES = [
    None,
    ProxmoxLXC(200),
    Docker("trainer"),
    Podman("trainer"),
    parse_container("pod:ml/trainer-0/main"),
]


@pytest.mark.parametrize("place", PLACES, ids=lambda c: c.spec if c else "host")
def test_the_container_line_reads_the_same_with_and_without_a_snapshot(
    place: Container | None,
) -> None:
    """Both paths say the container in its own words (Container.words): the
    facts' path wrote 'docker docker:trainer running' from the connection's
    facts, the snapshot's 'docker container trainer running'."""
    target = Target(LocalTransport(), place)
    facts = connection_facts(target, Settings(local=True), connect_ms=1.0)
    snap = Snapshot(time=NOW, target=target.label, container=place)
    snap.ct_status = CtStatus.RUNNING if place is not None else None
    with_snap = _container_line(render_text(facts, snap, [], now=NOW))
    without = _container_line(render_text(facts, None, [], now=NOW))
    assert without == with_snap, (without, with_snap)
    words = place.words + " running" if place is not None else "none (plain host)"
    assert with_snap == words, with_snap


def _container_line(text: str) -> str:
    line = next(x for x in text.splitlines() if x.startswith("container"))
    return line.removeprefix("container").strip()


def test_with_nothing_read_the_doctor_never_says_nothing_wrong() -> None:
    text = render_text({"target": "h/200", "connection": "failed"}, None, [], now=0.0)
    assert "nothing wrong" not in text
    assert "? not known: nothing was read from the run" in text


def _gpu_row(text: str, index: int) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"GPU {index} "))


def test_the_text_report_says_whose_each_holder_is_as_the_gpu_pane_does() -> None:
    """doctor's GPU rows name each holder's user after its PID, as the GPU
    pane does ('session eval (PID 5310 alice, 5.1 GiB)', issue 45): another
    user's than the run's marked in words, the run user's own plain, none
    when the container did not say; the JSON's held_by keeps its words (its
    uid and user are fields of their own)."""
    from gputui.demo.scenes import SCENES, T0
    from gputui.model import GpuOwners

    snap, _lines, _findings = SCENES["shared"](T0)  # root's run; alice's eval on GPU 0
    text = render_text(FACTS, snap, [], now=T0)
    assert "[5.1 GiB held by session eval (PID 5310 alice — not this run's user)]" in text, text
    assert "held by CT 201 (eval-box) (PID 91822)]" in _gpu_row(text, 7), text  # not said: none
    held = {p["ct_pid"]: p for p in snapshot_to_dict(snap, T0)["gpus"]["processes"]}
    assert held[5310]["held_by"] == "held by session eval (PID 5310)", held
    assert (held[5310]["uid"], held[5310]["user"]) == (1001, "alice"), held
    snap.gpu_owners = GpuOwners({4242: (0, "root"), 5310: (0, "root")}, me=0, at=T0)
    text = render_text(FACTS, snap, [], now=T0)
    assert "[5.1 GiB held by session eval (PID 5310 root)]" in _gpu_row(text, 0), text
    snap.gpu_owners = GpuOwners({4242: (0, "root"), 5310: (1002, None)}, me=0, at=T0)
    text = render_text(FACTS, snap, [], now=T0)
    row = _gpu_row(text, 0)
    assert "held by session eval (PID 5310 uid 1002 — not this run's user)]" in row, text


def test_a_run_not_read_now_is_never_said_alive() -> None:
    """The agent lost (a CT stopped and started again): the session and its
    processes as last read are not said alive, in the JSON or the text."""
    snap = run()
    assert snapshot_to_dict(snap, NOW)["session"]["alive"] is True
    snap.run_read_at = NOW - 6.0
    snap.run_unread = "gputui's agent in CT 200 is not answering; starting it again"
    d = snapshot_to_dict(snap, NOW)
    assert d["session"]["alive"] is None
    assert d["run_read"] == {"at": NOW - 6.0, "unread": snap.run_unread}
    text = render_text(FACTS, snap, diagnose(snap, NOW), now=NOW)
    assert "not read now — gputui's agent in CT 200 is not answering" in text, text
    assert ": alive" not in text and "(as last read, not now)" in text, text
