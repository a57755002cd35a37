"""The pure parts of 'gputui runs as root only what root owns' (issue 21):
the identity drop, the root-owned check's answer, process identities, the
old-log check and the py-spy owner check."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gputui.actions.dump import owned_by
from gputui.actions.procid import ProcId, changed, parse_proc_ids, pinned, proc_id_argv
from gputui.actions.relaunch import log_refusal
from gputui.remote.identity import as_owner, parse_root_owned, root_owned_argv


def test_as_owner_drops_to_the_owner_and_root_needs_no_drop() -> None:
    assert as_owner(1000, 1001, ["py-spy", "dump"]) == [
        "setpriv", "--reuid=1000", "--regid=1001", "--clear-groups", "--", "py-spy", "dump",
    ]  # fmt: skip
    assert as_owner(0, 0, ["gdb"]) == ["gdb"]
    for bad in ((-1, 0), (1, -1)):
        with pytest.raises(ValueError):
            as_owner(*bad, ["x"])


def test_root_owned_check_on_real_files(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the files must be root's")
    tmp_path.chmod(0o755)
    ok = tmp_path / "ok"
    ok.write_text("")
    users = tmp_path / "users"
    users.write_text("")
    os.chown(users, 65534, 65534)
    open_dir = tmp_path / "w"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    (open_dir / "x").write_text("")

    def check(p: Path) -> tuple[str | None, str]:
        res = subprocess.run(root_owned_argv(str(p)), capture_output=True, text=True)
        return parse_root_owned(res.stdout)

    if check(ok)[0] is None:
        pytest.skip(f"a directory above {tmp_path} is not root's alone: {check(ok)[1]}")
    assert check(ok) == (str(ok), "")
    assert check(users) == (None, f"{users} belongs to uid 65534, not root")
    why = f"{open_dir} can be changed by others than root (mode 777)"
    assert check(open_dir / "x") == (None, why)
    assert check(tmp_path / "missing") == (None, "not found")


def test_proc_ids_parse_and_what_changed() -> None:
    me = os.getpid()
    out = subprocess.run(proc_id_argv([me, 999_999_999]), capture_output=True, text=True).stdout
    ids = parse_proc_ids(out)
    assert list(ids) == [me] and ids[me].uid == os.getuid()
    stat = Path(f"/proc/{me}/stat").read_text()
    assert ids[me].start == int(stat.rsplit(") ", 1)[1].split()[19])
    assert os.path.samefile(ids[me].exe, f"/proc/{me}/exe")
    want = pinned(ids)
    assert changed(want, ids) == [] and changed(want, {}) == []  # gone is no change
    other = {me: ProcId(me, ids[me].start + 1, ids[me].uid, ids[me].gid)}
    assert changed(want, other) == [
        f"pid {me} is another process now (started again since the box opened)"
    ]
    assert parse_proc_ids("12\tgone\n\x00junk\t\t\n") == {}


def test_old_log_check() -> None:
    ok = "regular file|1000|1\t/home/u/run"
    assert log_refusal("/home/u/run/t.log", ok, 1000) is None
    assert log_refusal("/x", "none", 1000) is None
    assert log_refusal("/x", "link", 1000) == "a symbolic link"
    assert log_refusal("/x", "fifo|1000|1\t/home/u", 1000) == "not a regular file (fifo)"
    assert log_refusal("/etc/passwd", "regular file|0|1\t/etc", 1000) == (
        "owned by uid 0, not by the run's owner (uid 1000)"
    )
    assert log_refusal("/etc/passwd", "regular file|0|1\t/etc", 0) == "a system file (/etc/passwd)"
    assert log_refusal("/x", "", 0) == "not a regular file (unreadable)"


def test_py_spy_of_the_owner_only_when_the_owner_alone_can_change_it() -> None:
    line = "/home/u/v/bin/py-spy\t{} {}\t{} {}"
    assert owned_by(line.format(1000, 755, 1000, 755), 1000) == "/home/u/v/bin/py-spy"
    assert owned_by(line.format(1000, 755, 0, 755), 1000) == "/home/u/v/bin/py-spy"
    assert owned_by(line.format(1001, 755, 1000, 755), 1000) is None  # another user's file
    assert owned_by(line.format(1000, 775, 1000, 755), 1000) is None  # group may change it
    assert owned_by(line.format(1000, 755, 1001, 755), 1000) is None  # another user's dir
    assert owned_by(line.format(1000, 755, 1000, 1777), 1000) is None  # anyone's dir


def test_a_tmux_socket_is_used_as_its_owner_or_refused_in_one_line() -> None:
    from gputui.actions.plan import ActionError
    from gputui.actions.server import socket_of, socket_owner

    s = "/tmp/tmux-1000/default"
    assert socket_owner(s, "1000 1000|1000 1000 700") == (1000, 1000)
    assert socket_owner(s, "none|1000 1001 700") == (1000, 1001)  # gone: its directory's owner
    assert socket_owner("/tmp/tmux-0/default", "0 0|0 0 700") == (0, 0)
    for answer, why in (
        ("link", "a symbolic link"),
        ("notsock", "not a socket"),
        ("", "could not be read"),
        ("1000 1000|1001 1001 700", "owner uid 1001"),
        ("0 0|1000 1000 700", "not uid 0's alone"),
        ("1000 1000|1000 1000 1777", "mode 1777"),
    ):
        with pytest.raises(ActionError) as err:
            socket_owner(s, answer)
        assert why in str(err.value) and "\n" not in str(err.value), (answer, err.value)
    assert socket_of(["tmux", "-S", s]) == s
    assert socket_of(["/usr/bin/setpriv", "--reuid=1000", "--", "tmux", "-S", s]) is None
    assert socket_of(["tmux"]) is None and socket_of(["tmux", "-L", "x"]) is None
