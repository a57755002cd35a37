"""The demo's own tmux server starts wherever the state directory is: a
socket path over ~107 bytes made tmux say "File name too long" (the served
demo in a test's deep tmp path never started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gputui.demo.environment import SOCKET_PATH_MAX, DemoEnvironment
from gputui.errors import GputuiError


def test_a_deep_state_directory_still_starts_the_demo_tmux_server(tmp_path: Path) -> None:
    root = tmp_path / ("deep-" * 12) / "gputui" / "demo"
    env = DemoEnvironment(root=root)
    sock = env.tmux_dir / f"tmux-{os.getuid()}" / "default"
    assert len(os.fsencode(sock)) <= SOCKET_PATH_MAX, sock
    env.prepare()
    try:
        env.tmux("new-session", "-d", "-s", "deep", "sleep 30")
        assert env.tmux("has-session", "-t", "deep", check=False).returncode == 0
        assert (env.tmux_dir.stat().st_mode & 0o777) == 0o700
    finally:
        env.tmux("kill-server", check=False)


def test_a_short_state_directory_keeps_its_own_tmux_dir(tmp_path: Path) -> None:
    env = DemoEnvironment(root=tmp_path / "d")
    if len(os.fsencode(tmp_path / "d" / "tmux" / "tmux-0" / "default")) > SOCKET_PATH_MAX:
        pytest.skip("this machine's tmp path is itself too long")
    assert env.tmux_dir == tmp_path / "d" / "tmux"


def test_a_short_dir_someone_else_made_is_refused_in_one_line(tmp_path: Path) -> None:
    env = DemoEnvironment(root=tmp_path / ("deep-" * 12))
    env.tmux_dir.mkdir(mode=0o777)
    os.chmod(env.tmux_dir, 0o777)  # as if planted by another user in /tmp
    try:
        with pytest.raises(GputuiError, match="not a private directory"):
            env.prepare()
    finally:
        env.tmux_dir.rmdir()
