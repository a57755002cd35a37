"""Who holds a GPU, in words (issue 22): another CT by number AND name
("CT 201 (eval-box)", from the host's `pct list`), a Docker container by its
name ("container trainer2", from `docker ps`), and the GPU row's line
'0 held by this run (12.1 GiB) · session eval (PID 491, 5.1 GiB)'."""

from __future__ import annotations

from gputui.containers import Docker, ProxmoxLXC
from gputui.diagnose.holders import holders_of
from gputui.model import GpuProcess, GpuSample, Pane, Proc, Session, Snapshot
from gputui.monitor.gpufeed import parse_apps_block
from gputui.text.owners import container_words
from gputui.ui.widgets.gpus import holder_lines

T = 1_000_000.0
UUID = "GPU-aaa"
DOCKER_ID = "3f2a9c0d1e2b" + "4" * 52

PCT_LIST = """\
VMID       Status     Lock         Name
200        running                 train-box
201        running                 eval-box
202        stopped    backup
"""
DOCKER_PS = f"{DOCKER_ID}\ttrainer2\trunning\n{'9' * 64}\tidle\texited\n"


def snap_with(*gprocs: GpuProcess, container: object = None, **kw: object) -> Snapshot:
    snap = Snapshot(time=T, target="t", container=container, **kw)  # type: ignore[arg-type]
    snap.gpus.add(GpuSample(index=0, time=T, uuid=UUID, mem_used_mib=17_500, mem_total_mib=143_771))
    snap.gpus.processes = list(gprocs)
    return snap


def test_the_hosts_lists_give_each_container_its_name() -> None:
    assert ProxmoxLXC(200).neighbours_argv() == ["pct", "list"]
    assert ProxmoxLXC(200).read_neighbours(PCT_LIST) == {
        "lxc:200": "train-box",
        "lxc:201": "eval-box",
        "lxc:202": "backup",  # a lock column left empty: the third word is the name
    }
    assert Docker("trainer").read_neighbours(DOCKER_PS) == {
        f"docker:{DOCKER_ID}": "trainer2",
        f"docker:{'9' * 64}": "idle",
    }


def test_another_ct_is_named_by_number_and_name() -> None:
    other = GpuProcess(UUID, 7001, 5_200, "python3", in_container=False, ct_id=201)
    assert container_words(other, {"lxc:201": "eval-box"}) == "CT 201 (eval-box)"
    assert container_words(other, {}) == "CT 201"  # not listed (yet): the number alone
    names = ProxmoxLXC(200).read_neighbours(PCT_LIST)
    snap = snap_with(other, container=ProxmoxLXC(200), container_names=names)
    (h,) = holders_of(snap, T)
    assert h.words() == "held by CT 201 (eval-box) (PID 7001)"
    assert h.live_other and not h.leftover


def test_a_docker_container_is_named_by_its_cgroup_id() -> None:
    """The apps listing's cgroup path gives the container ID; `docker ps`
    gives its name; a name-less ID is shown short, as `docker ps` does."""
    lines = [
        "5151, python3, 5200, GPU-aaa",
        "@gputui rc 0",
        f"@gputui pid 5151 /system.slice/docker-{DOCKER_ID}.scope pid:[4026532002] 5151\t9",
    ]
    (gp,), _, _ = parse_apps_block(lines, ct_id=200)
    assert gp.container == f"docker:{DOCKER_ID}" and gp.in_container is False
    names = Docker("trainer").read_neighbours(DOCKER_PS)
    assert container_words(gp, names) == "container trainer2"
    assert container_words(gp, {f"docker:{DOCKER_ID[:12]}": "short"}) == "container short"
    assert container_words(gp, {}) == "docker container 3f2a9c0d1e2b"
    (h,) = holders_of(snap_with(gp, container=ProxmoxLXC(200), container_names=names), T)
    assert h.words() == "held by container trainer2 (PID 5151)" and h.live_other


def test_a_docker_process_on_a_plain_host_is_the_containers_not_a_leftover() -> None:
    """Watching a run on the host itself, every PID is the host's: a GPU
    process of a Docker container there is that container's, never 'a
    process under PID N' or a leftover."""
    gp = GpuProcess(
        UUID, 8123, 5_200, "python3", ct_pid=8123, in_container=True, ancestors=[8100, 1200]
    )
    gp.container = f"docker:{DOCKER_ID}"
    names = {f"docker:{DOCKER_ID}": "trainer2"}
    (h,) = holders_of(snap_with(gp, container_names=names), T)
    assert (h.kind, h.owner) == ("container", "container trainer2")


def test_the_gpu_row_line_names_this_run_and_the_other_session() -> None:
    mine = GpuProcess(UUID, 4242, 12_390, "python3", ct_pid=42, in_container=True)
    other = GpuProcess(UUID, 4491, 5_222, "python3", ct_pid=491, in_container=True, ancestors=[490])
    snap = snap_with(mine, other, container=ProxmoxLXC(200), session_name="train")
    snap.procs = [Proc(pid=42, ppid=41, cmdline=["python3", "train.py"], is_python=True)]
    snap.sessions = [
        Session("train", panes=[Pane("train", 0, 0, 41)]),
        Session("eval", panes=[Pane("eval", 0, 0, 490)]),
    ]
    holders = holders_of(snap, T)
    (line,) = holder_lines(snap.gpus, holders, compact=False)
    assert line.plain == "0 held by this run (12.1 GiB) · session eval (PID 491, 5.1 GiB)"
    # the run alone on its GPU: nothing more to say than the row's '*'
    assert holder_lines(snap_with(mine).gpus, holders[:1], compact=False) == []
