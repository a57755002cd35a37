"""Every string from the remote side is data: never run, never raw to the
terminal, never markup.

Session names, pane start commands, working directories, /proc command
lines, discovered log paths, log lines, remote error text: a compromised (or
merely unusual) container chooses them. This module is the one rule applied
where such text leaves gputui:

- shown in a terminal (CLI, doctor, the TUI): `visible()` — C0 controls,
  DEL, C1 controls (U+0080–U+009F), bidi overrides and lone surrogates are
  replaced by printable stand-ins (`ESC` → `␛`, `DEL` → `␡`, U+009B → `\\x9b`),
  so no escape sequence (CSI, OSC 0/2/8/52, DCS, APC, PM) reaches the
  terminal; what is left of such a sequence is plain text.
- shown by Textual: `remote_text()` — a `rich.text.Text` (never parsed as
  markup: `[/]` and `[bold]` stay literal) of the visible text.
- passed to tmux where tmux expands formats (`new-session -s NAME -c DIR`,
  `-n NAME`): `tmux_literal()` — `#` → `##` (but `#[`, a style, as it
  is), so `#(cmd)` and `#{…}` are never run or expanded. Targets (`-t`)
  and the command's arguments are not format-expanded by tmux 3.3a and are
  passed as they are.
- passed to a shell: quoted once with `shlex` (remote/quoting.py).
"""

from __future__ import annotations

import re
from functools import lru_cache

from rich.text import Span, Text

# Control pictures for C0 (U+2400 + code) and DEL; C1, bidi controls and lone
# surrogates as escape text. Each stand-in is printable, so visible() is
# idempotent.
_STAND_INS: dict[str, str] = {chr(c): chr(0x2400 + c) for c in range(0x20)}
_STAND_INS["\x7f"] = "\u2421"  # ␡
_STAND_INS.update({chr(c): f"\\x{c:02x}" for c in range(0x80, 0xA0)})
# Bidi embeddings/overrides/isolates and line/paragraph separators: they
# reorder or break what a confirm box shows ("Trojan source").
_STAND_INS.update(
    {
        chr(c): f"\\u{c:04x}"
        for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
    }
)
_STAND_INS.update({"\u2028": "\\u2028", "\u2029": "\\u2029"})
_SURROGATES = "\ud800-\udfff"


@lru_cache(maxsize=16)
def _unsafe(keep: str) -> re.Pattern[str]:
    chars = "".join(re.escape(c) for c in _STAND_INS if c not in keep)
    return re.compile(f"[{chars}{_SURROGATES}]")


def _stand_in(m: re.Match[str]) -> str:
    c = m.group()
    return _STAND_INS.get(c) or f"\\u{ord(c):04x}"


def visible(value: object, keep: str = "") -> str:
    """`value` as text safe to write to a terminal: every control character
    shown as a printable stand-in. `keep` names the few a context allows
    (e.g. "\\n" in a multi-line box whose line breaks are gputui's own)."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():  # fast path: every character replaced below is non-printable
        return text
    pattern = _unsafe(keep)
    if pattern.search(text) is None:
        return text
    return pattern.sub(_stand_in, text)


_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_text(value: object) -> str:
    """`value` (remote text: a log line, a path, a session name) as Markdown
    that shows exactly it: visible(), and every ASCII punctuation mark
    backslash-escaped, so `[text](https://…)` is no link, `**x**` no bold
    and a bare URL not linkified (issue 34: evidence in the help screen)."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", visible(value))


ZWSP = "\u200b"  # zero width space: what chat services advise to break a mention
_MASKED_LINK = re.compile(r"\](\s*)\(")


def no_mentions(text: str) -> str:
    """`text` (an alert naming a session, a log line) as a chat message
    (Discord, Slack, Matrix, Teams through apprise) that pings nobody and
    hides no link: EVERY `@` gets a zero width space after it, whatever
    follows (`@everyone_`, `@here2`, Matrix's `@room`: a word list misses
    some, issue 45); every `<` one after it (`<@id>`, `<@&role>`, `<!here>`,
    `<url|text>`); a masked link `[text](url)` one after `]` and one before
    `(`, whatever spacing is between (`[text] (url)`). It reads the same."""
    text = text.replace("@", "@" + ZWSP).replace("<", "<" + ZWSP)
    return _MASKED_LINK.sub(lambda m: "]" + ZWSP + m.group(1) + ZWSP + "(", text)


