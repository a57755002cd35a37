"""remote/mainproc.py: a container's own log and restart, as argv and text (issue 26)."""

from __future__ import annotations

import pytest

from gputui.actions.restart import is_main_process_relaunch
from gputui.config import RunConfig, Settings
from gputui.containers import Docker, Host, KubePod, Podman, ProxmoxLXC
from gputui.remote.local import LocalTransport
from gputui.remote.mainproc import (
    has_logs,
    is_log_source,
    log_source,
    logs_argv,
    logs_words,
    restart_argv,
    stamp_key,
    stamped_line,
)
from gputui.remote.target import Target


def test_logs_argv_per_kind_merges_stderr_and_resumes_from_a_stamp() -> None:
    merge = ["sh", "-c", 'exec "$@" 2>&1', "gputui-logs"]
    assert logs_argv(Docker("t"), None, 200) == [
        *merge,
        "docker",
        "logs",
        "-f",
        "-t",
        "--tail",
        "200",
        "t",
    ]
    stamp = "2026-12-02T18:00:00.000000001Z"
    assert logs_argv(Podman("t"), stamp)[4:] == [
        "podman",
        "logs",
        "-f",
        "-t",
        "--since",
        stamp,
        "t",
    ]
    pod = KubePod("p-0", "ml", "main", context="prod")
    assert logs_argv(pod, stamp)[4:] == [
        "kubectl", "--context", "prod", "logs", "-f", "--timestamps", "-n", "ml",
        f"--since-time={stamp}", "p-0", "-c", "main",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="keeps no log"):
        logs_argv(ProxmoxLXC(200), None)
    assert logs_words(pod) == "kubectl logs -n ml p-0 -c main"
    assert logs_words(Docker("t")) == "docker logs t"
    assert [has_logs(c) for c in (Docker("t"), pod, ProxmoxLXC(200), Host())] == [1, 1, 0, 0]
    assert log_source(Docker("t")) == "docker logs t" and is_log_source("docker logs t")
    assert is_log_source(log_source(pod)) and not is_log_source("/var/log/x.log")
    assert not is_log_source("docker") and not is_log_source(None)


def test_stamps_split_off_and_compare_whatever_their_digits_and_zone() -> None:
    assert stamped_line("2026-12-02T18:00:00.5Z step 1") == ("2026-12-02T18:00:00.5Z", "step 1")
    assert stamped_line("2026-12-02T18:00:00Z ") == ("2026-12-02T18:00:00Z", "")
    assert stamped_line("Error response from daemon: No such container: t") is None
    assert stamped_line("2026-12-02 18:00:00 not docker's") is None
    a = stamp_key("2026-12-02T18:00:00.5Z")
    assert (
        a == stamp_key("2026-12-02T18:00:00.500000000Z") == stamp_key("2026-12-02T19:00:00.5+01:00")
    )
    assert stamp_key("2026-12-02T18:00:00.123456789Z") < a < stamp_key("2026-12-02T18:00:00.51Z")


def test_restart_is_dockers_and_podmans_only() -> None:
    assert restart_argv(Docker("t")) == ["docker", "restart", "-t", "10", "t"]
    assert restart_argv(Podman("t")) == ["podman", "restart", "-t", "10", "t"]
    assert restart_argv(KubePod("p")) is None and restart_argv(ProxmoxLXC(200)) is None


def test_relaunch_restarts_the_container_only_when_no_tmux_run_is_named() -> None:
    docker = Target(LocalTransport(), Docker("t"))
    assert is_main_process_relaunch(docker, Settings(), None)
    assert not is_main_process_relaunch(docker, Settings(), "train")
    assert not is_main_process_relaunch(docker, Settings(session="train"), None)
    assert not is_main_process_relaunch(
        docker, Settings(run=RunConfig(command="python t.py")), None
    )
    assert not is_main_process_relaunch(Target(LocalTransport(), ProxmoxLXC(200)), Settings(), None)
