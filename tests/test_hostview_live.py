"""The host view end to end: real sshd, real tmux, real runs in stand-in CTs.

Host "proxmox": three running containers (a healthy run, a buffered one, a
dead session) and a stopped one, CTs in `/lxc/<n>` cgroups as on Proxmox
VE, 8 stand-in GPUs listing the runs' real host PIDs and 20 GiB held by a
PID that is gone. Host "plain": a second sshd with no container tool, one
run in tmux on the host itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import hostscene
import scenarios
from gputui.config import Settings
from gputui.host.hostwatch import HostWatch
from gputui.host.view import HostView
from gputui.monitor import new_lines
from gputui.remote.agent_client import AGENT_MARKER
from helpers import until
from testbed import Testbed

FIRST_CT = 340


@pytest.fixture(scope="module")
def proxmox() -> Iterator[tuple[Testbed, hostscene.HostScene]]:
    tb = Testbed().start()
    tb.use_cgroups()
    try:
        scene = hostscene.build(tb, FIRST_CT)
        yield tb, scene
    finally:
        tb.stop()


@pytest.fixture(scope="module")
def plain() -> Iterator[tuple[Testbed, scenarios.Run]]:
    root = Path(__import__("tempfile").mkdtemp(prefix="gputui-plain-", dir="/var/tmp"))
    tmux_dir = root / "tmux"
    tmux_dir.mkdir()
    tb = Testbed(root, extra_env={"TMUX_TMPDIR": str(tmux_dir)}, container_tool=False).start()
    env = {
        "PATH": scenarios.CLEAN_PATH,
        "HOME": "/root",
        "TERM": "xterm",
        "TMUX_TMPDIR": str(tmux_dir),
    }
    try:
        run = scenarios.prepare(tb, 0, "plain", "job")
        cmd = scenarios.tee_command(run.path("start_healthy.sh"), str(run.log))
        subprocess.run(
            ["tmux", "new", "-d", "-s", "job", "-c", str(run.dir), cmd], env=env, check=True
        )
        pid = scenarios.wait_python(run, "train.py")
        tb.set_gpus(
            {
                "gpus": [scenarios.gpu(0, 30_000, 96), scenarios.gpu(1, 0, 0)],
                "apps": [scenarios.app(pid, 0, 29_500)],
            }
        )
        yield tb, run
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        tb.stop()


def settings(tb: Testbed) -> Settings:
    return Settings(**tb.transport_kwargs())


def agents_left(tb: Testbed) -> list[int]:
    """Host PIDs of gputui agents started through this test bed, still alive."""
    marker = f"GPUTUI_STANDIN_STATE={tb.state_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
            env = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if AGENT_MARKER.encode() in argv and marker in env.split(b"\0"):
            found.append(int(entry))
    return found


def by_ct(view: HostView) -> dict[int | None, Any]:
    return {c.id: c for c in view.containers}


@pytest.mark.timeout(240)  # its waits: 60 + 30 + 60 s at most
async def test_three_containers_every_gpu_and_who_holds_it(
    proxmox: tuple[Testbed, hostscene.HostScene],
) -> None:
    tb, scene = proxmox
    healthy, buffered, dead = scene.healthy, scene.buffered, scene.dead
    watch = HostWatch(settings(tb), list_period_s=1.0)
    await watch.start()
    try:
        await until(lambda: watch.view.complete, timeout=60, what="a complete host view")
        # argv alone no longer says "buffered" (issue 31): the run's first
        # 8 KiB block (~2 s) shows it
        await until(
            lambda: by_ct(watch.view)[buffered.ct].health == "buffered",
            timeout=20,
            what="the buffered run's first block",
        )
        view = watch.view
        rows = by_ct(view)
        assert view.containers_known is True
        assert [c.id for c in view.containers] == scene.cts
        assert (rows[healthy.ct].health, rows[healthy.ct].sessions) == ("ok", ["train"])
        assert (rows[buffered.ct].health, rows[buffered.ct].sessions) == ("buffered", ["sft"])
        assert "block-buffered" in rows[buffered.ct].why
        assert (rows[dead.ct].health, rows[dead.ct].sessions) == ("dead", ["eval"])
        assert (rows[scene.stopped_ct].status, rows[scene.stopped_ct].health) == (
            "stopped",
            "stopped",
        )
        assert rows[healthy.ct].gpus == [0, 1] and rows[buffered.ct].gpus == [2, 3]
        await until(
            lambda: all(h.session for g in watch.view.gpus[:4] for h in g.holders),
            timeout=30,
            what="the sessions of the GPU holders",
        )
        gpus = watch.view.gpus
        assert len(gpus) == hostscene.GPUS
        for index, run in ((0, healthy), (1, healthy), (2, buffered), (3, buffered)):
            (h,) = gpus[index].holders
            assert (h.place, h.host_pid, h.session, h.log) == (
                run.ct,
                run.host_pid,
                run.session,
                str(run.log),
            )
            assert h.ct_pid is not None and h.ct_pid != h.host_pid  # its PID inside the CT
            assert gpus[index].util_pct == 97 and not gpus[index].orphaned
        assert gpus[4].orphaned and [h.alive for h in gpus[4].holders] == [False]
        assert not any(g.holders or g.orphaned for g in gpus[5:])

        # Steady state: the host lists its containers again and again, but
        # nothing new is run inside any of them — three lists in a row with
        # no exec. On a loaded machine a container's late start (its agent
        # or log follower, up after the view was complete: loaded CI run z4,
        # one `exec 341`) may fall in the first window; it happens once, a
        # command per poll would be in every window.
        late: list[str] = []
        deadline = time.monotonic() + 60
        while True:
            tb.count_pct_calls()
            await until(lambda: len(tb.pct_calls()) >= 3, timeout=30, what="3 container lists")
            execs = [c for c in tb.pct_call_details() if not c.startswith("list")]
            if not execs:
                break
            late += execs
            assert time.monotonic() < deadline, f"still running commands in the CTs: {late}"
        assert len(late) <= 2 * len(scene.cts), late  # an agent and a follower each, at most
        assert watch.channels <= 8
    finally:
        await watch.stop()
    await until(lambda: not agents_left(tb), timeout=10, what="every agent to exit")


def first_lines(borrowed: Any) -> list[str]:
    """The log lines a run view hears of first, on subscribing (its app's
    messages delivered at once here)."""
    heard: list[str] = []

    def listen(_snap: Any, news: Any) -> None:
        batch = new_lines(news)
        heard.extend(batch.lines if batch is not None else ())

    borrowed.app = SimpleNamespace(call_later=lambda cb, *args: cb(*args))
    borrowed.subscribe(listen)
    borrowed.close()
    return heard


async def test_a_run_view_opened_from_the_host_view_starts_with_the_logs_last_lines(
    proxmox: tuple[Testbed, hostscene.HostScene],
) -> None:
    """Enter on a container: the run view's log shows the log's last lines
    at once. The host watch drained its monitor's lines and threw them away,
    so the view stayed blank until the run wrote again — minutes for a
    buffered run — while its header counted the log's lines (issue 46)."""
    from gputui.ui.hostapp import RunChoice, borrow

    tb, scene = proxmox
    run = scene.healthy
    watch = HostWatch(settings(tb), list_period_s=1.0)
    await watch.start()
    try:
        await until(lambda: watch.view.complete, timeout=60, what="a complete host view")
        mon = watch.monitor_for(run.ct)
        assert mon is not None
        await until(lambda: mon.snapshot.log.path == str(run.log), timeout=30, what="its log")
        await until(  # the host view's own rounds take what the monitor read
            lambda: len(watch.lines_of(run.ct, str(run.log))) >= 3,
            timeout=30,
            what="the log's lines kept by the host view",
        )
        kept = watch.lines_of(run.ct, str(run.log))
        borrowed = borrow(watch, mon, RunChoice(0, run.ct, None))  # no await between
        first = first_lines(borrowed)  # what the run view shows first
        assert first[: len(kept)] == kept
        assert all(line in run.log.read_text() for line in kept[-3:])
        other = borrow(watch, mon, RunChoice(0, run.ct, "another"))
        assert first_lines(other)[: len(kept)] != kept  # another session: not these
        mon.watch_session(run.session)
    finally:
        await watch.stop()


