"""`gputui doctor`: what gputui finds about the target, as text or JSON.

`gather_facts(settings)` connects and collects plain facts (connection,
container status, tools); `render_facts` / `facts_json` print them. They are
kept apart so the run's snapshot and findings can be added to the same
report later (see doctor_run.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict
from typing import Any

from gputui.model import CtStatus, Tools
from gputui.remote.target import Target, connect_target
from gputui.untrusted import visible

# One fixed script (no values spliced in) that reports every tool in one call:
# `name<TAB>version` per line, version empty when the tool is missing.
TOOLS_SCRIPT = r"""for t in tmux python3 py-spy gdb nvidia-smi; do
  if command -v "$t" >/dev/null 2>&1; then
    case "$t" in
      tmux) v=$(tmux -V 2>&1 | head -n 1) ;;
      python3) v=$(python3 --version 2>&1 | head -n 1) ;;
      py-spy) v=$(py-spy --version 2>&1 | head -n 1) ;;
      gdb) v=$(gdb --version 2>&1 | head -n 1) ;;
      *) v=$(command -v "$t") ;;
    esac
    printf '%s\t%s\n' "$t" "${v:-yes}"
  else
    printf '%s\t\n' "$t"
  fi
done
"""


def _parse_tools(text: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        name, _, version = line.partition("\t")
        if name:
            found[name.strip()] = version.strip() or None
    return found


async def probe_tools(target: Target) -> Tools:
    probe = ["sh", "-c", TOOLS_SCRIPT]
    if target.ct is not None:
        inside, host = await asyncio.gather(
            target.run(probe, timeout=20), target.run_host(probe, timeout=20)
        )
        ct_tools, host_tools = _parse_tools(inside.out), _parse_tools(host.out)
    else:
        host = await target.run_host(probe, timeout=20)
        ct_tools = host_tools = _parse_tools(host.out)
    return Tools(
        tmux=ct_tools.get("tmux"),
        python3=ct_tools.get("python3"),
        py_spy=ct_tools.get("py-spy"),
        nvidia_smi_host=host_tools.get("nvidia-smi") is not None,
        nvidia_smi_ct=(ct_tools.get("nvidia-smi") is not None) if target.ct is not None else None,
        gdb=ct_tools.get("gdb"),
        probed=True,
    )


async def gather_facts(settings: Any) -> dict[str, Any]:
    """Connection, CT status and tools. Raises GputuiError (one line) when the
    host cannot be reached or the CT cannot run commands."""
    t0 = time.perf_counter()
    target = await connect_target(settings)
    transport = target.transport
    try:
        facts = connection_facts(target, settings, (time.perf_counter() - t0) * 1000.0)
        facts["tools"] = asdict(await probe_tools(target))
        return facts
    finally:
        await transport.close()


def connection_facts(target: Target, settings: Any, connect_ms: float) -> dict[str, Any]:
    """target / connection / ct facts of a connected target (CT checked running)."""
    transport = target.transport
    local = getattr(settings, "local", False) or getattr(settings, "demo", False)
    facts: dict[str, Any] = {
        "target": target.label,
        "connection": {
            "transport": "local" if local else "ssh",
            "host": getattr(transport, "resolved_host", None) or getattr(settings, "host", None),
            "port": getattr(transport, "resolved_port", None),
            "user": getattr(transport, "resolved_user", None),
            "state": transport.state.value,
            "rtt_ms": round(transport.rtt_ms, 1) if transport.rtt_ms is not None else None,
            "connect_ms": round(connect_ms, 1),
        },
        "ct": None,
    }
    if target.ct is not None:
        facts["ct"] = {"number": target.ct, "status": CtStatus.RUNNING.value}
    return facts


def _fmt(value: Any) -> str:
    return (
        "missing" if value is None or value is False else ("yes" if value is True else str(value))
    )


def render_facts(facts: dict[str, Any]) -> str:
    c = facts["connection"]
    lines = [f"target      {facts['target']}"]
    if c["transport"] == "ssh":
        lines.append(
            f"connection  {c['user']}@{c['host']} port {c['port']}: {c['state']}, "
            f"round trip {c['rtt_ms']} ms, connected in {c['connect_ms']:.0f} ms"
        )
    else:
        lines.append(f"connection  this machine: {c['state']}")
    ct = facts.get("ct")
    lines.append(
        f"container   {ct['number']}: {ct['status']}"
        if ct
        else "container   none (commands run on the host)"
    )
    t = facts["tools"]
    where = "in the CT" if ct else "on the host"
    lines.append(f"tools {where}:")
    lines.append(f"  tmux        {_fmt(t['tmux'])}")
    lines.append(f"  python3     {_fmt(t['python3'])}")
    lines.append(f"  py-spy      {_fmt(t['py_spy'])}")
    lines.append(f"  gdb         {_fmt(t['gdb'])}")
    lines.append(
        f"  nvidia-smi  host: {_fmt(t['nvidia_smi_host'])}"
        + (f", CT: {_fmt(t['nvidia_smi_ct'])}" if ct else "")
    )
    return "\n".join(visible(line) for line in lines) + "\n"  # tool versions are remote text


def facts_json(facts: dict[str, Any]) -> str:
    return json.dumps(facts, indent=2, sort_keys=False)


def run(settings: Any, as_json: bool = False) -> int:
    """`gputui doctor`: print the facts; GputuiError propagates (cli: exit 2)."""
    facts = asyncio.run(gather_facts(settings))
    print(facts_json(facts) if as_json else render_facts(facts), end="" if not as_json else "\n")
    return 0
