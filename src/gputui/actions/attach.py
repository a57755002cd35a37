"""attach: the local argv that opens the run's tmux session in this terminal."""

from __future__ import annotations

import os
import shlex
from typing import Any

from gputui.actions.plan import ActionPlan
from gputui.actions.runspec import session_target, tmux_argv
from gputui.remote.target import in_container


def attach_argv(settings: Any, session: str | None = None) -> list[str]:
    """`ssh -t [-p P] [-i F] user@host pct exec CT -- tmux attach -t =S`,
    or `tmux attach -t =S` on this machine. Attaching only watches (Ctrl-b d
    detaches), so it is allowed in --read-only too."""
    name = session or getattr(settings, "session", None)
    if not name:
        from gputui.actions.plan import ActionError

        raise ActionError("no tmux session to attach to", "pass --session NAME")
    remote = in_container(
        getattr(settings, "ct", None), tmux_argv(None, "attach-session", "-t", session_target(name))
    )
    host = getattr(settings, "host", None)
    if getattr(settings, "local", False) or not host:
        return ["env", "-u", "TMUX", *remote] if os.environ.get("TMUX") else remote
    argv = ["ssh", "-t"]
    if getattr(settings, "ssh_config", None):
        argv += ["-F", str(settings.ssh_config)]
    if getattr(settings, "port", None):
        argv += ["-p", str(settings.port)]
    if getattr(settings, "identity_file", None):
        argv += ["-i", str(settings.identity_file)]
    if getattr(settings, "known_hosts", None):
        argv += ["-o", f"UserKnownHostsFile={settings.known_hosts}"]
    user = getattr(settings, "user", None)
    argv.append(f"{user}@{host}" if user else str(host))
    argv += ["--", shlex.join(remote)]  # ssh hands ONE string to the remote shell
    return argv


def plan_attach(settings: Any, session: str | None = None) -> ActionPlan:
    argv = attach_argv(settings, session)
    return ActionPlan(
        action="attach",
        title=f"Attach to tmux session {session or getattr(settings, 'session', '')!r}",
        target=" ".join(argv[-1:]),
        session=session or getattr(settings, "session", None),
        ct=getattr(settings, "ct", None),
        commands=[argv],
        notes=["Detach with Ctrl-b d to come back to gputui."],
    )
