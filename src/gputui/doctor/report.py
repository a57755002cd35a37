"""`gputui doctor` output: the facts, the snapshot and the findings, as text a
person reads in five seconds or as JSON with a stable schema
(gputui/doctor/doctor-json.md, `schema_version` 1).

Pure: no I/O and no clock reads; `now` is passed in (default: the snapshot's
time). `facts` is the doctor's dict of connection facts; the keys read here
are listed in gputui/doctor/doctor-json.md, and all of them are optional.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from gputui.containers import container_for
from gputui.diagnose import buffering_words, signal_name, snapshot_holders, stdout_words
from gputui.diagnose.buffering import BUFFERED, FLUSHES, UNBUFFERED, UNKNOWN, judge
from gputui.diagnose.compare import summary, vs_last_dict
from gputui.diagnose.hardware import health_facts, health_summary
from gputui.model import Finding, GpuProcess, LogState, Proc, Severity, Snapshot
from gputui.text.untrusted import json_text, visible
from gputui.text.words import dur, gib, size_words
from gputui.verbs import keyed

SCHEMA_VERSION = 1
EXIT_OK = 0  # nothing wrong (INFO findings only count as nothing wrong)
EXIT_PROBLEM = 1  # at least one WARNING or ERROR finding
EXIT_UNINSPECTABLE = 2  # the target could not be inspected at all
LOG_TAIL_LINES = 20

_MARK = {Severity.ERROR: "✗", Severity.WARNING: "!", Severity.INFO: "·"}


# ------------------------------------------------------------------ exit


def exit_code(findings: Iterable[Finding], *, inspected: bool = True) -> int:
    """0 when nothing is wrong (INFO findings are notes), 1 when something is,
    2 when the target could not be inspected."""
    if not inspected:
        return EXIT_UNINSPECTABLE
    return EXIT_PROBLEM if any(f.severity != Severity.INFO for f in findings) else EXIT_OK


# ------------------------------------------------------------------ JSON


def _num(x: Any) -> Any:
    """JSON has no NaN/inf: those become null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _enum(x: Any) -> Any:
    return getattr(x, "value", x)


def proc_to_dict(p: Proc, log: LogState | None = None, now: float = 0.0) -> dict[str, Any]:
    out = p.stdout
    b = judge(p, log, now)
    kind = out.kind if out is not None else "unknown"
    return {
        "pid": p.pid,
        "ppid": p.ppid,
        "cmdline": list(p.cmdline or []),
        "cwd": p.cwd,
        "state": p.state,
        "cpu_pct": _num(p.cpu_pct),
        "rss_bytes": p.rss_bytes,
        "threads": p.threads,
        "start_time": _num(p.start_time),
        "is_python": p.is_python,
        "stdout": {
            "kind": kind,
            "path": out.path if out is not None else None,
            "readers": [{"pid": pid, "command": cmd} for pid, cmd in (out.readers if out else [])],
            "reader_files": list(out.reader_files) if out is not None else [],
            "files": out.files if out is not None else [],
            "description": stdout_words(p),
        },
        "buffering": {
            # the verdict, from what the log shows (block_buffered: argv/env
            # only, the suspicion); see docs/doctor-json.md
            "verdict": b.state,
            "log_evidence": b.evidence,
            "block_buffered": p.block_buffered,
            "u_flag": p.python_u_flag,
            "pythonunbuffered": p.env_pythonunbuffered,
            "tty": kind == "tty",
            "evidence": buffering_words(p) if p.is_python else [],
        },
        "fd1_pos": p.fd1_pos,
        "source_files": [{"path": f, "mtime": _num(m)} for f, m in (p.source_files or [])],
        "write_files": list(getattr(p, "write_files", None) or []),
        "reads_tty": getattr(p, "reads_tty", None),
    }


