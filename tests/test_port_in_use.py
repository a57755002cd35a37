"""A run that could not listen on its port (torch.distributed's store,
29500 by default) because another process holds it — the deploy loop's
"relaunched by hand while the old run still lives" — is named with who
holds it: the line's forms (torch ≥ 2.4's libuv store, torch ≤ 2.3's,
c10d's warnings, any server), the rule's words, the agent's `listeners` op
on real sockets, the monitor's call and its answer in the snapshot, and
end to end on the test bed: an old run holding the port in one tmux
session, a second run failing on it in another, `gputui doctor`.
Each fails on the old code (no such rule, op or field)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import scenarios as sc
from gputui.diagnose import KINDS, diagnose
from gputui.diagnose.ports import port_taken, ports_taken
from gputui.model import Pane, PortHolder, PortsTaken, Session, Severity, Snapshot
from gputui.monitor.feed import Poll
from gputui.monitor.portwatch import READ_EVERY_S, PortWatch, holders_from
from gputui.remote import agent
from helpers import wait_for
from test_diagnose import NOW, run
from testbed import free_port

LIBUV = (
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
    "network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address "
    "already in use"
)
OLD_TORCH = (
    "RuntimeError: The server socket has failed to listen on any local network address. The "
    "server socket has failed to bind to [::]:29501 (errno: 98 - Address already in use). The "
    "server socket has failed to bind to 0.0.0.0:29501 (errno: 98 - Address already in use)."
)
C10D_WARNING = (
    "[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29502 "
    "(errno: 98 - Address already in use)."
)
UVICORN = (
    "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
    "address already in use"
)
BARE = "OSError: [Errno 98] Address already in use"


@pytest.mark.parametrize(
    ("line", "port", "torch"),
    [
        (LIBUV, 29500, True),
        (OLD_TORCH, 29501, True),
        (C10D_WARNING, 29502, True),
        (UVICORN, 8000, False),
        (BARE, None, False),
    ],
)
def test_each_form_of_the_line_names_its_port(line: str, port: int | None, torch: bool) -> None:
    hit = port_taken(line)
    assert hit is not None and hit.port == port and hit.torch is torch


def test_lines_that_only_look_alike_are_not_a_taken_port() -> None:
    for line in (
        "step 100 | loss 2.0 | port 29500",
        "SO_REUSEADDR set: address reuse allowed",
        "connecting to 10.0.0.1:29500 (errno: 111 - Connection refused)",
        "",
    ):
        assert port_taken(line) is None, line


def test_the_newest_line_per_port_comes_first_and_a_portless_one_only_alone() -> None:
    taken = ports_taken([C10D_WARNING, BARE, LIBUV, "step 1"])
    assert [t.port for t in taken] == [29500, 29502]
    assert [t.port for t in ports_taken([BARE])] == [None]


def _holders(session: str | None = "old-run") -> PortsTaken:
    store = PortHolder(29500, 812, ["torchrun", "--nproc_per_node", "8", "train.py"], "root")
    store.ancestors, store.session = [700], session
    worker = PortHolder(29500, 813, ["python3", "train.py"], "root", [812, 700], session)
    return PortsTaken([29500], [store, worker], [], NOW)


def _port_finding(snap: Snapshot) -> Any:
    found = [f for f in diagnose(snap, NOW) if f.kind == "port_in_use"]
    return found[0] if found else None


def test_a_dead_run_names_the_holder_and_its_session_first() -> None:
    snap = run(
        session="dead", dead_status=1, log_tail=("Traceback (most recent call last):", LIBUV)
    )
    snap.ports_taken = _holders()
    findings = [f for f in diagnose(snap, NOW) if f.severity != Severity.INFO]
    f = findings[0]
    assert f.kind == "port_in_use" and f.severity == Severity.ERROR, [x.kind for x in findings]
    assert "could not listen on port 29500" in f.title
    assert "PID 812 (torchrun --nproc_per_node 8 train.py) in session 'old-run'" in f.title
    assert any("PID 812 (root) listens on port 29500" in e for e in f.evidence), f.evidence
    assert any("1 child process(es)" in e for e in f.evidence), f.evidence  # 813, not a holder
    assert "session 'old-run'" in f.fix and "MASTER_PORT=29501" in f.fix
    assert "--master_port 29501" in f.fix
    assert KINDS["port_in_use"].alerts and KINDS["port_in_use"].host_word == "dead"


def test_a_holder_outside_tmux_gets_the_kill_command_if_it_is_yours() -> None:
    snap = run(session="dead", dead_status=1, log_tail=(LIBUV,))
    snap.ports_taken = _holders(session=None)
    f = _port_finding(snap)
    assert "under no tmux session" in " ".join(f.evidence)
    assert "`pct exec 200 -- kill 812`" in f.fix
    assert "leftover" not in f.fix  # outside tmux is not dead (a nohup'd run)


def test_not_asked_unseen_or_free_are_each_said_as_they_are() -> None:
    snap = run(session="dead", dead_status=1, log_tail=(LIBUV,))
    f = _port_finding(snap)  # no agent answer: who is not known
    assert f.title.endswith("another process holds it")
    assert "`pct exec 200 -- ss -ltnp 'sport = :29500'`" in f.fix
    snap.ports_taken = PortsTaken([29500], [], [29500], NOW)
    assert "a process of another user holds it" in _port_finding(snap).title
    snap.ports_taken = PortsTaken([29500], [], [], NOW)
    assert "nothing listens on it now" in _port_finding(snap).title


def test_the_run_itself_holding_the_port_now_is_no_finding() -> None:
    """The line is an earlier attempt's: the watched run (alive) listens now."""
    snap = run(log_tail=(LIBUV, "step 1 | loss 2.0"))
    me = snap.procs[0].pid
    snap.ports_taken = PortsTaken([29500], [PortHolder(29500, me, ["python3", "train.py"])], [], 0)
    assert _port_finding(snap) is None
    snap.ports_taken = _holders()  # someone else: the run goes on, a WARNING
    f = _port_finding(snap)
    assert f is not None and f.severity == Severity.WARNING


