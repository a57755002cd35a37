"""The container seam (gputui/containers/): how each kind is entered, asked
for its status, attached to and named in a fix — and that a new kind is one
class (here a stand-in `docker exec`, run for real through a Target)."""

from __future__ import annotations

import shutil
import sys

import pytest

from gputui.containers import (
    CgroupOwner,
    Container,
    Docker,
    Host,
    KubePod,
    Podman,
    ProxmoxLXC,
    cgroup_owner,
    container_for,
    parse_container,
)
from gputui.containers.base import IN_CONTAINER
from gputui.containers.kubernetes import IN_POD
from gputui.errors import ContainerError
from gputui.model import CtStatus
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
    assert target.label.endswith(" docker trainer") and target.ct_id is None
    assert await target.container_status() == CtStatus.NONE  # it has nothing to ask
    attach = target.attach_argv(["tmux", "attach-session", "-t", "=run"])
    assert attach[-5:] == ["GPUTUI_INSIDE=trainer", "tmux", "attach-session", "-t", "=run"]


@pytest.mark.parametrize("ct", [200, None])
def test_target_label_names_the_container(ct: int | None) -> None:
    t = Target(LocalTransport(), ct)
    assert t.label == (f"{t.transport.label} ct 200" if ct else t.transport.label)


# ---------------------------------------------------------------- Docker, Podman, Kubernetes


def test_docker_enters_with_exec_i_and_reads_its_error_texts() -> None:
    c = parse_container("docker:trainer")
    assert isinstance(c, Docker) and c == Docker("trainer") and c.id is None
    assert c.wrap(["tmux", "ls"]) == [
        "docker", "exec", "-i", "-w", "/", "-u", "0", "-e", "LC_CTYPE=C.UTF-8",
        "trainer", *IN_CONTAINER, "tmux", "ls",
    ]  # fmt: skip
    assert c.attach(["tmux", "attach"])[:3] == ["docker", "exec", "-it"]
    assert c.phrase("pip install py-spy") == "docker exec trainer pip install py-spy"
    assert (c.words, c.label, c.spec) == (
        "docker container trainer",
        "docker trainer",
        "docker:trainer",
    )
    assert c.status_argv()[:3] == ["docker", "container", "inspect"]
    assert c.read_status("running\n") == CtStatus.RUNNING
    assert c.read_status("exited\n") == CtStatus.STOPPED
    assert c.read_status("Error response from daemon: No such container: trainer") == (
        CtStatus.MISSING
    )
    assert c.read_status("Error response from daemon: container 3f2a is not running") == (
        CtStatus.STOPPED
    )
    assert c.read_status("ssh: connection reset") is None
    missing = c.not_running(CtStatus.MISSING, "gpu1")
    assert missing is not None and "`docker ps -a`" in str(missing)
    stopped = c.not_running(CtStatus.STOPPED, "gpu1")
    assert stopped is not None and "`docker start trainer`" in str(stopped)
    err = c.tool_missing(127, "sh: 1: docker: not found", "gpu1")
    assert err is not None and "docker" in str(err)


def test_podman_reads_podmans_own_error_texts() -> None:
    c = parse_container("podman:job")
    assert isinstance(c, Podman) and c.wrap(["ls"])[:2] == ["podman", "exec"]
    text = 'Error: no container with name or ID "job" found: no such container'
    assert c.read_status(text) == CtStatus.MISSING
    text = "Error: can only create exec sessions on running containers: container state improper"
    assert c.read_status(text) == CtStatus.STOPPED
    assert (
        c.missing_evidence()[0]
        == 'Error: no container with name or ID "job" found: no such container'
    )
    assert c != Docker("job")


def test_pod_spec_namespace_pod_container_and_context() -> None:
    c = parse_container("pod:ml/trainer-0/main", context="prod")
    assert isinstance(c, KubePod) and (c.namespace, c.pod, c.container) == (
        "ml",
        "trainer-0",
        "main",
    )
    assert c.wrap(["tmux", "ls"]) == [
        "kubectl",
        "--context",
        "prod",
        "exec",
        "-i",
        "-n",
        "ml",
        "trainer-0",
        "-c",
        "main",
        "--",
        "/usr/bin/env",
        "LC_CTYPE=C.UTF-8",
        *IN_CONTAINER,
        "tmux",
        "ls",
    ]
    assert c.phrase("pip install py-spy") == (
        "kubectl --context prod exec -n ml trainer-0 -c main -- pip install py-spy"
    )
    assert c.spec == "pod:ml/trainer-0/main" and c.label == "pod ml/trainer-0/main"
    bare = parse_container("pod:trainer-0")
    assert bare.wrap(["ls"]) == [
        "kubectl",
        "exec",
        "-i",
        "trainer-0",
        "--",
        *IN_POD,
        "ls",
    ]
    assert bare.read_status('Error from server (NotFound): pods "trainer-0" not found') == (
        CtStatus.MISSING
    )
    text = 'error: unable to upgrade connection: container not found ("main")'
    assert c.read_status(text) == CtStatus.STOPPED
    assert c.read_status("Running") == CtStatus.RUNNING
    assert c.read_status("Pending") == CtStatus.STOPPED


