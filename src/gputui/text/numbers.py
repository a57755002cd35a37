"""Whole numbers in text from elsewhere (a tool's output, a flag): ASCII
digits only. Pure.

`str.isdigit()` and `int()` take more than `0-9`: `"²00".isdigit()` is True
but `int("²00")` raises ValueError (a crash where the check was meant to
keep it out), `int("٢٠٠")` is 200, and 5,000 digits raise ValueError too. A
VMID, a port, a GPU index or a PID written any other way is not a number
gputui reads: `ascii_int` says None, and the caller skips the item or marks
it unreadable.
"""

from __future__ import annotations

import re

_DIGITS = re.compile(r"[0-9]+")


def ascii_int(text: str, max_digits: int = 18) -> int | None:
    """`text` as an int when it is 1..max_digits ASCII digits with blanks
    around them at most, else None. Only ASCII blanks are stripped: str.strip()
    also takes control characters such as \x1c-\x1f, which are no blank."""
    text = text.strip(" \t\r\n\v\f")
    if len(text) > max_digits or not _DIGITS.fullmatch(text):
        return None
    return int(text)
