"""Hostile values in argv arrive as literal bytes: nothing is ever executed.

Values mixing `;`, quotes, `$()`, backticks, spaces, newlines, `*` and `~`
(session names, paths) go through the real chain — shlex.join → sshd → the
host shell → the watchdog → `pct exec CT --` → printf — and must come back
byte-identical, while a canary file that every injection would create stays
absent on the host and inside the CT.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.remote.quoting import command_line
from gputui.remote.target import Target
from gputui.remote.watchdog import with_watchdog

PIECES = [
    ";",
    "'",
    '"',
    "$(",
    ")",
    "`",
    " ",
    "\n",
    "*",
    "~",
    "\\",
    "|",
    "&",
    ">",
    "<",
    "$",
    "{",
    "}",
    "!",
    "#",
    "-",
    "%s",
    "é",
    "✓",
    "\t",
]


def hostile(canary: Path) -> st.SearchStrategy[str]:
    attacks = [
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"; touch {canary};",
        f"' ; touch {canary} ; '",
        f'" ; touch {canary} ; "',
        f"\ntouch {canary}\n",
        f"&& touch {canary}",
        f"| touch {canary}",
    ]
    piece = st.sampled_from(PIECES + attacks) | st.text(alphabet="abcXYZ019_./", max_size=4)
    return st.lists(piece, min_size=1, max_size=8).map("".join)


def test_command_line_round_trips_through_shlex() -> None:
    argv = ["printf", "%s", "a b;c $(x) `y` 'q' \"d\"\n*~"]
    assert shlex.split(command_line(argv)) == argv


@pytest.mark.parametrize("bad", [[], ["a\0b"]])
def test_command_line_refuses_what_no_command_can_receive(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        command_line(bad)


def test_watchdog_passes_argv_as_positional_parameters() -> None:
    argv = ["printf", "%s", "$(touch /x)"]
    wrapped = with_watchdog(argv)
    assert wrapped[:2] == ["sh", "-c"] and wrapped[-3:] == argv
    assert "$(touch /x)" not in wrapped[2]  # the script never contains the values


def test_hostile_values_over_ssh_and_pct_are_never_executed(testbed, ct: int) -> None:
    """Property test over the whole chain (ssh + watchdog + pct exec)."""
    canary = testbed.workspace / f"canary-{ct}"  # visible on the host and in the CT
    loop = asyncio.new_event_loop()
    transport = testbed.transport(rtt_refresh=None)
    testbed.set_pct_delay(0)  # the Perl start-up delay adds nothing to this test
    try:
        loop.run_until_complete(transport.connect())
        target = Target(transport, ct)

        @settings(
            max_examples=20,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(value=hostile(canary), cwd_like=hostile(canary))
        def check(value: str, cwd_like: str) -> None:
            r = loop.run_until_complete(
                target.run(["printf", "%s|%s", value, cwd_like], timeout=20)
            )
            assert r.exit_status == 0, r.err
            assert r.stdout == f"{value}|{cwd_like}".encode()
            assert not canary.exists()

        check()
        # on the host side of the CT as well (no pct): session names as tmux would get them
        r = loop.run_until_complete(
            target.run_host(["printf", "%s", f"s;$(touch {canary})`touch {canary}`"])
        )
        assert r.stdout == f"s;$(touch {canary})`touch {canary}`".encode()
        inside = testbed.ct_exec(ct, ["ls", str(testbed.workspace)])
        assert canary.name not in str(inside.stdout)
        assert not canary.exists()
    finally:
        testbed.set_pct_delay(0.3)
        loop.run_until_complete(transport.close())
        loop.close()
