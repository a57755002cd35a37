"""Turning an argv list into the one command string ssh needs.

sshd hands the command string to the remote user's shell, so this is the
only place a shell ever parses anything gputui sends: every argument is
quoted with `shlex.quote` (single quotes), so `;`, `$()`, backticks, globs,
`~` and newlines arrive as literal bytes.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def command_line(argv: Sequence[str]) -> str:
    """The shell command string that runs exactly `argv`, quoted once."""
    if not argv:
        raise ValueError("empty argv: nothing to run")
    for arg in argv:
        if not isinstance(arg, str):
            raise TypeError(f"argv items must be str, got {type(arg).__name__}: {arg!r}")
        if "\0" in arg:
            raise ValueError(
                f"argv item contains a NUL byte, which no command can receive: {arg!r}"
            )
    return shlex.join(argv)
