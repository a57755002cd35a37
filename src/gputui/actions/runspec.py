"""How a run is started: pure text work, no I/O.

- `RunSpec`: session, cwd, command, log, env — from the config's `[run]` or
  recovered from a tmux pane's start command and the process command line.
- `WRAPPER`: the one fixed bash script every (re)launch runs; values reach it
  only as positional arguments, never spliced into its text.
- `new_session_argv`: `tmux new-session … \\; set-option -p … remain-on-exit on`
  as ONE tmux invocation, every value escaped for tmux's own `;` parsing and
  the session name and cwd for tmux's format expansion (`#` -> `##`).
- `spec_from_start_command`: the run read back from tmux's `pane_start_command`
  (split by `collect.tmux.split_start_command`).
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
from dataclasses import dataclass, field

from gputui.actions.scripts import WRAPPER
from gputui.collect.tmux import LAUNCH_WRAPPER_NAME, split_start_command
from gputui.text.untrusted import tmux_literal

# The env file: the values go into a fresh file of root's (mktemp: O_EXCL,
# 0600), which is then hard-linked to the planned path; link(2) fails on
# anything already there — a FIFO someone planted would otherwise take the
# secret (`set -C` refuses only an existing regular file), a file of theirs
# would hand the wrapper their variables (LD_PRELOAD). The path is checked to
# be that very file afterwards; else nothing is left anywhere.
WRITE_ENV_SCRIPT = r"""umask 077; e=$1
t=$(mktemp "$e.XXXXXX") || exit 1
if [ -e "$e" ] || [ -L "$e" ]; then s=3; cat > /dev/null; else
  cat > "$t" && ln -- "$t" "$e" 2>/dev/null && [ -f "$e" ] && [ ! -L "$e" ] && [ "$e" -ef "$t" ]
  s=$?
fi
if [ "$s" != 0 ]; then
  [ -d "$e" ] && [ ! -L "$e" ] && rm -f -- "$e/${t##*/}"
  printf '%s: something else is already at this path (a file, FIFO or link put there by someone); nothing was written to it\n' "$e" >&2
fi
rm -f -- "$t"; exit "$s"
"""
ENV_DIR = "/tmp"
WRAPPER_NAME = LAUNCH_WRAPPER_NAME  # $0 of the wrapper: what ps shows

_SHELLS = {"bash", "sh", "zsh", "fish", "dash", "ksh", "-bash", "-sh", "-zsh"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PYTHON = re.compile(r"^(\s*(?:\S*/)?python[0-9.]*)(?=\s|$)")
_REDIRECT = re.compile(
    r"^(?P<cmd>.*?)\s*(?:>>?|&>>?)\s*(?P<file>[^\s|;&<>]+)(?:\s*2>&1)?\s*$", re.S
)


@dataclass
class RunSpec:
    session: str
    cwd: str
    command: str  # a shell command line (bash parses it, as tmux would have)
    log: str
    env: dict[str, str] = field(default_factory=dict)
    source: str = (
        ""  # "config [run]" | "pane start command" | "process command line" | "gputui wrapper"
    )
    # the command writes `log` itself (`bash start.sh` whose script tees into
    # it): the wrapper adds no tee of its own, which would write every line
    # into the file a second time, at its own offset
    writes_own_log: bool = False

    @property
    def effective_command(self) -> str:
        """The command as it will run: `python -u` where it starts with python."""
        return add_python_u(self.command)


def add_python_u(command: str) -> str:
    """`python3 train.py` -> `python3 -u train.py`; anything else unchanged."""
    m = _PYTHON.match(command)
    if not m:
        return command
    rest = command[m.end() :]
    first = rest.split(None, 1)[0] if rest.strip() else ""
    if first == "-u" or (first.startswith("-") and not first.startswith("--") and "u" in first):
        return command
    return f"{m.group(1)} -u{rest}"


def _last_pipe(command: str) -> tuple[int, int] | None:
    """(start, end) of the last top-level `|` or `|&` (not `||`), outside quotes."""
    found = None
    quote: str | None = None
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c == "\\":
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "|":
            if i + 1 < n and command[i + 1] == "|":
                i += 2
                continue
            end = i + 2 if i + 1 < n and command[i + 1] == "&" else i + 1
            found = (i, end)
            i = end
            continue
        i += 1
    return found


_MERGE = re.compile(r"\s*2>&1\s*$")


def _words(text: str) -> list[str]:
    """Shell words of a simple command; [] when it holds operators (; & < > ( ))
    or cannot be parsed."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:
        return []
    if any(w and all(c in "();<>|&" for c in w) for w in words):
        return []
    return words


