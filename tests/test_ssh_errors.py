"""Every bad input ends in one line naming the problem and the fix, exit 2,
no traceback, within the connect timeout — through `gputui doctor` itself."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputui.cli.main import main
from testbed import closed_port


def doctor(capsys, *args: str) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    rc = main(["doctor", *args])
    out, err = capsys.readouterr()
    return rc, out, err, time.monotonic() - t0


def connected(rc: int, out: str) -> bool:
    """doctor got through to the host. These tests are about the connection:
    the report may add findings of its own (on a loaded machine a
    `watch_incomplete` WARNING, exit 1), so not exit 0 but not 2 (refused)
    and the connection line."""
    return rc in (0, 1) and "connection  connected (round trip" in out


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gputui: ")
    return lines[0]


def bed_flags(testbed, **over: str) -> list[str]:
    flags = {
        "--host": testbed.host,
        "--port": str(testbed.port),
        "--user": testbed.user,
        "-i": str(testbed.key_path),
        "--known-hosts": str(testbed.known_hosts_path),
    }
    flags.update(over)
    return [x for kv in flags.items() for x in kv]


def new_key(path: Path) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts TCP but never says a word (a hung host)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def test_dns_failure(capsys) -> None:
    rc, _, err, took = doctor(capsys, "--host", "nonexistent.invalid")
    line = one_line(err)
    assert rc == 2 and took < 10
    assert "unknown host 'nonexistent.invalid'" in line and "ssh config" in line


@pytest.mark.parametrize("name", ["bad..host.invalid", "x" * 64 + ".invalid"])
def test_a_name_dns_cannot_even_encode_is_one_line(capsys, name: str) -> None:
    """An empty or over-long label fails in Python's IDNA codec before any DNS
    query: one line naming the host, not the codec's exception."""
    rc, _, err, took = doctor(capsys, "--host", name)
    line = one_line(err)
    assert rc == 2 and took < 10
    assert f"{name!r} is not a valid host name" in line and "ssh config" in line, line
    assert "UnicodeError" not in line and "idna" not in line


def test_unknown_alias_in_given_ssh_config(capsys, testbed) -> None:
    rc, _, err, _ = doctor(
        capsys, "--host", "nosuchalias.invalid", "--ssh-config", str(testbed.ssh_config_path)
    )
    assert rc == 2 and "unknown host 'nosuchalias.invalid'" in one_line(err)


def test_alias_from_ssh_config_works(capsys, testbed) -> None:
    rc, out, err, _ = doctor(
        capsys, "--host", testbed.alias, "--ssh-config", str(testbed.ssh_config_path)
    )
    assert connected(rc, out), err
    assert f"root@127.0.0.1:{testbed.port}\n" in out and "connection  connected (round trip" in out


def test_closed_port(capsys) -> None:
    port = closed_port()
    rc, _, err, took = doctor(capsys, "--host", "127.0.0.1", "--port", str(port))
    line = one_line(err)
    assert rc == 2 and took < 10
    assert f"connection refused by 127.0.0.1 port {port}" in line and "--port" in line


def test_timeout_is_bounded_by_connect_timeout(capsys, silent_port: int) -> None:
    rc, _, err, took = doctor(
        capsys, "--host", "127.0.0.1", "--port", str(silent_port), "--connect-timeout", "1"
    )
    line = one_line(err)
    assert rc == 2
    assert 0.9 < took < 3.0
    assert f"no ssh answer from 127.0.0.1 port {silent_port} within 1 s" in line


def test_authentication_failure(capsys, testbed, tmp_path: Path) -> None:
    wrong = new_key(tmp_path / "wrong_key")
    rc, _, err, took = doctor(capsys, *bed_flags(testbed, **{"-i": str(wrong)}))
    line = one_line(err)
    assert rc == 2 and took < 10
    assert "refused our ssh keys" in line and "-i FILE" in line


def test_missing_identity_file(capsys, testbed, tmp_path: Path) -> None:
    rc, _, err, _ = doctor(capsys, *bed_flags(testbed, **{"-i": str(tmp_path / "nope")}))
    assert rc == 2 and "identity file" in one_line(err) and "does not exist" in err


def host_fingerprint(testbed) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", f"{testbed.host_key_path}.pub"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[1]  # SHA256:...


