"""`gputui doctor --host H` on a Proxmox host: the host view as text and JSON.

Pure: a HostView (hostview.py) in, the report and its exit code out. Each
container with its state, sessions, the GPUs its processes hold and its one
word of health; each GPU with who holds it; the exit code is the worst of
the words (gputui/doctor/doctor-json.md, "A Proxmox host").
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from gputui.doctor.report import (
    EXIT_OK,
    EXIT_PROBLEM,
    EXIT_UNINSPECTABLE,
    SCHEMA_VERSION,
    _jsonable,
)
from gputui.host.view import DOWN_STATES, ContainerRow, GpuRow, HostView, rank
from gputui.text.untrusted import json_text, visible
from gputui.text.words import gib

# words that need a person (exit 1); "down" is a container that could not be
# inspected (exit 2); ok / idle / stopped are nothing wrong
PROBLEM_WORDS = frozenset({"dead", "full", "hung", "stalled", "buffered", "starting"})


def word_exit(word: str) -> int:
    if word == "down":
        return EXIT_UNINSPECTABLE
    return EXIT_PROBLEM if word in PROBLEM_WORDS else EXIT_OK


def host_exit(view: HostView) -> int:
    """The worst of the containers' words; memory no live process holds, or
    a part not seen within the watch's bound, is a problem too."""
    if view.connection in DOWN_STATES:
        return EXIT_UNINSPECTABLE
    codes = [word_exit(c.health) for c in view.containers]
    if any(g.orphaned or g.broken for g in view.gpus) or not_seen(view):
        codes.append(EXIT_PROBLEM)
    return max(codes, default=EXIT_OK)


def where(place: int | str | None) -> str:
    """A host view key in words: 'CT 200', 'docker trainer', 'host'."""
    if place is None:
        return "host"
    return place.replace(":", " ", 1) if isinstance(place, str) else f"CT {place}"


def _order(c: ContainerRow) -> tuple[int, int, int, str]:
    """Worst first; then the host, CTs by number, other kinds by name."""
    n = c.id if isinstance(c.id, int) else 0
    return (rank(c.health), c.id is not None, n, str(c.id or ""))


def not_seen(view: HostView) -> list[str]:
    """What the watch had not seen when it stopped (never "nothing wrong")."""
    missing = []
    if view.containers_known is None:
        missing.append("the host's list of containers")
    if not view.gpu_error and not (view.gpus and view.holders_known):
        missing.append("the GPUs and the processes holding them")
    missing += [f"{where(c.id)}'s run" for c in view.containers if c.health == "starting"]
    return missing


def _container(c: ContainerRow) -> dict[str, Any]:
    return {
        "id": c.id,
        "name": c.name,
        "status": c.status,
        "health": c.health,
        "why": c.why,
        "sessions": list(c.sessions),
        "session": c.watched_session,
        "gpus": list(c.gpus),
    }


def _gpu(g: GpuRow) -> dict[str, Any]:
    doc = asdict(g)
    doc["orphaned"] = g.orphaned
    # a holder's container is `ct` in the document (docs/doctor-json.md), as ever
    doc["holders"] = [
        {("ct" if k == "place" else k): v for k, v in h.items()} for h in doc["holders"]
    ]
    return doc


def host_dict(view: HostView, facts: dict[str, Any], now: float) -> dict[str, Any]:
    """The `gputui doctor --json` document of a Proxmox host; `facts`: the
    connection's, as the run doctor's (doctor.connection_facts)."""
    code = host_exit(view)
    facts = {**facts, "target": view.label, "kind": "proxmox host"}
    if view.connection in DOWN_STATES and view.error:
        facts["error"] = view.error
    if not_seen(view):
        facts["not_seen"] = not_seen(view)
    return {
        "schema_version": SCHEMA_VERSION,
        "time": now,
        "target": view.label,
        "ok": code == EXIT_OK,
        "exit_code": code,
        "facts": _jsonable(facts),
        "snapshot": None,
        "findings": [],
        "host": {
            "health": view.health,
            "gpu_error": view.gpu_error,
            "containers": [_container(c) for c in view.containers],
            "gpus": [_gpu(g) for g in view.gpus],
        },
    }