def pipes_into_tee(command: str) -> bool:
    """True when the command's last stage is still a `tee` (unparsed)."""
    pipe = _last_pipe(command)
    if not pipe:
        return False
    right = command[pipe[1] :].split()
    return bool(right) and posixpath.basename(right[0]) == "tee"


def split_log_pipe(command: str) -> tuple[str, str | None]:
    """`CMD 2>&1 | tee [-a] LOG` -> (CMD, LOG); `CMD > LOG 2>&1` -> (CMD, LOG);
    anything else -> (command, None). Only the last pipe stage is looked at."""
    pipe = _last_pipe(command)
    if pipe:
        left, right = command[: pipe[0]], command[pipe[1] :]
        words = _words(right)
        if words and posixpath.basename(words[0]) == "tee":
            files = [w for w in words[1:] if not w.startswith("-")]
            if len(files) == 1 and not any(c in w for w in words for c in "$`"):
                return _MERGE.sub("", left).strip(), files[0]
        return command, None
    m = _REDIRECT.match(command)
    if m and m.group("cmd").strip():
        try:
            (path,) = shlex.split(m.group("file"))
        except ValueError:
            return command, None
        return m.group("cmd").strip(), path
    return command, None


# What tmux 3.3a rewrites in a new session's name (checked on it): ':' and
# '.' become '_'; control characters, DEL, C1, a backslash and a '$' before
# a letter, '_' or '{' are stored escaped (as octal, a doubled backslash, \$).
_TMUX_RENAMES = re.compile(r"[:.\\\x00-\x1f\x7f-\x9f]|\$[A-Za-z_{]")


def check_session_name(name: str) -> None:
    """Refuse a name tmux would store as another: the run would come back
    under a name nobody asked for, and the relaunch could not find it."""
    from gputui.actions.plan import ActionError

    if not name or _TMUX_RENAMES.search(name):
        raise ActionError(
            f"tmux session name {name!r} cannot be used: tmux would store it under another name",
            "tmux rewrites ':', '.', '\\', '$NAME' and control characters in session names; "
            "rename the session (tmux rename-session) or pick another name in [run] session",
        )


def check_env(env: dict[str, str]) -> None:
    from gputui.actions.plan import ActionError

    for k, v in env.items():
        if not _ENV_NAME.match(k):
            raise ActionError(
                f"[run] env name {k!r} is not a valid environment variable name",
                "use letters, digits and _ only, not starting with a digit",
            )
        if "\0" in v:
            raise ActionError(f"[run] env value of {k} holds a NUL byte", "remove it")


def tmux_arg(value: str) -> str:
    """Escape a value for a tmux command line that contains `;` separators:
    tmux treats an argument ENDING in `;` as a separator, `\\;` as a literal."""
    return value[:-1] + "\\;" if value.endswith(";") else value


def tmux_argv(tmux: list[str] | None, *args: str) -> list[str]:
    """A tmux command line with every value escaped for tmux's `;` parsing
    (which applies to every argument, even without a separator)."""
    return [*(tmux or ["tmux"]), *(tmux_arg(a) for a in args)]


def session_target(session: str) -> str:
    """An exact-match tmux target for a session (no prefix/pattern matching)."""
    return f"={session}"


