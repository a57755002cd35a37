"""Write docs/gputui.1, the man page, from the parser `gputui` itself uses
(gputui.cli.main.build_parser) and the examples its --help shows
(gputui.cli.examples), so the two never disagree.

    python scripts/manpage.py            # rewrite docs/gputui.1
    python scripts/manpage.py --check    # exit 1 if docs/gputui.1 is out of date
    man ./docs/gputui.1                  # read it

tests/test_manpage.py fails when the committed page is not what this writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputui import __version__
from gputui.cli.examples import DOCTOR_EXIT, EXAMPLES, JSON_DOC
from gputui.cli.main import build_parser

OUT = Path(__file__).resolve().parent.parent / "docs" / "gputui.1"
TARGET_GROUP = "target"
FILES = (
    (
        "$XDG_CONFIG_HOME/gputui/config.toml",
        "the config file (else ~/.config/gputui/config.toml); "
        "`gputui config` says which is read, `gputui config --example` prints every key",
    ),
    (
        "$XDG_STATE_HOME/gputui/",
        "else ~/.local/state/gputui/: history.sqlite (the history), "
        "audit.log (every action), py-spy dumps, crash-*.txt, debug-*.log (-v); 0600 files "
        "in a 0700 directory",
    ),
)
ENVIRONMENT = (
    ("XDG_CONFIG_HOME", "where the config is looked for"),
    ("XDG_STATE_HOME", "where the history, audit log, dumps, crash and debug files go"),
    ("NO_COLOR", "no colour in the dashboard"),
)
DESCRIPTION = (
    "gputui watches a training run on a remote GPU machine — a Proxmox host, an LXC "
    "container (or a Docker/Podman container, a Kubernetes pod, the host itself), a run "
    "in tmux writing a log — over one ssh connection, says what is wrong and why "
    "(block-buffered output, a stall, a dead session, a full disk, GPU memory held by "
    "nobody) and puts the fix one key away: relaunch unbuffered, kill, py-spy dump, "
    "flush live through gdb. The same checks run without a screen as `gputui doctor`, "
    "and `gputui watch` records the history, sends alerts and serves Prometheus metrics."
)
SEE_ALSO = "ssh(1), ssh_config(5), tmux(1), nvidia-smi(1), py-spy(1), gdb(1)"


def roff(text: str) -> str:
    """Plain text as roff: backslashes, hyphens and non-ASCII escaped, no line
    starting with a control character."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    out = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in out)  # — as \[u2014]
    return "\n".join("\\&" + ln if ln.startswith((".", "'")) else ln for ln in out.split("\n"))


def flags(action: argparse.Action) -> str:
    names = ", ".join(f"\\fB{roff(n)}\\fR" for n in action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or action.dest.upper()
    return f"{names} \\fI{roff(str(metavar))}\\fR"


def options(parser: argparse.ArgumentParser, skip_target: bool) -> list[str]:
    """.TP entries for the parser's options and positionals (its target
    flags once only: they are the same for every command)."""
    out: list[str] = []
    for group in parser._action_groups:
        if skip_target and group.title == TARGET_GROUP:
            continue
        for a in group._group_actions:
            if a.help == argparse.SUPPRESS or isinstance(a, argparse._SubParsersAction):
                continue
            if {"-h", "-V"} & set(a.option_strings):
                continue
            if skip_target and "--verbose" in a.option_strings:
                continue  # every command takes it: said once, under OPTIONS
            head = flags(a) if a.option_strings else f"\\fI{roff(str(a.metavar or a.dest))}\\fR"
            out += [".TP", head, roff(a.help or "")]
    return out


def target_flags(parser: argparse.ArgumentParser) -> str:
    names = [
        a.option_strings[-1]
        for g in parser._action_groups
        if g.title == TARGET_GROUP
        for a in g._group_actions
        if a.option_strings
    ]
    return roff(" ".join(names))


def examples(command: str) -> list[str]:
    out: list[str] = []
    for line, what in EXAMPLES[command]:
        out += [".TP", f"\\f(CR{roff(line)}\\fR", roff(what) if what else "\\&"]
    return out


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def command_section(name: str, p: argparse.ArgumentParser, helps: dict[str, str]) -> list[str]:
    out = [".SS " + roff(f"gputui {name}"), roff(p.description or helps.get(name, ""))]
    if target_flags(p):
        out += [".PP", f"Target options: {target_flags(p)} (see \\fBOPTIONS\\fR)."]
    out += options(p, skip_target=True)
    out += [".PP", "Examples:", ".RS", *examples(name), ".RE"]
    if name == "doctor":
        out += [".PP", "Exit status:", ".RS"]
        for code, what in DOCTOR_EXIT:
            out += [".TP", f"\\fB{code}\\fR", roff(what)]
        out += [
            ".RE",
            ".PP",
            roff(
                "--json prints one document, described in "
                "gputui/doctor/doctor-json.md in the installed package."
            ),
        ]
    return out


def page() -> str:
    parser = build_parser()
    subs = commands(parser)
    helps = {
        c.dest: c.help or ""
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction)
        for c in a._choices_actions
    }
    out = [
        f'.TH GPUTUI 1 "" "gputui {__version__}" "User Commands"',
        ".SH NAME",
        "gputui \\- " + roff(parser.description or ""),
        ".SH SYNOPSIS",
        "\\fBgputui\\fR [\\fIoptions\\fR] [\\fITARGET\\fR]",
        ".br",
        "\\fBgputui\\fR \\fICOMMAND\\fR [\\fIoptions\\fR] [\\fITARGET\\fR]",
        ".SH DESCRIPTION",
        roff(DESCRIPTION),
        ".PP",
        roff(parser.epilog.split("examples:", 1)[0].strip() if parser.epilog else ""),
        ".PP",
        roff(
            "With no COMMAND, the dashboard: on a terminal, the screen; with stdout "
            "not a terminal (a pipe, cron), the report `gputui doctor` prints."
        ),
        ".SH OPTIONS",
        *options(parser, skip_target=False),
        ".SH COMMANDS",
    ]
    for name, p in subs.items():
        out += command_section(name, p, helps)
    out += [
        ".SH EXAMPLES",
        *examples("gputui"),
        ".SH EXIT STATUS",
        ".TP",
        "\\fB0\\fR",
        "success",
        ".TP",
        "\\fB1\\fR",
        roff(
            "doctor found a problem; an action failed; an internal error (its traceback "
            "is in a crash file, named on stderr)"
        ),
        ".TP",
        "\\fB2\\fR",
        roff(
            "bad input, or the target could not be reached: one line "
            "on stderr naming the problem and the fix"
        ),
        ".TP",
        "\\fB130\\fR, \\fB143\\fR, \\fB129\\fR",
        "Ctrl\\-C, SIGTERM, SIGHUP",
    ]
    out += [".SH FILES"]
    for path, what in FILES:
        out += [".TP", f"\\fI{roff(path)}\\fR", roff(what)]
    out += [".SH ENVIRONMENT"]
    for name, what in ENVIRONMENT:
        out += [".TP", f"\\fB{name}\\fR", roff(what)]
    out += [".SH SEE ALSO", SEE_ALSO]
    text = "\n".join(out) + "\n"
    return text.replace(roff(str(JSON_DOC)), roff("gputui/doctor/doctor-json.md"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write docs/gputui.1 from gputui's parser")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/gputui.1 is stale")
    args = ap.parse_args(argv)
    text = page()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python scripts/manpage.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