@pytest.mark.parametrize(
    "text",
    ["docker:", "docker:-rm", "docker:a b", "lxd:x", "pod:A/B", "pod:a/b/c/d", "0", "podman:$(x)"],
)
def test_a_bad_container_spec_is_one_line(text: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_container(text)
    assert "\n" not in str(err.value) and str(err.value)


DOCKER_ID = "3f2a" + "0" * 56 + "beef"


@pytest.mark.parametrize(
    ("path", "owner"),
    [
        ("/lxc/200/ns/.lxc", CgroupOwner("lxc", "200")),
        ("/lxc.payload.201/init.scope", CgroupOwner("lxc", "201")),
        (f"/system.slice/docker-{DOCKER_ID}.scope", CgroupOwner("docker", DOCKER_ID)),
        (f"/docker/{DOCKER_ID}", CgroupOwner("docker", DOCKER_ID)),
        (
            f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{DOCKER_ID}.scope/container",
            CgroupOwner("podman", DOCKER_ID),
        ),
        (
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1d2c_3e4f_aa00_0000"
            f".slice/cri-containerd-{DOCKER_ID}.scope",
            CgroupOwner("pod", DOCKER_ID, "1d2c-3e4f-aa00-0000"),
        ),
        (
            f"/kubepods/besteffort/pod1d2c3e4f-aa00/{DOCKER_ID}",
            CgroupOwner("pod", DOCKER_ID, "1d2c3e4f-aa00"),
        ),
        ("/user.slice/user-0.slice/session-3.scope", None),
        (f"/system.slice/libpod-conmon-{DOCKER_ID}.scope", None),
        ("/", None),
    ],
)
def test_cgroup_path_names_its_container(path: str, owner: CgroupOwner | None) -> None:
    assert cgroup_owner(path) == owner


def test_a_container_owns_only_its_own_cgroup() -> None:
    assert ProxmoxLXC(200).owns(CgroupOwner("lxc", "200"))
    assert not ProxmoxLXC(200).owns(CgroupOwner("lxc", "2001"))
    d = Docker("trainer", container_id=DOCKER_ID)
    assert d.owns(CgroupOwner("docker", DOCKER_ID))
    assert not d.owns(CgroupOwner("podman", DOCKER_ID))
    assert not Docker("trainer").owns(CgroupOwner("docker", DOCKER_ID))  # name only: cannot tell
    assert Docker(DOCKER_ID[:12]).owns(CgroupOwner("docker", DOCKER_ID))  # a short ID is an ID
    assert container_for("docker:trainer") == Docker("trainer") and container_for(
        "200"
    ) == ProxmoxLXC(200)


# ---------------------------------------------------------------- GPU processes by cgroup

DOCKER_PATH = f"/system.slice/docker-{DOCKER_ID}.scope"
APPS = [
    "4242, python3, 80000, GPU-aaa",
    "5151, python3, 1000, GPU-aaa",
    "6161, python3, 1000, GPU-bbb",
    "7171, python3, 1000, GPU-bbb",
    "@gputui rc 0",
    "@gputui pid 4242 /lxc/200/ns/.lxc pid:[4026532001] 4242\t17",
    f"@gputui pid 5151 {DOCKER_PATH} pid:[4026532002] 5151\t9",
    "@gputui pid 6161 /lxc/²00/ns pid:[4026532003] 6161\t5",
    "@gputui pid 7171 - pid:[4026532002] 7171\t11",
]


def test_the_apps_listing_maps_full_cgroup_paths_of_every_kind() -> None:
    """The apps loop prints the container's whole cgroup path now: a CT's
    `/lxc/200/ns/.lxc` is CT 200, a Docker scope is in no CT, `/lxc/²00` is no CT."""
    from gputui.monitor.gpufeed import parse_apps_block

    procs, _, _ = parse_apps_block(APPS, ct_id=200)
    by = {p.host_pid: p for p in procs}
    assert (by[4242].in_container, by[4242].ct_pid, by[4242].ct_id) == (True, 17, 200)
    assert by[5151].in_container is False and by[5151].ct_id is None
    assert by[6161].ct_id is None
    # watching a Docker container (ct 0): its agent's PID namespace says which
    procs, _, _ = parse_apps_block(APPS, ct_id=0, ct_pid_ns="pid:[4026532002]")
    by = {p.host_pid: p for p in procs}
    assert [by[pid].in_container for pid in (4242, 5151, 7171)] == [False, True, True]
    assert by[5151].ct_pid == 9


def test_the_host_view_knows_a_docker_container_by_its_cgroup_id() -> None:
    """No agent (no python3 in the image): the cgroup's container ID names it."""
    from gputui.collect.nvidiasmi import parse_apps_listing
    from gputui.host.view import host_gpu_processes

    procs = host_gpu_processes(parse_apps_listing(APPS), {}, {DOCKER_ID: "docker:trainer"})
    by = {p.host_pid: p for p in procs}
    assert (by[4242].place, by[5151].place, by[6161].place, by[7171].place) == (
        200,
        "docker:trainer",
        None,
        None,
    )
    assert by[5151].ct_pid == 9
