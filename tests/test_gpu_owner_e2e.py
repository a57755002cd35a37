"""End to end, on the test bed (issue 45): a GPU leftover of another uid is
never advised killed.

Root's run (real tmux session "dflash" in the stand-in CT, a real python3
train.py) shares GPU 0 with a leftover of uid 65534: a real zombie (its
parent, started with setpriv in the CT under no tmux, never reaps it), both
listed by HOST PID by the stand-in nvidia-smi. `gputui doctor --json` over
real ssh: the agent in the CT reads the zombie's owner (/proc/PID/status
Uid:), the JSON carries it, and gpu_memory_orphaned names uid 65534 with no
`kill PID` in its fix (it said `pct exec N -- kill PID`)."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

import helpers
import scenarios as sc
from gputui.remote import agent as agent_mod

UID = 65534
ZOMBIE_PARENT = "import os, time\nif os.fork() == 0:\n    os._exit(0)\ntime.sleep(600)\n"


def _user(uid: int) -> str:
    try:
        return f" ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return ""


def _zombie_of(parent_script: str) -> tuple[int, int]:
    """(the parent's host PID, its zombie child's host PID)."""

    def found() -> tuple[int, int] | None:
        for p in sc.host_pids(parent_script):
            if os.stat(f"/proc/{p}").st_uid != UID:
                continue
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
            for k in kids:
                stat = Path(f"/proc/{k}/stat").read_text()
                if stat[stat.rfind(")") + 2 :].startswith("Z"):
                    return p, int(k)
        return None

    got = helpers.wait_for(found, 10, "uid 65534's zombie")
    assert got is not None
    return got


@pytest.mark.timeout(90)
def test_another_uids_gpu_leftover_is_named_never_killed(testbed: Any, ct: int) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to start a process of another uid")
    train = sc.prepare(testbed, ct, "owner-train", "dflash")
    sc.launch(testbed, train, sc.tee_command(train.path("start_training.sh"), str(train.log)))
    pid = sc.wait_python(train, "train.py")
    marker = f"gputui-left-behind-{ct}"  # its argv's last word: how the host finds it
    code = shlex.quote(ZOMBIE_PARENT)
    drop = f"setpriv --reuid={UID} --regid={UID} --clear-groups"
    started = testbed.ct_exec(
        ct, ["sh", "-c", f"cd / && {drop} python3 -c {code} {marker} </dev/null >/dev/null 2>&1 &"]
    )
    assert started.returncode == 0, started.stderr
    _, zombie = _zombie_of(marker)
    testbed.set_gpus(
        {
            "gpus": [sc.gpu(0, 41_500, 98)],
            "apps": [
                {**sc.app(pid, 0, 10_900), "sm": 97},
                sc.app(zombie, 0, 30 * 1024),
            ],
        }
    )
    flags = ["--session", "dflash", "--log", str(train.log), "--stale-after", "60"]
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags, "--json"))
    assert r.doc is not None, r.stdout + r.stderr
    held = {p["host_pid"]: p for p in r.doc["snapshot"]["gpus"]["processes"]}
    left = held[zombie]
    ct_pid = left["ct_pid"]
    assert ct_pid is not None and left["state"] == "Z", held
    assert left["uid"] == UID and held[pid]["uid"] == 0, held  # as the CT sees them
    (f,) = [f for f in r.doc["findings"] if f["kind"] == "gpu_memory_orphaned"]
    assert f"kill {ct_pid}" not in f["fix"], f["fix"]
    assert (
        f"uid {UID}{_user(UID)}'s PID {ct_pid} holds 30.0 GiB on GPU 0 — not this run's user; "
        "ask them or, as root, kill it"
    ) in f["fix"], f["fix"]


HOST_ROOT = 100_000  # an unprivileged CT's root as the host sees it (Proxmox's default idmap)


@pytest.mark.timeout(60)
def test_an_unprivileged_cts_root_is_root_not_the_hosts_uid(
    testbed: Any, unprivileged_ct: int
) -> None:
    """An unprivileged CT (the stand-in pct's `unprivileged: 1`: a user
    namespace of its own, CT uid 0 = host uid 100000, its root an idmapped
    view of the host's /) runs a process of its root that holds GPU memory.
    The host sees uid 100000; `gputui doctor --json` over real ssh, whose
    agent in the CT reads the owner there, says uid 0, root — what the GPU
    pane and the advice then say. The same op on the host reads 100000."""
    if os.geteuid() != 0:
        pytest.skip("needs root to map a user namespace's uids")
    ct = unprivileged_ct
    marker = f"gputui-unpriv-holder-{ct}"
    hold = (
        f"cd / && python3 -c 'import time; time.sleep(600)' {marker} </dev/null >/dev/null 2>&1 &"
    )
    started = testbed.ct_exec(ct, ["sh", "-c", hold])
    assert started.returncode == 0, started.stderr
    (holder,) = helpers.wait_for(lambda: sc.host_pids(marker), 10, "the CT root's process")
    assert os.stat(f"/proc/{holder}").st_uid == HOST_ROOT  # the host's view of the CT's root
    assert agent_mod.pid_owners([holder])["owners"][0]["uid"] == HOST_ROOT  # asked on the host
    testbed.set_gpus({"gpus": [sc.gpu(0, 30 * 1024, 0)], "apps": [sc.app(holder, 0, 30 * 1024)]})
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"))
    assert r.doc is not None, r.stdout + r.stderr
    assert "agent_error" not in r.doc["facts"], r.doc["facts"]
    held = {p["host_pid"]: p for p in r.doc["snapshot"]["gpus"]["processes"]}
    assert held[holder]["ct_pid"] not in (None, holder), held
    assert (held[holder]["uid"], held[holder]["user"]) == (0, "root"), held
