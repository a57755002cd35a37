"""tmux: the argv to list sessions/panes and capture a pane, and parsing.

Pure functions, no I/O.

Separator choice (checked against real tmux 3.3a): literal control characters
in a `-F` format pass through unchanged, and tmux escapes control characters
in *session names* (a name typed with 0x1f is stored as the text `\\037`) and
in the start command (printed through its argument escaping). Two values come
out raw: `pane_current_command` (argv[0] of the pane's foreground process,
which its owner chooses: `exec -a $'x\\x1e\\nmain\\x1f…'`) and
`pane_current_path` (a directory, which may contain 0x1f or a newline). So
every text field goes through tmux's `s/[\\001-\\037\\177]/?/` modifier
(TEXT_FIELDS): no field can hold a separator or a newline, whatever tmux
version or locale, and a record is accepted only with exactly PANE_FIELDS'
count and numbers where numbers belong (issue 34: a forged record named a
session `main` with the PID of root's process). Fields are split by US
(0x1f), each record ends with RS (0x1e) + newline. A path or command shown
with `?` is lossy: actions take the run's cwd from /proc, not from here.
"""

from __future__ import annotations

import os
import re

from gputui.errors import GputuiError
from gputui.model import Pane, Session
from gputui.text.numbers import bounded_int

FIELD_SEP = "\x1f"
RECORD_END = "\x1e"

PANE_FIELDS: tuple[str, ...] = (
    "session_name",
    "session_windows",
    "session_created",
    "session_attached",
    "window_index",
    "pane_index",
    "pane_pid",
    "pane_dead",
    "pane_dead_status",
    "pane_dead_signal",
    "pane_start_command",
    "pane_current_command",
    "pane_current_path",
    "pane_start_path",  # where the pane started: its cwd once it is dead (no current path)
)

# Text fields: every control character (0x01-0x1f, 0x7f) becomes `?` inside
# tmux, before it prints them; the other fields are numbers tmux prints itself.
TEXT_FIELDS = frozenset(
    {
        "session_name",
        "pane_start_command",
        "pane_current_command",
        "pane_current_path",
        "pane_start_path",
    }
)
CONTROL_TO_QUESTION = "s/[\x01-\x1f\x7f]/?/:"
_NUMBER_FIELDS: tuple[str, ...] = (
    "session_windows",
    "session_created",
    "session_attached",
    "window_index",
)
_NUMBER_FIELDS += ("pane_index", "pane_pid", "pane_dead", "pane_dead_status", "pane_dead_signal")


def _field_format(name: str) -> str:
    return "#{" + (CONTROL_TO_QUESTION if name in TEXT_FIELDS else "") + name + "}"


LIST_PANES_FORMAT = FIELD_SEP.join(_field_format(f) for f in PANE_FIELDS) + RECORD_END

_NO_SERVER = ("no server running on", "error connecting to", "no sessions")


def _tmux(socket_path: str | None) -> list[str]:
    """`tmux [-S socket_path]`: for this user's own servers only. Another
    user's server is reached only through the argv the agent builds to run
    as that user (remote/agent.py `as_owner`, carried as Session.tmux)."""
    return ["tmux", "-S", socket_path] if socket_path else ["tmux"]


def list_panes_argv(socket_path: str | None = None) -> list[str]:
    """argv listing every pane of every session (`tmux list-panes -a -F …`)."""
    return [*_tmux(socket_path), "list-panes", "-a", "-F", LIST_PANES_FORMAT]


def pane_target(session: str, window_index: int = 0, pane_index: int = 0) -> str:
    """A `-t` target naming exactly this pane (`=` stops prefix matching)."""
    return f"={session}:{window_index}.{pane_index}"


def capture_argv(pane_target: str, lines: int, socket_path: str | None = None) -> list[str]:
    """argv printing the last `lines` lines of a pane, wrapped lines joined."""
    if lines <= 0:
        raise ValueError(f"lines must be positive, got {lines}")
    return [
        *_tmux(socket_path),
        "capture-pane",
        "-p",
        "-J",
        "-S",
        f"-{int(lines)}",
        "-t",
        pane_target,
    ]


def is_no_server(stderr: str) -> bool:
    """True for tmux's "nothing is running" texts: `no server running on
    /tmp/tmux-0/default`, `error connecting to /tmp/tmux-0/default (No such
    file or directory)`, `no sessions`."""
    low = stderr.lower()
    return any(p in low for p in _NO_SERVER)


def sessions_from_result(exit_status: int | None, stdout: str, stderr: str) -> list[Session]:
    """Interpret a finished `list_panes_argv()` run.

    No server → [] (not an error). tmux missing → GputuiError with the fix."""
    if exit_status == 0:
        return parse_panes(stdout)
    if is_no_server(stderr):
        return []
    low = stderr.lower()
    if exit_status == 127 or "not found" in low or "no such file" in low:
        raise GputuiError("tmux is not installed on the target", "install it: apt install tmux")
    msg = " ".join(stderr.split()) or f"exit {exit_status}"
    raise GputuiError(f"tmux list-panes failed: {msg}", "check that tmux works: tmux ls")


def _int(s: str) -> int | None:
    """A number tmux printed: ASCII digits, bounded (text/numbers.py)."""
    return bounded_int(s, 0, max_digits=19)


_CESC = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "v": "\v", "f": "\f", "s": " "}


