"""The same behaviour from LocalTransport and SshTransport (real sshd on 127.0.0.1),
plus what only ssh has: the channel budget, reconnect, the watchdog through pct."""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gputui.errors import CommandTimeout
from gputui.model import ConnectionState
from gputui.remote.base import Transport
from gputui.remote.local import LocalTransport
from gputui.remote.ssh import MAX_CHANNELS, SshTransport
from gputui.remote.target import Target


def sleep_marker() -> str:
    """A unique `sleep` duration: every process that carries it shows it in ps."""
    return f"{random.randint(1000, 9000)}.{random.randint(10**8, 10**9)}"


def host_procs(marker: str) -> list[str]:
    """Command lines on this machine (= the test bed host) containing marker."""
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


async def gone(marker: str, within: float = 5.0, check=host_procs) -> list[str]:
    """Wait until no process mentions marker; what is left when time runs out."""
    deadline = time.monotonic() + within
    left = check(marker)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        left = check(marker)
    return left


@pytest.fixture(params=["local", "ssh"])
async def transport(request, testbed) -> AsyncIterator[Transport]:
    t: Transport = LocalTransport() if request.param == "local" else testbed.transport()
    await t.connect()
    try:
        yield t
    finally:
        await t.close()


@pytest.fixture
async def ssh(testbed) -> AsyncIterator[SshTransport]:
    t = testbed.transport(rtt_refresh=None)
    await t.connect()
    try:
        yield t
    finally:
        await t.close()


# ------------------------------------------------------------ both transports


async def test_connect_reports_state_and_rtt(transport: Transport) -> None:
    assert transport.state == ConnectionState.CONNECTED
    assert transport.rtt_ms is not None and 0 < transport.rtt_ms < 10_000


async def test_run_returns_bytes_and_status_exactly(transport: Transport) -> None:
    value = "a b;c 'd' \"e\" $(touch x) `y` *\n~"
    r = await transport.run(["printf", "%s", value])
    assert (r.exit_status, r.stdout, r.stderr) == (0, value.encode(), b"")
    r = await transport.run(["sh", "-c", 'echo out; echo err >&2; exit "$1"', "sh", "7"])
    assert (r.exit_status, r.stdout, r.stderr) == (7, b"out\n", b"err\n")
    assert not r.ok


async def test_run_feeds_input(transport: Transport) -> None:
    r = await transport.run(["cat"], input=b"line one\n\xff\x00two")
    assert r.ok and r.stdout == b"line one\n\xff\x00two"


async def test_missing_command_is_exit_127(transport: Transport) -> None:
    r = await transport.run(["no-such-command-gputui"])
    assert r.exit_status == 127
    assert b"no-such-command-gputui" in r.stderr


async def test_non_utf8_output_keeps_the_connection(transport: Transport) -> None:
    r = await transport.run(["printf", "\\377\\376\\200bad\\n"])
    assert r.stdout == b"\xff\xfe\x80bad\n"
    async with await transport.open(["printf", "\\377 stream \\300\\n"]) as p:
        assert await p.readline() == b"\xff stream \xc0\n"
    again = await transport.run(["echo", "still here"])
    assert again.stdout == b"still here\n"
    assert transport.state == ConnectionState.CONNECTED
    if isinstance(transport, SshTransport):
        assert transport.reconnects == 0


async def test_timeout_raises_and_kills_the_command(transport: Transport) -> None:
    marker = sleep_marker()
    t0 = time.monotonic()
    with pytest.raises(CommandTimeout) as err:
        # the background sleep is a grandchild: the whole group must die
        await transport.run(["sh", "-c", f"sleep {marker} & sleep {marker}"], timeout=0.5)
    assert time.monotonic() - t0 < 3
    assert "did not finish within 0.5 s" in str(err.value)
    assert await gone(marker) == []
    assert (await transport.run(["true"])).ok


async def test_open_streams_lines_and_exit_status(transport: Transport) -> None:
    p = await transport.open(["sh", "-c", "for i in 1 2 3; do echo line $i; done; exit 4"])
    lines = [line async for line in p.lines()]
    assert lines == [b"line 1\n", b"line 2\n", b"line 3\n"]
    assert await p.wait() == 4
    await p.close()


async def test_open_without_watchdog_gets_stdin(transport: Transport) -> None:
    p = await transport.open(["cat"], watchdog=False)
    await p.write(b"ping\n")
    assert await p.readline() == b"ping\n"
    await p.close()


async def test_closed_stream_leaves_nothing_behind(transport: Transport) -> None:
    marker = sleep_marker()
    # children that write nothing: no SIGPIPE will ever end them, only the watchdog
    p = await transport.open(["sh", "-c", f"echo up; sleep {marker} & sleep {marker}"])
    assert await p.readline() == b"up\n"
    # the sleeps start after "up" is written: on a loaded machine, after it is read
    deadline = time.monotonic() + 10.0
    while len(host_procs(marker)) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert len(host_procs(marker)) >= 3  # sh and its two sleeps
    await p.close()
    assert await gone(marker) == []


async def test_cancelled_reader_leaves_nothing_behind(transport: Transport) -> None:
    marker = sleep_marker()
    started = asyncio.Event()

    async def follow() -> None:
        async with await transport.open(
            ["sh", "-c", f"sleep {marker} & while :; do echo tick; sleep 0.05; done"]
        ) as p:
            async for _ in p.lines():
                started.set()

    task = asyncio.ensure_future(follow())
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert await gone(marker) == []


# ------------------------------------------------------------ ssh only


