"""The test bed itself: a real sshd reachable with asyncssh and OpenSSH, CTs that are real namespaces."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import asyncssh

from helpers import wait_for
from testbed import Testbed


async def test_asyncssh_connects_with_ssh_options(testbed: Testbed) -> None:
    async with asyncssh.connect(**testbed.ssh_options()) as conn:
        result = await conn.run("id -u; echo $PATH; echo $GPUTUI_STANDIN_STATE", check=True)
    uid, path, state = str(result.stdout).splitlines()
    assert uid == "0"
    assert str(testbed.bin_dir) in path.split(":")  # ~/.bashrc may prepend more
    assert state == str(testbed.state_dir)


async def test_alias_from_ssh_config_reaches_the_server(testbed: Testbed) -> None:
    opts = testbed.ssh_options()
    for key in ("host", "port", "username", "client_keys", "known_hosts"):
        opts.pop(key)
    async with asyncssh.connect("gpuhost", **opts) as conn:
        result = await conn.run("command -v pct", check=True)
    assert str(result.stdout).strip() == str(testbed.bin_dir / "pct")


def test_openssh_client_uses_the_config(testbed: Testbed) -> None:
    out = subprocess.run(
        testbed.ssh_argv("echo", "hello"), capture_output=True, text=True, timeout=20, check=True
    )
    assert out.stdout == "hello\n"


async def test_unknown_host_key_is_refused(testbed: Testbed, tmp_path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    try:
        async with asyncssh.connect(**testbed.ssh_options(known_hosts=str(empty))):
            raise AssertionError("connected without a known host key")
    except asyncssh.HostKeyNotVerifiable:
        pass


async def test_max_sessions_is_the_openssh_default(testbed: Testbed) -> None:
    async with asyncssh.connect(**testbed.ssh_options()) as conn:
        procs = [await conn.create_process("cat") for _ in range(10)]
        try:
            await conn.create_process("cat")
            raise AssertionError("an 11th session was allowed")
        except asyncssh.ChannelOpenError:
            pass
        finally:
            for p in procs:
                p.stdin.write_eof()
                await p.wait()


def test_workspace_is_outside_tmp_and_seen_in_ct(testbed: Testbed, ct: int) -> None:
    assert not str(testbed.workspace).startswith("/tmp")
    marker = testbed.workspace / f"seen-{ct}"
    marker.write_text("from host")
    out = testbed.ct_exec(ct, ["cat", str(marker)])
    assert out.returncode == 0, out.stderr
    assert out.stdout == "from host"


def test_ct_fixture_gives_a_running_ct_and_destroys_it(testbed: Testbed) -> None:
    number = 299
    tag = (
        f"sleep {uuid.uuid4().int % 90000 + 10000}"  # unique: other suites run on this machine too
    )
    testbed.ct_create(number)
    try:
        assert testbed.ct_running(number)
        init = testbed.ct_init_pid(number)
        assert init is not None
        sleeper = testbed.ct_exec(number, ["sh", "-c", f"{tag} >/dev/null 2>&1 & echo $!"])
        assert sleeper.returncode == 0, sleeper.stderr
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
        assert tag in ps.stdout.splitlines()
    finally:
        testbed.ct_destroy(number)
    assert not testbed.ct_conf_path(number).exists()
    # the killed init is gone once its parent (unshare) reaps it: at once on a
    # quiet machine, a moment later on a loaded one (loaded CI run u: still in
    # /proc right after `pct stop` returned, with nothing else in the CT)
    try:
        wait_for(lambda: not os.path.exists(f"/proc/{init}"), 15, "the CT's init to go")
    except AssertionError as e:
        raise AssertionError(f"{e}: {_proc_state(init)}") from None
    # nothing from the CT survives: our sleep is gone from the host
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert tag not in ps.splitlines()


def test_stop_leaves_no_process_or_file_behind() -> None:
    tb = Testbed().start()
    root = str(tb.root)
    tb.ct_create(250)
    stream = subprocess.Popen(
        tb.ssh_argv("nvidia-smi", "--query-gpu=index", "--format=csv", "-lms", "100000"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert stream.stdout is not None
        assert stream.stdout.readline() == "index\n"  # the remote loop is up
        tb.stop()
        stream.wait(10)
    finally:
        stream.kill()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert root not in ps
    assert not os.path.exists(root)


def _proc_state(pid: int) -> str:
    """'PID 7775: state Z, parent 7770' — what a lingering process is."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return f"PID {pid}: gone"
    fields = stat.rsplit(")", 1)[1].split()
    return f"PID {pid}: state {fields[0]}, parent {fields[1]}"
