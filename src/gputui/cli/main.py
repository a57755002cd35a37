"""The `gputui` command: flags + config file -> Settings -> dashboard, doctor or an action.

Every problem a user can cause ends as one line on stderr (`gputui: ...`)
and exit status 2; Ctrl-C exits 130 quietly; anything else is a bug: one
line naming a crash file with the traceback (gputui.cli.crash), exit status 1.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from gputui import __version__
from gputui.cli.examples import DOCTOR_DESCRIPTION
from gputui.cli.targets import SSH_OPTION_NAMES, settle_target
from gputui.config import (
    MAX_CONNECT_TIMEOUT_S,
    MIN_INTERVAL_S,
    Settings,
    check_local_files,
    settings_from,
)
from gputui.containers import FLAG_KINDS, Container
from gputui.errors import GputuiError
from gputui.host.targets import host_settings, several_with_run_flags, wants_host_view
from gputui.remote.target import TARGET_GRAMMAR
from gputui.verbs import CLI_VERBS, VERB_BY_ID

NOT_A_TERMINAL = (
    "stdout is not a terminal, so no dashboard: here is the report `gputui doctor` prints "
    "(run gputui in a terminal for the dashboard)"
)
HOW_TO_START = (
    "no target given — try `gputui --demo`, or watch a run with "
    "`gputui --host HOST --ct N` (or set host in the config: `gputui config`)"
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line naming it and the fix (exit 2),
    not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"gputui: {message} — see `{self.prog} --help`\n")


def _seconds(text: str) -> float:
    """A finite number of seconds > 0 (ranges per flag: config._validate)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds, e.g. 10")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def whole_number(text: str) -> int:
    """An integer written in ASCII digits: int() alone takes '２００' as 200."""
    t = text.strip()
    if not (t.isascii() and t.isdigit()):
        raise ValueError(text)
    return int(t)