def test_unknown_host_key_names_fingerprint_and_fix(capsys, testbed, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    rc, _, err, _ = doctor(capsys, *bed_flags(testbed, **{"--known-hosts": str(kh)}))
    line = one_line(err)
    assert rc == 2
    assert f"host key for [127.0.0.1]:{testbed.port} is not known" in line
    assert host_fingerprint(testbed) in line
    assert f"ssh-keyscan -p {testbed.port} 127.0.0.1 >> {kh}" in line
    assert "--accept-new-host-key" in line
    assert kh.read_text() == ""  # nothing was trusted


def test_accept_new_host_key_adds_it_after_showing_it(capsys, testbed, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    rc, out, err, _ = doctor(
        capsys, *bed_flags(testbed, **{"--known-hosts": str(kh)}), "--accept-new-host-key"
    )
    assert connected(rc, out), err
    assert "accepted NEW host key" in err and host_fingerprint(testbed) in err
    assert kh.read_text().split() == [f"[127.0.0.1]:{testbed.port}", *testbed.host_key_line.split()]
    # from now on it is a known key: no flag needed, nothing printed
    rc, out, err, _ = doctor(capsys, *bed_flags(testbed, **{"--known-hosts": str(kh)}))
    assert connected(rc, out) and err == "", err
    # and OpenSSH agrees with the line we wrote
    ssh = subprocess.run(
        [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={kh}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-i",
            str(testbed.key_path),
            "-p",
            str(testbed.port),
            "root@127.0.0.1",
            "true",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=20,
    )
    assert ssh.returncode == 0, ssh.stderr


@pytest.mark.parametrize("accept", [False, True])
def test_changed_host_key_is_never_accepted(capsys, testbed, tmp_path: Path, accept: bool) -> None:
    other = new_key(tmp_path / "other_host_key")
    pub = Path(f"{other}.pub").read_text().split()
    kh = tmp_path / "my known_hosts"
    kh.write_text(f"[127.0.0.1]:{testbed.port} {pub[0]} {pub[1]}\n")
    extra = ["--accept-new-host-key"] if accept else []
    rc, _, err, _ = doctor(capsys, *bed_flags(testbed, **{"--known-hosts": str(kh)}), *extra)
    line = one_line(err)
    assert rc == 2
    assert f"host key for [127.0.0.1]:{testbed.port} has CHANGED" in line
    assert kh.read_text().split() == [f"[127.0.0.1]:{testbed.port}", pub[0], pub[1]]
    # the fix as printed, pasted into a shell, removes the old key from that file
    fix = line.split("`")[1]
    assert fix.startswith(f"ssh-keygen -R '[127.0.0.1]:{testbed.port}' -f "), line
    subprocess.run(["sh", "-c", fix], check=True, capture_output=True, timeout=20)
    assert kh.read_text() == ""


def test_ct_that_does_not_exist(capsys, testbed) -> None:
    rc, _, err, _ = doctor(capsys, *bed_flags(testbed), "--ct", "9999")
    line = one_line(err)
    assert rc == 2
    assert "container 9999 does not exist" in line and "pct list" in line


def test_ct_stopped(capsys, testbed, ct: int) -> None:
    testbed.ct_stop(ct)
    rc, _, err, _ = doctor(capsys, *bed_flags(testbed), "--ct", str(ct))
    line = one_line(err)
    assert rc == 2
    assert f"container {ct} on" in line and "is stopped" in line and f"pct start {ct}" in line


@pytest.mark.skipif(shutil.which("pct") is not None, reason="this machine has a pct")
def test_pct_missing_means_not_proxmox(capsys) -> None:
    rc, _, err, _ = doctor(capsys, "--local", "--ct", "200")
    line = one_line(err)
    assert rc == 2
    assert "`pct` not found" in line and "use without --ct on a plain GPU server" in line


def test_invalid_config_file_names_the_line(capsys, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('host = "h"\nct = 200\n[ui]\ninterval = = 1\n')
    rc, _, err, _ = doctor(capsys, "--config", str(cfg))
    line = one_line(err)
    assert rc == 2 and f"{cfg}:4" in line and "invalid TOML" in line


def test_unknown_config_key_names_key_and_line(capsys, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('host = "h"\n\n[ssh]\nconect_timeout = 5\n')
    rc, _, err, _ = doctor(capsys, "--config", str(cfg))
    line = one_line(err)
    assert rc == 2 and f"{cfg}:4: `ssh.conect_timeout`: unknown key" in line
    assert "connect_timeout" in line  # the fix lists the right spelling


def test_wrong_type_in_config_names_key_and_line(capsys, tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('host = "h"\nct = "200"\n')
    rc, _, err, _ = doctor(capsys, "--config", str(cfg))
    line = one_line(err)
    assert rc == 2 and f"{cfg}:2: `ct`: must be an integer" in line
