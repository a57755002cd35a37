"""attach: the local argv that opens the run's tmux session in this terminal."""

from __future__ import annotations

from gputui.actions.plan import ActionError, ActionPlan
from gputui.actions.runspec import session_target, tmux_argv
from gputui.config import Settings
from gputui.remote.target import Target


def attach_argv(
    target: Target, session: str | None, read_only: bool = False, tmux: list[str] | None = None
) -> list[str]:
    """The transport's terminal argv around the container's attach argv
    (`ssh -t … host` + the container's way in + `tmux attach -t =S`; just
    `tmux attach -t =S` on this machine). In --read-only it is tmux's
    read-only client (`attach -r`): the run is shown, keys other than
    detach do not reach it."""
    if not session:
        raise ActionError("no tmux session to attach to", "pass --session NAME")
    flags = ["-r"] if read_only else []
    return target.attach_argv(
        tmux_argv(tmux, "attach-session", *flags, "-t", session_target(session))
    )


def plan_attach(
    target: Target,
    settings: Settings,
    session: str | None = None,
    *,
    tmux: list[str] | None = None,
) -> ActionPlan:
    name = session or settings.session
    argv = attach_argv(target, name, settings.read_only, tmux)
    how = "read-only " if settings.read_only else ""
    notes = ["Detach with Ctrl-b d to come back to gputui."]
    if settings.read_only:
        notes.insert(
            0, "--read-only: tmux's read-only client (attach -r); your keys do not reach the run."
        )
    return ActionPlan(
        action="attach",
        title=f"Attach {how}to tmux session {name or ''!r}",
        target=" ".join(argv[-1:]),
        session=name,
        ct=target.ct,
        commands=[argv],
        notes=notes,
    )
