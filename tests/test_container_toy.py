"""A new container kind is its module and its KINDS line (issue 35): the toy
kind of tests/toykind.py, registered by the one line in `toy_kind` below,
is read from its spec, owns its cgroups, answers for its main process and
is listed and watched on a real host (sshd, tmux, the `toybox` stand-in)
by code that never heard of it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import gputui.containers as containers
from gputui.config import Settings
from gputui.containers import cgroup_owner, container_for, parse_container
from gputui.host.hostwatch import HostWatch
from gputui.model import ConnectionState, Snapshot
from gputui.remote import mainproc
from gputui.verbs import why_not
from helpers import until
from testbed import Testbed
from toykind import Toy

_ID = "c0ffee" * 8


@pytest.fixture
def toy_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(containers, "KINDS", (*containers.KINDS, Toy))  # its KINDS line


def test_the_toy_kind_is_read_from_its_spec_and_owns_its_cgroups(toy_kind: None) -> None:
    assert parse_container("toy:box") == Toy("box") == container_for("toy:box")
    owner = cgroup_owner(f"/toybox.slice/toybox-{_ID}.scope")
    assert owner is not None and (owner.kind, owner.ident, owner.number) == ("toy", _ID, None)
    assert cgroup_owner("/lxc/200/ns/toybox-" + _ID + ".scope").number == 200  # CT's first
    assert [k.__name__ for k in containers.listing_kinds()][-1] == "Toy"


def test_the_toy_kind_answers_for_its_main_process(toy_kind: None) -> None:
    toy = Toy("box")
    assert not mainproc.has_logs(toy) and mainproc.restart_argv(toy) is None
    with pytest.raises(ValueError, match="toybox box keeps no log"):
        mainproc.logs_argv(toy, None)
    snap = Snapshot(0.0, "h", container=toy, connection=ConnectionState.CONNECTED)
    why = why_not("relaunch", snap, read_only=False)
    assert why == "no session selected"


@pytest.fixture(scope="module")
def toy_host() -> Iterator[Testbed]:
    tb = Testbed(container_tool=False, docker=False).start()
    try:
        toybox = str(tb.bin_dir / "toybox")
        for name, state in (("box", "running"), ("idle", "stopped")):
            subprocess.run([toybox, "create", name, state], env=tb.env(), check=True)
        work = Path(tb.workspace) / "toy"
        work.mkdir()
        loop = "while true; do echo step; sleep 0.5; done > train.log"
        tmux = ["tmux", "new-session", "-d", "-s", "train", "-c", str(work), loop]
        r = subprocess.run(
            [toybox, "exec", "box", "--", *tmux], env=tb.env(), capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        yield tb
    finally:
        subprocess.run(
            [str(tb.bin_dir / "toybox"), "exec", "box", "--", "tmux", "kill-server"],
            env=tb.env(),
            capture_output=True,
        )
        tb.stop()


async def test_a_host_of_toy_containers_is_listed_and_its_runs_watched(
    toy_kind: None, toy_host: Testbed
) -> None:
    watch = HostWatch(Settings(**toy_host.transport_kwargs()), list_period_s=1.0)
    await watch.start()
    try:
        await until(
            lambda: watch.view.complete and len(watch.view.containers) == 2,
            timeout=60,
            what="a complete host view",
        )
        rows = {c.id: c for c in watch.view.containers}
        assert sorted(rows, key=str) == ["toy:box", "toy:idle"], rows
        assert rows["toy:box"].status == "running" and rows["toy:idle"].status == "stopped"
        assert watch.names == {"toy:box": "box", "toy:idle": "idle"}
        await until(
            lambda: {c.id: c for c in watch.view.containers}["toy:box"].sessions == ["train"],
            timeout=30,
            what="the toy container's tmux session",
        )
        mon = watch.monitor_for("toy:box")
        assert mon is not None and mon.target.container == Toy("box")
        assert watch.monitor_for("toy:idle") is None  # a stopped one gets no monitor
    finally:
        await watch.stop()
