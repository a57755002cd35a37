"""Dependencies' warnings stay off the user's terminal.

A release of one library gputui uses can make another warn at import:
cryptography 51 deprecated DSA, which asyncssh 2.24 still names, so every
command that touched ssh opened with ten lines of `CryptographyDeprecationWarning`
above gputui's own one-line answer, and they stayed on screen after the
dashboard quit. The user can do nothing about them. So a short list — each a
warning category and the package that raises it, with the reason — is kept off
stderr; every other warning, gputui's own included, shows as Python shows it.
With `-v`, every warning, the quieted ones too, goes to the debug log.

`install` runs when the `gputui` package is imported, before anything imports
asyncssh. It replaces `warnings.showwarning` (the last step of a warning that
the filters let through) and changes no filter: `-W` and PYTHONWARNINGS still
decide what is raised, shown or made an error.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import warnings
from collections import deque
from dataclasses import dataclass
from typing import TextIO

log = logging.getLogger("gputui.warnings")


@dataclass(frozen=True)
class Quieted:
    """Warnings of `category` (its module and class name) raised from code in `package`."""

    category: str
    package: str
    why: str


QUIETED = (
    Quieted(
        "cryptography.utils.CryptographyDeprecationWarning",
        "asyncssh",
        "asyncssh 2.24 names cryptography's DSA types at import; cryptography 51 "
        "deprecated them. Nothing for a user to do: asyncssh's to change.",
    ),
)

# warnings shown before `-v` started the debug log (they come at import): kept
# so the log still gets them; a bound, as a loop that warns must not grow memory
EARLY: deque[str] = deque(maxlen=100)
_package_dirs: dict[str, str | None] = {}
_original_showwarning = warnings.showwarning


def install() -> None:
    """Route every warning Python would show through `_show`; safe to call twice."""
    if warnings.showwarning is not _show:
        global _original_showwarning
        _original_showwarning = warnings.showwarning
        warnings.showwarning = _show


def quieted(category: type[Warning], filename: str) -> Quieted | None:
    """The entry of QUIETED this warning falls under, or None."""
    name = f"{category.__module__}.{category.__qualname__}"
    for q in QUIETED:
        if q.category == name and _inside(filename, q.package):
            return q
    return None


def start_debug_log() -> None:
    """`-v` started the debug log: what was shown before goes there first."""
    for text in EARLY:
        log.debug("%s", text)
    EARLY.clear()


def _show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    text = warnings.formatwarning(message, category, filename, lineno, line).rstrip("\n")
    q = quieted(category, filename)
    if q is not None:
        text += f"  [kept off the terminal: {q.why}]"
    if log.isEnabledFor(logging.DEBUG) and log.hasHandlers():
        log.debug("%s", text)
    else:
        EARLY.append(text)
    if q is None:
        _original_showwarning(message, category, filename, lineno, file, line)


def _inside(filename: str, package: str) -> bool:
    """Whether `filename` is one of `package`'s own files (found without importing it)."""
    if package not in _package_dirs:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        places = list(spec.submodule_search_locations or []) if spec else []
        _package_dirs[package] = os.path.realpath(places[0]) if places else None
    where = _package_dirs[package]
    return where is not None and os.path.realpath(filename).startswith(where + os.sep)