def snapshot_to_dict(snap: Snapshot, now: float | None = None) -> dict[str, Any]:
    """The snapshot as plain JSON-able data (see gputui/doctor/doctor-json.md)."""
    now = snap.time if now is None else now
    session = snap.session
    proc = snap.training_proc
    unread = getattr(snap, "run_unread", "") or None  # as last read: not known to be alive now
    return {
        "time": _num(snap.time),
        "target": snap.target,
        "connection": {
            "state": _enum(snap.connection),
            "error": snap.connection_error,
            "rtt_ms": _num(snap.rtt_ms),
        },
        "ct": {"id": snap.ct_id, "status": _enum(snap.ct_status)},
        "container": _container_dict(snap),
        "tools": {
            "tmux": snap.tools.tmux,
            "python3": snap.tools.python3,
            "py_spy": snap.tools.py_spy,
            "gdb": snap.tools.gdb,
            "nvidia_smi_host": snap.tools.nvidia_smi_host,
            "nvidia_smi_ct": snap.tools.nvidia_smi_ct,
        },
        "gpus": _gpus_dict(snap, now),
        "session": {
            "name": snap.session_name,
            "found": session is not None,
            "gone": snap.session_gone,
            "alive": session.alive if session is not None and not unread else None,
            "run_found_by": getattr(snap, "run_found_by", "") or "",
        },
        "sessions": _sessions_list(snap),
        "pane_tail": list(snap.pane_tail),
        "log": _log_dict(snap, now),
        "process": proc_to_dict(proc, snap.log, now) if proc is not None else None,
        "processes": [proc_to_dict(p, snap.log, now) for p in snap.procs],
        "run_read": {"at": _num(getattr(snap, "run_read_at", None)), "unread": unread},
        "metrics": _metrics_dict(snap),
        "ports_taken": _ports_dict(snap),
        "vs_last": vs_last_dict(snap.vs_last),
    }


def _ports_dict(snap: Snapshot) -> dict[str, Any] | None:
    """Who listens on the ports the run's output says were taken (null: not
    asked — no such line, or no agent)."""
    t = snap.ports_taken
    if t is None:
        return None
    return {
        "ports": list(t.ports),
        "holders": [
            {
                "port": h.port,
                "pid": h.pid,
                "user": h.user,
                "command": h.command,
                "session": h.session,
            }
            for h in t.holders
        ],
        "unseen": list(t.unseen),
    }


def _owner(owners: dict[int, tuple[int | None, str | None]], p: GpuProcess) -> tuple[Any, Any]:
    """(uid, user) of a GPU process in the watched container, as the agent
    there read it; (None, None): not known."""
    if not p.in_container or p.ct_pid is None:
        return None, None
    return owners.get(p.ct_pid, (None, None))


def _gpus_dict(snap: Snapshot, now: float) -> dict[str, Any]:
    """The snapshot's "gpus": each device's latest reading, the GPU processes
    (with who holds each, and whose process it is) and the feed's events."""
    g = snap.gpus
    owners = snap.gpu_owners.owners if snap.gpu_owners is not None else {}
    held_by = snapshot_holders(snap, now)
    devices = []
    for idx in sorted(g.latest):
        s = g.latest[idx]
        devices.append(
            {
                "index": s.index,
                "name": s.name,
                "uuid": s.uuid,
                "time": _num(s.time),
                "mem_used_mib": _num(s.mem_used_mib),
                "mem_total_mib": _num(s.mem_total_mib),
                "util_pct": _num(s.util_pct),
                "temp_c": _num(s.temp_c),
                "power_w": _num(s.power_w),
                "power_limit_w": _num(s.power_limit_w),
                "sm_clock_mhz": _num(s.sm_clock_mhz),
            }
        )
    return {
        "source": g.source,
        "error": g.error,
        "lost": g.lost,
        "devices": devices,
        "processes": [
            {
                "gpu_uuid": p.gpu_uuid,
                "host_pid": p.host_pid,
                "ct_pid": p.ct_pid,
                "in_container": p.in_container,
                "used_mib": _num(p.used_mib),
                "name": p.name,
                "sm_util": _num(p.sm_util),
                "state": p.state,
                "cpu_s": _num(p.cpu_s),
                "ancestors": p.ancestors,
                "ct_id": p.ct_id,
                "held_by": held_by.get((p.gpu_uuid, p.host_pid), ""),
                "uid": _owner(owners, p)[0],
                "user": _owner(owners, p)[1],
            }
            for p in g.processes
        ],
        "events": [_event_dict(e) for e in g.events],
        # the hardware's own words (issue 32): per GPU, the health fields as
        # read (null: not read / not supported) and what is wrong
        "health": _jsonable(health_facts(g, now)),
        "kernel_log": g.kernel_log,
    }


