"""What `gputui COMMAND --help` ends with: examples, and for `doctor` its exit
statuses. One table for every command, so `--help`, the man page
(scripts/manpage.py) and the tests read the same words.

Each example is (command line, what it does); the command lines are run
through the real parser by tests/test_help_examples.py, so none goes stale.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gputui

Example = tuple[str, str]

EXAMPLES: dict[str, tuple[Example, ...]] = {
    "gputui": (
        (
            "gputui --demo",
            "a made-up run on this machine: try r, h, ? (d too, with py-spy installed)",
        ),
        ("gputui --host gpu1 --ct 200", "the run in CT 200 of gpu1 (newest tmux session)"),
        ("gputui root@10.1.2.6:2222/200 --session train", "the same, as one word"),
        ("gputui --host gpu1", "no CT named: the whole host, every GPU and container"),
        ("gputui --local --log train.log", "a run on this machine"),
    ),
    "doctor": (
        ("gputui doctor --demo", "what doctor says about the demo's buffered run"),
        ("gputui doctor gpu1/200", "one report on the run in CT 200"),
        ("gputui doctor --host gpu1 --json", "the host: every CT and GPU, as JSON"),
        ("gputui doctor gpu1/200 || echo needs a look", "in cron or CI: exit 1 on a problem"),
    ),
    "relaunch": (
        ("gputui relaunch gpu1/200", "show the plan, ask, restart the run unbuffered"),
        ("gputui relaunch gpu1/200 --session train --yes", "the same without asking"),
    ),
    "kill": (
        ("gputui kill gpu1/200", "SIGINT, then SIGTERM, then SIGKILL (asks first)"),
        ("gputui kill gpu1/200 --force --json --yes", "SIGTERM then SIGKILL; the result as JSON"),
    ),
    "dump": (
        ("gputui dump gpu1/200", "py-spy dump of every Python process of the run"),
        ("gputui dump gpu1/200 --native", "with C/C++ frames too"),
    ),
    "flush": (("gputui flush gpu1/200", "flush a buffered run's stdout through gdb, no restart"),),
    "launch": (("gputui launch gpu1/200", "start the config's [run] command in tmux"),),
    "watch": (
        ("gputui watch gpu1/200", "record the history and send alerts, no screen"),
        ("gputui watch gpu1/200 gpu2 --prometheus 127.0.0.1:9464", "two targets, and /metrics"),
        ("gputui watch --local", "this machine"),
    ),
    "history": (
        ("gputui history", "every recorded target, the last 6 h"),
        ("gputui history gpu1/200 --since 2d --json", "two days of one target, for scripts"),
        ("gputui history gpu1/200 --runs", "the target's runs and their ids"),
        ("gputui history --compare 12 14", "run 14 against run 12, at the same step (--csv)"),
        ("gputui history --pick-last 12 14", "compare run 14 with run 12 from now on"),
    ),
    "alert-test": (("gputui alert-test", "send one test alert to the config's [alerts] urls"),),
    "serve": (
        ("gputui serve --demo", "the demo in a browser: open the printed URL"),
        ("gputui serve gpu1/200", "a run, read-only, on 127.0.0.1:8000"),
        ("gputui serve gpu1/200 --bind 0.0.0.0:8001 --public", "reachable from other machines"),
    ),
    "config": (
        ("gputui config", "where the config is read from, and whether it parses"),
        ("gputui config --example", "the example config: every key, its default"),
        (
            "mkdir -p ~/.config/gputui && gputui config --example > ~/.config/gputui/config.toml",
            "",
        ),
        ('${EDITOR:-vi} "$(gputui config --path)"', "edit it"),
    ),
    "completion": (
        (
            "gputui completion bash > ~/.local/share/bash-completion/completions/gputui",
            "bash",
        ),
        ("gputui completion zsh > ~/.zfunc/_gputui", "zsh (~/.zfunc in fpath)"),
        ("gputui completion fish > ~/.config/fish/completions/gputui.fish", "fish"),
    ),
}

# the `doctor --json` document's description, shipped in the package
JSON_DOC = Path(gputui.__file__).parent / "doctor" / "doctor-json.md"

# `gputui doctor`'s exit statuses (doctor/report.py exit_code)
DOCTOR_EXIT = (
    ("0", "nothing wrong (notes only)"),
    ("1", "a problem was found (a WARNING or an ERROR in the report)"),
    ("2", "the target could not be inspected, or bad input"),
)
DOCTOR_DESCRIPTION = (
    "Connect to the target once, check the connection, the container and the "
    "tools, read the GPUs, the run's sessions, processes and log for up to 20 s, "
    "then print what is wrong and the fix for each — the dashboard's banner as text. "
    "With no container or run named, it reports on the whole host; with several "
    "hosts, one report each (exit status: the worst)."
)


def epilog(command: str, doc_json: str = "") -> str:
    """The text after `gputui COMMAND --help`'s options (kept as written)."""
    rows = EXAMPLES.get(command, ())
    width = max((len(line) for line, what in rows if what and len(line) <= 60), default=0)
    out = ["examples:"]
    for line, what in rows:
        if not what:
            out.append(f"  {line}")
        elif len(line) > 60:
            out += [f"  {line}", f"      {what}"]
        else:
            out.append(f"  {line.ljust(width)}   {what}")
    if command == "doctor":
        out += ["", "exit status:"] + [f"  {code}  {what}" for code, what in DOCTOR_EXIT]
        if doc_json:
            out += ["", f"--json prints one document, described in {doc_json}"]
    return "\n".join(out) + "\n"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the epilog (examples, exit statuses) is
    kept line for line; the description is still wrapped."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        at = text.find("examples:\n")
        if at < 0:
            return super()._fill_text(text, width, indent)
        head = super()._fill_text(text[:at], width, indent) + "\n\n" if text[:at].strip() else ""
        return head + "".join(indent + line for line in text[at:].splitlines(keepends=True))


def add_examples(parser: argparse.ArgumentParser, command: str, doc_json: str = "") -> None:
    """Give `parser` (gputui or one of its commands) its examples."""
    parser.formatter_class = HelpFormatter
    parser.epilog = (
        epilog(command, doc_json) if not parser.epilog else f"{parser.epilog}\n\n{epilog(command)}"
    )
