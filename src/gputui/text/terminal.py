"""A terminal that another user's programs draw on, made safe to pass to
the admin's own (issue 45): the byte stream a relayed `tmux attach` writes.

A tmux client of the run's owner draws with cursor moves, colours and
erases; the same stream could carry what a terminal answers or acts on — a
title report typed back as keys, OSC 52 setting the clipboard, DCS and APC
strings, printer and window controls, mouse and key modes left on. So the
stream is parsed as a terminal parses it and only drawing passes:

- text between sequences goes through `untrusted.visible` (the rule every
  remote string follows) keeping only \\r \\n \\b \\t and SO/SI;
- a CSI sequence passes, re-written in 7-bit form, when its final byte is
  one that draws or moves (`DRAWING`) and it has no intermediate byte and
  no private marker but `?` on a mode set/reset (alternate screen, cursor,
  wrap, mouse, bracketed paste — whatever they make the terminal send goes
  to the relay, never to a shell); `ESC SP q` (cursor shape) passes too;
- ESC 7/8/=/>/M/D/E and a charset designation (`ESC ( 0`) pass;
- everything else — OSC, DCS, APC, PM, SOS strings to their end, reports
  (DSR `n`, DA `c`, window ops `t`, DECRQM `$p`), `ESC c`, BEL, 8-bit C1
  controls — is dropped and counted (`dropped`).

`RESET` is written when the relay ends: the modes the stream may have set
(mouse, focus, bracketed paste, keypad, alternate screen) off again.
Pure: bytes in, bytes out.
"""

from __future__ import annotations

import codecs
import re

from gputui.text.untrusted import visible

ESC = "\x1b"
DRAWING = frozenset("@ABCDEFGHIJKLMPSTXZ`abdefghlmrsu")
# The ESC Fp/Fe/Fs sequences that only draw or move.
ESC_SINGLE = frozenset("78=>MDEH")
# ESC ( X, ESC ) X ...: which character set draws (line drawing, ASCII).
CHARSET_INTRO = frozenset("()*+")
CHARSETS = frozenset("0AB")
# ESC ] OSC, ESC P DCS, ESC _ APC, ESC ^ PM, ESC X SOS: strings to their end.
STRING_INTRO = frozenset("]P_^X")
C1_STRING = frozenset("\x90\x98\x9d\x9e\x9f")
KEEP = "\r\n\b\t\x0e\x0f"
_TEXT_STOP = re.compile("[\x1b\x07\x9b\x90\x98\x9d\x9e\x9f]")  # ESC, BEL, CSI, C1 strings
_STRING_STOP = re.compile("[\x1b\x07\x9c]")  # what may end a string
_CSI_PARAMS = re.compile("[\x20-\x3f]*")  # a CSI's parameter and intermediate bytes
CSI_MAX = 64  # a longer "CSI" is no sequence a terminal draws with
_WHOLE_CSI = re.compile(f"\x1b\\[([\x20-\x3f]{{0,{CSI_MAX}}})([\x40-\x7e])")  # one in a read
RESET = (
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2004l"
    b"\x1b[?1l\x1b>\x1b[?25h\x1b[?1049l\x1b[0m\r\n"
)


class TerminalFilter:
    """`feed(bytes) -> bytes`, the drawing of a terminal stream only (see
    the module text). Keeps its state between calls: a sequence may be cut
    anywhere by a read."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._state = "text"
        self._seq = ""
        self.dropped = 0  # sequences and controls not passed on

    def feed(self, data: bytes) -> bytes:
        out: list[str] = []
        chunk = self._decoder.decode(data)
        i, n = 0, len(chunk)
        while i < n:
            if self._state == "text":  # a run of text up to the next control, at once
                m = _TEXT_STOP.search(chunk, i)
                j = m.start() if m else n
                if j > i:
                    out.append(visible(chunk[i:j], keep=KEEP))
                i = j
                whole = _WHOLE_CSI.match(chunk, i)
                if whole is not None:  # the common case: a whole CSI in this read
                    ok = drawing_csi(whole.group(1), whole.group(2))
                    out.append(whole.group() if ok else self._drop())
                    i = whole.end()
                    continue
            elif self._state == "string":  # a string's body is dropped up to its end
                m = _STRING_STOP.search(chunk, i)
                if m is None:
                    break
                i = m.start()
            elif self._state == "csi":  # its parameters at once, then the final byte
                m = _CSI_PARAMS.match(chunk, i)
                assert m is not None  # it matches the empty string
                self._seq = (self._seq + m.group())[: CSI_MAX + 1]
                i = m.end()
            if i < n:
                out.append(self._control(chunk[i]))
                i += 1
        return "".join(out).encode("utf-8", errors="replace")

    def _drop(self) -> str:
        self.dropped += 1
        self._state, self._seq = "text", ""
        return ""

    def _control(self, ch: str) -> str:
        """One character outside plain text: a sequence's start, part or end."""
        state = self._state
        if state == "text":
            return self._start(ch)
        if state == "string":
            return self._in_string(ch)
        if state == "string_esc":
            self._state = "text"
            return "" if ch == "\\" else self._start_after_string(ch)
        if state == "esc":
            return self._after_esc(ch)
        if state == "charset":
            self._state = "text"
            return f"{ESC}{self._seq}{ch}" if ch in CHARSETS else self._drop()
        return self._in_csi(ch)

    def _start(self, ch: str) -> str:
        if ch == ESC:
            self._state = "esc"
        elif ch == "\x9b":
            self._state, self._seq = "csi", ""
        elif ch in C1_STRING:
            self.dropped += 1
            self._state = "string"
        else:  # BEL
            self.dropped += 1
        return ""

    def _start_after_string(self, ch: str) -> str:
        """ESC then not `\\` inside a string: the string ended, a sequence begins."""
        self._state = "esc"
        return self._control(ch)

    def _in_string(self, ch: str) -> str:
        if ch == ESC:
            self._state = "string_esc"
        elif ch in ("\x07", "\x9c"):
            self._state = "text"
        return ""

    def _after_esc(self, ch: str) -> str:
        if ch == "[":
            self._state, self._seq = "csi", ""
            return ""
        if ch in STRING_INTRO:
            self.dropped += 1
            self._state = "string"
            return ""
        if ch in CHARSET_INTRO:
            self._state, self._seq = "charset", ch
            return ""
        if ch in ESC_SINGLE:
            self._state = "text"
            return ESC + ch
        if ch == ESC:
            self.dropped += 1
            return ""  # still after an ESC
        return self._drop()

    def _in_csi(self, ch: str) -> str:
        code = ord(ch)
        if 0x20 <= code <= 0x3F and len(self._seq) < CSI_MAX:
            self._seq += ch
            return ""
        if not 0x40 <= code <= 0x7E or len(self._seq) > CSI_MAX:
            self._drop()
            return self._start(ch) if ch in (ESC, "\x9b") or ch in C1_STRING else ""
        seq, self._state, self._seq = self._seq, "text", ""
        return f"{ESC}[{seq}{ch}" if drawing_csi(seq, ch) else self._drop()


def drawing_csi(params: str, final: str) -> bool:
    """Whether `CSI params final` only draws, moves or sets a mode."""
    if final == "q" and params.endswith(" ") and (params == " " or params[:-1].isdigit()):
        return True  # DECSCUSR: the cursor's shape
    if any(0x20 <= ord(c) <= 0x2F for c in params) or final not in DRAWING:
        return False
    if params[:1] in ("<", "=", ">"):
        return False
    if params[:1] == "?":
        return final in "hlJK"
    return True