def _event_dict(e: Any) -> dict[str, Any]:
    doc = {"time": _num(e.time), "text": e.text, "lost": e.lost}
    if e.xid is not None:  # a kernel-log Xid: its number, the GPU's bus id, the PID named
        doc.update(xid=e.xid, bus_id=e.bus_id, pid=e.pid, source=e.source)
    return doc


def _sessions_list(snap: Snapshot) -> list[dict[str, Any]]:
    """The snapshot's "sessions": every tmux session seen, with its panes."""
    return [
        {
            "name": s.name,
            "socket": s.socket,
            "owner": s.owner,
            "windows": s.windows,
            "created": _num(s.created),
            "attached": s.attached,
            "alive": s.alive,
            "panes": [
                {
                    "window": p.window_index,
                    "pane": p.pane_index,
                    "pid": p.pid,
                    "dead": p.dead,
                    "dead_status": p.dead_status,
                    "dead_signal": p.dead_signal,
                    "current_command": p.current_command,
                    "start_command": p.start_command,
                    "current_path": p.current_path,
                }
                for p in s.panes
            ],
        }
        for s in snap.sessions
    ]


def _log_dict(snap: Snapshot, now: float) -> dict[str, Any]:
    """The snapshot's "log": the followed file, how it was read, its tail."""
    log = snap.log
    return {
        "path": log.path,
        "exists": log.exists,
        "size": log.size,
        "mtime": _num(log.mtime),
        "offset": log.offset,
        "lines_total": log.lines_total,
        "last_line_time": _num(log.last_line_time),
        "silent_s": _num(log.silent_for(now)),
        "truncations": log.truncations,
        "rotations": log.rotations,
        "read_via": log.read_via,
        "error": log.error,
        "fs_free": log.fs_free,
        "fs_total": log.fs_total,
        "tail": list(snap.log_tail)[-LOG_TAIL_LINES:],
    }


def _metrics_dict(snap: Snapshot) -> dict[str, Any]:
    """The snapshot's "metrics": the step and the last loss and throughput."""
    m = snap.metrics
    return {
        "preset": m.preset,
        "last_step": m.last_step,
        "last_step_time": _num(m.last_step_time),
        "median_step_interval_s": _num(m.median_step_interval),
        "loss": _num(m.loss.last()),
        "throughput": _num(m.throughput.last()),
        "throughput_unit": m.throughput_unit,
    }


def finding_to_dict(f: Finding) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "severity": _enum(f.severity),
        "title": f.title,
        "evidence": list(f.evidence),
        "action": f.action,
        "action_label": keyed(f.action, f.action_label),
        "alt_action": f.alt_action,
        "alt_action_label": keyed(f.alt_action, f.alt_action_label),
        "fix": f.fix,
    }


def doctor_dict(
    facts: dict[str, Any],
    snap: Snapshot | None,
    findings: list[Finding],
    *,
    now: float | None = None,
    inspected: bool = True,
) -> dict[str, Any]:
    """The whole `gputui doctor --json` document."""
    if now is None:
        now = snap.time if snap is not None else facts.get("time")
    code = exit_code(findings, inspected=inspected)
    return {
        "schema_version": SCHEMA_VERSION,
        "time": _num(now),
        "target": (snap.target if snap is not None else None) or facts.get("target"),
        "ok": code == EXIT_OK,
        "exit_code": code,
        "facts": _jsonable(facts),
        "snapshot": snapshot_to_dict(snap, now) if snap is not None else None,
        "findings": [finding_to_dict(f) for f in findings],
    }


