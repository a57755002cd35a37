"""The log follower reads with the log owner's hands (issue 34, item 2).

uid 65534 owns the run and its log's directory. Once the follower runs, it
swaps a parent directory of the log for a link to a root-only directory
holding a file of the same name: `tail -F` as root followed the new file
and streamed it (`root:$6$…` of /etc/shadow on screen). Now no byte of the
root-only file reaches the follower's lines, whether tail follows the swap
by itself or the stream is started again (as on the agent's new inode).
A root log below a directory others may write is refused in one line.
Real processes, real files, the real follow script.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import helpers
from gputui.model import LogState
from gputui.monitor.logfollow import LogFollower, follow_argv, not_a_file_error
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

UID = 65534
DROP = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
CANARY = "ROOT-ONLY-CANARY"


@pytest.fixture
async def local() -> AsyncIterator[Target]:
    tr = LocalTransport()
    await tr.connect()
    try:
        yield Target(tr)
    finally:
        await tr.close()


@pytest.fixture
def dirs() -> Iterator[tuple[Path, Path]]:
    """(the user's directory with sub/job.log, root's 0700 directory with a 0600 job.log)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    user = Path(tempfile.mkdtemp(prefix="gfo-", dir="/var/tmp"))
    root = Path(tempfile.mkdtemp(prefix="gfo-root-", dir="/var/tmp"))
    root.chmod(0o700)
    (root / "job.log").write_text(f"{CANARY} root:$6$secret\n")
    (root / "job.log").chmod(0o600)
    user.chmod(0o755)
    os.chown(user, UID, UID)
    subprocess.run([*DROP, "sh", "-c", 'mkdir sub && echo "step 1" > sub/job.log'], cwd=user)
    try:
        yield user, root
    finally:
        shutil.rmtree(user, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


class Seen:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.states: list[LogState] = []

    def on_lines(self, batch: list[str]) -> None:
        self.lines += batch

    def on_state(self, st: LogState) -> None:
        self.states.append(st)


async def test_a_swapped_parent_directory_never_streams_a_root_only_file(
    local: Target, dirs: tuple[Path, Path]
) -> None:
    user, root = dirs
    seen = Seen()
    f = LogFollower(local, str(user / "sub" / "job.log"), seen.on_lines, seen.on_state)
    await f.start()
    try:
        await helpers.until(lambda: "step 1" in seen.lines, 20, "the user's line")
        swap = "mv sub sub.old && ln -s \"$1\" sub && echo 'step 2' >> sub.old/job.log"
        subprocess.run([*DROP, "sh", "-c", swap, "sh", str(root)], cwd=user, check=True)
        for i in range(6):  # root's file grows: a follower on it would see lines
            with open(root / "job.log", "a") as fh:
                fh.write(f"{CANARY} {i}\n")
            await asyncio.sleep(0.3)
            if i == 2:
                opened = f.streams_opened
                f.restart()  # as when the agent's stat sees the new inode
                await helpers.until(lambda o=opened: f.streams_opened > o, 20, "a new stream")
        await asyncio.sleep(1.0)
    finally:
        await f.stop()
    leaked = [ln for ln in [*seen.lines, *f.tail] if CANARY in ln or "root:" in ln]
    assert not leaked, leaked


async def test_a_root_log_below_a_directory_others_may_write_is_refused_in_one_line(
    local: Target, dirs: tuple[Path, Path]
) -> None:
    user, _ = dirs
    open_dir = user / "shared"  # below /var/tmp: anyone may reach it
    open_dir.mkdir()
    open_dir.chmod(0o777)  # not sticky: anyone may swap what is in it
    log = open_dir / "run.log"
    log.write_text(f"{CANARY}\n")
    seen = Seen()
    f = LogFollower(local, str(log), seen.on_lines, seen.on_state)
    await f.start()
    try:
        await helpers.until(lambda: f.state.error is not None, 20, "the refusal")
    finally:
        await f.stop()
    err = f.state.error or ""
    assert "not followed" in err and str(open_dir) in err and "\n" not in err
    assert str(not_a_file_error(str(log), f.state.not_a_file or "", err)).count("\n") == 0
    assert not [ln for ln in seen.lines if CANARY in ln]


def first_bytes(path: Path) -> bytes:
    """The follow script's header and first bytes for `path` (run as root)."""
    p = subprocess.Popen(
        follow_argv(str(path), None, None, batch=False),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        out, _ = p.communicate(timeout=1.5)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out


def test_below_a_directory_only_root_may_pass_root_follows_and_above_it_nobody_else_counts(
    dirs: tuple[Path, Path],
) -> None:
    """A log below root's 0700 directory can be changed by no one else, so
    root follows it whoever owns it; root's 0700 directory inside a user's
    directory can be swapped by that user, so its log is read as the user."""
    user, root = dirs
    sealed = root / "u.log"  # root's 0700 directory, the user's file
    sealed.write_text("sealed line\n")
    os.chown(sealed, UID, UID)
    assert b"sealed line" in first_bytes(sealed)
    private = user / "private"  # the user's directory, root's 0700 one in it
    private.mkdir(mode=0o700)
    (private / "job.log").write_text(f"{CANARY}\n")
    (private / "job.log").chmod(0o600)
    out = first_bytes(private / "job.log")
    assert CANARY.encode() not in out and not out.startswith(b"@gputui ok"), out
