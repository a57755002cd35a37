"""attach: the local argv that opens the run's tmux session in this
terminal — directly for a session of gputui's own user, through a pty of
gputui's (actions/ownterminal.py) for a session whose server is another
user's: that user's programs never get this terminal (issue 45)."""

from __future__ import annotations

import subprocess

from gputui.actions.ownterminal import ESCAPE_WORDS, relay
from gputui.actions.plan import ActionError, ActionPlan, ActionResult
from gputui.actions.runspec import session_target, tmux_argv
from gputui.config import Settings
from gputui.remote.target import Target
from gputui.text.owners import runs_as

RELAY_NOTE = (
    "The session's tmux server is {owner}'s: its client runs on a terminal gputui opens for it "
    "and relays to yours (drawing only; no title, clipboard or report sequence passes), "
    "so {owner}'s programs never get your terminal; " + ESCAPE_WORDS + "."
)


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
    owner = runs_as(tmux)
    if owner is not None:
        how += f"(relayed: {owner}'s server) "
        notes.insert(0, RELAY_NOTE.format(owner=owner))
    if settings.read_only:
        notes.insert(
            0, "--read-only: tmux's read-only client (attach -r); your keys do not reach the run."
        )
    return ActionPlan(
        action="attach",
        title=f"Attach {how}to tmux session {name or ''!r}",
        target=" ".join(argv[-1:]),
        session=name,
        ct=target.ct_id,
        commands=[argv],
        notes=notes,
        params={"owner": owner} if owner is not None else {},
    )


def run_attach(plan: ActionPlan) -> ActionResult:
    """Run a confirmed attach plan in this terminal (fds 0 and 1), as the
    dashboard does with its screen suspended: the argv itself for a session
    of gputui's own user; relayed through a pty of gputui's for another
    user's (`params["owner"]`)."""
    owner = plan.params.get("owner")
    if not owner:
        rc = subprocess.run(plan.commands[0], check=False).returncode
        return ActionResult(rc == 0, f"detached (exit status {rc})")
    got = relay(plan.commands[0])
    said = f"detached from {owner}'s session, relayed (exit status {got.returncode})"
    if got.escaped:
        said = f"left {owner}'s session with Ctrl-] (relayed; its client was hung up on)"
    if got.dropped:
        said += f"; {got.dropped} sequence(s) of its output were not passed to your terminal"
    return ActionResult(got.escaped or got.returncode == 0, said)