def host_json(view: HostView, facts: dict[str, Any], now: float) -> str:
    doc = host_dict(view, facts, now)
    return json_text(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False))


def _mib(x: float | None) -> str:
    return "?" if x is None else f"{x:.0f}"


def _gpu_line(g: GpuRow) -> str:
    util = "?" if g.util_pct is None else f"{g.util_pct:.0f}%"
    line = f"GPU {g.index}  {visible(g.name)}  {_mib(g.mem_used_mib)}/{_mib(g.mem_total_mib)} MiB  {util}"
    holders = []
    for h in g.holders:
        pid = h.ct_pid if h.ct_pid is not None else h.host_pid
        who = f"{where(h.place)} pid {pid} {visible(h.process)}"
        if h.used_mib is not None:  # how much each holds: a shared GPU reads as the host view's
            who += f" {gib(h.used_mib)}"
        if h.session:
            who += f" (session {visible(h.session)})"
        if not h.alive:
            who += " (gone)"
        holders.append(who)
    if holders:
        line += "  held by " + ", ".join(holders)
    if g.orphaned:
        line += f"  ✗ {_mib(g.unowned_mib)} MiB held by no live process"
    for issue in g.issues:  # the hardware's own words
        line += f"  {'✗' if g.broken else '⚠'} {issue.split(': ', 1)[-1]}"
    return line


def _container_lines(rows: list[ContainerRow]) -> list[str]:
    """One aligned line per container: number, name, status, word, GPUs,
    sessions, and the finding behind the word."""
    cells = [
        (
            where(c.id),
            visible(c.name),
            c.status,
            c.health,
            "GPUs " + (",".join(str(i) for i in c.gpus) or "-"),
            ", ".join(visible(s) for s in c.sessions) or "no session",
        )
        for c in rows
    ]
    widths = [max((len(r[i]) for r in cells), default=0) for i in range(5)]
    out = []
    for c, r in zip(rows, cells, strict=True):
        line = "  ".join([*(v.ljust(w) for v, w in zip(r, widths, strict=False)), r[5]])
        out.append(f"{line} — {visible(c.why)}" if c.why else line)
    return out


def _connection(facts: dict[str, Any]) -> str:
    conn = facts.get("connection")
    rtt = conn.get("rtt_ms") if isinstance(conn, dict) else None
    state = conn.get("state", "connected") if isinstance(conn, dict) else "connected"
    return f"{state} (round trip {rtt:.0f} ms)" if isinstance(rtt, (int, float)) else str(state)


def _engine(view: HostView) -> str:
    """What lists the host's containers: Proxmox, or Docker/Podman by their keys."""
    kinds = {c.id.split(":", 1)[0] for c in view.containers if isinstance(c.id, str)}
    return "Proxmox" if not kinds else " + ".join(sorted(k.capitalize() for k in kinds))


def host_text(view: HostView, facts: dict[str, Any]) -> str:
    """The host view as lines: the host, each container, each GPU, the verdict."""
    out = [
        f"target      {visible(view.label)}",
        f"connection  {visible(_connection(facts))}",
        f"host        {_engine(view)}: {len(view.containers)} containers, {len(view.gpus)} GPUs",
    ]
    if view.connection in DOWN_STATES:
        out.append(f"✗ cannot reach the host: {visible(view.error or view.connection.value)}")
        return "\n".join(out) + "\n"
    rows = sorted(view.containers, key=_order)
    out += _container_lines(rows)
    if view.gpu_error:
        out.append(f"GPUs: {visible(view.gpu_error)}")
    out += [_gpu_line(g) for g in view.gpus]
    missing = not_seen(view)
    if missing:
        out.append("not seen in time: " + "; ".join(missing) + " — run gputui doctor again")
    bad = [c for c in rows if word_exit(c.health) != EXIT_OK]
    orphaned = [g for g in view.gpus if g.orphaned]
    if not bad and not orphaned and not missing:
        out.append("✓ nothing wrong")
    else:
        worst = bad[0] if bad else None
        said = (
            f"worst: {worst.health} ({where(worst.id)})" if worst else "GPU memory held by nothing"
        )
        out.append(
            f"✗ {len(bad)} container(s) need a look, {len(orphaned)} GPU(s) orphaned; {said}"
        )
    return "\n".join(out) + "\n"
