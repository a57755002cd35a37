"""LineSplitter / strip_ansi (gputui.collect.logtail)."""

from __future__ import annotations

import random
from collections import deque
from pathlib import Path

import pytest

from gputui.collect.logtail import LineSplitter, strip_ansi

LOGS = Path(__file__).parent / "fixtures" / "logs"


def feed_all(data: bytes, chunk: int, max_line: int = 64 * 1024) -> tuple[list[str], str]:
    s = LineSplitter(max_line=max_line)
    out: list[str] = []
    for i in range(0, len(data), chunk):
        out += s.feed(data[i : i + chunk])
    return out, s.pending()


@pytest.mark.parametrize(
    ("data", "lines", "pending"),
    [
        (b"a\nb\n", ["a", "b"], ""),
        (b"a\r\nb\r\n", ["a", "b"], ""),
        (b"a\rb\rc", ["a", "b"], "c"),  # tqdm: the live bar is pending
        (b"\rbar 1\rbar 2\r", ["bar 1", "bar 2"], ""),
        (b"x\n\n\ny\n", ["x", "", "", "y"], ""),  # blank lines in the file are kept
        (b"x\n\r\rbar\n", ["x", "bar"], ""),  # empty pieces between \r are dropped
        (b"no newline", [], "no newline"),
        (b"", [], ""),
    ],
)
def test_splitting(data: bytes, lines: list[str], pending: str) -> None:
    s = LineSplitter()
    assert s.feed(data) == lines
    assert s.pending() == pending


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 4096])
def test_same_lines_whatever_the_chunking(chunk: int) -> None:
    data = b"".join((LOGS / n).read_bytes() for n in sorted(p.name for p in LOGS.glob("*.log")))
    whole, pend_whole = feed_all(data, len(data))
    parts, pend_parts = feed_all(data, chunk)
    assert parts == whole and pend_parts == pend_whole
    assert len(whole) > 40


def test_crlf_split_across_feeds_gives_no_empty_line() -> None:
    s = LineSplitter()
    assert s.feed(b"abc\r") == ["abc"]
    assert s.feed(b"\ndef\n") == ["def"]
    assert s.feed(b"\r") == []
    assert s.feed(b"\n") == []
    assert s.feed(b"\n") == [""]  # a genuine blank line after a CRLF


def test_invalid_utf8_replaced_and_split_char_kept() -> None:
    s = LineSplitter()
    assert s.feed(b"caf\xe9 \xff\n") == ["caf\ufffd \ufffd"]
    # a valid 3-byte character split over three reads
    assert s.feed(b"\xe2") == []
    assert s.feed(b"\x82") == []
    assert s.feed(b"\xac ok\n") == ["\u20ac ok"]


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[38;2;180;60;0mgrad_norm\x1b[39m", "grad_norm"),
        ("\x1b[1;32;48;5;200mx", "x"),
        ("\x1b]0;window title\x07text", "text"),
        ("\x1b]8;;https://example.invalid\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x1b[2K\x1b[1Aup", "up"),
        ("\x1b(Bplain", "plain"),
        ("\x1b7saved\x1b8", "saved"),
        ("lone \x1b", "lone "),
        ("no escapes [1m here", "no escapes [1m here"),
    ],
)
def test_strip_ansi(raw: str, clean: str) -> None:
    assert strip_ansi(raw) == clean


def test_ansi_stripped_in_lines_and_pending() -> None:
    s = LineSplitter()
    assert s.feed(b"\x1b[34mtps: 7,123\x1b[39m\n\x1b[1mbar") == ["tps: 7,123"]
    assert s.pending() == "bar"


def test_over_long_line_emitted_in_chunks() -> None:
    s = LineSplitter(max_line=100)
    out = s.feed(b"x" * 250)
    assert out == ["x" * 100, "x" * 100]
    assert s.pending() == "x" * 50
    assert s.feed(b"y\n") == ["x" * 50 + "y"]
    # a long complete line in one read is bounded too
    out = s.feed(b"z" * 230 + b"\n")
    assert [len(x) for x in out] == [100, 100, 30]


def test_long_line_cut_on_character_boundary() -> None:
    s = LineSplitter(max_line=16)
    out = s.feed("é".encode() * 20)  # 40 bytes, no newline
    assert all("\ufffd" not in x for x in out)
    assert "".join(out) + s.pending() == "é" * 20


def test_pending_memory_bounded_under_random_garbage() -> None:
    rng = random.Random(7)
    s = LineSplitter(max_line=1024)
    total = 0
    for _ in range(300):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        for line in s.feed(data):
            assert isinstance(line, str)
            total += 1
        assert len(s._buf) <= 1024  # the partial line never grows past max_line
    assert total > 0


def test_flush_and_count() -> None:
    s = LineSplitter()
    s.feed(b"a\nb\npartial")
    assert s.flush() == ["partial"]
    assert s.flush() == []
    assert s.lines_total == 3


def test_million_lines_through_bounded_buffer() -> None:
    """1e6 lines (~40 MB) fed in 64 KiB chunks: every line counted, the buffer
    and the partial line stay bounded."""
    line = b"iter %d: loss 4.2345, time 123.45ms\n"
    data = b"".join(line % i for i in range(1_000_000))
    s = LineSplitter()
    buf: deque[str] = deque(maxlen=200)
    total = 0
    for i in range(0, len(data), 65536):
        lines = s.feed(data[i : i + 65536])
        buf.extend(lines)
        total += len(lines)
    assert total == 1_000_000 and s.lines_total == 1_000_000 and len(buf) == 200
    assert buf[-1] == "iter 999999: loss 4.2345, time 123.45ms"