def findings_to_json(
    facts: dict[str, Any],
    snap: Snapshot | None,
    findings: list[Finding],
    *,
    now: float | None = None,
    inspected: bool = True,
) -> str:
    """`gputui doctor --json`: one JSON document (schema in gputui/doctor/doctor-json.md)."""
    doc = doctor_dict(facts, snap, findings, now=now, inspected=inspected)
    return json_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))


def _jsonable(x: Any) -> Any:
    """Facts come from the doctor; make sure whatever is in them serializes."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        return _num(x)
    if x is None or isinstance(x, (str, int, bool)):
        return x
    v = getattr(x, "value", None)
    if isinstance(v, (str, int)):
        return v
    return str(x)


# ------------------------------------------------------------------ text


def render_text(
    facts: dict[str, Any],
    snap: Snapshot | None,
    findings: list[Finding],
    *,
    now: float | None = None,
) -> str:
    """What `gputui doctor` prints: one line per fact, then the findings with
    their evidence and the key or command that fixes each; ✓ when nothing is
    wrong."""
    now = now if now is not None else (snap.time if snap is not None else 0.0)
    rows: list[tuple[str, str]] = []
    target = (snap.target if snap is not None else "") or str(facts.get("target", "?"))
    rows.append(("target", target))
    rows.append(("connection", _connection_line(facts, snap)))
    ct_line = _ct_line(facts, snap)
    if ct_line:
        rows.append(("container", ct_line))
    tools = _tools_line(facts.get("tools"))
    if tools:
        rows.append(("tools", tools))
    if snap is not None:
        rows += _gpu_rows(snap)
        rows.append(("session", _session_line(snap)))
        for why in facts.get("tmux_skipped") or []:  # another user's server, not used
            rows.append(("skipped", str(why)))
        rows.append(("log", _log_line(snap, now)))
        proc = snap.training_proc
        if proc is not None:
            old = " (as last read, not now)" if getattr(snap, "run_unread", "") else ""
            rows.append(("process", f"PID {proc.pid} {_short(proc.command, 70)}{old}"))
            rows.append(("stdout", stdout_words(proc)))
            rows.append(("buffering", _buffering_verdict(proc, snap.log, now)))
        else:
            rows.append(("process", "no Python process in the session"))
        mline = _metrics_line(snap, now)
        if mline:
            rows.append(("progress", mline))
        if snap.vs_last is not None:  # the run against its last one (issue 49)
            rows.append(("vs last run", summary(snap.vs_last)))

    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines.append("")
    wrong = [f for f in findings if f.severity != Severity.INFO]
    if not wrong and snap is None:  # nothing was read: never a ✓ (issue 44)
        lines.append("? not known: nothing was read from the run")
    elif not wrong:
        lines.append("✓ nothing wrong")
    for i, f in enumerate(findings):
        if i:
            lines.append("")
        lines.append(f"{_MARK.get(f.severity, '?')} {f.severity.value.upper()}: {f.title}")
        for e in f.evidence:
            lines.append(f"    {e}")
        keys = [
            x
            for x in (keyed(f.action, f.action_label), keyed(f.alt_action, f.alt_action_label))
            if x
        ]
        if keys:
            lines.append("    → " + "   ".join(keys))
        if f.fix:
            lines.append(f"    fix: {f.fix}")
    # session names, commands, paths and remote errors are data: no raw controls
    return "\n".join(visible(line) for line in lines) + "\n"


def _short(s: str, n: int) -> str:
    s = (s or "").strip()
    return s if len(s) <= n else s[: n - 1] + "…"


def _connection_line(facts: dict[str, Any], snap: Snapshot | None) -> str:
    if snap is not None:
        state = _enum(snap.connection)
        err = snap.connection_error
        rtt = snap.rtt_ms
    else:
        state = facts.get("connection", "failed")
        err = facts.get("error") or facts.get("connection_error")
        rtt = facts.get("rtt_ms")
    line = str(state)
    if isinstance(rtt, (int, float)) and math.isfinite(rtt):
        line += f" (round trip {rtt:.0f} ms)"
    for k in ("ssh", "server_version", "host_key"):
        if facts.get(k):
            line += f", {k.replace('_', ' ')} {facts[k]}"
    if err and str(state) != "connected":
        line += f" — {err}"
    return line


def _tools_line(tools: Any) -> str:
    """`tmux 3.3a · Python 3.11.7 · py-spy missing · GNU gdb 13.1 · nvidia-smi host+ct`."""
    if not isinstance(tools, dict):
        return ""
    parts = []
    for name, key in (
        ("tmux", "tmux"),
        ("python3", "python3"),
        ("py-spy", "py_spy"),
        ("gdb", "gdb"),
    ):
        version = str(tools.get(key) or "missing")
        # `tmux -V` says "tmux 3.3a", python3 "Python 3.11.7": name the tool once
        known = version.lower().startswith(name[:4].lower()) or name[:3] in version.lower()
        parts.append(version if known and version != "missing" else f"{name} {version}")
    where = [
        w for w, key in (("host", "nvidia_smi_host"), ("ct", "nvidia_smi_ct")) if tools.get(key)
    ]
    parts.append("nvidia-smi " + ("+".join(where) if where else "missing"))
    return " · ".join(parts)


def _container_dict(snap: Snapshot) -> dict[str, str] | None:
    c = snap.container
    return {"kind": c.kind, "spec": c.spec} if c is not None and c.kind else None


def _facts_place(facts: dict[str, Any]) -> tuple[str | None, Any]:
    """The container connection_facts name ({"ct": {"number", "status"}} or
    {"container": {"kind", "spec", "status"}}) in its own words and its
    status: the Container is built from the number or spec, as the
    snapshot's is, so both lines read the same. None: the plain host."""
    ct, other = facts.get("ct"), facts.get("container")
    ct = ct if isinstance(ct, dict) else {}
    other = other if isinstance(other, dict) else {}
    place, status = (
        (other.get("spec"), other.get("status")) if other else (ct.get("number"), ct.get("status"))
    )
    if place is None or place == "" or isinstance(place, bool):
        return None, status
    try:
        return container_for(place).words, status
    except (ValueError, TypeError):  # a spec this version does not read: said as it came
        return visible(f"{other.get('kind')} {place}"), status


