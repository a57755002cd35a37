"""The stand-ins behave like the real pct and nvidia-smi, seen through the real sshd."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import time
import uuid

import asyncssh
import pytest

from testbed import Testbed


async def ssh_run(
    tb: Testbed, argv: list[str], *, input: str | None = None
) -> asyncssh.SSHCompletedProcess:
    """Run argv on the test-bed host through sshd, quoted once (like gputui's transport)."""
    async with asyncssh.connect(**tb.ssh_options()) as conn:
        return await conn.run(shlex.join(argv), input=input, check=False)


def local(tb: Testbed, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a stand-in directly on this machine with the test bed's environment (fast path)."""
    return subprocess.run(
        argv, env=tb.env(), capture_output=True, text=True, timeout=20, check=False
    )


def host_pid_ns() -> str:
    return os.readlink("/proc/self/ns/pid")


@pytest.fixture
def no_delay(testbed: Testbed):
    testbed.set_pct_delay(0)
    yield
    testbed.set_pct_delay(0.3)


# ------------------------------------------------------------------------------------ pct


async def test_exec_runs_in_the_ct_pid_namespace_with_private_tmp(
    testbed: Testbed, ct: int
) -> None:
    inside = await ssh_run(
        testbed,
        [
            "pct",
            "exec",
            str(ct),
            "--",
            "sh",
            "-c",
            "readlink /proc/self/ns/pid; cat /proc/1/cmdline | tr '\\0' ' '; echo; ls -a /tmp",
        ],
    )
    assert inside.exit_status == 0, inside.stderr
    ns, init_cmdline, *tmp = str(inside.stdout).splitlines()
    assert ns != host_pid_ns()
    assert "gputui-ct-init" in init_cmdline or "python" in init_cmdline  # PID 1 is the CT's init
    assert f".gputui-ct-{ct}" in tmp
    host = await ssh_run(testbed, ["sh", "-c", "readlink /proc/self/ns/pid; ls -a /tmp"])
    host_ns, *host_tmp = str(host.stdout).splitlines()
    assert host_ns == host_pid_ns()
    assert f".gputui-ct-{ct}" not in host_tmp


async def test_exec_sees_its_own_pid_1_and_not_host_processes(testbed: Testbed, ct: int) -> None:
    result = await ssh_run(
        testbed, ["pct", "exec", str(ct), "--", "sh", "-c", "ls /proc | grep -c '^[0-9]'"]
    )
    assert result.exit_status == 0, result.stderr
    # init, nsenter's child sh, ls, grep: a handful, never the host's hundreds (sshd, pytest, ...)
    assert int(str(result.stdout)) < 10
    host_pids = [p for p in os.listdir("/proc") if p.isdigit()]
    assert len(host_pids) > int(str(result.stdout))


async def test_exec_passes_argv_without_a_shell(testbed: Testbed, ct: int) -> None:
    evil = ["$(touch /var/tmp/pwned)", "; id", "`id`", "a b", "it's", 'say "hi"', "line1\nline2"]
    result = await ssh_run(testbed, ["pct", "exec", str(ct), "--", "printf", "%s|", *evil])
    assert result.exit_status == 0, result.stderr
    assert str(result.stdout) == "".join(f"{e}|" for e in evil)
    assert not os.path.exists("/var/tmp/pwned")


async def test_exec_passes_exit_status_stderr_and_cwd(testbed: Testbed, ct: int) -> None:
    result = await ssh_run(
        testbed, ["pct", "exec", str(ct), "--", "sh", "-c", "pwd; echo oops >&2; exit 7"]
    )
    assert result.exit_status == 7
    assert str(result.stdout) == "/root\n"
    assert str(result.stderr) == "oops\n"


async def test_exec_streams_stdin_and_stdout(testbed: Testbed, ct: int) -> None:
    async with asyncssh.connect(**testbed.ssh_options()) as conn:
        proc = await conn.create_process(shlex.join(["pct", "exec", str(ct), "--", "cat"]))
        for i in range(3):
            proc.stdin.write(f"line {i}\n")
            assert await asyncio.wait_for(proc.stdout.readline(), 5) == f"line {i}\n"
        proc.stdin.write_eof()
        result = await asyncio.wait_for(proc.wait(), 5)
    assert result.exit_status == 0


async def test_missing_ct_gives_the_real_error(testbed: Testbed) -> None:
    node = os.uname().nodename.split(".")[0]
    for argv in (["pct", "exec", "999", "--", "true"], ["pct", "status", "999"]):
        result = await ssh_run(testbed, argv)
        assert result.exit_status == 255
        assert (
            str(result.stderr) == f"Configuration file 'nodes/{node}/lxc/999.conf' does not exist\n"
        )
        assert str(result.stdout) == ""


async def test_stopped_ct(testbed: Testbed, no_delay: None) -> None:
    testbed.ct_create(298, running=False)
    try:
        status = await ssh_run(testbed, ["pct", "status", "298"])
        assert str(status.stdout) == "status: stopped\n"
        result = await ssh_run(testbed, ["pct", "exec", "298", "--", "true"])
        assert result.exit_status == 255
        assert str(result.stderr) == "CT 298 not running\n"
        start = await ssh_run(testbed, ["pct", "start", "298"])
        assert start.exit_status == 0, start.stderr
        assert str((await ssh_run(testbed, ["pct", "status", "298"])).stdout) == "status: running\n"
        again = await ssh_run(testbed, ["pct", "start", "298"])
        assert (again.exit_status, str(again.stderr)) == (255, "CT 298 already running\n")
    finally:
        testbed.ct_destroy(298)


async def test_stop_kills_everything_in_the_ct(testbed: Testbed, ct: int, no_delay: None) -> None:
    tag = f"sleep {uuid.uuid4().int % 90000 + 10000}"  # unique argv to find it with ps
    started = testbed.ct_exec(ct, ["sh", "-c", f"{tag} </dev/null >/dev/null 2>&1 &"])
    assert started.returncode == 0, started.stderr
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert tag in ps.splitlines()
    stop = await ssh_run(testbed, ["pct", "stop", str(ct)])
    assert stop.exit_status == 0, stop.stderr
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert tag not in ps.splitlines()
    assert str((await ssh_run(testbed, ["pct", "status", str(ct)])).stdout) == "status: stopped\n"


async def test_list(testbed: Testbed, ct: int, no_delay: None) -> None:
    testbed.ct_create(297, running=False)
    try:
        result = await ssh_run(testbed, ["pct", "list"])
    finally:
        testbed.ct_destroy(297)
    lines = str(result.stdout).splitlines()
    assert lines[0].startswith("VMID       Status     Lock         Name")
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert rows[str(ct)] == "running"
    assert rows["297"] == "stopped"


async def test_usage_errors(testbed: Testbed, ct: int, no_delay: None) -> None:
    missing = await ssh_run(testbed, ["pct", "exec", str(ct)])
    assert missing.exit_status == 255
    assert str(missing.stderr).startswith("missing command at ")
    unknown = await ssh_run(testbed, ["pct", "frobnicate"])
    assert unknown.exit_status == 255
    assert "unknown command 'pct frobnicate'" in str(unknown.stderr)
    unquoted = await ssh_run(testbed, ["pct", "exec", str(ct), "ls", "-la"])
    assert unquoted.exit_status == 255
    assert str(unquoted.stderr).startswith("Unknown option: la\n400 unable to parse option\n")
    dashed = await ssh_run(testbed, ["pct", "exec", str(ct), "--", "ls", "-d", "/root"])
    assert (dashed.exit_status, str(dashed.stdout)) == (0, "/root\n")
    bad = await ssh_run(testbed, ["pct", "status", "abc"])
    assert bad.exit_status == 255
    assert "vmid: invalid format" in str(bad.stderr)


async def test_a_hold_ends_every_call_after_it_once_not_per_call(testbed: Testbed, ct: int) -> None:
    """hold_pct(s): a host busy for s seconds — a call started meanwhile ends
    after it; the calls after it are not held again; the test bed's own
    calls (GPUTUI_PCT_DELAY=0) are never held."""
    hold = 3.0
    async with asyncssh.connect(**testbed.ssh_options()) as conn:
        t0 = time.monotonic()
        testbed.hold_pct(hold)
        try:
            testbed.ct_exec(ct, ["true"])
            own = time.monotonic() - t0
            ends = []
            for _ in range(3):
                await conn.run(shlex.join(["pct", "status", str(ct)]), check=True)
                ends.append(time.monotonic() - t0)
        finally:
            testbed.hold_pct(0)
    assert own < hold, own
    assert ends[0] >= hold, ends
    assert ends[1] - ends[0] < hold and ends[2] - ends[1] < hold, ends  # held once, not per call


async def test_start_up_delay_like_perl(testbed: Testbed, ct: int) -> None:
    async with asyncssh.connect(**testbed.ssh_options()) as conn:
        t0 = time.monotonic()
        await conn.run(shlex.join(["true"]), check=True)
        bare = time.monotonic() - t0
        t0 = time.monotonic()
        result = await conn.run(shlex.join(["pct", "status", str(ct)]), check=True)
        with_pct = time.monotonic() - t0
        testbed.set_pct_delay(0)
        t0 = time.monotonic()
        await conn.run(shlex.join(["pct", "status", str(ct)]), check=True)
        fast = time.monotonic() - t0
        testbed.set_pct_delay(0.3)
    assert str(result.stdout) == "status: running\n"
    assert with_pct >= 0.3
    assert with_pct - bare >= 0.25
    assert fast < with_pct


async def test_tmux_in_ct_uses_the_ct_private_tmp(
    testbed: Testbed, ct: int, no_delay: None
) -> None:
    name = f"tb{uuid.uuid4().hex[:8]}"
    made = await ssh_run(
        testbed,
        ["pct", "exec", str(ct), "--", "tmux", "new-session", "-d", "-s", name, "sleep 300"],
    )
    assert made.exit_status == 0, made.stderr
    inside = await ssh_run(
        testbed, ["pct", "exec", str(ct), "--", "tmux", "list-sessions", "-F", "#{session_name}"]
    )
    assert name in str(inside.stdout).split()
    host = await ssh_run(testbed, ["tmux", "list-sessions", "-F", "#{session_name}"])
    assert name not in str(host.stdout).split()


# ------------------------------------------------------------------------------ nvidia-smi

REAL_FIELDS = (
    "index,name,uuid,memory.used,memory.total,memory.free,utilization.gpu,utilization.memory,"
    "temperature.gpu,temperature.memory,power.draw,power.limit,clocks.sm,clocks.mem,pci.bus_id"
)
# Header as printed by the real driver 580.159.04 on an H200 for REAL_FIELDS.
REAL_HEADER = (
    "index, name, uuid, memory.used [MiB], memory.total [MiB], memory.free [MiB], "
    "utilization.gpu [%], utilization.memory [%], temperature.gpu, temperature.memory, "
    "power.draw [W], power.limit [W], clocks.current.sm [MHz], clocks.current.memory [MHz], pci.bus_id"
)
BUSY = {
    "gpus": [
        {
            "uuid": "GPU-7fb76c28-8b78-910c-5477-ef36de273a06",
            "pci.bus_id": "00000000:00:06.0",
            "memory.used": 1395,
            "utilization.gpu": 100,
            "temperature.gpu": 52,
            "power.draw": 627.0,
            "clocks.sm": 1980,
        }
    ],
    "apps": [{"pid": 656, "process_name": "python3", "used_memory": 1386}],
}


@pytest.fixture
def gpus(testbed: Testbed):
    """Restore the default (one idle H200) after a test that changes the GPU state."""
    yield testbed
    testbed.set_gpus({})


async def test_query_gpu_csv_header_units_like_the_real_driver(
    testbed: Testbed, gpus: Testbed
) -> None:
    testbed.set_gpus(BUSY)
    result = await ssh_run(testbed, ["nvidia-smi", f"--query-gpu={REAL_FIELDS}", "--format=csv"])
    assert result.exit_status == 0, result.stdout
    header, row = str(result.stdout).splitlines()
    assert header == REAL_HEADER
    assert row == (
        "0, NVIDIA H200, GPU-7fb76c28-8b78-910c-5477-ef36de273a06, 1395 MiB, 143771 MiB, 141761 MiB, "
        "100 %, 0 %, 52, 37, 627.00 W, 700.00 W, 1980 MHz, 3201 MHz, 00000000:00:06.0"
    )


def test_format_variants(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus(BUSY)
    q = "--query-gpu=index,memory.used,power.draw"
    no_format = local(testbed, ["nvidia-smi", q]).stdout
    assert no_format == "index, memory.used [MiB], power.draw [W]\n0, 1395 MiB, 627.00 W\n"
    assert (
        local(testbed, ["nvidia-smi", q, "--format=csv,noheader"]).stdout
        == "0, 1395 MiB, 627.00 W\n"
    )
    assert (
        local(testbed, ["nvidia-smi", q, "--format=csv,noheader,nounits"]).stdout
        == "0, 1395, 627.00\n"
    )
    nounits = local(testbed, ["nvidia-smi", q, "--format=csv,nounits"]).stdout
    assert nounits == "index, memory.used [MiB], power.draw [W]\n0, 1395, 627.00\n"
    bad = local(testbed, ["nvidia-smi", q, "--format=json"])
    assert (bad.returncode, bad.stdout) == (2, "Format modifier is not recognized.\n")


def test_na_and_not_supported(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus(
        {"gpus": [{"power.draw": None, "clocks.sm": "[Not Supported]", "memory.used": None}]}
    )
    out = local(
        testbed,
        ["nvidia-smi", "--query-gpu=power.draw,clocks.sm,memory.used", "--format=csv,noheader"],
    )
    assert out.stdout == "[N/A], [Not Supported], [N/A]\n"


async def test_invalid_field(testbed: Testbed) -> None:
    result = await ssh_run(testbed, ["nvidia-smi", "--query-gpu=index,foo", "--format=csv"])
    assert result.exit_status == 2
    assert str(result.stdout) == 'Field "foo" is not a valid field to query.\n\n'
    apps = local(testbed, ["nvidia-smi", "--query-compute-apps=pid,bar", "--format=csv"])
    assert (apps.returncode, apps.stdout) == (2, 'Field "bar" is not a valid field to query.\n\n')


def test_select_gpu_with_i(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus({"gpus": [{"utilization.gpu": 10}, {"utilization.gpu": 90}]})
    one = local(
        testbed,
        ["nvidia-smi", "-i", "1", "--query-gpu=index,utilization.gpu", "--format=csv,noheader"],
    )
    assert one.stdout == "1, 90 %\n"
    both = local(
        testbed,
        ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits"],
    )
    assert both.stdout == "0, 10\n1, 90\n"
    bad = local(testbed, ["nvidia-smi", "-i", "5", "--query-gpu=index", "--format=csv"])
    assert (bad.returncode, bad.stdout) == (6, "No devices were found\n")


def test_list_gpus(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus(
        {"gpus": [{"uuid": "GPU-aaaa"}, {"uuid": "GPU-bbbb", "name": "NVIDIA H100 80GB HBM3"}]}
    )
    out = local(testbed, ["nvidia-smi", "-L"])
    assert (
        out.stdout
        == "GPU 0: NVIDIA H200 (UUID: GPU-aaaa)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n"
    )


async def test_compute_apps_by_host_pid(testbed: Testbed, ct: int, gpus: Testbed) -> None:
    testbed.set_gpus(BUSY)
    argv = [
        "nvidia-smi",
        "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
        "--format=csv",
    ]
    result = await ssh_run(testbed, argv)
    assert str(result.stdout) == (
        "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"
        "656, python3, 1386 MiB, GPU-7fb76c28-8b78-910c-5477-ef36de273a06\n"
    )
    # Inside an unprivileged CT nvidia-smi often lists nothing: the state can say so.
    testbed.set_gpus({**BUSY, "ct_apps": "none"})
    inside = await ssh_run(testbed, ["pct", "exec", str(ct), "--", *argv])
    assert str(inside.stdout) == "pid, process_name, used_gpu_memory [MiB], gpu_uuid\n"
    on_host = await ssh_run(testbed, argv)
    assert "656, python3" in str(on_host.stdout)


async def test_loop_streams_rows_rereads_state_and_interleaves_events(
    testbed: Testbed, gpus: Testbed
) -> None:
    testbed.set_gpus({"gpus": [{"utilization.gpu": 5}]})
    argv = [
        "nvidia-smi",
        "--query-gpu=index,utilization.gpu",
        "--format=csv,noheader,nounits",
        "-lms",
        "100",
    ]
    async with asyncssh.connect(**testbed.ssh_options()) as conn:
        proc = await conn.create_process(shlex.join(argv))
        first = await asyncio.wait_for(proc.stdout.readline(), 5)
        second = await asyncio.wait_for(proc.stdout.readline(), 5)
        assert first == second == "0, 5\n"
        testbed.set_gpus(
            {"gpus": [{"utilization.gpu": 97}], "events": ["Xid 79, GPU has fallen off the bus."]}
        )
        seen: list[str] = []
        while "0, 97\n" not in seen:
            seen.append(await asyncio.wait_for(proc.stdout.readline(), 5))
        assert "Xid 79, GPU has fallen off the bus.\n" in seen
        more = [await asyncio.wait_for(proc.stdout.readline(), 5) for _ in range(2)]
        assert more == ["0, 97\n", "0, 97\n"]  # each event line once
        proc.close()


def test_loop_with_header_prints_it_once(testbed: Testbed) -> None:
    proc = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=index", "--format=csv", "-lms", "50"],
        env=testbed.env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(4)]  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()
    assert lines == ["index\n", "0\n", "0\n", "0\n"]
    zero = local(testbed, ["nvidia-smi", "--query-gpu=index", "--format=csv", "-lms", "0"])
    assert zero.returncode == 2
    assert "Loop frequency must be greater than 0." in zero.stdout


async def test_lost_gpu(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus({"lost": True})
    result = await ssh_run(
        testbed, ["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv"]
    )
    assert result.exit_status == 15
    assert (
        str(result.stdout)
        == "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\n"
    )


def test_plain_table_matches_the_real_layout(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus(BUSY)
    lines = local(testbed, ["nvidia-smi"]).stdout.splitlines()
    # Lines copied from the real nvidia-smi (580.159.04, H200) under the same load.
    assert (
        lines[2]
        == "| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |"
    )
    assert (
        lines[8]
        == "|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |"
    )
    assert (
        lines[9]
        == "| N/A   52C    P0            627W /  700W |    1395MiB / 143771MiB |    100%      Default |"
    )
    assert (
        "|    0   N/A  N/A             656      C   python3                                1386MiB |"
        in lines
    )


def test_state_file_is_json_the_test_controls(testbed: Testbed, gpus: Testbed) -> None:
    testbed.set_gpus(BUSY)
    assert json.loads((testbed.state_dir / "gpus.json").read_text()) == BUSY


def test_killing_pct_exec_on_the_host_leaves_the_ct_command_running(
    testbed: Testbed, ct: int
) -> None:
    """Like lxc-attach (which only waits, it does not forward SIGTERM): a stream must be wrapped
    *inside* the CT to end with its channel; killing the host-side `pct exec` is not enough."""
    tag = f"sleep {uuid.uuid4().int % 90000 + 10000}"
    env = testbed.env()
    env["GPUTUI_PCT_DELAY"] = "0"
    pct = subprocess.Popen(
        ["pct", "exec", str(ct), "--", *tag.split()], env=env, stdin=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 5
    while (
        tag
        not in subprocess.run(
            ["ps", "-eo", "args"], capture_output=True, text=True
        ).stdout.splitlines()
    ):
        assert time.monotonic() < deadline, "the command never started in the CT"
        time.sleep(0.02)
    pct.terminate()
    pct.wait(5)
    time.sleep(0.1)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert tag in ps.splitlines()  # still running inside the CT; the ct fixture's destroy kills it
