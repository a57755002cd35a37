"""A run that waits for someone to answer (`waiting_for_input`). Pure.

A run in tmux keeps its terminal as stdin, and whatever asks a question
there stops it until someone attaches: wandb's "wandb: Enter your choice:",
a Hugging Face login or `trust_remote_code` prompt, a `breakpoint()` left
in the code (pdb), a start script's `read -p`. The log goes quiet (the
prompt has no newline, so it never becomes a line of the log), the GPUs
idle with their memory held, and every other word would be wrong: not
hung, not buffered, not loading. The agent reads which call each process
sleeps in (/proc/PID/syscall: a read of its terminal, or readline's select
on fd 0) — `Proc.reads_tty`; the pane's last line is the question."""

from __future__ import annotations

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.owners import runs_as
from gputui.text.untrusted import one_line
from gputui.text.words import dur

# a prompt's words -> how to answer it before it is asked (the fix)
UP_FRONT = (
    ("wandb", "set WANDB_API_KEY (or WANDB_MODE=offline) in the run's environment"),
    ("custom code", "pass trust_remote_code=True where the model or dataset is loaded"),
    ("trust_remote_code", "pass trust_remote_code=True where the model or dataset is loaded"),
    ("token", "set HF_TOKEN (or log in once with `huggingface-cli login`) before the run"),
    ("[y/n]", "answer in the start command (`yes |`, `--yes`, `-y`)"),
    ("(y/n)", "answer in the start command (`yes |`, `--yes`, `-y`)"),
)
DEBUGGER = ("(Pdb)", "ipdb>", "(Pdb++)")


def pane_question(ctx: Context) -> str:
    """The pane's last non-empty line: the question on the screen."""
    for ln in reversed(list(ctx.snap.pane_tail or [])):
        if ln and ln.strip():
            return ln.strip()
    return ""


def how_to_attach(ctx: Context) -> str:
    """`attach (a)`, and for a session whose tmux server is another user's
    the safe form it takes (issue 45): through a terminal of gputui's, so
    that user's programs never get the admin's."""
    owner = runs_as(ctx.session.server_tmux) if ctx.session is not None else None
    if owner is None:
        return "attach (a)"
    return (
        f"attach (a: {owner}'s tmux server, so gputui relays it through a terminal of its own "
        f"and {owner}'s programs never get yours)"
    )


@rule(
    Kind(
        "waiting_for_input",
        specificity=85,
        cause="waiting_for_input",
        alerts=True,  # news even in a relaunched run's first quiet stretch
        host_word="stalled",
        # a run asleep at a prompt looks loading, hung, stalled or buffered:
        # it is none of these
        supersedes=("loading", "held_but_idle", "progress_stalled", "busy_but_silent"),
    )
)
def rule_waiting_for_input(ctx: Context) -> Finding | None:
    """A process of the run is asleep reading its terminal
    (`Context.waiting_input`): what it asks, since when the log is quiet,
    and how to answer — attach (`a`), or give the answer up front."""
    p = ctx.waiting_input
    if p is None:
        return None
    question = pane_question(ctx)
    who = f"PID {p.pid} ({short(one_line(p.command), 50)})"
    ev = [f"{who} is asleep reading its terminal {p.reads_tty}"]
    if question:
        ev.append(f"the pane's last line: {short(one_line(question), 200)}")
    quiet = ctx.log_silent_s
    if quiet is not None and quiet >= 1:
        ev.append(f"the log has been quiet for {dur(quiet)}")
    ev += [g.line() for g in ctx.gpu_views if g.sample.mem_used_mib]
    if any(question.startswith(d) for d in DEBUGGER):
        return Finding(
            kind="waiting_for_input",
            severity=Severity.WARNING,
            title=f"the run stopped in the debugger: {who} waits at a pdb prompt",
            evidence=ev,
            action="attach",
            action_label="attach and continue (c)",
            fix=(
                f"{how_to_attach(ctx)} and continue (c); a breakpoint() left in the code stops every run: "
                "remove it, or relaunch with PYTHONBREAKPOINT=0"
            ),
        )
    said = f": {short(one_line(question), 80)}" if question else ""
    lowered = question.lower()
    ahead = next((fix for word, fix in UP_FRONT if word in lowered), None)
    return Finding(
        kind="waiting_for_input",
        severity=Severity.WARNING,
        title=f"the run waits for an answer{said} — {who} reads the terminal",
        evidence=ev,
        action="attach",
        action_label="attach and answer",
        fix=f"{how_to_attach(ctx)} and answer it"
        + (f"; so that it is never asked: {ahead}" if ahead else "; or give the answer up front"),
    )
