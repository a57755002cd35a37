"""A verb is one declaration (gputui.verbs.Verb): its CLI flags, palette
switches, audit words and GPU expectation come from it, and each verb has
exactly one Action (planner + executor) in gputui.actions."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

from gputui import actions, verbs
from gputui.cli import actions as cli_actions
from gputui.cli.main import build_parser
from gputui.record import recorder
from gputui.verbs import (
    CLI_VERBS,
    VERB_BY_ID,
    VERBS,
    Audit,
    DumpOptions,
    GpuAfter,
    Verb,
    numbers,
    switch,
    text,
)


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("name", CLI_VERBS)
def test_each_verbs_flags_are_its_declared_options(name: str) -> None:
    """Beside what every verb takes (launch declares no option: the target's
    flags, --yes, --json), a verb's flags are its declared options."""
    declared = {o.flag for o in VERB_BY_ID[name].option_list()}
    assert flags(subparser(name)) - flags(subparser("launch")) == declared
    assert not VERB_BY_ID["launch"].option_list()


@dataclass(frozen=True)
class ToyOptions:
    depth: tuple[int, ...] = numbers("--depth", "how deep (repeatable)", metavar="N")
    loud: bool = switch("--loud", "say it loudly")
    word: str | None = text("--word", "the word to say", metavar="WORD")


def test_a_new_verbs_flags_come_from_its_declaration_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A verb declared with options gets its flags with no line in cli/
    (cli/actions.py once added each verb's flags in an `if`)."""
    toy = Verb("toy", "t", "toy", "a toy verb", lambda s, c: None, options=ToyOptions)
    monkeypatch.setitem(VERB_BY_ID, "toy", toy)
    parser = argparse.ArgumentParser()
    cli_actions.add_arguments(parser, "toy")
    args = parser.parse_args(["--depth", "2", "--depth", "5", "--loud", "--word", "hi"])
    assert cli_actions.options_from("toy", args) == ToyOptions((2, 5), True, "hi")
    assert cli_actions.options_from("toy", parser.parse_args([])) == ToyOptions()


def test_dump_flags_reach_its_typed_options() -> None:
    args = build_parser().parse_args(
        ["dump", "--pid", "7", "--pid", "9", "--native", "--py-spy", "/opt/py-spy", "h"]
    )
    assert cli_actions.options_from("dump", args) == DumpOptions(
        pids=(7, 9), native=True, locals_=False, py_spy="/opt/py-spy"
    )


def test_each_verb_has_one_action_taking_its_options() -> None:
    assert list(actions.ACTIONS) == [v.id for v in VERBS]
    for v in VERBS:
        a = actions.ACTIONS[v.id]
        assert a.verb is v
        assert (a.execute is None) == (v.runs != "target"), v.id
        assert isinstance(v.make_options(), v.options)
    assert VERB_BY_ID["force_kill"].make_options({"force": False}).force is True  # preset


def test_the_recorder_expects_the_verbs_declared_to_begin_in_the_audit_log() -> None:
    expected = {v.id for v in VERBS if v.audit is Audit.BEGIN_AND_END}
    assert expected == {"relaunch", "kill", "force_kill", "launch"}
    assert {v.id for v in VERBS if recorder._expected(v.id)} == expected
    assert not recorder._expected("dump") and not recorder._expected(None)
    freed = {v.id for v in VERBS if v.gpu_after is GpuAfter.FREED}
    assert freed == {"relaunch", "kill", "force_kill"}


def test_options_are_frozen_typed_dataclasses() -> None:
    for v in VERBS:
        assert dataclasses.is_dataclass(v.options)
        for o in verbs.options_of(v.options):
            assert o.flag.startswith("--") and o.help and o.name
