"""What every action shares: the plan shown in the confirm box, the result,
the audit log, and the read-only switch.

Every action is two steps so a person can confirm in between:
`plan_*()` inspects (read-only) and returns an `ActionPlan` naming the exact
target and the exact argv lists; `execute()` runs it and returns an
`ActionResult`. Nothing acts on a process at plan time.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gputui.actions.scripts import OWN_SCRIPTS
from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.statefiles import append_private, audit_path
from gputui.text.untrusted import visible

Progress = Callable[[str], None] | None


class ActionsDisabled(GputuiError):
    """gputui runs with --read-only."""


class ActionError(GputuiError):
    """An action cannot be planned or carried out as asked."""


@dataclass
class ActionPlan:
    """One confirmed-before-run action.

    `commands` are the argv lists that will run inside the container (or on
    the host when there is no CT); `display` renders them for a person.
    `session`, `ct` and `pids` are fixed when the plan is made; `params`
    carries the values `execute` needs (log path, timeouts, ...).
    """

    action: str  # a verb id (gputui.verbs): "relaunch", "kill", "dump", "attach", ...
    title: str  # one line: "Kill run in session 'train' (CT 200)?"
    target: str  # e.g. "root@10.1.2.6 ct 200 · session 'train' · pgid 4242"
    session: str | None = None
    ct: int | None = None  # the Proxmox CT's number (as --json and the audit log say it)
    pids: list[int] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the confirm box says besides argv
    params: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    @property
    def display(self) -> str:
        """Human-readable text for the confirm box: notes, then each command;
        no control character from a remote value reaches the terminal."""
        lines = [visible(note) for note in self.notes]  # one line each, whatever they quote
        for argv in self.commands:
            lines.append("$ " + render_argv(argv))
        return "\n".join(lines)

    @property
    def brief(self) -> str:
        """`display` with gputui's own scripts named, not printed: what
        `gputui kill --yes` shows (it printed a 30-line shell script nobody
        was asked to read); the confirm prompt shows them whole."""
        lines = [visible(note) for note in self.notes]
        lines += ["$ " + render_argv(argv, brief=True) for argv in self.commands]
        return "\n".join(lines)


@dataclass
class ActionResult:
    ok: bool
    summary: str  # one line
    details: list[str] = field(default_factory=list)
    output: str = ""  # e.g. py-spy stacks
    saved_path: str | None = None
    ended_by: str | None = None  # kill: "SIGINT" | "SIGTERM" | "SIGKILL" | "already gone"
    elapsed_s: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


def render_argv(argv: list[str], *, brief: bool = False) -> str:
    """An argv as a person would type it (quoted once, shell syntax), safe to
    print: control characters in any value are shown as stand-ins
    (untrusted.visible). Only gputui's own fixed scripts keep their line
    breaks; `bash -c SCRIPT` / `sh -c SCRIPT` is shown with the script below
    (`brief`: named by its $0 and length instead)."""
    if len(argv) >= 3 and argv[0] in ("bash", "sh") and argv[1] == "-c" and argv[2] in OWN_SCRIPTS:
        body = argv[2].strip("\n")
        rest = _render_words(argv[3:])
        if brief:
            lines = body.count("\n") + 1
            return f"{argv[0]} -c '<gputui's script, {lines} lines>' {rest}"
        return f"{argv[0]} -c '<script below>' {rest}\n    " + body.replace("\n", "\n    ")
    return _render_words(argv)


def _render_words(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) if a in OWN_SCRIPTS else visible(shlex.quote(a)) for a in argv)


def check_allowed(settings: Settings) -> None:
    """Raise ActionsDisabled when gputui runs read-only."""
    if settings.read_only:
        raise ActionsDisabled(
            "actions are disabled: gputui runs with --read-only",
            "restart without --read-only (or set read_only = false in the config) to act on runs",
        )


# ------------------------------------------------------------------ state dir


def audit_begun(target: str, plan: ActionPlan, path: Path | None = None) -> Path:
    """Append a line saying `plan` begins (`"phase": "begun"`): a gputui
    recording this target (the dashboard's or `watch`) takes what follows —
    the session gone, the log silent — as the user's doing, not news."""
    entry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "epoch": round(time.time(), 3),
        "phase": "begun",
        "plan": round(plan.created, 3),
        "target": target,
        "begins": plan.action,  # not "action": one "action" line per action run
        "session": plan.session,
        "ct": plan.ct,
        "pids": plan.pids,
        # the gputui process running it (this machine's): once it is gone with
        # no end line (quit or killed mid-action), the action is over
        "by": os.getpid(),
    }
    return append_private(path or audit_path(), json.dumps(entry, ensure_ascii=True) + "\n")


def audit(target: str, plan: ActionPlan, result: ActionResult, path: Path | None = None) -> Path:
    """Append one JSON line for an executed action; returns the file written."""
    p = path or audit_path()
    entry = {
        "plan": round(plan.created, 3),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "epoch": round(time.time(), 3),
        "target": target,
        "action": plan.action,
        "plan_target": plan.target,
        "session": plan.session,
        "ct": plan.ct,
        "pids": plan.pids,
        "commands": plan.commands,
        "ok": result.ok,
        "outcome": result.summary,
        "ended_by": result.ended_by,
        "saved_path": result.saved_path,
    }
    line = json.dumps(entry, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # an argument's non-UTF-8 bytes (lone surrogates): \udcXX
        line = json.dumps(entry, ensure_ascii=True)
    return append_private(p, line + "\n")


def say(progress: Progress, text: str) -> None:
    if progress is not None:
        progress(text)
