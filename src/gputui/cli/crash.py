"""An error nobody expected: the traceback goes to a private crash file and
the user sees one line naming it (exit status 1), never a wall of text that
may hold the run's secrets (Textual's own report prints locals).

Used by cli.py for the CLI verbs and by the dashboard (ui/app.py) for an
exception inside Textual.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from gputui import __version__
from gputui.statefiles import state_dir, write_private_new

CRASH_EXIT = 1


def crash_dir() -> Path:
    return state_dir()


def record(err: BaseException, argv: list[str] | None = None) -> Path:
    """Write the traceback of `err` to a new crash-*.txt; returns its path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    head = (
        f"gputui {__version__} crashed at {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
        f"python {sys.version.split()[0]} · pid {os.getpid()}\n\n"
    )
    d = crash_dir()
    for n in range(100):
        path = d / f"crash-{stamp}-{os.getpid()}{f'-{n}' if n else ''}.txt"
        try:
            return write_private_new(path, head + text)
        except FileExistsError:
            continue
    raise FileExistsError(path)


def report(err: BaseException) -> int:
    """Record `err` and print the one line for it on stderr; the exit status."""
    # only the type: the message may carry remote text or a secret; the file has it all
    what = type(err).__name__
    try:
        path = record(err)
    except OSError as write_err:
        print(
            f"gputui: internal error ({what}); could not write a crash file: {write_err}",
            file=sys.stderr,
        )
        return CRASH_EXIT
    print(
        f"gputui: internal error ({what}) — the traceback is in {path}; "
        "please report it with that file",
        file=sys.stderr,
    )
    return CRASH_EXIT
