"""`gputui doctor`'s plain facts about a connected target: the connection
and the container (the tools in it and on the host: monitor/tools.py). doctor/run.py
adds the run's snapshot and findings and prints the report.
"""

from __future__ import annotations

from typing import Any

from gputui.config import Settings
from gputui.model import CtStatus
from gputui.remote.target import Target


def connection_facts(target: Target, settings: Settings, connect_ms: float) -> dict[str, Any]:
    """target / connection / ct facts of a connected target (CT checked running)."""
    transport = target.transport
    local = settings.local or settings.demo
    facts: dict[str, Any] = {
        "target": target.label,
        "connection": {
            "transport": "local" if local else "ssh",
            "host": getattr(transport, "resolved_host", None) or settings.host,
            "port": getattr(transport, "resolved_port", None),
            "user": getattr(transport, "resolved_user", None),
            "state": transport.state.value,
            "rtt_ms": round(transport.rtt_ms, 1) if transport.rtt_ms is not None else None,
            "connect_ms": round(connect_ms, 1),
        },
        "ct": None,
    }
    if target.ct_id is not None:
        facts["ct"] = {"number": target.ct_id, "status": CtStatus.RUNNING.value}
    elif target.in_container:  # docker, podman, pod: by kind and name
        c = target.container
        facts["container"] = {"kind": c.kind, "spec": c.spec, "status": CtStatus.RUNNING.value}
    return facts
