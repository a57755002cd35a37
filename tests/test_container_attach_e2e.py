"""attach through a Docker container, a Podman container and a pod, live
(issue 26): the argv the dashboard runs in its terminal — OpenSSH's `ssh -t`
to the test bed's sshd, then `docker exec -it` / `podman exec -it` /
`kubectl exec -it` into the stand-in's namespaces, then `tmux attach` — is
run in a real pseudo-terminal; the tmux server inside the container lists
one attached client, keys typed reach the run, and Ctrl-b d detaches and
ends the whole chain with exit 0."""

from __future__ import annotations

import itertools
import os
import pty
import select
import time
from typing import Any

import pytest

import helpers
from gputui.actions import plan_attach
from gputui.config import Settings
from gputui.containers import Container, Docker, KubePod, Podman
from gputui.remote.target import Target

_n = itertools.count(1)


def _read_for(fd: int, seconds: float) -> None:
    """Drain the terminal a while (ssh and tmux write to it; a full pty would stall them)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                os.read(fd, 65536)
            except OSError:
                return


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["docker", "podman", "pod"])
def test_attach_through_each_kind_in_a_real_terminal(
    kind: str, testbed: Any, testbed_commands: None
) -> None:
    name = f"at{os.getpid() % 10000}-{next(_n)}"
    container: Container
    if kind == "pod":
        testbed.container_create("kubectl", f"ml/{name}/main")
        tool, where, container = "kubectl", f"ml/{name}", KubePod(name, "ml", "main")
    else:
        testbed.container_create(kind, name)
        tool, where = kind, name
        container = Docker(name) if kind == "docker" else Podman(name)
    try:
        start = ["tmux", "new-session", "-d", "-s", "run", "cat > /tmp/typed"]
        assert testbed.container_exec(tool, where, start).returncode == 0
        plan = plan_attach(Target(testbed.transport(), container), Settings(), "run")
        argv = plan.commands[0]
        assert argv[:2] == ["ssh", "-t"] and "exec -it" in argv[-1]
        env = {**testbed.env(), "HOME": str(testbed.home), "TERM": "xterm-256color"}
        env.pop("TMUX", None)
        pid, fd = pty.fork()
        if pid == 0:  # the child: the plan's argv in a terminal, as the dashboard runs it
            os.execvpe(argv[0], argv, env)
        try:

            def clients() -> int:
                listed = ["tmux", "list-clients", "-t", "run", "-F", "#{client_tty}"]
                out = testbed.container_exec(tool, where, listed).stdout
                _read_for(fd, 0.2)
                return len(out.split())

            assert helpers.wait_for(clients, 60, "an attached tmux client") == 1
            os.write(fd, b"hello from the terminal\r")

            def typed() -> str:
                _read_for(fd, 0.2)
                return testbed.container_exec(tool, where, ["cat", "/tmp/typed"]).stdout

            assert helpers.wait_for(typed, 30, "the keys in the run") == "hello from the terminal\n"
            os.write(fd, b"\x02d")  # Ctrl-b d: detach
            deadline = time.monotonic() + 30
            status = None
            while status is None and time.monotonic() < deadline:
                _read_for(fd, 0.1)
                done, st = os.waitpid(pid, os.WNOHANG)
                status = st if done else None
            assert status is not None and os.waitstatus_to_exitcode(status) == 0
            pid = 0
            listed = ["tmux", "has-session", "-t", "run"]
            assert testbed.container_exec(tool, where, listed).returncode == 0  # the run goes on
        finally:
            if pid:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            os.close(fd)
    finally:
        testbed.container_exec(tool, where, ["tmux", "kill-server"])
        testbed.container_stop(tool, where)
