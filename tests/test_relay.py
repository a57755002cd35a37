"""The host view's relay (remote/relay.py + relay_client.py): many commands
over one channel, with flow control — a command that floods its output
while gputui reads slowly holds at most the relay's window in gputui's
memory, and never delays another command's output.

Real processes: the relay runs as its own python3 process, as it would on
the host; the commands are real processes writing real bytes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gputui.remote import relay
from gputui.remote.local import LocalTransport
from gputui.remote.relay_client import LINE_CUT_MARK, LINE_MAX, RelayProcess, RelayTransport

RELAY_PY = Path(relay.__file__)
MIB = 1024 * 1024
FLOOD = (
    "import sys,hashlib\n"
    "out=sys.stdout.buffer\n"
    "for i in range({n}):\n"
    "    out.write(b'%08d ' % i + b'x' * 90 + b'\\n')\n"
)


def flood_bytes(n: int) -> bytes:
    return b"".join(b"%08d " % i + b"x" * 90 + b"\n" for i in range(n))


class RelayPipe:
    """The relay as a real process, spoken to through its stdin/stdout."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(RELAY_PY)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.pending = b""
        self.got: dict[int, bytearray] = {}
        self.exits: dict[int, int | None] = {}

    def send(self, msg: dict[str, object]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def drain(self, seconds: float) -> None:
        """Read whatever the relay sends for `seconds`."""
        assert self.proc.stdout is not None
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            except BlockingIOError:
                time.sleep(0.02)
                continue
            if not chunk:
                break
            self.pending += chunk
            *lines, self.pending = self.pending.split(b"\n")
            for line in lines:
                msg = json.loads(line)
                cid = int(msg["id"])
                if "out" in msg:
                    self.got.setdefault(cid, bytearray()).extend(base64.b64decode(msg["out"]))
                if "exit" in msg:
                    self.exits[cid] = msg["exit"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_the_relay_sends_no_more_than_its_window_until_acknowledged() -> None:
    pipe = RelayPipe()
    try:
        pipe.drain(0.5)  # its hello (id 0)
        # 40 MiB of output nobody acknowledges, and a quick command beside it.
        pipe.send({"op": "open", "id": 1, "argv": [sys.executable, "-c", FLOOD.format(n=400_000)]})
        pipe.send({"op": "open", "id": 2, "argv": ["echo", "still here"]})
        pipe.drain(2.0)
        assert bytes(pipe.got.get(2, b"")) == b"still here\n" and pipe.exits.get(2) == 0
        first = len(pipe.got.get(1, b""))
        assert 0 < first <= relay.WINDOW, first
        assert 1 not in pipe.exits  # the flood waits on its pipe, not finished
        pipe.send({"op": "ack", "id": 1, "n": first})
        pipe.drain(1.5)
        second = len(pipe.got[1])
        assert first < second <= first + relay.WINDOW, (first, second)
        assert bytes(pipe.got[1]) == flood_bytes(400_000)[:second]  # in order, nothing lost
    finally:
        pipe.close()
    assert pipe.proc.returncode == 0  # stdin EOF: the relay stopped, its commands killed


async def test_a_slow_reader_holds_at_most_the_window_and_gets_every_byte() -> None:
    n = 200_000  # 19 MiB
    want = hashlib.sha256(flood_bytes(n)).hexdigest()
    transport = LocalTransport()
    await transport.connect()
    relay_t = RelayTransport(transport, python=sys.executable)
    try:
        flood = await relay_t.open([sys.executable, "-c", FLOOD.format(n=n)], watchdog=False)
        assert isinstance(flood, RelayProcess)
        await asyncio.sleep(1.0)  # nobody reads: the relay must stop at its window
        quick = await relay_t.run(["echo", "beside it"], timeout=10)
        assert quick.stdout == b"beside it\n"  # not stuck behind the flood
        got = hashlib.sha256()
        total = 0
        while True:
            line = await flood.readline()
            if not line:
                break
            got.update(line)
            total += len(line)
            if total % (2 * MIB) < 100:
                await asyncio.sleep(0.01)  # a reader slower than the writer
        assert total == n * 100
        assert got.hexdigest() == want
        assert flood.held_most <= relay.WINDOW + relay.CHUNK, flood.held_most
        assert await flood.wait() == 0
    finally:
        await relay_t.close()
        await transport.close()


async def test_a_line_longer_than_the_window_comes_cut_and_marked() -> None:
    size = 3 * relay.WINDOW
    transport = LocalTransport()
    await transport.connect()
    relay_t = RelayTransport(transport, python=sys.executable)
    try:
        proc = await relay_t.open(
            [sys.executable, "-c", f"import sys; sys.stdout.write('y' * {size} + '\\nend\\n')"],
            watchdog=False,
        )
        line = await asyncio.wait_for(proc.readline(), 20)
        mark = LINE_CUT_MARK.format(n=size - LINE_MAX).encode()
        assert line == b"y" * LINE_MAX + mark + b"\n"
        assert await asyncio.wait_for(proc.readline(), 5) == b"end\n"
        assert isinstance(proc, RelayProcess) and proc.held_most <= relay.WINDOW
    finally:
        await relay_t.close()
        await transport.close()


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


async def test_a_64_mib_line_in_a_followed_log_keeps_memory_bounded(tmp_path: Path) -> None:
    """The run writes 64 MiB without a newline into its log, then a normal
    line: gputui's memory does not grow with the line, and the next line
    still arrives."""
    log = tmp_path / "train.log"
    log.write_bytes(b"step 1\n")
    transport = LocalTransport()
    await transport.connect()
    relay_t = RelayTransport(transport, python=sys.executable)
    writer = None
    try:
        proc = await relay_t.open(["tail", "-c", "+1", "-F", "--", str(log)], watchdog=False)
        assert await asyncio.wait_for(proc.readline(), 20) == b"step 1\n"
        base = rss_kib()
        peak = base
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys\n"
                "with open(sys.argv[1], 'ab') as f:\n"
                "    for _ in range(64):\n"
                "        f.write(b'z' * (1 << 20)); f.flush()\n"
                "    f.write(b'\\nstep 2\\n')\n",
                str(log),
            ]
        )

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_kib())
                await asyncio.sleep(0.01)

        sampler = asyncio.create_task(sample())
        try:
            cut = await asyncio.wait_for(proc.readline(), 120)
            nxt = await asyncio.wait_for(proc.readline(), 30)
        finally:
            sampler.cancel()
        peak = max(peak, rss_kib())
        assert peak - base < 24 * 1024, f"RSS grew {(peak - base) // 1024} MiB under a 64 MiB line"
        assert cut == b"z" * LINE_MAX + LINE_CUT_MARK.format(n=64 * MIB - LINE_MAX).encode() + b"\n"
        assert nxt == b"step 2\n"
        assert writer.wait(timeout=30) == 0
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
        await relay_t.close()
        await transport.close()