def _ct_line(facts: dict[str, Any], snap: Snapshot | None) -> str:
    """'CT 200 running', 'docker container trainer running', 'none (plain
    host)': the container's `words` with or without a snapshot."""
    if snap is None:
        where, status = _facts_place(facts)
    else:
        c = snap.container
        where, status = (c.words if c is not None and c.kind else None), _enum(snap.ct_status)
    if where is None:
        return "none (plain host)" if status in (None, "none", "unknown") else str(status)
    return f"{where} {status}"


def _gpu_rows(snap: Snapshot) -> list[tuple[str, str]]:
    g = snap.gpus
    held_by = snapshot_holders(snap, snap.time, users=True)
    rows = []
    for idx in sorted(g.latest):
        s = g.latest[idx]
        parts = [s.name or "GPU"]
        total = f"/{gib(s.mem_total_mib)}" if s.mem_total_mib else ""
        parts.append(f"{gib(s.mem_used_mib)}{total}")
        parts.append("util ?" if s.util_pct is None else f"{s.util_pct:.0f} %")
        if s.temp_c is not None:
            parts.append(f"{s.temp_c:.0f} °C")
        if s.power_w is not None:
            lim = f"/{s.power_limit_w:.0f}" if s.power_limit_w else ""
            parts.append(f"{s.power_w:.0f}{lim} W")
        for p in g.processes or []:  # who: "held by session eval (PID 491 alice)"
            who = held_by.get((p.gpu_uuid, p.host_pid))
            if p.gpu_uuid == s.uuid and who:
                util = "" if p.sm_util is None else f", {p.sm_util:.0f} % SM"
                parts.append(f"[{gib(p.used_mib)} {who}{util}]")
        rows.append((f"GPU {idx}", "  ".join(parts)))
        if idx in g.health or s.event_reasons is not None:
            rows.append(("", health_summary(g, idx).split(": ", 1)[1]))
    if g.kernel_log:
        rows.append(("kernel log", g.kernel_log))
    if not rows:
        rows.append(("GPUs", g.error or "no readings"))
    elif g.error:
        rows.append(("GPUs", g.error))
    return rows


