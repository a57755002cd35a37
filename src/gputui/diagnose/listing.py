"""A watched session gputui cannot see (`session_unknown`, issue 44): the
target has not listed its tmux sessions for a while although asked — the
agent in the container never answered, or stopped answering. Pure: reads
`Snapshot.listing_late_since` and `listing_problem`, which the monitor sets.

A run read before and not since (`run_unread`): the agent that read it
stopped answering (a container stopped and started again, the agent
killed). What is shown of its processes is as of that read: the rules that
judge them do not run meanwhile (diagnose/__init__.py), this one says why.

Without the listing nothing is known of the session: whether it exists,
its panes, the run's processes. The rules that read them stay quiet, and
before this word the banner said nothing of a `--session NAME` while the
agent never answered. It says what is unknown and why.
"""

from __future__ import annotations

from gputui.diagnose.context import Context
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.untrusted import one_line
from gputui.text.words import dur


@rule(Kind("session_unknown", specificity=64, cause="session_unknown", alerts=True))
def rule_session_unknown(ctx: Context) -> Finding | None:
    """The watched session is not known: no tmux listing came for a while."""
    snap = ctx.snap
    since = snap.listing_late_since
    if since is None or ctx.connection_down or not ctx.ct_usable:
        return None  # listed lately; or the connection's, the container's words say it
    name = snap.session_name or snap.listing_session
    where = ctx.ct_words
    for_how_long = dur(max(0.0, ctx.now - since))
    what = f"session {name}" if name else "the run's session"
    never = not snap.sessions and not snap.procs
    ev = [
        (
            f"no tmux listing from {where} since gputui started, {for_how_long} ago"
            if never
            else f"the last tmux listing from {where} came {for_how_long} ago"
        ),
        f"why: {one_line(snap.listing_problem, 300)}"
        if snap.listing_problem
        else "why: the agent has not answered yet, and has not said it failed",
        "not known: whether the session exists, its panes, the run's processes and what "
        "they wait on — the words that read them are silent until a listing comes"
        + ("" if never else "; what is shown of them is as of that listing"),
    ]
    return Finding(
        kind="session_unknown",
        severity=Severity.WARNING,
        title=(
            f"{what} is not known: {where} has not listed its tmux sessions for "
            f"{for_how_long} (gputui's agent there does not answer)"
        ),
        evidence=ev,
        fix=(
            f"see whether {where} answers: `{ctx.in_ct('tmux ls')}`; a loaded or swapping "
            "machine answers late; `gputui -v` writes the agent's errors to the debug log"
        ),
    )


@rule(Kind("run_unread", specificity=35, cause="run_unread", host_level=True, host_word="starting"))
def rule_run_unread(ctx: Context) -> Finding | None:
    """The run was read and no poll has read it since: its processes as shown are old."""
    snap = ctx.snap
    if not snap.run_unread or snap.run_read_at is None or ctx.connection_down:
        return None
    if not ctx.ct_usable:
        return None  # the container's own word says it (ct_stopped, ct_missing)
    ago = dur(max(0.0, ctx.now - snap.run_read_at))
    what = f"session {snap.session_name}" if snap.session_name else "the run"
    return Finding(
        kind="run_unread",
        severity=Severity.WARNING,
        title=f"{what} not read for {ago}: {one_line(snap.run_unread, 200)}",
        evidence=[
            f"the run's processes and sessions were last read {ago} ago",
            "what is shown of them is as of then, not live; nothing is judged from them "
            "until the agent answers again (a container started again has none of them)",
        ],
        fix=(
            f"wait: gputui starts its agent again by itself; if it does not, "
            f"`{ctx.in_ct('python3 -V')}` shows whether {ctx.ct_words} can run it"
        ),
    )
