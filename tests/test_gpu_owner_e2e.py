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

import json
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
from gputui.remote.agent_client import AGENT_MARKER, BOOTSTRAP, source_line

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


def _ct_pid(host_pid: int) -> int:
    """Its PID in its own PID namespace (the last NSpid field)."""
    for line in Path(f"/proc/{host_pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    raise AssertionError(f"no NSpid for {host_pid}")


@pytest.mark.timeout(60)
def test_an_unprivileged_cts_root_is_root_to_the_agent_not_the_hosts_uid(
    testbed: Any, unprivileged_ct: int
) -> None:
    """An unprivileged CT (the stand-in pct's `unprivileged: 1`: a user
    namespace of its own, CT uid 0 = host uid 100000) runs a process of its
    root. The host sees uid 100000; the agent, started in the CT as gputui
    starts it (its bootstrap, its source on stdin) and asked its `owners` op
    by the process's CT PID, answers the CT's uid 0, root — what the GPU pane,
    the advice and `doctor --json` then say.

    The agent is started here by `pct exec` directly: gputui itself does not
    run the stand-in CT's python3 as root (the host's /usr/bin belongs to
    the host's root, nobody in this CT; a real unprivileged CT's rootfs is
    its own root's), and says so in one line — asserted at the end."""
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
    ct_pid = _ct_pid(holder)
    assert ct_pid != holder
    asks = [{"id": 1, "op": "owners", "pids": [ct_pid]}, {"id": 2, "op": "hello"}]
    stdin = source_line().decode() + "".join(json.dumps(a) + "\n" for a in asks)
    r = testbed.ct_exec(ct, ["python3", "-I", "-S", "-c", BOOTSTRAP, AGENT_MARKER], input=stdin)
    answers = {a["id"]: a for a in map(json.loads, r.stdout.splitlines())}
    assert set(answers) == {1, 2} and all(a["ok"] for a in answers.values()), (r.stdout, r.stderr)
    owners = answers[1]["result"]
    assert owners["owners"] == [{"pid": ct_pid, "uid": 0, "user": "root"}], owners
    assert owners["uid"] == 0 and answers[2]["result"]["uid"] == 0  # the agent: the CT's root too
    # the same op on the host (the host's PID) reads the host's uid: why it is asked in the CT
    assert agent_mod.pid_owners([holder])["owners"][0]["uid"] == HOST_ROOT
    # gputui's own start of the agent there: refused in one line, not run as root
    testbed.set_gpus({"gpus": [sc.gpu(0, 30 * 1024, 0)], "apps": [sc.app(holder, 0, 30 * 1024)]})
    d = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"))
    assert d.doc is not None, d.stdout + d.stderr
    assert "is not root's alone" in d.doc["facts"]["agent_error"], d.doc["facts"]
