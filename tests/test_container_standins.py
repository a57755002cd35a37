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


MAIN = 'echo "run $(cat /proc/1/cmdline | wc -c)"; echo err >&2; trap "exit 0" TERM; while :; do sleep 0.1; done'


def test_docker_logs_is_the_json_file_driver_kept_across_restart(testbed) -> None:
    """A container whose main process is the run: `docker logs` gives its
    stdout and stderr apart (-t: RFC3339 with 9 digits), --since filters by
    time, restart keeps the old lines and appends the new run's, and
    `logs -f` follows until the container stops."""
    import re
    import subprocess
    import time

    name = f"sb{os.getpid()}m{next(_names)}"
    testbed.container_create("docker", name, "sh", "-c", MAIN)
    try:
        deadline = time.monotonic() + 15
        while "err" not in testbed._tool("docker", "logs", name).stderr:
            assert time.monotonic() < deadline, "no output in docker logs"
            time.sleep(0.05)
        res = testbed._tool("docker", "logs", "-t", name)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z run \d+\n", res.stdout)
        assert re.fullmatch(r"\S+ err\n", res.stderr)
        first = res.stdout.split()[0]
        started = testbed._tool(
            "docker", "inspect", "-f", "{{.State.StartedAt}}", name
        ).stdout.strip()
        t0 = time.monotonic()
        testbed._tool("docker", "restart", name)  # sh handles SIGTERM: no 10 s wait
        assert time.monotonic() - t0 < 8
        again = testbed._tool("docker", "inspect", "-f", "{{.State.StartedAt}}", name).stdout
        assert again.strip() > started
        deadline = time.monotonic() + 15
        while testbed._tool("docker", "logs", name).stderr.count("err") < 2:
            assert time.monotonic() < deadline, "the restarted run's output is not in the log"
            time.sleep(0.05)
        lines = testbed._tool("docker", "logs", "-t", name).stdout.splitlines()
        assert len(lines) == 2 and lines[0].split()[0] == first  # the old line kept
        since = testbed._tool("docker", "logs", "--since", lines[1].split()[0], name).stdout
        assert since.splitlines() == [lines[1].split(None, 1)[1]]
        res = testbed._tool("docker", "logs", "--tail", "1", name)
        assert (res.stdout, res.stderr) == ("", "err\n")  # the last line of both streams
        res = testbed._tool("docker", "logs", "--since", "tomorrow", name, check=False)
        assert res.returncode == 1 and "cannot parse" in res.stderr
        follow = subprocess.Popen(
            [str(testbed.bin_dir / "docker"), "logs", "-f", "--since", "1s", name],
            env=testbed.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        testbed.container_exec("docker", name, ["sh", "-c", "echo late > /proc/1/fd/1"])
        testbed.container_stop("docker", name)
        out, _ = follow.communicate(timeout=20)  # -f ends when the container stops
        assert out.decode().splitlines()[-1] == "late"
    finally:
        testbed.container_stop("docker", name)


def test_kubectl_logs_of_a_pods_main_process(testbed) -> None:
    import time

    testbed.kubeconfig()
    pod = f"lp{os.getpid()}x{next(_names)}"
    testbed._containers.add(("kubectl", f"ml/{pod}"))
    testbed._tool("kubectl", "stand-in-pod", "ml", pod, "main", "sh", "-c", MAIN)
    try:
        deadline = time.monotonic() + 15
        while "err" not in testbed._tool("kubectl", "logs", "-n", "ml", pod).stdout:
            assert time.monotonic() < deadline, "no output in kubectl logs"
            time.sleep(0.05)
        out = testbed._tool("kubectl", "-n", "ml", "logs", "--timestamps", pod, "-c", "main").stdout
        assert sorted(ln.split(None, 1)[1][:3] for ln in out.splitlines()) == ["err", "run"]
        res = testbed._tool("kubectl", "logs", "-n", "ml", pod, "-c", "side", check=False)
        assert res.returncode == 1 and "container side is not valid for pod" in res.stderr
    finally:
        testbed.container_stop("kubectl", f"ml/{pod}")
