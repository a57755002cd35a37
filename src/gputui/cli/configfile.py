"""`gputui config`: which config file is read, and the example to start one from.

`gputui config` says where the file is (and why there: --config,
$XDG_CONFIG_HOME or the default), whether it exists and whether it parses;
`--example` prints the example shipped in the package (every key, its
default); `--path` prints the path alone, for scripts and $EDITOR.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from gputui.config import (
    Settings,
    default_config_path,
    example_config,
    load_config,
    settings_container,
)
from gputui.errors import ConfigError


def add_parser(sub: Any, add_target_flags: Any) -> None:
    p = sub.add_parser(
        "config",
        help="where the config file is read from; --example prints one to start from",
        description="Say which config file gputui reads, whether it exists and whether it "
        "parses. Every key is optional and a flag always wins over the file.",
    )
    add_target_flags(p, suppress=True, parts=frozenset({"config"}))
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--example",
        action="store_true",
        help="print the example config shipped with gputui (every key, documented)",
    )
    what.add_argument("--path", action="store_true", help="print the config file's path only")


def where_from(given: str | None) -> tuple[Path, str]:
    """The config file gputui reads and why that one."""
    if given is not None:
        return Path(given).expanduser(), "given with --config"
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if base and os.path.isabs(base):
        return default_config_path(), "from $XDG_CONFIG_HOME"
    return default_config_path(), "the default"


def describe(given: str | None) -> tuple[list[str], int]:
    """The lines `gputui config` prints, and its exit status (2: the file is
    named but missing, or does not parse)."""
    path, why = where_from(given)
    head = f"config file: {path} ({why})"
    if not path.exists():
        if given is not None:
            return [head, f"gputui: config file {path} does not exist"], 2
        start = shlex.quote(str(path.parent))
        return [
            head,
            "  it does not exist: gputui runs on its flags and defaults",
            f"  start one: mkdir -p {start} && (umask 077 && gputui config --example"
            f" > {shlex.quote(str(path))})",
        ], 0
    try:
        settings = load_config(path)
    except ConfigError as err:
        return [head, f"gputui: {err}"], 2
    return [
        head,
        "  it exists and parses; flags given on the command line win over it",
        f"  `gputui` alone watches: {what_it_names(settings)}",
    ], 0


def what_it_names(s: Settings) -> str:
    """What `gputui` with no target flags would watch, from the config alone."""
    if s.targets:
        return f"{len(s.targets)} host{'s' if len(s.targets) != 1 else ''} ([[targets]])"
    if not s.host:
        return "nothing (no host: give one with --host, or set host in this file)"
    try:
        where = settings_container(s).words
    except ValueError as err:  # two container kinds: the dashboard says the same
        return f"{s.host}, but {err}"
    run = ", ".join(f"{k} {v}" for k, v in (("session", s.session), ("log", s.log)) if v)
    return f"{where} on {s.host}" + (f" ({run})" if run else "")


def main(args: argparse.Namespace) -> int:
    if args.example:
        sys.stdout.write(example_config())
        return 0
    given = getattr(args, "config", None)
    if args.path:
        print(where_from(given)[0])
        return 0
    lines, status = describe(given)
    for line in lines:
        print(line, file=sys.stderr if line.startswith("gputui:") else sys.stdout)
    return status
