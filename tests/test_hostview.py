"""The host view's pure parts: the host's container list, which container a
GPU process is in, who holds each GPU, one word of health, several hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.collect.nvidiasmi import parse_apps_listing
from gputui.config import HostTarget, Settings, parse_config
from gputui.containers import ContainerListing, ProxmoxLXC
from gputui.errors import ConfigError, GputuiError
from gputui.host.targets import host_settings, wants_host_view
from gputui.host.view import (
    ContainerRow,
    HostView,
    RunIndex,
    container_of_cgroup,
    container_rows,
    gpu_rows,
    health_word,
    host_gpu_processes,
)
from gputui.model import (
    ConnectionState,
    Finding,
    GpuSample,
    GpuState,
    Pane,
    Session,
    Severity,
    Snapshot,
    Tools,
)

# As Proxmox VE 8 prints it: fixed columns, the Lock column usually blank.
PCT_LIST = (
    "VMID       Status     Lock         Name                \n"
    "200        running                 dflash              \n"
    "201        stopped    backup       sft-box             \n"
    "203        running                 eval                \n"
)


def test_the_host_lists_its_containers_as_proxmox_prints_them() -> None:
    assert ProxmoxLXC.read_list(PCT_LIST) == [
        ContainerListing(200, "running", "dflash", ""),
        ContainerListing(201, "stopped", "sft-box", "backup"),
        ContainerListing(203, "running", "eval", ""),
    ]
    assert ProxmoxLXC.read_list("") == []
    assert ProxmoxLXC.list_argv() == ["pct", "list"]
    assert ProxmoxLXC.tool_absent(127, "")
    assert ProxmoxLXC.tool_absent(1, "sh: 1: pct: not found")
    assert not ProxmoxLXC.tool_absent(255, "CT 200 not running")


@pytest.mark.parametrize(
    ("cgroup", "ct"),
    [("/lxc/203", 203), ("/lxc/203/ns", 203), ("-", None), ("/lxc/", None), ("/user.slice", None)],
)
def test_a_cgroup_names_its_container(cgroup: str, ct: int | None) -> None:
    assert container_of_cgroup(cgroup) == ct


LISTING = [
    "4242, python3, 60500, GPU-a",
    "5151, python3, 60500, GPU-b",
    "6161, python, 1000, GPU-b",
    "777, python3, 20000, GPU-c",
    "@gputui rc 0",
    "@gputui pid 4242 /lxc/203 pid:[4026532281] 4242 8",
    "@gputui pid 5151 - pid:[4026532999] 5151 12",
    "@gputui pid 6161 - pid:[4026531836] 6161",
    "@gputui pid 777 - - ",
]


def test_gpu_processes_are_placed_by_cgroup_else_by_pid_namespace() -> None:
    procs = host_gpu_processes(parse_apps_listing(LISTING), {"pid:[4026532999]": 205})
    by_pid = {p.host_pid: p for p in procs}
    assert (by_pid[4242].place, by_pid[4242].ct_pid, by_pid[4242].alive) == (203, 8, True)
    assert (by_pid[5151].place, by_pid[5151].ct_pid) == (205, 12)
    assert (by_pid[6161].place, by_pid[6161].ct_pid) == (None, None)  # a host process
    assert by_pid[777].alive is False  # nvidia-smi still lists it; /proc has no such PID


def test_a_failed_listing_gives_no_processes() -> None:
    assert host_gpu_processes(parse_apps_listing(["boom", "@gputui rc 9"])) == []


def _state(*rows: tuple[int, str, float, float]) -> GpuState:
    st = GpuState()
    for index, uuid, mem, util in rows:
        st.add(
            GpuSample(
                index=index, time=1.0, uuid=uuid, mem_used_mib=mem, mem_total_mib=143771,
                util_pct=util, power_w=600.0,
            )
        )  # fmt: skip
    return st


def test_each_gpu_names_its_holders_session_and_log_and_flags_orphaned_memory() -> None:
    procs = host_gpu_processes(parse_apps_listing(LISTING), {"pid:[4026532999]": 205})
    runs = RunIndex()
    runs.add(203, [5, 8], "train", "/w/train.log")
    st = _state((0, "GPU-a", 61000, 97), (1, "GPU-b", 62000, 95), (2, "GPU-c", 20480, 0))
    rows = gpu_rows(st, procs, runs, plain_host=False)
    a, b, c = rows
    (h,) = a.holders
    assert (h.place, h.ct_pid, h.host_pid, h.session, h.log) == (
        203,
        8,
        4242,
        "train",
        "/w/train.log",
    )
    assert not a.orphaned
    assert [x.place for x in b.holders] == [205, None]
    assert b.holders[0].session is None  # CT 205's run tree is unknown
    assert c.orphaned and c.unowned_mib == 20480  # its only process is gone
    assert [x.alive for x in c.holders] == [False]


def test_on_a_plain_server_the_host_pid_is_the_run_pid() -> None:
    listing = parse_apps_listing(
        ["99, python3, 1000, GPU-a", "@gputui rc 0", "@gputui pid 99 - pid:[1] 99"]
    )
    runs = RunIndex()
    runs.add(None, [99], "train", "/w/log")
    (row,) = gpu_rows(_state((0, "GPU-a", 1500, 90)), host_gpu_processes(listing), runs, True)
    (h,) = row.holders
    assert (h.place, h.ct_pid, h.session) == (None, 99, "train")


def _finding(kind: str, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(kind=kind, severity=severity, title=f"{kind} title")


RUNNING = Snapshot(
    time=0.0, target="t", sessions=[Session("train", panes=[Pane("train", 0, 0, 5)])]
)


@pytest.mark.parametrize(
    ("findings", "word"),
    [
        ([], "ok"),
        ([_finding("buffered_output")], "buffered"),
        ([_finding("busy_but_silent")], "buffered"),
        ([_finding("held_but_idle", Severity.WARNING)], "stalled"),
        ([_finding("held_but_idle", Severity.ERROR)], "hung"),
        ([_finding("progress_stalled")], "stalled"),
        ([_finding("session_dead", Severity.ERROR)], "dead"),
        ([_finding("run_exited", Severity.ERROR), _finding("buffered_output")], "dead"),
        ([_finding("held_but_idle", Severity.ERROR), _finding("busy_but_silent")], "hung"),
        ([_finding("stale_code")], "ok"),
        ([_finding("disk_full", Severity.ERROR), _finding("busy_but_silent")], "full"),
        (
            [_finding("disk_full", Severity.ERROR), _finding("held_but_idle", Severity.ERROR)],
            "full",
        ),
        ([_finding("session_dead", Severity.ERROR), _finding("disk_full", Severity.ERROR)], "dead"),
        ([_finding("disk_full"), _finding("buffered_output")], "stalled"),  # space freed since
        ([_finding("disk_low")], "ok"),
        ([_finding("run_unread")], "starting"),  # its agent lost: not "ok" from old processes
    ],
)
def test_one_word_of_health_comes_from_the_run_views_findings(
    findings: list[Finding], word: str
) -> None:
    got, why = health_word(findings, RUNNING)
    assert got == word
    assert (why == "") == (word == "ok")


def test_no_session_and_no_run_is_idle() -> None:
    assert health_word([], Snapshot(time=0.0, target="t")) == (
        "idle",
        "no tmux session and no run found",
    )
    no_tmux = Snapshot(time=0.0, target="t", tools=Tools(python3="3.11", probed=True))
    assert health_word([], no_tmux) == ("idle", "tmux is not installed: no session can be seen")


def test_container_rows_stopped_starting_and_from_their_monitor() -> None:
    rows = container_rows(
        [(200, "running", "a"), (201, "stopped", "b"), (202, "running", "c")],
        {200: (RUNNING, [_finding("buffered_output")])},
        [],
    )
    assert [(r.id, r.health) for r in rows] == [
        (200, "buffered"),
        (201, "stopped"),
        (202, "starting"),
    ]
    assert rows[0].sessions == ["train"]


def _two_runs(old: Pane, *, new_dead: bool = False) -> Snapshot:
    """A CT with an older session and a newer one (the one its monitor watches)."""
    new = Pane("new", 0, 0, 9, dead=new_dead, dead_status=1 if new_dead else None)
    return Snapshot(
        time=0.0,
        target="t",
        session_name="new",
        sessions=[
            Session("old", created=1.0, panes=[old]),
            Session("new", created=2.0, panes=[new]),
        ],
    )


@pytest.mark.parametrize(
    ("old", "word", "why", "opens"),
    [
        (Pane("old", 0, 0, 5, dead=True, dead_status=1), "dead", "exit status 1", "old"),
        (Pane("old", 0, 0, 5, dead=True, dead_signal=9), "dead", "signal 9", "old"),
        (Pane("old", 0, 0, 5, dead=True), "dead", "exit status unknown", "old"),
        (Pane("old", 0, 0, 5, dead=True, dead_status=0), "ok", "", "new"),  # finished
        (
            Pane("old", 0, 0, 5, dead=True, dead_status=0, start_command="bash s.sh | tee l"),
            "dead",
            "the pipe's (tee's)",
            "old",
        ),
        (Pane("old", 0, 0, 5), "ok", "", "new"),
    ],
)
def test_the_word_is_the_worst_of_the_containers_runs(
    old: Pane, word: str, why: str, opens: str
) -> None:
    """A healthy new session beside a crashed older one is not "ok": the row
    names the older session and Enter opens it."""
    (row,) = container_rows([(200, "running", "a")], {200: (_two_runs(old), [])}, [])
    assert (row.health, row.watched_session) == (word, opens)
    assert why in row.why and (word == "ok") == (row.why == "")
    if word == "dead":
        assert "session old" in row.why


def test_a_dead_newest_session_beside_a_healthy_older_one_is_dead() -> None:
    snap = _two_runs(Pane("old", 0, 0, 5), new_dead=True)
    dead = _finding("session_dead", Severity.ERROR)
    (row,) = container_rows([(200, "running", "a")], {200: (snap, [dead])}, [])
    assert (row.health, row.why, row.watched_session) == ("dead", dead.title, "new")


def test_the_host_health_is_its_worst_and_down_when_the_link_is() -> None:
    view = HostView(label="h", connection=ConnectionState.CONNECTED)
    view.containers = [
        ContainerRow(1, "a", "running", health="ok"),
        ContainerRow(2, "b", "running", health="dead"),
    ]
    assert view.health == "dead"
    view.connection = ConnectionState.RECONNECTING
    assert view.health == "down"


# ------------------------------------------------------------------ several hosts


def test_targets_in_the_config(tmp_path: Path) -> None:
    text = '[[targets]]\nhost = "gpu1"\n\n[[targets]]\nhost = "gpu2"\nport = 2222\nuser = "me"\n'
    s = parse_config(text, tmp_path / "c.toml")
    assert s.targets == [HostTarget("gpu1"), HostTarget("gpu2", port=2222, user="me")]
    hosts = host_settings(s)
    assert [(h.host, h.port, h.user) for h in hosts] == [("gpu1", None, None), ("gpu2", 2222, "me")]
    assert wants_host_view(hosts)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[[targets]]\nport = 22\n", "`host` must name a host"),
        ('[[targets]]\nhost = "a"\nct = 200\n', "unknown key `ct`"),
        ('[[targets]]\nhost = "a"\nport = "22"\n', "`port` must be an integer"),
        ('[[targets]]\nhost = "a"\nport = 70000\n', "out of range"),
        ('[[targets]]\nhost = "-oProxyCommand=x"\n', "`host` must name a host"),
    ],
)
def test_bad_targets_name_the_table_and_the_fix(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text, tmp_path / "c.toml")
    assert "[[targets]] number 1" in str(err.value) and words in str(err.value)


def test_host_flags_win_over_targets_and_pick_the_view() -> None:
    s = Settings(targets=[HostTarget("gpu1")])
    assert [h.host for h in host_settings(s, ["a", "b"])] == ["a", "b"]
    with pytest.raises(GputuiError):
        host_settings(s, ["a", "a"])
    assert wants_host_view([Settings(host="h")])
    assert not wants_host_view([Settings(host="h", ct_id=200)])
    assert not wants_host_view([Settings(host="h", session="train")])
    assert not wants_host_view([Settings(local=True)])


def test_each_host_flag_keeps_its_own_user_and_port(tmp_path: Path) -> None:
    from gputui.cli import main as cli

    empty = tmp_path / "empty.toml"
    empty.write_text("")
    args, s = cli.parse(["--host", "root@a:2222", "--host", "b", "--config", str(empty)])
    hosts = host_settings(s, args.hosts)
    assert [(h.user, h.host, h.port) for h in hosts] == [("root", "a", 2222), (None, "b", None)]