def test_the_monitor_asks_only_while_a_line_says_so_and_drops_the_answer_after() -> None:
    t = [0.0]
    watch = PortWatch(clock=lambda: t[0])
    snap = Snapshot(time=0.0, target="t")
    snap.sessions = [Session("old-run", panes=[Pane("old-run", 0, 0, pid=700)])]
    assert watch.call(snap, Poll()) is None and not watch.apply(None, snap, Poll(now=1.0))
    snap.log_tail.extend(["step 1", LIBUV])
    assert watch.call(snap, Poll()) == {"ports": [29500]}
    answer = {
        "listeners": [
            {"port": 29500, "pid": 812, "user": "root", "cmdline": ["torchrun"], "ancestors": [700]}
        ],
        "unseen": [],
    }
    assert watch.apply(answer, snap, Poll(now=5.0))
    assert snap.ports_taken is not None and snap.ports_taken.holders[0].session == "old-run"
    assert watch.call(snap, Poll()) is None  # asked a moment ago
    t[0] += READ_EVERY_S
    assert watch.call(snap, Poll()) is not None
    assert not watch.apply(answer, snap, Poll(now=6.0))  # the same answer: nothing changed
    snap.log_tail.clear()
    snap.log_tail.extend(f"step {n}" for n in range(100))
    assert watch.call(snap, Poll()) is None and watch.apply(None, snap, Poll(now=7.0))
    assert snap.ports_taken is None


def test_an_agent_error_keeps_the_last_answer() -> None:
    snap = Snapshot(time=0.0, target="t")
    assert holders_from(RuntimeError("agent gone"), snap) is None
    assert holders_from({"listeners": [{"pid": "x"}], "unseen": [5]}, snap) == ([], [5])


