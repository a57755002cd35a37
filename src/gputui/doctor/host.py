"""`gputui doctor --host H` with no CT: what `gputui --host H` shows.

On a Proxmox host (its container tool lists CTs) the report is the host view, watched until
it is complete (every GPU and who holds it, every container and a word for
each; at most WATCH_MAX_S): hostreport.py writes it. A plain host (no
container tool) gets the run doctor of that host, as before (doctor_run).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from typing import Any

from gputui.config import Settings
from gputui.doctor import run as doctor_run
from gputui.doctor.facts import connection_facts
from gputui.doctor.hostreport import host_exit, host_json, host_text
from gputui.doctor.report import EXIT_UNINSPECTABLE, findings_to_json
from gputui.errors import GputuiError
from gputui.host.hostwatch import HostWatch
from gputui.host.view import HostView
from gputui.remote.target import Target, make_transport
from gputui.text.untrusted import visible

SETTLE_S = 2.0  # watched at least this long, so each container's run is diagnosed
HOLDERS_S = 8.0  # past complete: how long to wait for the sessions of the GPUs' holders
WATCH_MAX_S = 30.0  # never longer: what is missing then is named in the report
LOOK_S = 0.25


async def watch_host(
    settings: Settings, *, settle_s: float = SETTLE_S, bound_s: float = WATCH_MAX_S
) -> tuple[HostView | None, dict[str, Any]]:
    """(the host's view once complete, or at the bound; None for a plain
    host, and the connection facts). GputuiError (one line) when the host
    cannot be reached."""
    transport = make_transport(settings)
    t0 = time.perf_counter()
    await transport.connect()
    facts = connection_facts(Target(transport, None), settings, (time.perf_counter() - t0) * 1e3)
    watch = HostWatch(settings, transport)
    try:
        await watch.start()
        t0 = time.monotonic()
        wall0 = time.time()
        done_at: float | None = None
        while time.monotonic() - t0 < bound_s and not watch.plain:
            view = watch.build_view()
            now = time.monotonic()
            if view.complete and done_at is None:
                done_at = now
            settled = done_at is not None and now - t0 >= settle_s
            # a run whose log gets lines but has not shown its buffering yet
            # is given the run doctor's few seconds to show it (issue 31)
            telling = any(
                doctor_run.buffering_watch_due(
                    m.snapshot, now - (done_at or now), wall0, m.settings
                )
                for m in watch.monitors.values()
            )
            if (
                settled
                and not telling
                and (_holders_placed(view) or now - (done_at or now) >= HOLDERS_S)
            ):
                break
            await asyncio.sleep(LOOK_S)
        return (None if watch.plain else watch.build_view()), facts
    finally:
        with contextlib.suppress(Exception):
            await watch.stop()


def _holders_placed(view: HostView) -> bool:
    """Every live process holding a GPU in a container has its tmux session
    (the session index is asked every few seconds)."""
    return all(h.session for g in view.gpus for h in g.holders if h.alive and h.place is not None)


def main(settings: Settings, as_json: bool = False) -> int:
    """Print the host's report; the exit code is the worst container's."""
    try:
        view, facts = asyncio.run(watch_host(settings))
    except GputuiError as err:
        if as_json:
            facts = {"target": settings.host, "error": str(err)}
            print(findings_to_json(facts, None, [], now=time.time(), inspected=False))
        print(f"gputui: {visible(err)}", file=sys.stderr)
        return EXIT_UNINSPECTABLE
    if view is None:  # a plain GPU server: the doctor of the host itself
        return doctor_run.main(settings, as_json)
    if as_json:
        print(host_json(view, facts, time.time()))
    else:
        print(host_text(view, facts), end="")
    return host_exit(view)
