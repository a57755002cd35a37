"""The container seam (remote/container.py): how each kind is entered, asked
for its status, attached to and named in a fix — and that a new kind is one
class (here a stand-in `docker exec`, run for real through a Target)."""

from __future__ import annotations

import shutil
import sys

import pytest

from gputui.errors import ContainerError
from gputui.model import CtStatus
from gputui.remote.container import Container, Host, ProxmoxLXC, container_for
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target


def test_proxmox_lxc_wraps_with_pct_exec_and_reads_pct_status() -> None:
    c = ProxmoxLXC(200)
    assert c.wrap(["tmux", "ls"]) == ["pct", "exec", "200", "--", "tmux", "ls"]
    assert c.phrase("pip install py-spy") == "pct exec 200 -- pip install py-spy"
    assert c.status_argv() == ["pct", "status", "200"]
    assert (c.words, c.label) == ("CT 200", "ct 200")
    assert c.read_status("status: running\n") == CtStatus.RUNNING
    assert c.read_status("CT 200 not running\n") == CtStatus.STOPPED
    assert c.read_status("Configuration file 'nodes/pve/lxc/200.conf' does not exist") == (
        CtStatus.MISSING
    )
    assert c.read_status("ssh: connection reset") is None
    err = c.tool_missing(127, "sh: 1: pct: not found", "gpu1")
    assert isinstance(err, ContainerError) and "not a Proxmox host" in str(err)
    assert c.tool_missing(0, "", "gpu1") is None
    stopped = c.not_running(CtStatus.STOPPED, "gpu1")
    assert stopped is not None and "`pct start 200`" in str(stopped)
    assert c.not_running(CtStatus.RUNNING, "gpu1") is None


def test_host_is_no_container() -> None:
    h = container_for(None)
    assert isinstance(h, Host) and h.id is None
    assert h.wrap(["ls"]) == ["ls"] and h.phrase("ls") == "ls" and h.status_argv() is None
    assert container_for(201) == ProxmoxLXC(201) and container_for(h) is h


class EnvExec(Container):
    """A stand-in for `docker exec NAME argv`: enters "the container" with
    `env GPUTUI_INSIDE=NAME argv`, so a test can see that argv went in."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def words(self) -> str:
        return f"container {self.name}"

    @property
    def label(self) -> str:
        return f"docker {self.name}"

    def wrap(self, argv: list[str]) -> list[str]:
        return ["env", f"GPUTUI_INSIDE={self.name}", *argv]

    def phrase(self, command: str) -> str:
        return f"docker exec {self.name} {command}"


async def test_a_new_kind_of_container_is_one_class() -> None:
    target = Target(LocalTransport(), EnvExec("trainer"))
    py = shutil.which("python3") or sys.executable
    res = await target.run([py, "-c", "import os; print(os.environ['GPUTUI_INSIDE'])"])
    assert res.ok and res.out.strip() == "trainer"
    host = await target.run_host([py, "-c", "import os; print(os.environ.get('GPUTUI_INSIDE'))"])
    assert host.out.strip() == "None"  # the host itself is not entered
    assert target.label.endswith(" docker trainer") and target.ct is None
    assert await target.container_status() == CtStatus.NONE  # it has nothing to ask
    attach = target.attach_argv(["tmux", "attach-session", "-t", "=run"])
    assert attach[-5:] == ["GPUTUI_INSIDE=trainer", "tmux", "attach-session", "-t", "=run"]


@pytest.mark.parametrize("ct", [200, None])
def test_target_label_names_the_container(ct: int | None) -> None:
    t = Target(LocalTransport(), ct)
    assert t.label == (f"{t.transport.label} ct 200" if ct else t.transport.label)