def test_the_agent_names_a_real_listener_and_its_forked_child(tmp_path: Path) -> None:
    port = free_port()
    script = Path(sc.RUNS / "store_on_port.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, cwd=tmp_path
    )
    try:
        wait_for(lambda: agent.listening_inodes([port]), 10, "the store listening")
        got = wait_for(
            lambda: (
                (r := agent.port_listeners([port]))["listeners"] and len(r["listeners"]) == 2 and r
            ),
            10,
            "the store and its worker",
        )
        by_pid = {h["pid"]: h for h in got["listeners"]}
        assert proc.pid in by_pid, got
        store = by_pid[proc.pid]
        assert store["port"] == port and str(script) in store["cmdline"]
        assert store["ancestors"][0] == os.getpid()
        (child,) = [h for h in got["listeners"] if h["pid"] != proc.pid]
        assert child["ancestors"][0] == proc.pid  # the worker, under the store
        empty = {"listeners": [], "unseen": [], "uid": os.geteuid()}
        assert agent.port_listeners([free_port()]) == empty
        answer = agent.Agent().answer({"id": 1, "op": "listeners", "ports": [port]})
        assert answer["ok"] and len(answer["result"]["listeners"]) == 2
    finally:
        subprocess.run(["pkill", "-f", f"store_on_port.py {port}"], check=False)
        proc.wait(10)


@pytest.mark.timeout(90)
def test_doctor_names_the_old_run_holding_the_port_on_the_test_bed(testbed: Any, ct: int) -> None:
    """CT: session `old-run` holds a port (a store that forked its worker);
    session `relaunch` starts a second run on that port, which fails as
    torch does and dies (remain-on-exit). doctor names the port, the old
    run's PID as the CT sees it and its session, and the way out."""
    port = free_port()
    old = sc.prepare(testbed, ct, "port-old", "old-run")
    sc.launch(testbed, old, f"python3 -u store_on_port.py {port} 2>&1 | tee {old.log}")
    new = sc.prepare(testbed, ct, "port-new", "relaunch")
    wait_for(lambda: old.log.exists() and "step 2" in old.log.read_text(), 20, "the old run")
    sc.launch(
        testbed, new, f"python3 -u store_taken.py {port} 2>&1 | tee {new.log}", remain_on_exit=True
    )
    wait_for(lambda: new.log.exists() and "EADDRINUSE" in new.log.read_text(), 20, "its failure")
    store_pid = int(
        testbed.ct_exec(
            ct, ["pgrep", "-o", "-f", f"^python3 -u store_on_port.py {port}"]
        ).stdout.split()[0]
    )
    time.sleep(0.5)
    flags = ("--json", "--session", "relaunch", "--log", str(new.log))
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags), timeout=60)
    f = r.finding("port_in_use")
    assert f["severity"] == "error", f
    assert f"could not listen on port {port}" in f["title"]
    assert (
        f"PID {store_pid} (python3 -u store_on_port.py {port}) in session 'old-run'" in (f["title"])
    ), f["title"]
    assert f"MASTER_PORT={port + 1}" in f["fix"] and "session 'old-run'" in f["fix"]
    assert r.kinds()[0] == "port_in_use", r.kinds()
    taken = r.doc["snapshot"]["ports_taken"]  # type: ignore[index]
    assert taken["ports"] == [port] and taken["unseen"] == [], taken
    pids = {h["pid"]: h for h in taken["holders"]}
    assert pids[store_pid]["session"] == "old-run" and len(pids) == 2, taken  # + its worker


def test_a_timestamp_is_never_read_as_the_port() -> None:
    stamped = "[2024-05-01 12:34:56,789] ERROR server: [Errno 98] Address already in use"
    hit = port_taken(stamped)
    assert hit is not None and hit.port is None
    assert port_taken("12:34:56 bind 10.0.0.2:6006 failed: address already in use").port == 6006  # type: ignore[union-attr]
    assert port_taken("tensorboard: port 6006 EADDRINUSE").port == 6006  # type: ignore[union-attr]
