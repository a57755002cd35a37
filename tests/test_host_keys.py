"""Host keys behave as OpenSSH's do (issue #11 item 6), on real sshd
instances on 127.0.0.1: `UserKnownHostsFile none` trusts nothing, a key
marked `@revoked` is refused and never written by --accept-new-host-key,
and a ProxyJump host's changed key or silence is named as the jump host's.
Each refusal is also checked against OpenSSH's own client."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.cli.main import main
from test_ssh_errors import new_key, one_line
from testbed import Testbed, closed_port


@pytest.fixture(scope="module")
def jump() -> Iterator[Testbed]:
    """A second real sshd: the jump host."""
    tb = Testbed().start()
    try:
        yield tb
    finally:
        tb.stop()


def doctor(capsys, *args: str) -> tuple[int, str]:
    rc = main(["doctor", *args])
    return rc, capsys.readouterr().err


def doctor_connects(capsys, *args: str) -> tuple[bool, str]:
    """Did doctor get through to the host? These tests are about the
    connection: the report may add findings of its own (on a loaded machine a
    `watch_incomplete` WARNING, exit 1), so they ask for the connection line
    and an exit other than 2 (refused), not for exit 0."""
    rc = main(["doctor", *args])
    out, err = capsys.readouterr()
    return rc in (0, 1) and "connection  connected (round trip" in out, f"exit {rc}: {err}{out}"


def openssh_ok(config: Path, host: str, *extra: str) -> bool:
    """Does OpenSSH's client log in with this config (no prompts)?"""
    r = subprocess.run(
        ["ssh", "-F", str(config), "-o", "BatchMode=yes", *extra, host, "true"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=30,
    )
    return r.returncode == 0


def write_config(path: Path, hosts: dict[str, dict[str, str]]) -> Path:
    lines = []
    for alias, opts in hosts.items():
        lines.append(f"Host {alias}")
        lines += [f"    {k} {v}" for k, v in opts.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def bed_host(tb: Testbed, **over: str) -> dict[str, str]:
    opts = {
        "HostName": tb.host,
        "Port": str(tb.port),
        "User": tb.user,
        "IdentityFile": str(tb.key_path),
        "IdentitiesOnly": "yes",
        "StrictHostKeyChecking": "yes",
    }
    opts.update(over)
    return opts


def known(tb: Testbed, key_line: str | None = None, marker: str = "") -> str:
    return f"{marker}[{tb.host}]:{tb.port} {key_line or tb.host_key_line}\n"


def other_key_line(tmp_path: Path) -> str:
    pub = Path(f"{new_key(tmp_path / 'other_host_key')}.pub").read_text().split()
    return f"{pub[0]} {pub[1]}"


# ------------------------------------------------------------ UserKnownHostsFile none


@pytest.mark.parametrize("accept", [False, True])
def test_user_known_hosts_file_none_trusts_no_key(
    capsys, testbed: Testbed, tmp_path: Path, accept: bool
) -> None:
    cfg = write_config(
        tmp_path / "ssh_config", {"bed": bed_host(testbed, UserKnownHostsFile="none")}
    )
    extra = ["--accept-new-host-key"] if accept else []
    rc, err = doctor(capsys, "--host", "bed", "--ssh-config", str(cfg), *extra)
    line = one_line(err)
    assert rc == 2
    assert f"host key for [127.0.0.1]:{testbed.port} cannot be checked" in line
    assert "`UserKnownHostsFile none`" in line and "--known-hosts FILE" in line
    assert not openssh_ok(cfg, "bed")  # OpenSSH refuses the same host


def test_user_known_hosts_file_none_with_known_hosts_flag_works(
    capsys, testbed: Testbed, tmp_path: Path
) -> None:
    """--known-hosts names the file to check against: then the key is known."""
    cfg = write_config(
        tmp_path / "ssh_config", {"bed": bed_host(testbed, UserKnownHostsFile="none")}
    )
    ok, err = doctor_connects(
        capsys, "--host", "bed", "--ssh-config", str(cfg),
        "--known-hosts", str(testbed.known_hosts_path),
    )  # fmt: skip
    assert ok, err


# ------------------------------------------------------------ @revoked


@pytest.mark.parametrize("accept", [False, True])
@pytest.mark.parametrize(
    "lines",
    [
        "revoked-only",  # only the @revoked mark for [host]:port
        "revoked-port-trusted-bare",  # revoked for [host]:port, trusted for the bare host
        "revoked-bare",  # revoked for the bare host name (any port)
    ],
)
def test_revoked_key_is_refused_and_never_written(
    capsys, testbed: Testbed, tmp_path: Path, lines: str, accept: bool
) -> None:
    kh = tmp_path / "known_hosts"
    revoked = known(testbed, marker="@revoked ")
    text = {
        "revoked-only": revoked,
        "revoked-port-trusted-bare": revoked + f"{testbed.host} {testbed.host_key_line}\n",
        "revoked-bare": f"@revoked {testbed.host} {testbed.host_key_line}\n",
    }[lines]
    kh.write_text(text)
    cfg = write_config(
        tmp_path / "ssh_config", {"bed": bed_host(testbed, UserKnownHostsFile=str(kh))}
    )
    extra = ["--accept-new-host-key"] if accept else []
    rc, err = doctor(capsys, "--host", "bed", "--ssh-config", str(cfg), *extra)
    line = one_line(err)
    assert rc == 2
    assert f"host key for [127.0.0.1]:{testbed.port} is REVOKED" in line
    assert str(kh) in line
    assert kh.read_text() == text  # nothing added or changed
    if lines != "revoked-bare":  # OpenSSH matches revocations by host[:port] as written
        assert not openssh_ok(cfg, "bed")


# ------------------------------------------------------------ ProxyJump


def jump_config(tmp_path: Path, testbed: Testbed, jump_opts: dict[str, str], kh: Path) -> Path:
    return write_config(
        tmp_path / "ssh_config",
        {
            "target": bed_host(testbed, ProxyJump="jumphost", UserKnownHostsFile=str(kh)),
            "jumphost": {**jump_opts, "UserKnownHostsFile": str(kh)},
        },
    )


def test_through_a_jump_host(capsys, testbed: Testbed, jump: Testbed, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(known(testbed) + known(jump))
    cfg = jump_config(tmp_path, testbed, bed_host(jump), kh)
    ok, err = doctor_connects(capsys, "--host", "target", "--ssh-config", str(cfg))
    assert ok, err
    assert openssh_ok(cfg, "target")


def test_changed_key_on_the_jump_host_is_the_jump_hosts(
    capsys, testbed: Testbed, jump: Testbed, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    text = known(testbed) + known(jump, other_key_line(tmp_path))
    kh.write_text(text)
    cfg = jump_config(tmp_path, testbed, bed_host(jump), kh)
    for extra in ([], ["--accept-new-host-key"]):
        rc, err = doctor(capsys, "--host", "target", "--ssh-config", str(cfg), *extra)
        line = one_line(err)
        assert rc == 2
        assert f"host key for jump host [127.0.0.1]:{jump.port} has CHANGED" in line
        assert f"(ProxyJump to [127.0.0.1]:{testbed.port})" in line
        assert f"ssh-keygen -R '[127.0.0.1]:{jump.port}'" in line
        assert kh.read_text() == text
    assert not openssh_ok(cfg, "target")


def test_unknown_target_key_behind_a_good_jump_host_is_the_targets(
    capsys, testbed: Testbed, jump: Testbed, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(known(jump))
    cfg = jump_config(tmp_path, testbed, bed_host(jump), kh)
    rc, err = doctor(capsys, "--host", "target", "--ssh-config", str(cfg))
    line = one_line(err)
    assert rc == 2
    assert line.startswith(f"gputui: host key for [127.0.0.1]:{testbed.port} is not known")


@pytest.fixture
def silent_port() -> Iterator[int]:
    """Accepts TCP, never says a word: a hung jump host."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


@pytest.mark.parametrize("dead", ["silent", "refused"])
def test_dead_jump_host_is_named(
    capsys, testbed: Testbed, tmp_path: Path, silent_port: int, dead: str
) -> None:
    port = silent_port if dead == "silent" else closed_port()
    kh = tmp_path / "known_hosts"
    kh.write_text(known(testbed))
    cfg = jump_config(tmp_path, testbed, {"HostName": "127.0.0.1", "Port": str(port)}, kh)
    rc, err = doctor(capsys, "--host", "target", "--ssh-config", str(cfg), "--connect-timeout", "1")
    line = one_line(err)
    assert rc == 2
    if dead == "silent":
        assert f"no ssh answer from jump host 127.0.0.1 port {port} within 1 s" in line
    else:
        assert f"connection refused by jump host 127.0.0.1 port {port}" in line
    assert f"(ProxyJump to [127.0.0.1]:{testbed.port})" in line
    assert "no ssh answer from 127.0.0.1 port" not in line.replace("jump host ", "JUMP ")


def test_jump_flag_as_ssh_minus_j(capsys, testbed: Testbed, jump: Testbed, tmp_path: Path) -> None:
    """-J HOST goes through that jump host, as `ssh -J` does, with no
    ProxyJump in the ssh config: through a good one it connects, a refused
    one is named as the jump host."""
    kh = tmp_path / "known_hosts"
    kh.write_text(known(testbed) + known(jump))
    dead = closed_port()
    cfg = write_config(
        tmp_path / "ssh_config",
        {
            "target": bed_host(testbed, UserKnownHostsFile=str(kh)),
            "jumphost": {**bed_host(jump), "UserKnownHostsFile": str(kh)},
            "deadjump": {"HostName": "127.0.0.1", "Port": str(dead), "UserKnownHostsFile": str(kh)},
        },
    )
    ok, err = doctor_connects(
        capsys, "--host", "target", "--ssh-config", str(cfg), "-J", "jumphost"
    )
    assert ok, err
    rc, err = doctor(capsys, "--host", "target", "--ssh-config", str(cfg), "-J", "deadjump")
    line = one_line(err)
    assert rc == 2
    assert f"connection refused by jump host 127.0.0.1 port {dead}" in line
