"""No code a user planted runs as root (issue 34, item 3).

uid 65534 owns a directory holding a `base64.py` (which the agent's
bootstrap imports) and a bin/ with its own `python3` and `tmux`, each of
which leaves a mark when it runs. gputui starts its agent and asks for
tmux sessions and tool versions: with that directory as the working
directory and on PYTHONPATH (the host; a python3 first on the host's PATH
is refused, not run), and as the container's own PATH and PYTHONPATH (a
Docker container of the test bed, whose `docker exec` hands the image's
environment on). No mark may appear. Real processes, the stand-in docker.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gputui.containers import Docker
from gputui.monitor.tools import probe_tools
from gputui.remote.agent_client import AgentClient, AgentUnavailable
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

UID = 65534
BASE64 = """\
import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "IMPORTED-base64"), "w").close()
from binascii import a2b_base64 as b64decode, b2a_base64 as b64encode  # noqa
"""
TOOL = """#!/bin/sh
touch "$(dirname "$0")/../RAN-$(basename "$0")-uid$(id -u)"
exec /usr/bin/$(basename "$0") "$@"
"""


@pytest.fixture
def planted() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the point is what root runs")
    d = Path(tempfile.mkdtemp(prefix="gplant-", dir="/var/tmp"))
    (d / "base64.py").write_text(BASE64)
    (d / "bin").mkdir()
    for name in ("python3", "tmux"):
        (d / "bin" / name).write_text(TOOL)
        (d / "bin" / name).chmod(0o755)
    for p in [d, *d.rglob("*")]:
        os.chown(p, UID, UID)
    d.chmod(0o777)  # root's marks land here too
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def marks(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(("IMPORTED", "RAN")))


@pytest.fixture
async def local() -> AsyncIterator[LocalTransport]:
    tr = LocalTransport()
    await tr.connect()
    try:
        yield tr
    finally:
        await tr.close()


async def exercise(target: Target) -> None:
    """What gputui does first in a target: its agent, tmux, the tool versions."""
    client = await AgentClient.start(target, timeout=15)
    try:
        await client.sessions()
        assert client.hello.get("python")
    finally:
        await client.close()
    tools = await probe_tools(target)  # a tmux not root's is named, not run
    assert tools.tmux and tools.python3, tools


async def test_nothing_planted_in_the_working_directory_or_pythonpath_runs_on_the_host(
    planted: Path, local: LocalTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))
    await exercise(Target(local))
    assert marks(planted) == []


async def test_a_python3_first_on_the_hosts_path_that_root_does_not_own_is_not_run(
    planted: Path, local: LocalTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the host the PATH is the admin's own and kept; an interpreter on
    it that another user could change is refused in one line, not run."""
    monkeypatch.setenv("PATH", f"{planted / 'bin'}:{os.environ['PATH']}")
    with pytest.raises(AgentUnavailable) as err:
        await AgentClient.start(Target(local), timeout=15)
    assert "not root's alone" in str(err.value) and "\n" not in str(err.value)
    assert marks(planted) == []


async def test_nothing_planted_in_a_containers_environment_runs_as_root(
    planted: Path, local: LocalTransport, testbed: Any, testbed_commands: None
) -> None:
    name = f"plant{os.getpid() % 10000}"
    env = [f"PATH={planted / 'bin'}:/usr/bin:/bin", f"PYTHONPATH={planted}"]
    testbed._containers.add(("docker", name))
    testbed._tool(
        "docker", "run", "-d", "--name", name, *[a for e in env for a in ("-e", e)], "img"
    )
    try:
        target = Target(local, Docker(name))
        await exercise(target)
        where = await target.run(["sh", "-c", "pwd; id -u"])
        assert where.out.split() == ["/", "0"]  # `docker exec -w / -u 0`, made explicit
    finally:
        testbed.container_stop("docker", name)
    assert marks(planted) == []