async def test_a_container_that_stops_and_starts_again(
    proxmox: tuple[Testbed, hostscene.HostScene],
) -> None:
    tb, scene = proxmox
    ct = scene.stopped_ct
    watch = HostWatch(settings(tb), list_period_s=0.5)
    await watch.start()
    try:
        await until(lambda: watch.view.complete, timeout=60, what="a complete host view")
        tb.ct_start(ct)
        await until(
            lambda: by_ct(watch.view)[ct].health == "idle", timeout=30, what=f"CT {ct} idle"
        )
        assert watch.monitor_for(ct) is not None
        tb.ct_stop(ct)
        await until(
            lambda: by_ct(watch.view)[ct].health == "stopped", timeout=30, what=f"CT {ct} stopped"
        )
        assert watch.monitor_for(ct) is None  # its agent and log stream are closed
    finally:
        tb.ct_stop(ct)
        await watch.stop()


async def test_a_plain_server_shows_its_sessions_and_gpu_processes(
    plain: tuple[Testbed, scenarios.Run],
) -> None:
    tb, run = plain
    watch = HostWatch(settings(tb))
    await watch.start()
    try:
        await until(lambda: watch.view.complete, timeout=60, what="a complete host view")
        view = watch.view
        assert view.containers_known is False
        (row,) = view.containers
        assert (row.id, row.sessions, row.health, row.gpus) == (None, ["job"], "ok", [0])
        await until(lambda: watch.view.gpus[0].holders[0].session, timeout=30, what="the session")
        (h,) = watch.view.gpus[0].holders
        assert (h.place, h.ct_pid, h.host_pid, h.session, h.log) == (
            None,
            run.host_pid,
            run.host_pid,
            "job",
            str(run.log),
        )
    finally:
        await watch.stop()


