"""`gputui doctor` over several hosts (`--host a --host b`, `[[targets]]`).

Each host is inspected as `gputui doctor --host H` would (a Proxmox host
with no CT named: its host view, doctor_host.py), all at once, each
on its own connection: one that cannot be reached is reported as such and
the others are not held up. `--json` prints a list with one report per host,
each the document `gputui doctor --json` prints for it (gputui/doctor/doctor-json.md);
the exit code is the worst of them (2 > 1 > 0).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from gputui.config import Settings
from gputui.doctor import host as doctor_host
from gputui.doctor import run as doctor_run
from gputui.doctor.hostreport import host_dict, host_exit, host_text
from gputui.doctor.report import doctor_dict, exit_code, render_text
from gputui.errors import GputuiError
from gputui.host.targets import wants_host_view
from gputui.text.untrusted import json_text


async def _one(settings: Settings) -> tuple[dict[str, Any], str, int]:
    """(JSON report, text report, exit code) of one host: a Proxmox host
    with no CT named is its host view (doctor_host), as for one host."""
    try:
        if wants_host_view([settings]):
            view, host_facts = await doctor_host.watch_host(settings)
            if view is not None:
                now = time.time()
                return (
                    host_dict(view, host_facts, now),
                    host_text(view, host_facts),
                    host_exit(view),
                )
        facts, snap, findings, inspected = await doctor_run.inspect(settings)
    except GputuiError as err:
        facts = {"target": settings.host, "error": str(err)}
        doc = doctor_dict(facts, None, [], now=time.time(), inspected=False)
        return doc, f"{settings.host}: gputui: {err}\n", exit_code([], inspected=False)
    now = snap.time if snap is not None else time.time()
    doc = doctor_dict(facts, snap, findings, now=now, inspected=inspected)
    text = render_text(facts, snap, findings, now=now)
    return doc, text, exit_code(findings, inspected=inspected)


async def inspect_all(hosts: list[Settings]) -> list[tuple[dict[str, Any], str, int]]:
    return list(await asyncio.gather(*(_one(s) for s in hosts)))


def worst(codes: list[int]) -> int:
    """2 (could not inspect) > 1 (something wrong) > 0 (nothing wrong)."""
    return max(codes, default=0)


def main(hosts: list[Settings], as_json: bool = False) -> int:
    results = asyncio.run(inspect_all(hosts))
    if as_json:
        docs = [doc for doc, _, _ in results]
        print(json_text(json.dumps(docs, indent=2, ensure_ascii=False, allow_nan=False)))
    else:
        for i, (_, text, _) in enumerate(results):
            if i:
                print()
            print(f"== {hosts[i].host} ==")
            print(text, end="" if text.endswith("\n") else "\n")
    return worst([code for _, _, code in results])
