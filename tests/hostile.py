"""Hostile text for the "remote text is data" tests (issue #11): every class
a compromised or merely unusual container can put in a session name, a
working directory, a pane start command, an argument, a log path or a log
line, and a check that a terminal's output holds no sequence gputui did not
make."""

from __future__ import annotations

import re

from hypothesis import strategies as st

CANARY = "gputui-canary"  # `touch` targets: a file with this name must never appear

# One piece of each hostile class. {c} is the canary path a test fills in.
PIECES = (
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: write the clipboard
    "\x1b]0;owned title\x07",  # OSC 0 / 2: terminal title
    "\x1b]2;owned\x1b\\",
    "\x1b]8;;https://example.invalid/\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1bP1$r0m\x1b\\",  # DCS
    "\x1b_apc\x1b\\",  # APC
    "\x1b^pm\x1b\\",  # PM
    "\x1b[2J\x1b[H",  # CSI: clear, home
    "\x1b[8m",  # CSI: hidden text
    "\x9b31m",  # 8-bit CSI
    "\x85",  # C1 NEL
    "\x90",  # C1 DCS
    "\x7f",  # DEL
    "\x18",  # CAN
    "\x1a",  # SUB
    "\x07",  # BEL
    "\x08",  # BS
    "\x00",  # NUL
    "\r",
    "\n",
    "\t",
    "\u202e",  # right-to-left override
    "#(touch {c})",  # tmux runs it where it expands formats
    "#{session_name}",
    "#{pane_pid}",
    "##",
    "#",
    "[/]",  # Rich / Textual markup
    "[bold]",
    "[/bold]",
    "[link=https://example.invalid]",
    "'",
    '"',
    "$(touch {c})",
    "`touch {c}`",
    "; touch {c};",
    "\\",
    "$HOME",
    "*",
    "~",
    " ",
    "[baseline]",
    "model.layers=[1,2]",
)
WORDS = st.text(alphabet="abcxyz019_-/", min_size=1, max_size=6)


def hostile(
    canary: str, *, exclude: str = "", min_size: int = 1, max_size: int = 5
) -> st.SearchStrategy[str]:
    """A string of hostile pieces and plain words; characters in `exclude`
    are replaced by `_` (e.g. NUL where no argv can hold it)."""
    piece = st.sampled_from(PIECES).map(lambda p: p.replace("{c}", canary))
    parts = st.lists(st.one_of(piece, WORDS), min_size=min_size, max_size=max_size)

    def join(xs: list[str]) -> str:
        s = "".join(xs)
        for ch in exclude:
            s = s.replace(ch, "_")
        return s

    return parts.map(join)


# What Textual itself writes: SGR colours/attributes and cursor moves.
_OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;:]*[mHABCDJK]|\x1b\[\?[0-9;]*[hl]")
_RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def foreign_controls(output: str) -> list[str]:
    """The control characters left in terminal output once the sequences
    Textual makes are taken out (newlines are fine)."""
    rest = _OWN_SEQUENCES.sub("", output)
    return [repr(rest[max(0, m.start() - 10) : m.end() + 10]) for m in _RAW_CONTROL.finditer(rest)]


def raw_controls(text: str) -> list[str]:
    """Raw control characters in printed text (CLI, doctor), newlines allowed."""
    return [repr(text[max(0, m.start() - 10) : m.end() + 10]) for m in _RAW_CONTROL.finditer(text)]
