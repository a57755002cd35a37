"""Stdout buffering judged by what the log's appends show (issue 31):
diagnose/buffering.py's note_append + judge, on byte sequences shaped as
the writers make them. Pure; the end-to-end runs are in test_buffering_e2e.py."""

from __future__ import annotations

from gputui.diagnose.buffering import BUFFERED, FLUSHES, UNKNOWN, judge, note_append, note_stamped
from gputui.model import LogState, Proc, StdoutTarget

T0 = 1_700_000_000.0
LINE = b"step 12 | loss 7.1234 | 48012 tok/s\n"  # 37 bytes


def proc() -> Proc:
    """Python, no -u, PYTHONUNBUFFERED unset, stdout a pipe: suspected."""
    return Proc(
        pid=12,
        cmdline=["python3", "train.py"],
        is_python=True,
        stdout=StdoutTarget(kind="pipe"),
        env_pythonunbuffered=False,
        start_time=T0 - 5,
    )


def feed(st: LogState, chunks: list[tuple[float, bytes]]) -> None:
    """Deliver each chunk at its time, as the follower does."""
    for t, data in chunks:
        st.offset += len(data)
        note_append(st, data, t, t)


def test_lines_one_by_one_clear_the_suspicion() -> None:
    st = LogState(path="/w/train.log")
    feed(st, [(T0 + 0.5 * i, LINE) for i in range(4)])
    b = judge(proc(), st, T0 + 3)
    assert b.state == FLUSHES and b.block_buffered is False, b
    assert "one by one" in b.evidence[0]


def test_python_blocks_after_a_quiet_spell_confirm_it() -> None:
    st = LogState(path="/w/train.log", last_append_at=T0)
    block = LINE * 221  # 8,177 bytes of whole lines: Python's text layer
    feed(st, [(T0 + 3.7, block), (T0 + 7.4, block)])
    b = judge(proc(), st, T0 + 8)
    assert (
        b.state == BUFFERED and f"{len(block):,} bytes arrived at once after 4 s" in b.evidence[0]
    )


def test_a_stdio_cut_at_4_kib_held_back_confirms_it_a_transport_split_does_not() -> None:
    data = (LINE * 300)[:8192]  # ends mid-line at byte 8,192
    held = LogState(path="/w/train.log")
    feed(held, [(T0, data)])
    assert judge(proc(), held, T0 + 0.5).state == UNKNOWN  # not held long enough yet
    assert judge(proc(), held, T0 + 2.0).state == BUFFERED  # the rest waited 2 s
    split = LogState(path="/w/train.log")
    feed(split, [(T0, data), (T0 + 0.01, (LINE * 300)[8192:])])  # the rest at once
    assert judge(proc(), split, T0 + 2.0).state != BUFFERED


def test_nothing_yet_is_not_yet_known_and_a_stderr_line_or_two_do_not_clear_it() -> None:
    st = LogState(path="/w/train.log")
    assert judge(proc(), st, T0).state == UNKNOWN
    feed(st, [(T0, b"UserWarning: something\n"), (T0 + 1, b"warnings.warn(\n")])
    assert judge(proc(), st, T0 + 2).state == UNKNOWN


def test_stderr_lines_then_stdout_blocks_is_buffered() -> None:
    st = LogState(path="/w/train.log", last_append_at=T0)
    feed(st, [(T0 + i, b"W: a warning line\n") for i in range(4)])
    block = LINE * 221
    feed(st, [(T0 + 10, block), (T0 + 14, block)])
    assert judge(proc(), st, T0 + 15).state == BUFFERED


def test_an_earlier_process_s_blocks_say_nothing_of_this_one() -> None:
    st = LogState(path="/w/train.log", last_append_at=T0 - 100)
    feed(st, [(T0 - 60, LINE * 221)])  # written before this process started
    assert judge(proc(), st, T0).state == UNKNOWN


def test_a_container_log_s_stamps_tell_one_write_from_many() -> None:
    """`docker logs -t`: the runtime stamps lines as it reads them; one
    write's lines share a stamp (note_stamped)."""
    flushed = LogState(path="docker logs trainer", last_append_at=T0)
    note_stamped(flushed, [(T0 + 0.2 * i, f"step {i}") for i in range(1, 6)])
    assert judge(proc(), flushed, T0 + 1).state == FLUSHES
    buffered = LogState(path="docker logs trainer", last_append_at=T0)
    block = [(T0 + 2.0 + i * 1e-5, f"step {i}") for i in range(900)]  # 7,990 bytes, one write
    for line in block:  # a line at a time, as a stream may hand them on
        note_stamped(buffered, [line])
    note_stamped(buffered, [(T0 + 4.0, "step 900")])  # the next write begins
    assert judge(proc(), buffered, T0 + 4).state == BUFFERED


def test_a_python_block_passed_on_in_4_kib_halves_is_one_block() -> None:
    """tee reads the pipe in pieces: 4,096 bytes, then the rest 0.03 s later."""
    st = LogState(path="/w/train.log", last_append_at=T0)
    block = LINE * 221
    feed(st, [(T0 + 3.0, block[:4096]), (T0 + 3.03, block[4096:])])
    assert judge(proc(), st, T0 + 3.5).state == BUFFERED