@pytest.mark.parametrize("bad", [{"op": "ack", "id": 1, "n": "many"}, {"op": "ack", "id": 99}])
def test_a_bad_ack_is_ignored(bad: dict[str, object]) -> None:
    pipe = RelayPipe()
    try:
        pipe.send({"op": "open", "id": 1, "argv": ["echo", "ok"]})
        pipe.send(bad)
        pipe.drain(1.0)
        assert bytes(pipe.got[1]) == b"ok\n" and pipe.exits[1] == 0
    finally:
        pipe.close()


def test_a_line_reaches_a_slow_reader_whole_through_a_non_blocking_stdout() -> None:
    """The relay's stdout may be non-blocking (O_NONBLOCK lives on the open
    file, shared with whoever set it): a line longer than the pipe holds
    was written in part, BlockingIOError was swallowed, and the reader got
    a cut line (JSONDecodeError). Now the relay waits and writes the rest."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    out = os.fdopen(w, "wb")
    big = {"id": 7, "out": "x" * 300_000}  # over a pipe's 64 KiB
    got: list[bytes] = []

    def read_slowly() -> None:
        time.sleep(0.3)  # the pipe fills before anything is read
        with os.fdopen(r, "rb") as f:
            got.append(f.readline())

    reader = threading.Thread(target=read_slowly)
    reader.start()
    relay.Relay(out).send(big)
    out.close()
    reader.join(10)
    assert json.loads(got[0]) == big
