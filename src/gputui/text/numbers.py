"""Whole numbers in text from elsewhere (a tool's output, a flag): ASCII
digits only. Pure.

`str.isdigit()` and `int()` take more than `0-9`: `"²00".isdigit()` is True
but `int("²00")` raises ValueError (a crash where the check was meant to
keep it out), `int("٢٠٠")` is 200, and 5,000 digits raise ValueError too. A
VMID, a port, a GPU index or a PID written any other way is not a number
gputui reads: `ascii_int` says None, and the caller skips the item or marks
it unreadable.

`bounded_int` and `bounded_float` are the one way a number in remote text
(a log line, a tool's output) becomes a number: ASCII only, bounded in
length before any conversion, within the caller's bounds, None for
anything else, never an exception (issue 44: one 5,000-digit number in a
log line made int() raise inside a rule, and the banner went dark).
"""

from __future__ import annotations

import math
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


# The one way a number is read from remote text (a log line, a tool's output):
# ASCII only, bounded in length before any conversion, never an exception.
# Python's int() raises ValueError past 4,300 digits and takes Unicode digits;
# float() takes `٣٠`, `1_000`, `nan`, `inf` and 64 KiB of digits (as inf).
_SIGNED = re.compile(r"[-+]?[0-9]+")
_REAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?")
_NOT_FINITE = re.compile(r"[-+]?(?:nan|inf|infinity)", re.IGNORECASE)
MAX_REAL_CHARS = 64


def bounded_int(
    text: str | None,
    lo: int | None = None,
    hi: int | None = None,
    *,
    max_digits: int = 18,
) -> int | None:
    """A whole number read from remote text, or None — never raises: an
    optional sign and 1..max_digits ASCII digits (blanks around allowed),
    within lo..hi when given. A 5,000-digit string, `٣`, `1e3`, "" or
    None: None."""
    if text is None:
        return None
    t = text.strip(" \t\r\n\v\f")
    if len(t) > max_digits + 1 or not _SIGNED.fullmatch(t) or len(t.lstrip("+-")) > max_digits:
        return None
    v = int(t)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        return None
    return v


def bounded_float(
    text: str | None,
    lo: float | None = None,
    hi: float | None = None,
    *,
    finite: bool = True,
    max_chars: int = MAX_REAL_CHARS,
) -> float | None:
    """A real number read from remote text, or None — never raises: ASCII
    digits with an optional sign, point and exponent, at most max_chars,
    within lo..hi when given. `nan`/`inf` (and a value too big for a float)
    only when `finite` is False (a loss that turned NaN is news)."""
    if text is None:
        return None
    t = text.strip(" \t\r\n\v\f")
    if not t or len(t) > max_chars:
        return None
    if _NOT_FINITE.fullmatch(t):
        if finite:
            return None
        v = float(t)
    elif _REAL.fullmatch(t):
        v = float(t)
        if finite and not math.isfinite(v):
            return None
    else:
        return None
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        return None
    return v