async def test_twenty_concurrent_runs_share_one_connection(ssh: SshTransport) -> None:
    results = await asyncio.gather(
        *[ssh.run(["sh", "-c", 'sleep 0.2; echo "$1"', "sh", str(i)]) for i in range(20)]
    )
    assert [r.stdout for r in results] == [f"{i}\n".encode() for i in range(20)]
    assert 1 < ssh.max_channels_seen <= MAX_CHANNELS
    assert ssh.reconnects == 0 and ssh.channels_in_use == 0


async def test_aes_gcm_is_asked_for_first(ssh: SshTransport) -> None:
    """A busy log stream is hundreds of packets a second: asyncssh's Python
    chacha20-poly1305 costs ~7x AES-GCM a packet, so gputui asks for AES-GCM
    first (the real OpenSSH server picks the client's first choice)."""
    assert ssh._conn is not None
    assert ssh._conn.get_extra_info("recv_cipher") == "aes128-gcm@openssh.com"
    assert ssh._conn.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"


async def test_ciphers_in_the_ssh_config_are_kept(testbed, tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host {testbed.host}\n    Ciphers chacha20-poly1305@openssh.com\n")
    t = testbed.transport(config_path=str(cfg), rtt_refresh=None)
    await t.connect()
    try:
        assert t._conn is not None
        assert t._conn.get_extra_info("recv_cipher") == "chacha20-poly1305@openssh.com"
        assert (await t.run(["echo", "ok"])).stdout == b"ok\n"
    finally:
        await t.close()


async def test_long_lived_streams_count_against_the_budget(ssh: SshTransport) -> None:
    streams = [await ssh.open(["sleep", "30"]) for _ in range(MAX_CHANNELS)]
    with pytest.raises(CommandTimeout, match="channels"):
        await ssh.run(["true"], timeout=0.5)
    waiting = asyncio.ensure_future(ssh.run(["echo", "got a slot"], timeout=10))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await streams.pop().close()
    assert (await waiting).stdout == b"got a slot\n"
    for s in streams:
        await s.close()
    assert ssh.channels_in_use == 0


async def test_stream_inside_ct_dies_with_its_channel(ssh: SshTransport, testbed, ct: int) -> None:
    """`pct exec` starts the command in the CT's PID namespace; closing the
    channel must end it there too (host view and CT view)."""
    marker = f"/gputui-ct-{uuid.uuid4().hex[:8]}"
    target = Target(ssh, ct)
    p = await target.open(["tail", "-F", marker])

    def in_ct(m: str) -> list[str]:
        out = testbed.ct_exec(ct, ["ps", "-eo", "pid,args"]).stdout
        out = out if isinstance(out, str) else out.decode()
        return [line for line in out.splitlines() if m in line and "ps -eo" not in line]

    deadline = time.monotonic() + 10
    while not in_ct(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert in_ct(marker), "tail did not start inside the CT"
    await p.close()
    assert await gone(marker, check=in_ct) == []
    assert await gone(marker) == []


async def test_reconnects_after_the_link_is_cut(ssh: SshTransport) -> None:
    states: list[ConnectionState] = []
    ssh.on_state(lambda state, detail: states.append(state))
    sock = ssh._socket()
    assert sock is not None
    sock.shutdown(2)  # the TCP link dies under asyncssh
    r = await ssh.run(["echo", "back"], timeout=15)
    assert r.stdout == b"back\n"
    assert states[0] == ConnectionState.RECONNECTING
    assert states[-1] == ConnectionState.CONNECTED
    assert ssh.reconnects == 1 and ssh.rtt_ms is not None


async def test_reconnect_after_sshd_child_is_killed(ssh: SshTransport, testbed) -> None:
    """Kill the sshd process serving our connection (not the listener)."""
    states: list[ConnectionState] = []
    ssh.on_state(lambda state, detail: states.append(state))
    stream = await ssh.open(["sh", "-c", "echo $$; exec sleep 30"])
    pid = int((await stream.readline()).strip())
    # walk up from the command to the sshd process that serves this connection
    chain = [pid]
    while chain[-1] > 1:
        stat = Path(f"/proc/{chain[-1]}/stat").read_text()
        chain.append(int(stat.rsplit(")", 1)[1].split()[1]))
        if chain[-1] == testbed.sshd_pid:
            break
    assert chain[-1] == testbed.sshd_pid, chain
    victim = chain[-2]
    subprocess.run(["kill", "-9", str(victim)], check=True)
    r = await ssh.run(["echo", "again"], timeout=15)
    assert r.stdout == b"again\n"
    assert ConnectionState.RECONNECTING in states and states[-1] == ConnectionState.CONNECTED
    assert await stream.read() == b""  # the old stream ended with its connection
    await stream.close()
    assert ssh.channels_in_use == 0


async def test_a_local_commands_output_reaches_its_reader_in_the_turn_it_is_read(
    tmp_path: Path,
) -> None:
    """The GPU samples, the agent's answers and the log's lines come a chunk
    at a time: a chunk in the pipe is read in one turn of the event loop and
    the reader goes on in the next (asyncio's subprocess pipes handed each
    chunk on a turn later: a wake more for every chunk)."""
    done = tmp_path / "written"
    t = LocalTransport()
    await t.connect()
    p = await t.open(["sh", "-c", f'read -r _; echo hi; : > "{done}"; exec sleep 30'])
    try:
        await p.write(b"go\n")
        deadline = time.monotonic() + 10.0
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.01)  # the loop does not run: "hi" waits in the pipe
        assert done.exists()
        line = asyncio.ensure_future(p.readline())
        turns = 0
        while not line.done():
            await asyncio.sleep(0)
            turns += 1
        assert line.result() == b"hi\n"
        # the turn that starts the read and reads the pipe, the reader's, and
        # this loop's look after it (asyncio's subprocess pipes: 4)
        assert turns == 3
    finally:
        await p.close()
        await t.close()