def pane_target(session: str) -> str:
    return f"={session}:"


def env_file_path(spec: RunSpec) -> str:
    """A fresh, unguessable path for the env file ("" when there is no env)."""
    return f"{ENV_DIR}/gputui-env-{secrets.token_hex(12)}" if spec.env else ""


def env_file_bytes(env: dict[str, str]) -> bytes:
    """What the env file holds: NAME=VALUE, each NUL-terminated (sent on stdin)."""
    return b"".join(f"{k}={v}".encode("utf-8", "surrogateescape") + b"\0" for k, v in env.items())


def write_env_argv(path: str) -> list[str]:
    """Creates `path` 0600 with what arrives on stdin; fails if it exists."""
    return ["sh", "-c", WRITE_ENV_SCRIPT, "gputui-env", path]


def shown_env(env: dict[str, str]) -> str:
    """The env as the confirm box, the audit log and the screen show it."""
    return " ".join(f"{k}=…" for k in env)


OWN_LOG = "-"  # the wrapper's log argument for a command that writes its log itself


def wrapper_argv(spec: RunSpec, env_file: str = "") -> list[str]:
    """The argv the tmux pane runs (before tmux escaping): names, never values."""
    if spec.env and not env_file:
        raise ValueError("a run with env needs its env file (write_env_argv)")
    names = list(spec.env) if env_file else []
    log = OWN_LOG if spec.writes_own_log else spec.log
    return ["bash", "-c", WRAPPER, WRAPPER_NAME, log, spec.effective_command, env_file, *names]


def new_session_argv(spec: RunSpec, tmux: list[str] | None = None, env_file: str = "") -> list[str]:
    """One tmux invocation: create the detached session running the wrapper,
    then set remain-on-exit on its pane before anything can exit."""
    check_session_name(spec.session)
    check_env(spec.env)
    base = list(tmux or ["tmux"])
    # tmux format-expands -s and -c (a `#(cmd)` there runs cmd): `#` -> `##`
    name, cwd = tmux_literal(spec.session), tmux_literal(spec.cwd)
    new = ["new-session", "-d", "-s", name, "-c", cwd, *wrapper_argv(spec, env_file)]
    opt = ["set-option", "-p", "-t", pane_target(spec.session), "remain-on-exit", "on"]
    return base + [tmux_arg(a) for a in new] + [";"] + [tmux_arg(a) for a in opt]


def abs_log(log: str, cwd: str) -> str:
    return posixpath.normpath(posixpath.join(cwd or "/", log))


def spec_from_start_command(
    start_command: str, session: str, cwd: str
) -> tuple[str, str | None, dict[str, str], str]:
    """(command, log or None, env, source) from a pane's start command."""
    argv = split_start_command(start_command) or []  # unreadable: like none at all
    if not argv or (
        len(argv) == 1
        and posixpath.basename(argv[0].split(" ")[0]) in _SHELLS
        and " " not in argv[0].strip()
    ):
        return "", None, {}, ""  # an interactive shell: the run was typed into it
    if len(argv) >= 6 and argv[:2] == ["bash", "-c"] and argv[2] == WRAPPER:
        names = argv[7:]  # the env's values are in no command line: not carried over
        note = f" (env {', '.join(names)} not carried over: set it in [run] env)" if names else ""
        log = None if argv[4] == OWN_LOG else argv[4]  # the command's own: found from its run
        return argv[5], log, {}, "gputui wrapper" + note
    if len(argv) == 1:
        command = argv[0]  # tmux new "CMD STRING": one argument, run by sh -c
    elif len(argv) >= 3 and argv[0] in ("sh", "bash", "/bin/sh", "/bin/bash") and argv[1] == "-c":
        command = argv[2]
    else:
        command = shlex.join(argv)
    cmd, log = split_log_pipe(command)
    return cmd, (abs_log(log, cwd) if log else None), {}, "pane start command"