@pytest.mark.timeout(180)  # the phases' own limits add up to 125 s
async def test_two_hosts_one_goes_down_and_comes_back(
    proxmox: tuple[Testbed, hostscene.HostScene], plain: tuple[Testbed, scenarios.Run]
) -> None:
    """Host b goes off the network and comes back; host a goes on meanwhile.
    However long b was away, gputui tries again at least every 5 s, so it
    shows b again within seconds of its return, GPU readings included."""
    (a, _), (b, _) = proxmox, plain
    wa, wb = HostWatch(settings(a)), HostWatch(settings(b))

    async def phase(fn: Any, timeout: float, what: str) -> None:
        try:
            await until(fn, timeout=timeout, what=what)
        except AssertionError as err:  # say where each host stood
            raise AssertionError(
                f"{err}:\n{wa.view!r}\n{wb.view!r}\nb's transport: "
                f"{wb.transport.state.value} ({wb.transport.state_detail})"
            ) from None

    await asyncio.gather(wa.start(), wb.start())
    try:
        await phase(lambda: wa.view.complete and wb.view.complete, 50, "both")
        b.host_down()
        await phase(lambda: wb.view.health == "down", 20, "host b down")
        assert wb.view.error
        # The other host goes on: fresh readings keep arriving.
        seen = wa.view.gpus[0].util_pct, wa.feed.state.latest[0].time
        await phase(lambda: wa.feed.state.latest[0].time > seen[1], 10, "host a readings")
        assert wa.view.connection.value == "connected" and wa.view.health != "down"
        # Away long enough for the retries to space out to their longest.
        await phase(lambda: "retry in 5 s" in (wb.view.error or ""), 20, "retries 5 s apart")
        b_readings = wb.feed.state.latest[0].time
        b.host_up()
        await phase(
            lambda: wb.view.connection.value == "connected" and wb.view.health == "ok",
            10,
            "host b back within 10 s",
        )
        await phase(
            lambda: wb.feed.state.latest[0].time > b_readings, 5, "host b's GPU readings again"
        )
    finally:
        await asyncio.gather(wa.stop(), wb.stop())
    await until(lambda: not agents_left(a) and not agents_left(b), timeout=10, what="no agents")