def _session_line(snap: Snapshot) -> str:
    line = _watched_session(snap)
    others = sorted({x.name for x in snap.sessions} - {snap.session_name or ""})
    if others and snap.session is not None:  # two runs in one CT: the report is on one
        line += f" · not reported on: {', '.join(others)} (--session NAME)"
    return line


def _watched_session(snap: Snapshot) -> str:
    name = snap.session_name
    if not name:
        return "none watched"
    if snap.session_gone:
        return f"{name}: gone"
    if getattr(snap, "run_unread", ""):  # as last read: never said alive
        return f"{name}: not read now — {snap.run_unread}"
    s = snap.session
    if s is None:
        others = ", ".join(x.name for x in snap.sessions) or "none"
        return f"{name}: not found (sessions: {others})"
    if s.owner is not None:  # another user's tmux server, or a named one
        name = f"{name} (tmux server of {s.owner}: {s.socket})"
    p = s.main_pane
    if p is None:
        return f"{name}: alive"
    if p.dead:
        if p.dead_signal:
            how = f"signal {p.dead_signal} ({signal_name(p.dead_signal)})"
        elif p.dead_status is not None:
            how = f"exit status {p.dead_status}"
        else:
            how = "exit status unknown"
        return f"{name}: pane dead, {how}"
    cmd = f" — {_short(p.start_command, 60)}" if p.start_command else ""
    return f"{name}: alive, pane PID {p.pid}{cmd}"


def _log_line(snap: Snapshot, now: float) -> str:
    log = snap.log
    if not log.path:
        return "none watched"
    if log.exists is False:
        return f"{log.path}: does not exist"
    parts = [log.path + (f" (deleted; read through {log.read_via})" if log.read_via else "")]
    if log.size is not None:
        parts.append(f"{log.size:,} bytes")
    silent = log.silent_for(now)
    if silent is not None:  # a line gputui read, or only the file's mtime (none read, behind)
        seen = log.last_line_time is not None and not log.behind
        parts.append(f"{'last line' if seen else 'last written'} {dur(silent)} ago")
    if log.fs_free is not None:
        total = f" of {size_words(log.fs_total)}" if log.fs_total else ""
        parts.append(f"{size_words(log.fs_free)} free{total} on its disk")
    if log.error:
        parts.append(log.error)
    return ", ".join(parts)


def _buffering_verdict(p: Proc, log: LogState, now: float) -> str:
    if not p.is_python:
        return "not a Python process"
    b = judge(p, log, now)
    verdict = {
        BUFFERED: "BLOCK-BUFFERED",
        FLUSHES: "flushes its own lines",
        UNKNOWN: "not yet known (the log has not shown blocks or single lines yet)",
        UNBUFFERED: "line-buffered/unbuffered",
    }.get(b.state, "unknown")
    return "; ".join([f"{verdict} ({'; '.join(buffering_words(p))})", *b.evidence])


def _metrics_line(snap: Snapshot, now: float) -> str:
    m = snap.metrics
    parts = []
    if m.last_step is not None:
        ago = f" ({dur(now - m.last_step_time)} ago)" if m.last_step_time is not None else ""
        parts.append(f"step {m.last_step}{ago}")
    loss = m.loss.last()
    if loss is not None:
        parts.append(f"loss {loss:.4g}")
    thr = m.throughput.last()
    if thr is not None:
        parts.append(f"{thr:,.0f} {m.throughput_unit}".rstrip())
    if m.median_step_interval is not None:
        parts.append(f"median step {m.median_step_interval:.1f} s")
    return ", ".join(parts)
