"""One way to say a duration (text.words.dur): the banner's sentence and the
dashboard's columns say the same number in the same units."""

from __future__ import annotations

import pytest

from gputui.text.words import dur, program_name


@pytest.mark.parametrize(
    ("seconds", "sentence", "column"),
    [
        (-3, "0 s", "0 s"),
        (45, "45 s", "45 s"),
        (89.4, "89 s", "89 s"),
        (240, "4 min", "4 m"),
        (89 * 60, "89 min", "89 m"),
        (2 * 3600, "2 h", "2 h 00 m"),
        (2 * 3600 + 5 * 60, "2 h 5 min", "2 h 05 m"),
        (47 * 3600, "47 h", "47 h 00 m"),
        (3 * 86400 + 4 * 3600, "3 d 4 h", "3 d 4 h"),
        (3 * 86400, "3 d", "3 d"),
    ],
)
def test_one_rule_two_widths(seconds: float, sentence: str, column: str) -> None:
    assert dur(seconds) == sentence
    assert dur(seconds, short=True) == column


@pytest.mark.parametrize(
    ("cmd", "name"),
    [
        ("tee -a /w/train.log", "tee"),
        ("/usr/bin/python3 t.py", "python3"),
        ("", "a process"),
        ("\x85 \u3000", "a process"),
    ],
)
def test_a_reader_is_named_the_same_in_the_banner_and_the_run_panel(cmd: str, name: str) -> None:
    assert program_name(cmd) == name
