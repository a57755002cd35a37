"""`gputui -v`: a debug log a user can attach to a bug report (as `ssh -v`,
`lazydocker --debug`).

The log is a new file, `$XDG_STATE_HOME/gputui/debug-DATE-TIME-PID.log`
(0600 in a 0700 directory, like the crash files): gputui's version, Python,
the command line, what was asked of which target, every remote command with
its exit status and time, the connection's states, asyncssh's own log and any
traceback. Never the terminal: the dashboard owns it. The path is said on
stderr when gputui exits, so the user knows what to attach.

What it does not hold: the config's `[run] env` values (API keys go on stdin,
never in a command line) and stdin itself.
"""

from __future__ import annotations

import logging
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gputui import __version__, depwarnings
from gputui.containers import FLAG_KINDS
from gputui.statefiles import state_dir, write_private_new

MAX_BYTES = 50 * 1024 * 1024  # a day of `watch -v` is a few MB; a loop must not fill the disk
LOGGERS = ("gputui", "asyncssh")  # gputui.warnings: every warning, those kept off the terminal too
FORMAT = "%(asctime)s.%(msecs)03d %(name)s %(levelname)s %(message)s"
# what is said about the target: the Settings fields a bug report needs (not
# `run.env`, which may hold API keys)
TARGET_FIELDS = (
    "config_path",
    "host",
    "port",
    "user",
    *(kind.FIELD for kind in FLAG_KINDS),  # --ct, --docker, ...: where the run lives
    "kube_context",
    "jump",
    "ssh_config",
    "identity_file",
    "connect_timeout",
    "session",
    "log",
    "local",
    "demo",
    "read_only",
    "interval",
    "diagnosis.stale_after",
    "gpu_source",
)

log = logging.getLogger("gputui.cli")


class CappedFile(logging.Handler):
    """Appends to the private file; past MAX_BYTES, one last line says the rest was dropped."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.DEBUG)
        self.path = path
        self.written = path.stat().st_size
        self.full = False
        self.setFormatter(logging.Formatter(FORMAT, "%Y-%m-%d %H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        if self.full:
            return
        try:
            line = self.format(record) + "\n"
            if self.written + len(line) > MAX_BYTES:
                self.full = True
                line = f"debug log full ({MAX_BYTES // 2**20} MiB): later lines dropped\n"
            with open(self.path, "a", encoding="utf-8", errors="replace") as f:
                f.write(line)
            self.written += len(line)
        except Exception:
            self.handleError(record)


class DebugLog:
    """Off until `start`; `finish` says where the log is."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.handler: CappedFile | None = None

    def start(self, argv: Sequence[str], settings: Any) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = state_dir() / f"debug-{stamp}-{os.getpid()}.log"
        head = (
            f"gputui {__version__} debug log, started {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
            f"python {sys.version.split()[0]} on {platform.platform()} · pid {os.getpid()}\n"
            f"command: gputui {shlex.join(argv)}\n"
        )
        write_private_new(path, head)
        self.path, self.handler = path, CappedFile(path)
        for name in LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(self.handler)
            logger.setLevel(logging.DEBUG)
        _asyncssh_debug()
        depwarnings.start_debug_log()
        said = {f: _setting(settings, f) for f in TARGET_FIELDS}
        log.debug("target: %s", ", ".join(f"{k}={v!r}" for k, v in said.items() if v))
        return path

    def error(self, err: BaseException) -> None:
        if self.handler is not None:
            log.error("gputui failed", exc_info=err)

    def finish(self, code: int) -> None:
        if self.path is None or self.handler is None:
            return
        log.debug("exit status %s", code)
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self.handler)
        print(
            f"gputui: debug log in {self.path} — attach it to a bug report "
            "(it holds host names, paths and the commands run; no passwords or [run] env values)",
            file=sys.stderr,
        )


def _setting(settings: Any, name: str) -> Any:
    """A Settings field by name; `diagnosis.X`: Settings.diagnosis's X."""
    part, _, rest = name.partition(".")
    value = getattr(settings, part, None)
    return getattr(value, rest, None) if rest else value


def _asyncssh_debug() -> None:
    """asyncssh logs connection and auth steps at DEBUG once asked to (level 1:
    no packet dumps, which could hold what a command printed)."""
    try:
        import asyncssh

        asyncssh.set_debug_level(1)
    except Exception:  # pragma: no cover - asyncssh is a dependency
        pass
