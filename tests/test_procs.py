"""Pure /proc parsing rules (gputui.remote.agent, run in the container) on texts as the kernel writes them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gputui.remote.agent as agent_mod
from gputui.collect.procs import proc_from_agent
from gputui.remote.agent import (
    cgroup_in_container,
    env_value,
    is_python_argv,
    parse_fdinfo,
    parse_stat,
    parse_status_nspid,
    python_options,
    stdout_kind,
)

# A real /proc/PID/stat line (python3 running a training script), and one whose
# comm holds spaces and parentheses, which naive split() parsing gets wrong.
STAT = (
    "4242 (python3) S 4200 4242 4100 34816 4242 4194304 52188 0 3 0 1234 567 0 0 20 0 "
    "9 0 987654 3163545600 60241 18446744073709551615 94 95 140 0 0 0 0 16781312 "
    "134234626 0 0 0 17 1 0 0 0 0 0"
)
STAT_ODD = STAT.replace("(python3)", "(a) b (c)")


def test_parse_stat_fields() -> None:
    st = parse_stat(STAT)
    assert st == {
        "pid": 4242,
        "comm": "python3",
        "state": "S",
        "ppid": 4200,
        "utime": 1234,
        "stime": 567,
        "threads": 9,
        "starttime": 987654,
        "rss_pages": 60241,
        "image": "python3 94 95 140",  # comm, startcode, endcode, startstack (no arg_start…)
    }


def test_parse_stat_comm_with_parens_and_spaces() -> None:
    st = parse_stat(STAT_ODD)
    assert st is not None
    assert st["comm"] == "a) b (c"
    assert st["ppid"] == 4200 and st["starttime"] == 987654


@pytest.mark.parametrize("bad", ["", "garbage", "12 (x) S"])
def test_parse_stat_bad_input_is_none(bad: str) -> None:
    assert parse_stat(bad) is None


@pytest.mark.parametrize(
    ("argv", "u", "ignore_env", "script", "module"),
    [
        (["python3", "train.py"], False, False, "train.py", None),
        (["python3", "-u", "train.py"], True, False, "train.py", None),
        (["python3", "-uB", "train.py"], True, False, "train.py", None),
        (["python3", "-Bu", "train.py"], True, False, "train.py", None),
        (
            ["/usr/bin/python3.11", "-B", "-u", "train.py", "--lr", "3e-4"],
            True,
            False,
            "train.py",
            None,
        ),
        # -u after the script belongs to the script, not to Python
        (["python3", "train.py", "-u"], False, False, "train.py", None),
        (
            ["python", "-m", "torch.distributed.run", "-u"],
            False,
            False,
            None,
            "torch.distributed.run",
        ),
        (["python", "-u", "-m", "trainer"], True, False, None, "trainer"),
        (["python", "-mtrainer"], False, False, None, "trainer"),
        (["python3", "-c", "print(1)", "-u"], False, False, None, None),
        (["python3", "-uc", "print(1)"], True, False, None, None),
        # -W and -X take a value: `-W u` is not -u
        (["python3", "-W", "u", "train.py"], False, False, "train.py", None),
        (["python3", "-Wignore", "-X", "utf8", "train.py"], False, False, "train.py", None),
        (["python3", "-E", "train.py"], False, True, "train.py", None),
        (["python3", "-Iu", "train.py"], True, True, "train.py", None),
        (["python3", "--check-hash-based-pycs", "never", "-u", "t.py"], True, False, "t.py", None),
        (["python3", "-"], False, False, "-", None),
        (["python3", "--", "-weird.py"], False, False, "-weird.py", None),
    ],
)
def test_python_options(
    argv: list[str], u: bool, ignore_env: bool, script: str | None, module: str | None
) -> None:
    opts = python_options(argv)
    assert (opts["u"], opts["ignore_env"], opts["script"], opts["module"]) == (
        u,
        ignore_env,
        script,
        module,
    )


@pytest.mark.parametrize(
    ("argv", "exe", "expected"),
    [
        (["python3", "x.py"], None, True),
        (["/opt/conda/bin/python3.11", "x.py"], None, True),
        (["python"], None, True),
        (["bash", "start.sh"], "/usr/bin/bash", False),
        (["pythonista"], None, False),
        # setproctitle'd worker: argv says nothing, the exe does
        (["pt_data_worker"], "/usr/bin/python3.11", True),
        (["torchrun"], "/usr/bin/python3.10 (deleted)", True),
        ([], None, False),
    ],
)
def test_is_python(argv: list[str], exe: str | None, expected: bool) -> None:
    assert is_python_argv(argv, exe) is expected


def test_env_value() -> None:
    blob = b"PATH=/usr/bin\0PYTHONUNBUFFERED=1\0NOT_PYTHONUNBUFFERED=x\0"
    assert env_value(blob, "PYTHONUNBUFFERED") == "1"
    assert env_value(b"PYTHONUNBUFFERED=\0", "PYTHONUNBUFFERED") == ""
    assert env_value(b"XPYTHONUNBUFFERED=1\0", "PYTHONUNBUFFERED") is None
    assert env_value(b"", "PYTHONUNBUFFERED") is None


@pytest.mark.parametrize(
    ("link", "kind"),
    [
        ("pipe:[123456]", "pipe"),
        ("/workspace/train.log", "file"),
        ("/workspace/old name.log (deleted)", "file"),
        ("/dev/pts/3", "tty"),
        ("/dev/tty1", "tty"),
        ("socket:[998]", "socket"),
        ("/dev/null", "null"),
        ("anon_inode:[eventfd]", "unknown"),
        (None, "closed"),
    ],
)
def test_stdout_kind(link: str | None, kind: str) -> None:
    assert stdout_kind(link) == kind


def test_parse_fdinfo() -> None:
    info = parse_fdinfo("pos:\t8192\nflags:\t0102001\nmnt_id:\t31\nino:\t1234\n")
    assert info == {"pos": 8192, "flags": 0o102001}
    assert info["flags"] & 3 == 1  # O_WRONLY
    assert parse_fdinfo("") == {}


def test_parse_status_nspid() -> None:
    status = "Name:\tpython3\nTgid:\t91234\nPid:\t91234\nNSpid:\t91234\t57\n"
    assert parse_status_nspid(status) == 57
    assert parse_status_nspid("NSpid:\t812\n") == 812
    assert parse_status_nspid("Name:\tx\n") is None


_D, _P = "a1" * 32, "b2" * 32  # a Docker and a Podman container ID
_KP = "kubepods-besteffort-pod1234abcd_55aa_4e2f.slice"


@pytest.mark.parametrize(
    ("cgroup", "ct", "inside"),
    [
        ("0::/lxc/200/ns/user.slice/user-0.slice/session-c1.scope\n", 200, True),
        ("0::/lxc/200/ns/init.scope\n", "200", True),
        ("0::/lxc/2001/ns/init.scope\n", 200, False),
        ("0::/lxc.payload.200/init.scope\n", 200, True),
        ("0::/lxc.monitor.200\n", 200, False),
        ("0::/system.slice/pve-container@200.service\n", 200, False),
        ("12:pids:/lxc/200/ns\n11:memory:/lxc/200/ns\n", 200, True),
        ("0::/user.slice\n", 200, False),
        # Docker, Podman and kubepods under cgroup v2: "KIND:ID" (full ID or 12+ hex prefix)
        (f"0::/system.slice/docker-{_D}.scope\n", f"docker:{_D}", True),
        (f"0::/system.slice/docker-{_D}.scope\n", f"docker:{_D[:12]}", True),
        (f"0::/system.slice/docker-{_D}.scope\n", f"docker:{_D[:8]}", False),
        (f"0::/system.slice/docker-{_D}.scope\n", f"docker:{_P}", False),
        (f"0::/system.slice/docker-{_D}.scope\n", f"podman:{_D}", False),
        (f"0::/system.slice/docker-{_D}.scope\n", "docker:", False),
        (f"0::/docker/{_D}\n", f"docker:{_D}", True),
        (f"0::/machine.slice/libpod-{_P}.scope/container\n", f"podman:{_P}", True),
        (f"0::/machine.slice/libpod-conmon-{_P}.scope\n", f"podman:{_P}", False),
        (
            f"0::/kubepods.slice/kubepods-besteffort.slice/{_KP}/cri-containerd-{_D}.scope\n",
            f"pod:{_D}",
            True,
        ),
        (
            f"0::/kubepods.slice/kubepods-besteffort.slice/{_KP}/cri-containerd-{_D}.scope\n",
            f"docker:{_D}",
            False,
        ),
        (f"0::/kubepods.slice/kubepods-burstable.slice/{_KP}/crio-{_D}.scope\n", f"pod:{_D}", True),
        (f"0::/kubepods/burstable/pod1234abcd-55aa/{_D}\n", f"pod:{_D}", True),
        ("0::/lxc/200/ns/init.scope\n", f"docker:{_D}", False),
        ("0::/user.slice\n", f"pod:{_D}", False),
    ],
)
def test_cgroup_in_container(cgroup: str, ct: int | str, inside: bool) -> None:
    assert cgroup_in_container(cgroup, ct) is inside


def test_proc_from_agent_moves_times_to_local_clock() -> None:
    d = {
        "pid": 57,
        "ppid": 50,
        "cmdline": ["python3", "train.py"],
        "cwd": "/workspace",
        "state": "R",
        "cpu_pct": 97.5,
        "rss_bytes": 1 << 30,
        "threads": 12,
        "start_time": 1000.0,
        "is_python": True,
        "python_u_flag": False,
        "env_pythonunbuffered": False,
        "stdout": {
            "kind": "pipe",
            "path": "pipe:[77]",
            "pos": 0,
            "readers": [[58, "tee -a /workspace/train.log"]],
            "reader_files": ["/workspace/train.log"],
        },
        "fd1_pos": 0,
        "source_files": [["/workspace/train.py", 1100.0]],
    }
    p = proc_from_agent(d, clock_offset=5.0)
    assert p.start_time == 1005.0
    assert p.source_files == [("/workspace/train.py", 1105.0)]
    assert p.stdout.readers == [(58, "tee -a /workspace/train.log")]
    assert p.stdout.files == ["/workspace/train.log"]
    assert p.block_buffered is True
    d["env_pythonunbuffered"] = None
    assert proc_from_agent(d).block_buffered is None  # environ unreadable: cannot tell


def test_agent_source_is_python36_syntax() -> None:
    """The agent runs on whatever python3 the container has."""
    src = Path(agent_mod.__file__).read_text()
    ast.parse(src, feature_version=(3, 6))
    assert "from __future__ import annotations" not in src
    assert "capture_output" not in src.replace("no capture_output=", "")
