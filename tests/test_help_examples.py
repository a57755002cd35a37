"""Every `gputui COMMAND --help` ends with examples that parse (issue 36);
`doctor --help` says what doctor does and its exit statuses."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from gputui.cli.examples import DOCTOR_EXIT, EXAMPLES, JSON_DOC
from gputui.cli.main import build_parser, parse
from gputui.doctor.report import EXIT_OK, EXIT_PROBLEM, EXIT_UNINSPECTABLE


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {"gputui": parser, **action.choices}
    raise AssertionError("no subcommands")


def gputui_words(line: str) -> list[str]:
    """The gputui command in an example line (`mkdir … && gputui config --example > F`)."""
    at = re.search(r"(?:^|[\s\"(])gputui\s", line)
    assert at, line
    cut = re.split(r"\s(?:&&|\|\||>|\|)\s|\"|\)", line[at.end() :])[0]
    return shlex.split(cut)


def test_every_command_has_examples() -> None:
    for name, p in commands().items():
        assert EXAMPLES.get(name), f"`gputui {name}` has no examples in cli/examples.py"
        text = p.format_help()
        assert "\nexamples:\n" in text, name
        for line, _ in EXAMPLES[name]:
            assert line in text, (name, line)


@pytest.mark.parametrize(
    "line", [line for rows in EXAMPLES.values() for line, _ in rows], ids=lambda s: s[:40]
)
def test_each_example_parses(line: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no tester's config
    words = gputui_words(line)
    try:
        args, _ = parse(words)
    except SystemExit as done:  # argparse: a flag that does not exist, a bad value
        raise AssertionError(f"{line!r} does not parse (exit {done.code})") from None
    command = args.command or "gputui"  # the dashboard: no COMMAND
    assert command == "gputui" or command == words[0], (line, args)


def test_doctor_help_says_what_it_does_and_its_exit_statuses() -> None:
    text = commands()["doctor"].format_help()
    assert "Connect to the target once" in text  # a description, not only the usage
    statuses = {int(code) for code, _ in DOCTOR_EXIT}
    assert statuses == {EXIT_OK, EXIT_PROBLEM, EXIT_UNINSPECTABLE}
    assert "exit status:\n  0  nothing wrong" in text and "\n  2  the target" in text
    assert f"described in {JSON_DOC}" in text and JSON_DOC.is_file()
