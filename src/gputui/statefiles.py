"""Files gputui writes on this machine: the audit log, py-spy dumps, crash
reports. They can hold command lines, paths and stack locals of a run, so
each is created 0600 inside a 0700 directory, whatever the umask.

The directory is `$XDG_STATE_HOME/gputui`, else `~/.local/state/gputui`.
"""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700


def state_dir() -> Path:
    """$XDG_STATE_HOME/gputui, else ~/.local/state/gputui."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gputui"


_AUDIT_PATH: Path | None = None  # set_audit_path: the demo's own


def set_audit_path(path: Path | None) -> None:
    """Keep this process's actions in `path` (None: the user's own audit
    log): the demo's relaunches landed in the user's audit log as `local
    (vm)`, beside their real runs' (issue 46)."""
    global _AUDIT_PATH
    _AUDIT_PATH = path


def audit_path() -> Path:
    """The audit log: a line per action begun and done (actions/plan.py
    writes it; the recorder reads what the user did from it)."""
    return _AUDIT_PATH if _AUDIT_PATH is not None else state_dir() / "audit.log"


def private_dir(path: Path) -> Path:
    """Create `path` (and its parents) if needed; `path` itself is made 0700
    even when it existed with a looser mode (files from older versions)."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def _open_private(path: Path, flags: int) -> int:
    private_dir(path.parent)
    fd = os.open(path, flags | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode on open: tighten it
    return fd


def append_private(path: Path, text: str) -> Path:
    """Append `text` to `path`, a 0600 file in a 0700 directory."""
    fd = _open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
    return path


def write_private_new(path: Path, text: str) -> Path:
    """Write a new 0600 file (never an existing one: FileExistsError)."""
    fd = _open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path