def _setting_of(kind: type[Container]) -> Callable[[str], object]:
    """argparse's type for a container kind's flag: its `read_setting`, its
    ValueError's one line as argparse's message."""

    def read(text: str) -> object:
        try:
            return kind.read_setting(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    read.__name__ = kind.SETTING
    return read


def _port(text: str) -> int:
    try:
        value = whole_number(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (digits 0-9)") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 1-65535")
    return value


class HostsAction(argparse.Action):
    """--host may be given several times: all are `hosts`; `host` is the one
    host when there is one (several: gputui.host.targets makes a Settings for each,
    so one host's user@ or :port never leaks into the next)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        hosts = [*(getattr(namespace, "hosts", None) or []), values]
        namespace.hosts = hosts
        setattr(namespace, self.dest, hosts[0] if len(hosts) == 1 else None)


# Which flags each command shows and takes (parts of add_target_flags).
ALL_PARTS = frozenset(
    {"config", "host", "ssh", "container", "run", "interval", "stale", "read_only", "local", "demo"}
)
DOCTOR_PARTS = frozenset(
    {"config", "host", "ssh", "container", "run", "interval", "stale", "local", "demo"}
)
VERB_PARTS = frozenset({"config", "host", "ssh", "container", "run", "local"})
TARGET_HELP = (
    f"{TARGET_GRAMMAR}: the same as --host [USER@]HOST[:PORT] --ct N (host may be "
    "an ~/.ssh/config alias)"
)


def add_target_flags(
    p: argparse.ArgumentParser, suppress: bool = False, parts: frozenset[str] = ALL_PARTS
) -> None:
    """The flags that say what to watch, those in `parts` only (each
    command takes the ones it uses). In subcommands the defaults are
    SUPPRESS so a flag given before the subcommand is not overwritten."""
    d: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    b: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {"default": False}
    g = p.add_argument_group("target")
    if "host" in parts:
        g.add_argument(
            "--host",
            action=HostsAction,
            metavar=TARGET_GRAMMAR.upper(),
            help="host or ~/.ssh/config alias to ssh to (again for several hosts)",
            **d,
        )
        g.add_argument("-p", "--port", type=_port, help="ssh port", **d)
        g.add_argument("-l", "--user", help="ssh user", **d)
    if "ssh" in parts:
        _ssh_flags(g, d, b)
    if "container" in parts:
        _container_flags(g, d)
    if "run" in parts:
        g.add_argument("--session", metavar="NAME", help="tmux session of the run", **d)
        g.add_argument("--log", metavar="PATH", help="log file the run writes", **d)
    if "config" in parts:
        g.add_argument(
            "--config",
            metavar="FILE",
            help="config file (default ~/.config/gputui/config.toml)",
            **d,
        )
    _watch_flags(g, d, b, parts)


def _container_flags(g: Any, d: dict[str, Any]) -> None:
    """A flag per container kind, as the kind declares it (--ct N, --docker
    NAME, --podman NAME, --pod [NS/]POD[/C]); gputui/containers/ checks the
    names."""
    for kind in FLAG_KINDS:
        g.add_argument(
            f"--{kind.SETTING.replace('_', '-')}",
            dest=kind.SETTING,
            type=_setting_of(kind),
            metavar=kind.FLAG_METAVAR,
            help=kind.FLAG_HELP,
            **d,
        )
    g.add_argument("--kube-context", metavar="NAME", help="kubectl context for --pod", **d)


def _ssh_flags(g: Any, d: dict[str, Any], b: dict[str, Any]) -> None:
    g.add_argument(
        "-J",
        "--jump",
        metavar="[USER@]HOST[:PORT][,...]",
        help="jump host(s) to ssh through, as ssh -J (ProxyJump)",
        **d,
    )
    g.add_argument("-i", dest="identity_file", metavar="FILE", help="ssh private key", **d)
    g.add_argument(
        "-F",
        "--ssh-config",
        dest="ssh_config",
        metavar="FILE",
        help="ssh_config file instead of ~/.ssh/config (as ssh -F)",
        **d,
    )
    g.add_argument(
        "-o",
        dest="ssh_options",
        action="append",
        metavar="KEY=VALUE",
        help=f"an ssh option, as ssh -o: {', '.join(SSH_OPTION_NAMES)}",
        **d,
    )
    g.add_argument(
        "--known-hosts",
        dest="known_hosts",
        metavar="FILE",
        help="known_hosts file to check the host key against",
        **d,
    )
    g.add_argument(
        "--connect-timeout",
        dest="connect_timeout",
        type=_seconds,
        metavar="S",
        help=f"seconds to wait for the connection (10; at most {MAX_CONNECT_TIMEOUT_S:g})",
        **d,
    )
    g.add_argument(
        "--accept-new-host-key",
        dest="accept_new_host_key",
        action="store_true",
        help="accept an UNKNOWN host key after showing its fingerprint (never a changed one)",
        **b,
    )


def _watch_flags(g: Any, d: dict[str, Any], b: dict[str, Any], parts: frozenset[str]) -> None:
    if "interval" in parts:
        g.add_argument(
            "--interval",
            type=_seconds,
            metavar="S",
            help=f"seconds between polls (1.0; at least {MIN_INTERVAL_S:g})",
            **d,
        )
    if "stale" in parts:
        g.add_argument(
            "--stale-after",
            dest="stale_after",
            type=_seconds,
            metavar="S",
            help="log silence that counts as stalled (adaptive)",
            **d,
        )
    if "read_only" in parts:
        g.add_argument(
            "--read-only",
            dest="read_only",
            action="store_true",
            help="disable every action that changes something",
            **b,
        )
    if not {"local", "demo"} & parts:
        return  # an empty exclusive group breaks argparse's usage line
    mode = g.add_mutually_exclusive_group()
    if "local" in parts:
        mode.add_argument("--local", action="store_true", help="watch this machine (no ssh)", **b)
    if "demo" in parts:
        mode.add_argument(
            "--demo", action="store_true", help="a self-contained demo run on this machine", **b
        )


def _action_flags(p: argparse.ArgumentParser, command: str) -> None:
    from gputui.cli.actions import add_arguments

    add_arguments(p, command)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="gputui",
        usage="gputui [options] [TARGET] | gputui COMMAND [options] [TARGET]",
        description="A terminal dashboard for a training run on a remote GPU machine "
        "(Proxmox LXC + tmux + log).",
        epilog=f"TARGET: {TARGET_HELP}. Every command takes it the same way.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"gputui {__version__}")
    add_target_flags(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="gputui")
    doctor = sub.add_parser(
        "doctor",
        help="check the connection, container and tools; print a report",
        description=DOCTOR_DESCRIPTION,
    )
    add_target_flags(doctor, suppress=True, parts=DOCTOR_PARTS)
    _target_arg(doctor)
    doctor.add_argument("--json", action="store_true", help="print JSON")
    doctor.add_argument(
        "--buffer-watch",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="a run whose GPUs are busy while no step has reached its log: watch the log "
        "this long for whether its stdout is block-buffered (default 15); still not "
        "known then, the report says so",
    )
    for name in CLI_VERBS:
        p = sub.add_parser(name, help=VERB_BY_ID[name].cli_help)
        add_target_flags(p, suppress=True, parts=VERB_PARTS)
        _target_arg(p)
        _action_flags(p, name)
    from gputui.cli import record as history_cli

    history_cli.add_parsers(sub, add_target_flags)
    from gputui.cli import serve

    serve.add_parser(sub, add_target_flags)
    from gputui.cli import configfile

    configfile.add_parser(sub, add_target_flags)
    completion = sub.add_parser("completion", help="print a shell completion script")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    _add_examples(parser)
    return parser


VERBOSE_HELP = "write a debug log to attach to a bug report (its path is said on exit)"


def _add_examples(parser: argparse.ArgumentParser) -> None:
    """Every command takes -v and its --help ends with examples (cli/examples.py)."""
    from gputui.cli.examples import JSON_DOC, add_examples

    add_examples(parser, "gputui")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, p in action.choices.items():
                add_examples(p, name, doc_json=str(JSON_DOC) if name == "doctor" else "")
                p.add_argument(
                    "-v",
                    "--verbose",
                    action="store_true",
                    default=argparse.SUPPRESS,
                    help=VERBOSE_HELP,
                )


def _target_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "target", nargs="?", metavar="TARGET", default=argparse.SUPPRESS, help=TARGET_HELP
    )


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def _first_word(parser: argparse.ArgumentParser, argv: list[str]) -> int | None:
    """Where the first word that is neither a flag nor a flag's value is."""
    takes_value = {
        flag
        for a in parser._actions
        if a.nargs != 0 and a.option_strings
        for flag in a.option_strings
    }
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word == "--":
            return i + 1 if i + 1 < len(argv) else None
        elif word.startswith("-") and word != "-":
            skip = word in takes_value  # --flag=value and -p22 carry their value
        else:
            return i
    return None


def _dashboard_target(parser: argparse.ArgumentParser, argv: list[str]) -> int | None:
    """Where the dashboard's TARGET is in argv (`gputui gpu1/200`), None when
    a COMMAND comes first or there is none. argparse cannot tell a TARGET
    from a COMMAND before the subcommands, so the words are looked at here."""
    at = _first_word(parser, argv)
    return None if at is None or argv[at] in _commands(parser) else at


def _not_a_command(parser: argparse.ArgumentParser, word: str) -> None:
    """A bare word close to a command (`doctr`) is a typo, not a host."""
    import difflib

    if any(c in word for c in ".@:/[]"):
        return
    close = difflib.get_close_matches(word, sorted(_commands(parser)), n=1, cutoff=0.75)
    if close:
        parser.error(f"unknown command {word!r}: did you mean `gputui {close[0]}`?")


def _one_target(parser: argparse.ArgumentParser, rest: list[str], target: str) -> None:
    """`gputui a b` or `gputui gpu1 doctor`: one line saying how to write it."""
    at = _first_word(parser, [w for w in rest if w != "--"])
    if at is None:
        return
    word = [w for w in rest if w != "--"][at]
    if word in _commands(parser):
        parser.error(f"the command comes first: gputui {word} {target}")
    parser.error(f"one TARGET only ({target}, {word}): several hosts are --host a --host b")


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    at = _dashboard_target(parser, words)
    target = words.pop(at) if at is not None else None
    if target is not None:
        _not_a_command(parser, target)
        _one_target(parser, words, target)
    if target is not None and "--" in words[:at]:
        words.remove("--")
    args, extra = parser.parse_known_args(words)
    if extra:  # a flag this command does not take: name the command and its help
        command = f"gputui {args.command}" if getattr(args, "command", None) else "gputui"
        parser.exit(
            2, f"gputui: `{command}` does not take {' '.join(extra)} — see `{command} --help`\n"
        )
    if target is not None:
        args.target = target
    if getattr(args, "command", None) == "config":  # it reports on the file: not read here
        return args, Settings()
    settle_target(args)
    settings = settings_from(args)
    keepalive = getattr(args, "keepalive", None)
    if keepalive is not None:  # -o ServerAliveInterval=N (no flag of its own)
        settings.keepalive = keepalive
    return args, settings


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    command = getattr(args, "command", None)
    if command == "completion":
        from gputui.cli.completion import script

        print(script(args.shell, build_parser()), end="")
        return 0
    if command == "serve":
        return _serve(args, settings)
    if command == "config":
        from gputui.cli import configfile

        return configfile.main(args)
    check_local_files(settings)
    hosts = host_settings(settings, getattr(args, "hosts", None))
    several_with_run_flags(hosts, args)
    from_targets = bool(settings.targets) and not getattr(args, "hosts", None)
    if command == "doctor":
        return _doctor(args, settings, hosts, from_targets)
    if command in ("watch", "history", "alert-test"):
        from gputui.cli import record as history_cli

        return history_cli.run(command, args, settings)
    if command in CLI_VERBS:
        from gputui.cli import actions as actions_cli

        return actions_cli.run(command, args, settings)
    if not (wants_host_view(hosts) or settings.host or settings.local or settings.demo):
        print(f"gputui: {HOW_TO_START}", file=sys.stderr)
        return 2
    if not draws_screen():  # `gputui … | cat`, cron: text, as gpustat does
        print(f"gputui: {NOT_A_TERMINAL}", file=sys.stderr)
        return _doctor(args, settings, hosts, from_targets)
    if wants_host_view(hosts):
        from gputui.ui.hostapp import run_hosts

        return run_hosts(hosts)
    from gputui.ui.app import run_app

    return run_app(settings)


def draws_screen() -> bool:
    """Whether the dashboard has a screen: stdout is a terminal, or Textual
    was given a driver (textual-serve's web driver, whose stdout is a pipe)."""
    return sys.stdout.isatty() or bool(os.environ.get("TEXTUAL_DRIVER"))


def _doctor(
    args: argparse.Namespace, settings: Settings, hosts: list[Settings], from_targets: bool
) -> int:
    """`gputui doctor`, and the dashboard's stand-in when stdout is not a terminal."""
    as_json = bool(getattr(args, "json", False))
    if len(hosts) > 1 or from_targets:  # [[targets]]: a list, even of 1
        from gputui.doctor import several as doctor_hosts

        return doctor_hosts.main(hosts, as_json=as_json)
    if not (settings.host or settings.local or settings.demo):
        raise GputuiError(
            "no target given", "pass --host HOST [--ct N], or --local to check this machine"
        )
    if wants_host_view(hosts):  # a host, no run named: what `gputui --host H` shows
        from gputui.doctor import host as doctor_host

        return doctor_host.main(settings, as_json=as_json)
    from gputui.doctor import run as doctor_run

    watch = getattr(args, "buffer_watch", None)
    if watch is None:
        return doctor_run.main(settings, as_json=as_json)
    return doctor_run.main(settings, as_json=as_json, buffer_watch_s=watch)


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from gputui.cli import serve

    check_local_files(settings)
    return serve.main(args, settings, build_parser(), sys.argv[1:])


def main(argv: Sequence[str] | None = None) -> int:
    from gputui.cli.debuglog import DebugLog

    debug = DebugLog()  # -v: started once the command line parses
    code = _main(argv, debug)
    try:
        sys.stdout.flush()  # a reader that left shows here, not as Python's noise at exit
    except BrokenPipeError:
        code = _reader_gone()
    debug.finish(code)
    return code


def _reader_gone() -> int:
    """stdout's reader closed the pipe (`gputui doctor | head -3`): stop
    quietly, as a program that SIGPIPE ends would, with no crash report — the
    reader asked for no more. Later writes, Python's own flush at exit among
    them, go to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE  # what a shell reports for a command SIGPIPE ended


def _main(argv: Sequence[str] | None, debug: Any) -> int:
    try:
        args, settings = parse(argv)
        if getattr(args, "verbose", False):
            debug.start(list(sys.argv[1:] if argv is None else argv), settings)
        if settings.config_exposed:  # said once, before anything runs
            print(f"gputui: warning: {settings.config_exposed}", file=sys.stderr)
        return _dispatch(args, settings)
    except GputuiError as err:  # may quote remote text (an ssh server's reason, stat's output)
        from gputui.text.untrusted import visible

        debug.error(err)
        print(f"gputui: {visible(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as err:  # a bug: the traceback goes to a crash file, not the terminal
        from gputui.cli import crash

        debug.error(err)
        return crash.report(err)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