def test_doctor_over_every_target_prints_a_list_and_exits_with_the_worst(
    proxmox: tuple[Testbed, hostscene.HostScene],
    plain: tuple[Testbed, scenarios.Run],
    tmp_path: Path,
) -> None:
    (a, _), (b, _) = proxmox, plain
    config = tmp_path / "gputui.toml"
    config.write_text(
        "".join(
            f'[[targets]]\nhost = "127.0.0.1"\nport = {tb.port}\nuser = "root"\n'
            f'identity_file = "{tb.key_path}"\nknown_hosts = "{tb.known_hosts_path}"\n\n'
            for tb in (a, b)
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env["HOME"] = str(tmp_path)
    argv = [sys.executable, "-m", "gputui", "doctor", "--config", str(config), "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90)
    docs = json.loads(done.stdout)
    assert isinstance(docs, list) and len(docs) == 2, done.stderr
    assert [d["exit_code"] != 2 for d in docs] == [True, True], docs
    assert done.returncode == max(d["exit_code"] for d in docs)
    # the Proxmox host is its host view, as `doctor --host` alone; the plain one its run report
    views = [("host" in d, d["snapshot"] is not None) for d in docs]
    assert views == [(True, False), (False, True)], docs
    b.host_down()
    try:
        down = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90)
    finally:
        b.host_up()
    docs = json.loads(down.stdout)
    assert [d["exit_code"] == 2 for d in docs] == [False, True]
    assert "127.0.0.1" in docs[1]["facts"]["error"]
    assert down.returncode == 2  # the worst: one host could not be inspected


def test_the_cli_host_view_opens_a_run_and_comes_back(
    proxmox: tuple[Testbed, hostscene.HostScene], tmp_path: Path
) -> None:
    """`gputui --host H` in a terminal: the host view, Enter on the first
    container opens its run view, Esc comes back, q quits with 0."""
    import pty
    import select
    import time

    tb, _ = proxmox
    argv = [
        sys.executable, "-m", "gputui", "--host", "127.0.0.1", "--port", str(tb.port),
        "--user", "root", "-i", str(tb.key_path), "--known-hosts", str(tb.known_hosts_path),
        "--config", str(tmp_path / "none.toml"),
    ]  # fmt: skip
    (tmp_path / "none.toml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env.update(HOME=str(tmp_path), TERM="xterm-256color", COLUMNS="150", LINES="40")
    pid, fd = pty.fork()
    if pid == 0:  # the child: gputui on the pty
        os.execve(sys.executable, argv, env)
    seen = bytearray()

    def read_until(word: bytes, timeout: float) -> None:
        start = len(seen)
        deadline = time.monotonic() + timeout
        while word not in seen[start:]:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{word!r} never shown; last: {bytes(seen[-400:])!r}")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                try:
                    seen.extend(os.read(fd, 65536))
                except OSError:
                    break

    try:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
        read_until(b"buffered", 60)  # the host view, with the second CT's word
        os.write(fd, b"\r")
        read_until(b"training process", 60)  # the run view of the first CT
        os.write(fd, b"\x1b")
        read_until(b"containers", 30)  # back in the host view
        time.sleep(0.5)
        os.write(fd, b"q")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            select.select([fd], [], [], 0.2)
            with contextlib.suppress(OSError):
                seen.extend(os.read(fd, 65536))
        else:
            raise AssertionError("gputui did not quit")
        assert os.waitstatus_to_exitcode(status) == 0, bytes(seen[-600:])
        assert b"Traceback" not in seen
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
    assert not agents_left(tb)


def test_doctor_on_a_proxmox_host_is_the_host_view(
    proxmox: tuple[Testbed, hostscene.HostScene], tmp_path: Path
) -> None:
    """`gputui doctor --host H` (no CT) on a host with `pct`: each CT with its
    state, sessions, GPUs and word, in text and JSON, exit code the worst
    word's. It said "container none (plain host)" and "✓ nothing wrong"
    while the CTs' runs held the GPUs."""
    tb, scene = proxmox
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTUI")}
    env["HOME"] = str(tmp_path)
    where = ["127.0.0.1", "-o", f"Port={tb.port}", "-l", "root", "-i", str(tb.key_path)]
    where += ["--known-hosts", str(tb.known_hosts_path)]
    argv = [sys.executable, "-m", "gputui", "doctor", *where]
    done = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120)
    doc = json.loads(done.stdout)
    rows = {c["id"]: c for c in doc["host"]["containers"]}
    assert sorted(rows) == scene.cts, doc
    healthy, buffered, dead = scene.healthy, scene.buffered, scene.dead
    assert (rows[healthy.ct]["health"], rows[healthy.ct]["sessions"]) == ("ok", ["train"])
    assert rows[healthy.ct]["gpus"] == [0, 1] and rows[buffered.ct]["gpus"] == [2, 3]
    assert rows[buffered.ct]["health"] == "buffered"
    assert (rows[dead.ct]["health"], rows[dead.ct]["sessions"]) == ("dead", ["eval"])
    assert (rows[scene.stopped_ct]["status"], rows[scene.stopped_ct]["health"]) == (
        "stopped",
        "stopped",
    )
    holders = doc["host"]["gpus"][0]["holders"]
    assert [(h["ct"], h["session"]) for h in holders] == [(healthy.ct, "train")], holders
    assert doc["exit_code"] == done.returncode == 1, done.stderr  # the worst word: dead
    text = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert text.returncode == 1, text.stderr
    assert "plain host" not in text.stdout and "nothing wrong" not in text.stdout
    assert "connection  connected (round trip" in text.stdout, text.stdout
    line = next(x for x in text.stdout.splitlines() if x.startswith(f"CT {healthy.ct} "))
    assert re.search(r"\brunning +ok +GPUs 0,1 +train$", line), text.stdout
    assert f"worst: dead (CT {dead.ct})" in text.stdout, text.stdout