def one_line(value: object, limit: int = 300) -> str:
    """One line for a notification or an OSC payload (a bell's title, an
    apprise message): every character visible() would replace becomes a
    space (a stand-in would be noise there), runs of spaces are squeezed,
    and the text is cut to `limit` characters."""
    text = value if isinstance(value, str) else str(value)
    out = _unsafe("").sub(" ", text)
    out = re.sub(r" {2,}", " ", out).strip()
    return out if len(out) <= limit else out[: limit - 1] + "…"


_PATH = re.compile(r"(?<![\w.~:/-])/[^\s,;()'\"]+")
PATH_NAME_MAX = 40  # a shortened path keeps this much of its file name


def _short_path(path: str) -> str:
    """`/very/long/dir/train.log` -> `…/train.log` (a name over
    PATH_NAME_MAX keeps its start and end)."""
    name = path.rstrip("/").rsplit("/", 1)[-1] or path
    if len(name) > PATH_NAME_MAX:
        half = PATH_NAME_MAX // 2
        name = name[: half - 1] + "…" + name[-half:]
    return "…/" + name


def fit_line(value: object, limit: int) -> str:
    """one_line(value, limit), but the words come before the paths: while
    the line is too long, its longest path loses its directories first
    (`…/train.log`), so a cut never takes the cause that follows a long
    log path. What still does not fit is cut at the end."""
    out = one_line(value, 1 << 20)
    while len(out) > limit:
        paths = [m for m in _PATH.finditer(out) if len(_short_path(m.group())) < len(m.group())]
        if not paths:
            break
        m = max(paths, key=lambda m: len(m.group()))
        out = out[: m.start()] + _short_path(m.group()) + out[m.end() :]
    return one_line(out, limit)


def is_visible(text: str, keep: str = "") -> bool:
    """True when `text` holds nothing `visible()` would replace."""
    return _unsafe(keep).search(text) is None


# UTF-8 lead bytes of the non-ASCII characters visible() replaces: C1 (C2 80–9F),
# U+061C (D8 9C), U+200E–U+206F (E2 80 / E2 81).
_NON_ASCII_LEADS = (b"\xc2", b"\xd8\x9c", b"\xe2\x80", b"\xe2\x81")


@lru_cache(maxsize=8)
def _safe_bytes(keep: bytes) -> bytes:
    return bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0x100)) + keep


def plain_utf8(raw: bytes, keep: bytes = b"\t\r\n") -> bool:
    """Fast check on bytes about to be decoded as UTF-8: True when the text
    cannot hold anything visible() replaces (besides `keep`), so a log
    stream's usual bytes skip the per-character work."""
    if raw.translate(None, _safe_bytes(keep)):
        return False
    return raw.isascii() or not any(lead in raw for lead in _NON_ASCII_LEADS)


def remote_text(value: object, style: str = "", keep: str = "") -> Text:
    """A Rich `Text` for Textual: visible, and never parsed as markup."""
    return Text(visible(value, keep), style=style)


def safe_text(text: Text | str, keep: str = "") -> Text:
    """A `Text` (or plain str) with every styled piece made visible; the
    styles stay on the pieces they were on. A str is taken as plain text,
    never markup."""
    if isinstance(text, str):
        return remote_text(text, keep=keep)
    if is_visible(text.plain, keep):
        return text
    cuts = sorted({i for span in text.spans for i in (span.start, span.end)})
    out = text.blank_copy()
    for piece in text.divide(cuts):
        shown = visible(piece.plain, keep)
        spans = [Span(0, len(shown), s.style) for s in piece.spans if s.end > s.start]
        out.append_text(Text(shown, spans=spans))
    return out


_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def json_text(document: str) -> str:
    """JSON from `json.dumps(..., ensure_ascii=False)` safe to print: the
    characters json leaves raw but a terminal acts on (DEL, C1, bidi
    controls) written as \\uXXXX escapes — the values read back unchanged."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


_HASHES = re.compile(r"#+")


def tmux_literal(value: str) -> str:
    """A value for a tmux argument that tmux format-expands (`-s`, `-c`,
    `-n`), so that tmux takes it as typed and runs nothing: each `#` doubled
    (`##` expands to `#`; `#(cmd)` would run cmd) — except a run of `#`s
    right before `[`, which tmux copies as it is (a style, `#[bold]`, left
    for drawing): doubled, `/w/##[bold]` became `/w/####[bold]`, no such
    directory, and a relaunch started in the home directory. Checked on
    tmux 3.3a for `#[x`, `##[x`, `x##[y##[z#`, `#(…)`, `#{…}`, `#S`."""
    return _HASHES.sub(
        lambda m: m.group() if m.string.startswith("[", m.end()) else m.group() * 2, value
    )


__all__ = [
    "is_visible",
    "json_text",
    "plain_utf8",
    "remote_text",
    "safe_text",
    "tmux_literal",
    "visible",
]
