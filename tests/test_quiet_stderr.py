"""A fresh install's stderr is exactly gputui's own lines.

cryptography 51 deprecated DSA, which asyncssh 2.24 names at import: every
command that touched ssh opened with five CryptographyDeprecationWarnings
(ten lines) above gputui's one-line error, and eight tests that read the
first line of stderr failed. Here the installed console script runs in a clean
environment (no PYTHONWARNINGS, a private HOME) through each subcommand's
error path, and its stderr is compared line for line. A reader that closes the
pipe early (`| head`) ends the command quietly: no traceback, no crash file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputui import depwarnings
from testbed import closed_port

GPUTUI = Path(sys.executable).parent / "gputui"
UNKNOWN = (
    "gputui: unknown host 'nonexistent.invalid': not a Host alias in your ssh config and DNS "
    "cannot resolve it — check the name, or add a `Host` entry to ~/.ssh/config (or pass "
    "--ssh-config FILE)"
)
NOT_A_TERMINAL = (
    "gputui: stdout is not a terminal, so no dashboard: here is the report `gputui doctor` "
    "prints (run gputui in a terminal for the dashboard)"
)
T = ["--host", "nonexistent.invalid", "--ct", "200"]


def clean_env(home: Path) -> dict[str, str]:
    """What a new user's shell has: a PATH and a HOME, no Python settings."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "LANG": "C.UTF-8",
    }


def run(args: list[str], home: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPUTUI), *args],
        env=clean_env(home),
        stdin=subprocess.DEVNULL,
        stdout=kw.pop("stdout", subprocess.PIPE),  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )


CASES = [
    (["doctor", "--host", "nonexistent.invalid"], [UNKNOWN]),
    (["nonexistent.invalid"], [NOT_A_TERMINAL, UNKNOWN]),
    (T, [NOT_A_TERMINAL, UNKNOWN]),
    (["doctor", *T], [UNKNOWN]),
    (["relaunch", *T], [UNKNOWN]),
    (["kill", *T, "--yes"], [UNKNOWN]),
    (["dump", *T], [UNKNOWN]),
    (["flush", *T], [UNKNOWN]),
    (["launch", *T], [UNKNOWN]),
    (
        ["history", "--host", "nonexistent.invalid"],
        [
            "gputui: no history database at {state}/gputui/history.sqlite — run `gputui watch` "
            "or the dashboard first; they record the history"
        ],
    ),
    (
        ["alert-test"],
        [
            "gputui: no notification URLs configured — add urls = [...] under [alerts] in the "
            "config (see `gputui config --example`)"
        ],
    ),
    (
        ["config", "--bogus"],
        ["gputui: `gputui config` does not take --bogus — see `gputui config --help`"],
    ),
]


@pytest.mark.parametrize(("args", "want"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_each_commands_error_is_its_own_lines_only(
    args: list[str], want: list[str], tmp_path: Path
) -> None:
    r = run(args, tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [w.format(state=tmp_path / "state") for w in want]


def test_connection_refused_is_one_line(tmp_path: Path) -> None:
    """The path through asyncssh's connect (it is imported and used)."""
    port = closed_port()
    r = run(["doctor", "--host", "127.0.0.1", "-p", str(port), "--ct", "200"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"gputui: connection refused by 127.0.0.1 port {port} — is sshd running there and "
        "is the port right (--port)?"
    ]


@pytest.mark.parametrize(
    "args", [["config", "--example"], ["doctor", "--demo"], ["completion", "bash"]]
)
def test_a_reader_that_leaves_early_ends_the_command_quietly(
    args: list[str], tmp_path: Path
) -> None:
    """`gputui doctor | head -3`: the pipe's reader is gone before gputui
    writes (the worst case of `head`). BrokenPipeError was a crash report."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = run(args, tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    assert r.stderr == ""
    assert r.returncode == 141  # 128 + SIGPIPE, as a shell reports a command SIGPIPE ended
    assert not list((tmp_path / "state").glob("gputui/crash-*"))


def test_verbose_writes_the_quieted_warnings_to_the_debug_log(tmp_path: Path) -> None:
    """-v: every warning goes to the debug log, the ones kept off the terminal too."""
    probe = subprocess.run(
        [sys.executable, "-c", "import asyncssh"],
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
    )
    asyncssh_warns = "CryptographyDeprecationWarning" in probe.stderr  # the lock's versions: yes
    r = run(["-v", "doctor", "--host", "nonexistent.invalid"], tmp_path)
    assert r.stderr.splitlines()[0] == UNKNOWN
    assert len(r.stderr.splitlines()) == 2  # and where the debug log is
    logs = list((tmp_path / "state" / "gputui").glob("debug-*.log"))
    assert len(logs) == 1
    text = logs[0].read_text()
    assert ("CryptographyDeprecationWarning" in text) == asyncssh_warns
    assert ("kept off the terminal" in text) == asyncssh_warns


def test_a_quieted_warning_needs_its_category_and_its_package(tmp_path: Path) -> None:
    """The filter is narrow: the same category from elsewhere, or another
    category from asyncssh, is not quieted."""
    import asyncssh
    from cryptography.utils import CryptographyDeprecationWarning

    inside = str(Path(asyncssh.__file__).parent / "crypto" / "dsa.py")
    assert depwarnings.quieted(CryptographyDeprecationWarning, inside) is not None
    assert depwarnings.quieted(CryptographyDeprecationWarning, str(tmp_path / "x.py")) is None
    assert depwarnings.quieted(UserWarning, inside) is None
    assert depwarnings.quieted(DeprecationWarning, inside) is None


def test_gputuis_own_warnings_still_reach_stderr(tmp_path: Path) -> None:
    code = (
        "import gputui, warnings, sys\n"
        "warnings.warn('gputui says this', UserWarning)\n"
        "from cryptography.utils import CryptographyDeprecationWarning as C\n"
        "import asyncssh, os\n"
        "warnings.warn_explicit('quiet', C, os.path.join(os.path.dirname(asyncssh.__file__), 'x.py'), 1)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=clean_env(tmp_path), capture_output=True, text=True
    )
    assert "gputui says this" in r.stderr
    assert "quiet" not in r.stderr
