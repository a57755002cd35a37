"""`gputui relaunch|kill|dump|flush|launch` without the TUI.

Each verb's flags are its declared options (gputui.verbs: `Verb.options`,
added by add_arguments, read back by options_from); cli.py parses them and
calls `run(command, args, settings)`. The plan
(exact target and commands) is always printed first; it runs only after a
`y` on a terminal, or with `--yes`. The plan reads the run as the
dashboard's does: in one request to gputui's agent, started in the target
for it on the connection already open (actions/facts.py: agent_for_plan),
else — no python3 there — by the commands. Every remote value is printed through
`untrusted.visible`: no escape sequence from it reaches the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from gputui.actions import ActionPlan, ActionResult, RunSeen, execute, plan
from gputui.actions.facts import agent_for_plan
from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.remote.target import Target, make_target
from gputui.text.untrusted import json_text, visible
from gputui.verbs import CLI_VERBS, VERB_BY_ID, OptionKind

COMMANDS = CLI_VERBS


def options_from(command: str, args: argparse.Namespace) -> Any:
    """The verb's options dataclass from its parsed flags."""
    verb = VERB_BY_ID[command]
    given: dict[str, Any] = {}
    for o in verb.option_list():
        value = getattr(args, o.name, None)
        if o.kind is OptionKind.NUMBERS:
            given[o.name] = tuple(int(v) for v in value or ())
        elif o.kind is OptionKind.SWITCH:
            given[o.name] = bool(value)
        else:
            given[o.name] = value
    return verb.make_options(given)


async def make_plan(
    command: str, target: Target, args: argparse.Namespace, settings: Settings
) -> ActionPlan:
    session = getattr(args, "session", None) or settings.session
    if command not in COMMANDS:
        raise GputuiError(f"unknown action {command!r}", f"use one of: {', '.join(COMMANDS)}")
    async with agent_for_plan(target) as agent:  # closed before the question is asked
        # a session of another user's tmux server is acted on through it, as its owner
        tmux = await agent.server_of(session) if session else None
        seen = RunSeen(session=session, tmux=tmux, facts=agent.facts)
        return await plan(command, target, settings, seen, options_from(command, args))


def confirm(plan: ActionPlan, out: TextIO, ask: Callable[[str], str] | None) -> bool:
    if ask is None:
        if not sys.stdin.isatty():
            print("not run: no terminal to confirm on — add --yes to run it", file=out)
            return False
        ask = input
    try:
        answer = ask("Run it? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


async def run_async(
    command: str,
    args: argparse.Namespace,
    settings: Settings,
    *,
    target: Target | None = None,
    out: TextIO | None = None,
    ask: Callable[[str], str] | None = None,
) -> int:
    out = out or sys.stdout
    err = sys.stderr if out is sys.stdout else out
    as_json = bool(getattr(args, "json", False))
    show = err if as_json else out  # --json: stdout holds only the JSON document
    if as_json and ask is None and sys.stdin.isatty():
        ask = _ask_on(err)
    target = target or make_target(settings)
    plan: ActionPlan | None = None
    try:
        await target.transport.connect()
        plan = await make_plan(command, target, args, settings)
        print(visible(plan.title), file=show)
        print(f"target: {visible(plan.target)}", file=show)
        yes = bool(getattr(args, "yes", False))  # no question: its scripts are only named
        print(plan.brief if yes else plan.display, file=show)  # remote values made visible
        if not yes and not confirm(plan, show, ask):
            if as_json:
                print(_json(command, target, plan, None), file=out)
            return 1
        from gputui.actions.gpureaders import memory_reader, process_reader

        result = await execute(
            target,
            plan,
            lambda s: print(f"… {visible(s)}", file=err, flush=True),
            gpu_memory=memory_reader(target),
            gpu_processes=process_reader(target),
        )
    except GputuiError as e:
        print(f"gputui: {visible(e)}", file=err)
        if as_json:
            print(_json(command, target, plan, None, error=str(e)), file=out)
        return 2
    finally:
        await target.transport.close()
    if as_json:
        print(_json(command, target, plan, result), file=out)
        return 0 if result.ok else 1
    if result.output:
        print(visible(result.output.rstrip("\n"), keep="\n\t"), file=out)
    print(("ok: " if result.ok else "FAILED: ") + visible(result.summary), file=out)
    for line in result.details:
        print(f"  {visible(line)}", file=out)
    if result.saved_path:
        print(f"saved: {visible(result.saved_path)}", file=out)
    return 0 if result.ok else 1


def _ask_on(stream: TextIO) -> Callable[[str], str]:
    """input() with its prompt on `stream` (stderr under --json)."""

    def ask(prompt: str) -> str:
        print(prompt, end="", file=stream, flush=True)
        return input()

    return ask


def _json(
    command: str,
    target: Target,
    plan: ActionPlan | None,
    result: ActionResult | None,
    error: str | None = None,
) -> str:
    """--json: the plan, whether it ran, and what happened, as one document."""
    doc = {
        "action": command,
        "target": target.label,
        "plan": dataclasses.asdict(plan) if plan is not None else None,
        "ran": result is not None,
        "ok": result.ok if result is not None else False,
        "result": dataclasses.asdict(result) if result is not None else None,
        "error": error,
    }
    return json_text(json.dumps(doc, indent=2, ensure_ascii=False))


def run(command: str, args: argparse.Namespace, settings: Settings) -> int:
    """Entry point for cli.py: plan, print, confirm (or --yes), execute. Exit
    code 0 ok, 1 failed or not confirmed, 2 a problem the user can fix."""
    return asyncio.run(run_async(command, args, settings))


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Action flags for cli.py's subparsers (target flags are cli.py's):
    --yes and --json for every verb, then the verb's own options."""
    parser.add_argument("--yes", "-y", action="store_true", help="run without asking")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the plan and the result as JSON on stdout (the rest goes to stderr)",
    )
    for o in VERB_BY_ID[command].option_list():
        if o.kind is OptionKind.SWITCH:
            parser.add_argument(o.flag, dest=o.name, action="store_true", help=o.help)
        elif o.kind is OptionKind.NUMBERS:
            parser.add_argument(
                o.flag, dest=o.name, type=int, action="append", metavar=o.metavar, help=o.help
            )
        else:
            parser.add_argument(o.flag, dest=o.name, metavar=o.metavar, help=o.help)