def split_start_command(text: str) -> list[str] | None:
    """Split a start command as tmux prints it (`pane_start_command`, tmux 3.x
    `args_escape`: words joined by spaces, each maybe in "…" or '…', with
    vis(3) C-style and octal escapes) back into the argv. None when it does
    not parse (a quote left open). The one reader of tmux's rendering: the
    dashboard shows it (`start_command_text`), relaunch recovers the run
    from it (`actions.runspec.spec_from_start_command`)."""
    out: list[str] = []
    cur: list[str] = []
    in_word = False
    quote: str | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            d = text[i + 1]
            if d in "01234567":
                j = i + 1
                while j < n and j < i + 4 and text[j] in "01234567":
                    j += 1
                cur.append(chr(int(text[i + 1 : j], 8)))
                i = j
            else:
                cur.append(_CESC.get(d, d))
                i += 2
            in_word = True
            continue
        if quote:
            if c == quote:
                quote = None
            else:
                cur.append(c)
        elif c in "\"'":
            quote = c
            in_word = True
        elif c == " ":
            if in_word:
                out.append("".join(cur))
                cur, in_word = [], False
        else:
            cur.append(c)
            in_word = True
        i += 1
    if quote:
        return None
    if in_word:
        out.append("".join(cur))
    return [_utf8_fix(w) for w in out]


def _utf8_fix(word: str) -> str:
    """Octal escapes of UTF-8 bytes come out as latin-1 chars: re-decode."""
    try:
        return word.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return word


# $0 of gputui's launch wrapper (actions.runspec.WRAPPER_NAME): its pane runs
# `bash -c WRAPPER gputui-run LOG COMMAND ENVFILE [NAME…]` (env values: never in argv).
LAUNCH_WRAPPER_NAME = "gputui-run"


def start_command_text(raw: str) -> str:
    """tmux 3.3a prints a one-argument start command quoted and escaped
    (`"bash run.sh 2>&1 | tee \\"x\\""`); return the shell command itself.
    A pane started by gputui's launch wrapper shows the user's command, not
    the wrapper script. Other commands of several arguments (`sh -c "sleep 1"
    "a b"`) are returned as printed: that is already a readable line."""
    args = split_start_command(raw)
    if args is not None and len(args) == 1:
        return args[0]
    return launched_command(args) or raw


def launched_command(args: list[str] | None) -> str:
    """The user's command of a pane gputui's launch wrapper started (the
    split start command); "" for any other pane."""
    if (
        args is not None
        and len(args) >= 6
        and os.path.basename(args[0]) == "bash"
        and args[1] == "-c"
        and args[3] == LAUNCH_WRAPPER_NAME
    ):
        return args[5]
    return ""


def _records(text: str) -> list[str]:
    if RECORD_END in text:
        recs = text.split(RECORD_END)
        out = []
        for r in recs:
            if r.startswith("\n"):
                r = r[1:]
            if r.strip("\n"):
                out.append(r)
        return out
    return [ln for ln in text.splitlines() if ln]


def parse_pane_record(record: str) -> tuple[Session, Pane] | None:
    """One record of LIST_PANES_FORMAT, or None when it is not one: exactly
    the format's fields, a number (or nothing) in each number field, no
    control character in any field (tmux replaced them; one here means the
    output is not what the format asked for)."""
    parts = record.split(FIELD_SEP)
    if len(parts) != len(PANE_FIELDS) or any(_has_control(p) for p in parts):
        return None
    f = dict(zip(PANE_FIELDS, parts, strict=True))
    if not all(f[n] == "" or (f[n].isdigit() and f[n].isascii()) for n in _NUMBER_FIELDS):
        return None
    if not f["session_name"] or (_int(f["pane_pid"]) is None and f["pane_dead"] != "1"):
        return None
    name, start = f["session_name"], f["pane_start_command"]
    session = Session(
        name=name,
        windows=_int(f["session_windows"]) or 1,
        created=float(c) if (c := _int(f["session_created"])) is not None else None,
        attached=(_int(f["session_attached"]) or 0) > 0,
    )
    p = Pane(
        session=name,
        window_index=_int(f["window_index"]) or 0,
        pane_index=_int(f["pane_index"]) or 0,
        pid=_int(f["pane_pid"]),
        dead=f["pane_dead"] == "1",
        dead_status=_int(f["pane_dead_status"]),
        dead_signal=_int(f["pane_dead_signal"]),
        current_command=f["pane_current_command"],
        start_command=start_command_text(start),
        current_path=f["pane_current_path"],
        start_path=f["pane_start_path"],
        start_command_raw=start,
        launched_command=launched_command(split_start_command(start)),
    )
    return session, p


_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _has_control(text: str) -> bool:
    return _CONTROL_RE.search(text) is not None


_VIS_ESCAPE_RE = re.compile(r"\\(\\|[0-7]{3})")


def decode_format_output(text: str) -> str:
    """Undo tmux 3.4's escaping of `-F` output.

    tmux 3.4 prints control characters in format output as octal escapes
    (our 0x1f separator comes back as the four characters `\\037`; seen on
    Ubuntu 24.04's tmux 3.4 and on the lent H200 machine); 3.3a (Proxmox VE
    8) and 3.5+ print the raw bytes. Decode only when the separator came
    back escaped, so raw output with backslashes in paths is left alone."""
    if FIELD_SEP in text or "\\037" not in text:
        return text
    return _VIS_ESCAPE_RE.sub(
        lambda m: "\\" if m.group(1) == "\\" else chr(int(m.group(1), 8)), text
    )


def parse_panes(text: str) -> list[Session]:
    """Output of `list_panes_argv()` -> sessions (in tmux's order) with panes.

    A pane whose process exited has dead=True and dead_status (exit code) or
    dead_signal (signal number); a running pane has both None. Lines that do
    not have our fields are skipped."""
    sessions: dict[str, Session] = {}
    for rec in _records(decode_format_output(text)):
        parsed = parse_pane_record(rec)
        if parsed is None:
            continue
        s, p = parsed
        existing = sessions.get(s.name)
        if existing is None:
            sessions[s.name] = existing = s
        existing.panes.append(p)
    return list(sessions.values())
