"""The docker, podman and kubectl stand-ins (tests/standins/docker) behave
like the real CLIs: their flags, error texts and exit codes, and commands run
in a real PID + mount namespace, as the pct stand-in does (issue 26)."""

from __future__ import annotations

import itertools
import os

import pytest

from testbed import Testbed

_names = itertools.count(1)


@pytest.fixture
def box(testbed: Testbed):
    name = f"sb{os.getpid()}x{next(_names)}"
    testbed.container_create("docker", name)
    yield name
    testbed.container_stop("docker", name)


def test_docker_exec_enters_a_real_pid_namespace_with_the_containers_env(testbed, box) -> None:
    res = testbed.container_exec("docker", box, ["sh", "-c", 'echo $$; ls -A /tmp; echo "${FOO-}"'])
    assert res.returncode == 0, res.stderr
    pid, marker = res.stdout.split()[:2]
    assert int(pid) < 100 and marker.startswith(".gputui-container-")  # own PID ns, own /tmp
    res = testbed.container_exec("docker", box, ["cat"], input="through stdin\n")
    assert res.stdout == "through stdin\n"  # -i passes stdin
    res = testbed._tool(
        "docker", "exec", "-e", "FOO=bar", "-w", "/var", box, "sh", "-c", "echo $FOO; pwd"
    )
    assert res.stdout.split() == ["bar", "/var"]
    # the caller's environment does not leak in (docker exec starts from the container's)
    res = testbed._tool("docker", "exec", box, "sh", "-c", "echo ${SSH_CONNECTION-none}")
    assert res.stdout.strip() == "none"


def test_docker_errors_and_exit_codes_are_the_real_ones(testbed, box) -> None:
    res = testbed._tool("docker", "exec", "nope", "true", check=False)
    assert (res.returncode, res.stderr.strip()) == (
        1,
        "Error response from daemon: No such container: nope",
    )
    res = testbed._tool("docker", "exec", box, check=False)
    assert res.returncode == 1 and '"docker exec" requires at least 2 arguments.' in res.stderr
    cid = testbed._tool("docker", "container", "inspect", "-f", "{{.Id}}", box).stdout.strip()
    testbed._tool("docker", "stop", box)
    res = testbed._tool("docker", "exec", box, "true", check=False)
    assert (res.returncode, res.stderr.strip()) == (
        1,
        f"Error response from daemon: container {cid} is not running",
    )
    assert testbed._tool(
        "docker", "container", "inspect", "-f", "{{.State.Status}}", box
    ).stdout == ("exited\n")
    res = testbed._tool("docker", "container", "inspect", "nope", check=False)
    assert res.returncode == 1 and "Error: No such container: nope" in res.stderr
    testbed._tool("docker", "start", box)
    line = testbed._tool(
        "docker", "ps", "--no-trunc", "--format", "{{.ID}}\\t{{.Names}}\\t{{.State}}"
    ).stdout
    assert f"{cid}\t{box}\trunning" in line.splitlines()


def test_podman_says_it_podmans_way(testbed) -> None:
    name = f"pm{os.getpid()}"
    testbed.container_create("podman", name)
    try:
        res = testbed._tool("podman", "exec", "nope", "true", check=False)
        assert res.returncode == 125
        assert (
            res.stderr.strip()
            == 'Error: no container with name or ID "nope" found: no such container'
        )
        testbed._tool("podman", "stop", name)
        res = testbed._tool("podman", "exec", name, "true", check=False)
        assert res.returncode == 125 and res.stderr.strip() == (
            "Error: can only create exec sessions on running containers: container state improper"
        )
    finally:
        testbed.container_stop("podman", name)


def test_kubectl_exec_honours_the_kubeconfig(testbed) -> None:
    testbed.container_create("kubectl", f"ml/trainer-{os.getpid()}/main,sidecar")
    pod = f"trainer-{os.getpid()}"
    try:
        res = testbed._tool(
            "kubectl", "exec", "-i", "-n", "ml", pod, "-c", "main", "--", "sh", "-c", "echo $$"
        )
        assert res.returncode == 0 and int(res.stdout) < 100, res.stderr
        res = testbed._tool("kubectl", "exec", "-n", "ml", "nope", "--", "true", check=False)
        assert (res.returncode, res.stderr.strip()) == (
            1,
            'Error from server (NotFound): pods "nope" not found',
        )
        res = testbed._tool("kubectl", "exec", pod, "--", "true", check=False)  # namespace default
        assert "NotFound" in res.stderr
        res = testbed._tool(
            "kubectl", "--context", "other", "exec", "-n", "ml", pod, "--", "true", check=False
        )
        assert res.stderr.strip() == 'error: context "other" does not exist'
        phase = testbed._tool(
            "kubectl", "get", "pod", "-n", "ml", pod, "-o", "jsonpath={.status.phase}"
        )
        assert phase.stdout == "Running"
        testbed.container_stop("kubectl", f"ml/{pod}")
        res = testbed._tool(
            "kubectl", "exec", "-n", "ml", pod, "-c", "main", "--", "true", check=False
        )
        assert (res.returncode, res.stderr.strip()) == (
            1,
            'error: unable to upgrade connection: container not found ("main")',
        )
    finally:
        testbed.container_stop("kubectl", f"ml/{pod}")


def test_kubectl_without_a_kubeconfig_cannot_reach_a_cluster(testbed, tmp_path) -> None:
    env = {**testbed.env(), "HOME": str(tmp_path)}
    import subprocess

    res = subprocess.run(
        [str(testbed.bin_dir / "kubectl"), "get", "pods"], env=env, capture_output=True, text=True
    )
    assert res.returncode == 1 and "localhost:8080 was refused" in res.stderr
