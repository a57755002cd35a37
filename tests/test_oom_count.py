"""The agent's OOM-kill count (issue 22): memory.events / memory.oom_control
of the CT's cgroup and of the run's own, read from real files."""

from __future__ import annotations

from pathlib import Path

from gputui.remote.agent import oom_kill_count


def _tree(tmp_path: Path, pid: int, cgroup_line: str) -> tuple[Path, Path]:
    root, proc = tmp_path / "cg", tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(cgroup_line + "\n")
    return root, proc


def test_v2_the_run_cgroup_count_and_its_files_for_after_it_is_gone(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, 42, "0::/user.slice/train.scope")
    (root / "user.slice" / "train.scope").mkdir(parents=True)
    (root / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n")
    leaf = root / "user.slice" / "train.scope" / "memory.events"
    leaf.write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\noom_group_kill 0\n")
    count, files = oom_kill_count(42, str(root), str(proc))
    assert count == 2 and files == [str(leaf)]
    # the run is gone (no /proc/42): its cgroup is read through the files kept
    (proc / "42" / "cgroup").unlink()
    assert oom_kill_count(42, str(root), str(proc), known=files)[0] == 2
    assert oom_kill_count(42, str(root), str(proc))[0] == 0  # without them: the CT's only


def test_v1_memory_controller_and_nothing_readable(tmp_path: Path) -> None:
    root, proc = _tree(tmp_path, 7, "4:memory:/gputui-run\n0::/")
    (root / "memory" / "gputui-run").mkdir(parents=True)
    (root / "memory" / "gputui-run" / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"
    )
    assert oom_kill_count(7, str(root), str(proc))[0] == 1
    assert oom_kill_count(None, str(tmp_path / "none"), str(proc)) == (None, [])
    # a file outside the cgroup tree is never read for the caller
    outside = tmp_path / "elsewhere"
    outside.write_text("oom_kill 99\n")
    assert oom_kill_count(None, str(root), str(proc), known=[str(outside)])[0] is None
