"""Bytes from a log stream -> clean text lines. Pure, no I/O.

`LineSplitter.feed(bytes)` returns the complete lines in the data so far:
- a line ends at `\\n`, `\\r\\n` or a bare `\\r` (tqdm redraws its bar with `\\r`
  and writes no `\\n` until the bar closes);
- an empty line ended by `\\n` is kept (it is in the file), an empty piece
  between two `\\r` is dropped (it is only tqdm's cursor return);
- ANSI escape sequences (CSI, incl. 24-bit colour, OSC, charset and other
  two-byte escapes) are removed; invalid UTF-8 becomes U+FFFD; every other
  control character (C0 but tab, DEL, C1 U+0080–U+009F, CAN, SUB) is made
  visible (untrusted.visible: `␘`, `␡`, `\\x85`), never passed on raw;
- the unfinished tail is kept as bytes (so a UTF-8 character split across
  two reads survives) and is bounded: past `max_line` bytes it is emitted in
  chunks, cut on a character boundary.
"""

from __future__ import annotations

import re

from gputui.text.untrusted import plain_utf8, visible

ANSI_RE = re.compile(
    r"""
    \x1b\[[0-?]*[\x20-/]*[@-~]            # CSI ... final byte (colours, cursor moves)
  | \x1b\][^\x07\x1b\r\n]*(?:\x07|\x1b\\)?  # OSC ... BEL or ST (titles, hyperlinks)
  | \x1b[PX^_][^\x1b\r\n]*(?:\x1b\\)?      # DCS / SOS / PM / APC ... ST
  | \x1b[()*+][0-9A-Za-z]                 # charset selection
  | \x1b[\x20-/]*[0-~]                    # other escapes (ESC 7, ESC =, ESC c ...)
  | \x1b                                  # a lone ESC
  | \x9b[0-?]*[\x20-/]*[@-~]              # 8-bit CSI
    """,
    re.VERBOSE,
)


def strip_ansi(s: str) -> str:
    """Remove ANSI escape sequences from text."""
    if "\x1b" not in s and "\x9b" not in s:
        return s
    return ANSI_RE.sub("", s)


def clean_line(s: str) -> str:
    """ANSI sequences removed, every other control made visible (tab kept)."""
    return visible(strip_ansi(s), keep="\t")


def _cut_utf8(b: bytes, n: int) -> int:
    """A cut position <= n that does not split a UTF-8 character (when b is valid)."""
    if n >= len(b):
        return len(b)
    i = n
    # back up over continuation bytes (at most 3), but never to 0
    while i > n - 3 and i > 1 and 0x80 <= b[i] <= 0xBF:
        i -= 1
    return i


class LineSplitter:
    """Incremental splitter: feed bytes, get complete, clean lines."""

    def __init__(self, max_line: int = 64 * 1024) -> None:
        if max_line < 16:
            raise ValueError(f"max_line must be at least 16 bytes, got {max_line}")
        self.max_line = max_line
        self._buf = b""
        self._skip_lf = False  # the last chunk ended in \r: a leading \n belongs to it
        self.lines_total = 0

    def feed(self, data: bytes) -> list[str]:
        if self._skip_lf and data:
            if data[:1] == b"\n":
                data = data[1:]
            self._skip_lf = False
        if self._buf:
            data = self._buf + data
        last = max(data.rfind(b"\n"), data.rfind(b"\r"))
        out: list[str]
        if last < 0:
            self._buf = data
            out = []
        else:
            complete, self._buf = data[: last + 1], data[last + 1 :]
            if complete[-1:] == b"\r":
                self._skip_lf = True
            out = self._split(complete)
        if len(self._buf) > self.max_line:
            out.extend(self._drain_long())
        self.lines_total += len(out)
        return out

    def _split(self, complete: bytes) -> list[str]:
        text = complete.decode("utf-8", "replace")
        if "\x1b" in text or "\x9b" in text:
            text = ANSI_RE.sub("", text)
        if "\r" not in text:
            lines = text.split("\n")
            lines.pop()  # text ends with "\n": the last piece is ""
        else:
            text = text.replace("\r\n", "\n")
            pieces = text.split("\n")
            tail = pieces.pop()  # "" when text ends in \n, else ends in \r
            lines = []
            for p in pieces:
                if "\r" in p:
                    lines.extend(x for x in p.split("\r") if x)
                else:
                    lines.append(p)
            if tail:
                lines.extend(x for x in tail.split("\r") if x)
        if len(complete) > self.max_line:
            lines = self._bound(lines)
        if plain_utf8(complete, keep=b"\t\r\n\x1b"):  # nearly always: no work per line
            return lines
        return [visible(x, keep="\t") for x in lines]  # controls left after the ANSI strip

    def _bound(self, lines: list[str]) -> list[str]:
        m = self.max_line
        if max(map(len, lines), default=0) <= m:  # in C: runs on every large read
            return lines
        out: list[str] = []
        for x in lines:
            if len(x) <= m:
                out.append(x)
            else:
                out.extend(x[i : i + m] for i in range(0, len(x), m))
        return out

    def _drain_long(self) -> list[str]:
        out: list[str] = []
        while len(self._buf) > self.max_line:
            cut = _cut_utf8(self._buf, self.max_line)
            chunk, self._buf = self._buf[:cut], self._buf[cut:]
            out.append(clean_line(chunk.decode("utf-8", "replace")))
        return out

    def pending(self) -> str:
        """The unfinished last line (e.g. the live tqdm bar), cleaned."""
        return clean_line(self._buf.decode("utf-8", "replace"))

    def flush(self) -> list[str]:
        """End of stream: the unfinished line as a final line (if any)."""
        rest = self.pending()
        self._buf = b""
        self._skip_lf = False
        if rest:
            self.lines_total += 1
            return [rest]
        return []
