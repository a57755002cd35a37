"""Processes: the agent's process dicts -> `Proc`, with remote epoch times
moved onto the local clock.

The /proc parsing rules themselves live in `gputui.remote.agent`: they run
in the container, and the agent must travel there as one self-contained
stdlib file. This module reads only the JSON the agent answers with.
"""

from __future__ import annotations

from typing import Any

from gputui.model import Proc, StdoutTarget

__all__ = ["proc_from_agent", "procs_from_agent", "stdout_from_agent"]


def _shift(t: float | None, offset: float) -> float | None:
    return None if t is None else t + offset


def stdout_from_agent(d: dict[str, Any] | None) -> StdoutTarget:
    if not d:
        return StdoutTarget()
    return StdoutTarget(
        kind=str(d.get("kind") or "unknown"),
        path=d.get("path"),
        readers=[(int(pid), str(cmd)) for pid, cmd in d.get("readers") or []],
        reader_files=[str(f) for f in d.get("reader_files") or []],
        handles={str(f): str(h) for f, h in (d.get("handles") or {}).items()},
    )


def proc_from_agent(d: dict[str, Any], clock_offset: float = 0.0) -> Proc:
    """One process dict from the agent's `procs` op -> Proc. `clock_offset`
    (local - remote seconds) moves start_time and file mtimes to local time."""
    return Proc(
        pid=int(d["pid"]),
        ppid=int(d.get("ppid") or 0),
        cmdline=[str(a) for a in d.get("cmdline") or []]
        or ([f"[{d['comm']}]"] if d.get("comm") else []),
        cwd=d.get("cwd") or "",
        state=d.get("state") or "",
        cpu_pct=d.get("cpu_pct"),
        rss_bytes=d.get("rss_bytes"),
        threads=d.get("threads"),
        start_time=_shift(d.get("start_time"), clock_offset),
        is_python=bool(d.get("is_python")),
        stdout=stdout_from_agent(d.get("stdout")),
        python_u_flag=bool(d.get("python_u_flag")),
        env_pythonunbuffered=d.get("env_pythonunbuffered"),
        fd1_pos=d.get("fd1_pos"),
        source_files=[(str(p), float(m) + clock_offset) for p, m in d.get("source_files") or []],
        write_files=[str(f) for f in d.get("write_files") or []],
        reads_tty=str(d["reads_tty"]) if d.get("reads_tty") else None,
        uid=d["uid"] if isinstance(d.get("uid"), int) else None,
    )


def procs_from_agent(items: list[dict[str, Any]], clock_offset: float = 0.0) -> list[Proc]:
    return [proc_from_agent(d, clock_offset) for d in items]
