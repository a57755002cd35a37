"""A run that is its container's main process (no tmux), in a Docker or
Podman container or a pod (issue 26), on the test bed's stand-ins over the
real sshd: its output is the container's log (`docker logs -f -t`,
`kubectl logs -f --timestamps`), followed across a cut link and across a
restart with no gap or repeat; relaunch is `docker restart` (podman
restart), the confirm box says what happens and the log is kept; a pod's
relaunch is refused in one line naming `kubectl delete pod`; the dashboard's
monitor follows the container's log and finds the run as PID 1's tree."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.actions import ActionError, RunSeen, execute, plan
from gputui.config import Settings
from gputui.containers import Container, Docker, KubePod, Podman
from gputui.monitor.containerlog import ContainerLogFollower
from gputui.monitor.engine import Monitor
from gputui.remote.target import Target

PY = os.path.realpath(sys.executable)  # an absolute python3.x the container sees
MAIN = """\
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("started", file=sys.stderr, flush=True)
i = 0
while True:
    print("step %d" % i, flush=True)
    i += 1
    time.sleep(0.05)
"""
# the same run block-buffered (no flush, ~4 KB/s: an 8 KiB block every ~2 s):
# the log shows its buffer, so doctor names it (issue 31: MAIN flushes each
# line, and is no longer called buffered)
MAIN_BUFFERED = MAIN.replace('print("step %d" % i, flush=True)', 'print("step %d" % i)').replace(
    "time.sleep(0.05)", "time.sleep(0.002)"
)
_n = itertools.count(1)


@dataclass
class Box:
    tool: str
    name: str  # as the stand-in knows it (kubectl: NS/POD)
    container: Container


@pytest.fixture(params=["docker", "podman", "pod"])
def box(request: pytest.FixtureRequest, testbed: Any) -> Iterator[Box]:
    kind = request.param
    name = f"m{os.getpid() % 10000}-{next(_n)}"
    if kind == "pod":
        testbed.kubeconfig()
        testbed._containers.add(("kubectl", f"ml/{name}"))
        testbed._tool("kubectl", "stand-in-pod", "ml", name, "main", PY, "-c", MAIN)
        b = Box("kubectl", f"ml/{name}", KubePod(name, "ml", "main"))
    else:
        testbed.container_create(kind, name, PY, "-c", MAIN)
        b = Box(kind, name, (Docker if kind == "docker" else Podman)(name))
    try:
        yield b
    finally:
        testbed.container_stop(b.tool, b.name)


@pytest.fixture
async def target(box: Box, testbed: Any, testbed_commands: None) -> AsyncIterator[Target]:
    transport = testbed.transport()
    await transport.connect()
    try:
        yield Target(transport, box.container)
    finally:
        await transport.close()


class Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def on_lines(self, batch: list[str]) -> None:
        self.lines.extend(batch)

    def steps(self) -> list[str]:
        return [ln for ln in self.lines if ln.startswith("step ")]


def runs_of(lines: list[str]) -> list[list[int]]:
    """The step numbers, split where a run started over (step 0)."""
    runs: list[list[int]] = []
    for ln in lines:
        if ln.startswith("step "):
            i = int(ln.split()[1])
            if i == 0 or not runs:
                runs.append([])
            runs[-1].append(i)
    return runs


def consecutive(run: list[int]) -> bool:
    return run == list(range(run[0], run[0] + len(run)))


async def test_the_containers_log_is_followed_across_a_reconnect(target: Target) -> None:
    seen = Lines()
    f = ContainerLogFollower(target, seen.on_lines, None, clock=time.time)
    await f.start()
    try:
        await helpers.until(lambda: len(seen.steps()) > 20, 30, "lines before")
        assert "started" in seen.lines  # the container's stderr, merged in
        sock = target.transport._socket()  # type: ignore[attr-defined]
        sock.shutdown(2)  # the TCP link dies under asyncssh
        before = len(seen.steps())
        await helpers.until(lambda: len(seen.steps()) > before + 40, 40, "lines after")
        assert target.transport.reconnects >= 1  # type: ignore[attr-defined]
    finally:
        await f.stop()
    (run,) = runs_of(seen.lines)
    assert consecutive(run), run  # no gap, no repeat across the reconnect
    assert f.state.exists and f.state.error is None and f.streams_opened >= 2


def json_log_record(text: str, stream: str, ns: int) -> str:
    """One line of the json-file log driver's file, as dockerd writes it."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"
    return json.dumps({"log": text + "\n", "stream": stream, "time": stamp}) + "\n"


async def test_a_stderr_line_stamped_before_the_stdout_line_ahead_of_it_is_shown(
    testbed: Any, testbed_commands: None
) -> None:
    """dockerd stamps each pipe's line as it reads it, and the two copiers
    race for the log: the file can hold a stderr line stamped before the
    stdout line written ahead of it, or with the same stamp. Each is shown
    once, in the stream and across a reopen (`--since`), none dropped as
    'not after the last stamp seen'."""
    name = f"order{os.getpid() % 10000}-{next(_n)}"
    testbed.container_create("docker", name, PY, "-c", "import time; time.sleep(600)")
    log = testbed.state_dir / "containers" / "docker" / f"{name}.log"
    t = time.time_ns() - 60 * 10**9  # a minute ago: all of it backlog
    first = [("a", "stdout", t + 3000), ("b", "stderr", t + 1000), ("c", "stdout", t + 4000)]
    first += [("x", "stdout", t + 5000), ("x", "stderr", t + 5000), ("y", "stderr", t + 5000)]
    then = [("d", "stderr", t + 4500), ("e", "stdout", t + 6000), ("f", "stderr", t + 5500)]
    with log.open("a") as f:
        f.writelines(json_log_record(*r) for r in first)
    transport = testbed.transport()
    await transport.connect()
    seen = Lines()
    f = ContainerLogFollower(Target(transport, Docker(name)), seen.on_lines, None, clock=time.time)
    try:
        await f.start()
        await helpers.until(lambda: "y" in seen.lines, 30, "the first lines")
        await asyncio.sleep(0.5)  # a line dropped would not come later: none is asked for
        assert seen.lines == ["a", "b", "c", "x", "x", "y"]
        await f.stop()  # the stream ends; these come while it is down
        with log.open("a") as out:
            out.writelines(json_log_record(*r) for r in then)
        await f.start()  # reopened --since: each line once, none lost
        await helpers.until(lambda: "f" in seen.lines, 30, "the lines after the reopen")
        await asyncio.sleep(0.5)
        assert seen.lines == ["a", "b", "c", "x", "x", "y", "d", "e", "f"]
        assert f.streams_opened >= 2 and f.state.error is None
    finally:
        await f.stop()
        await transport.close()
        testbed.container_stop("docker", name)


async def test_a_stopped_containers_log_is_not_sent_again_at_each_reopen(
    testbed: Any, testbed_commands: None
) -> None:
    """The run printed its lines and ended, the container stopped: `docker
    logs -f` prints the log and exits, and the follower reopens it (every
    0.5 s, to see a restart soon). The first reopen sends the last seconds
    again (seenlines.py's window) and none is new, so the next ones start
    from the newest stamp: a line or so each, not the run's last 10 s each
    time (that was 200 lines here, twice a second, for as long as it stays
    stopped)."""
    name = f"ended{os.getpid() % 10000}-{next(_n)}"
    run = "for i in range(200): print('line %d' % i, flush=True)"
    testbed.container_create("docker", name, PY, "-c", run)
    transport = testbed.transport()
    await transport.connect()
    seen = Lines()
    f = ContainerLogFollower(Target(transport, Docker(name)), seen.on_lines, None, clock=time.time)
    try:
        await f.start()
        await helpers.until(lambda: f.streams_opened >= 5, 60, "the first reopens")
        before = f.seen.resent  # the window was sent again once (or twice, where the
        # first stream ended before the last lines were in the log: the next brought them)
        await helpers.until(lambda: f.streams_opened >= 8, 60, "three reopens more")
        assert seen.lines == [f"line {i}" for i in range(200)]  # each once
        assert f.seen.resent - before <= 4, (before, f.seen.resent)  # its last line, each
    finally:
        await f.stop()
        await transport.close()
        testbed.container_stop("docker", name)


async def test_relaunch_is_docker_restart_with_the_log_kept(
    box: Box, target: Target, testbed: Any, tmp_path: Path
) -> None:
    if box.tool == "kubectl":
        with pytest.raises(ActionError) as err:
            await plan("relaunch", target, Settings(), RunSeen())
        said = str(err.value)
        assert "\n" not in said and "starts over only in a new pod" in said
        assert f"kubectl delete pod -n ml {box.name.split('/')[1]}" in said
        assert "its controller" in said and "log goes with it" in said
        return
    seen = Lines()
    f = ContainerLogFollower(target, seen.on_lines, None, clock=time.time)
    await f.start()
    try:
        await helpers.until(lambda: len(seen.steps()) > 10, 30, "the first run's lines")
        p = await plan("relaunch", target, Settings(), RunSeen())
        assert p.title == f"Restart {box.tool} container {box.name} (the run is its main process)?"
        assert p.commands == [[box.tool, "restart", "-t", "10", box.name]]
        text = p.display
        assert f"SIGTERM to its main process (PID 1: `{PY} -c" in text, text
        assert "SIGKILL after 10 s" in text and "starts again with the same command" in text
        assert f"its log is kept: `{box.tool} logs {box.name}` still holds the old run's" in text
        result = await execute(target, p, audit_file=tmp_path / "audit.log")
        assert result.ok, result.summary
        assert "the log is kept" in result.summary
        await helpers.until(
            lambda: len(runs_of(seen.lines)) == 2 and len(runs_of(seen.lines)[1]) > 10,
            40,
            "the new run's lines",
        )
    finally:
        await f.stop()
    old, new = runs_of(seen.lines)
    assert old[0] == 0 and consecutive(old) and consecutive(new) and new[0] == 0
    assert seen.lines.count("started") == 2  # each run's stderr, once
    logs = testbed._tool(box.tool, "logs", box.name)
    assert logs.stderr.count("started") == 2 and logs.stdout.startswith("step 0\nstep 1\n")


async def test_the_monitor_follows_the_containers_log(box: Box, target: Target) -> None:
    """No --session, no --log: the monitor's log is the container's, and the
    run is PID 1's tree (its Python process)."""
    if box.tool == "podman":
        pytest.skip("the same path as docker; once is enough for the monitor")
    where = {"docker": box.name} if box.tool == "docker" else {"pod": f"{box.name}/main"}
    mon = Monitor(target, Settings(interval=0.5, **where))
    snap = mon.snapshot
    await mon.start()
    try:
        await helpers.until(
            lambda: any(ln.startswith("step ") for ln in snap.log_tail), 40, "the log"
        )
        words = (
            f"docker logs {box.name}"
            if box.tool == "docker"
            else f"kubectl logs -n {box.name.replace('/', ' ')} -c main"
        )
        assert snap.log.path == words
        await helpers.until(
            lambda: any(p.pid == 1 and p.is_python for p in snap.procs), 40, "the run"
        )
        assert snap.run_found_by == "log"
    finally:
        await mon.stop()


@pytest.mark.timeout(150)
async def test_the_dashboard_relaunches_a_main_process_container(
    testbed: Any, testbed_commands: None
) -> None:
    """`gputui --host H --docker NAME` on a run that is the container's main
    process: its log on screen is `docker logs`; r opens the box that says
    what docker restart does, y restarts it and the new run's lines follow
    the old ones in the same view."""
    from gputui.ui.screens.confirm import ConfirmScreen
    from ui_scenarios import SIZE, make_app

    name = f"dash{os.getpid() % 10000}-{next(_n)}"
    testbed.container_create("docker", name, PY, "-c", MAIN)
    try:
        settings = Settings(**testbed.transport_kwargs(), docker=name, interval=0.5)
        app, parts = make_app(settings)
        snap = parts.monitor.snapshot
        async with app.run_test(size=SIZE) as pilot:
            await helpers.until(lambda: "step 3" in snap.log_tail, 40, "the container's log")
            await pilot.press("r")

            def box_text() -> str:
                """The confirm box's text once it is mounted ('' until then)."""
                found = app.screen.query("#confirm-text")
                return (
                    str(found.first().render())
                    if isinstance(app.screen, ConfirmScreen) and found
                    else ""
                )

            # the box opens at once ("reading what it would act on…") and
            # fills in when the plan's reads are done: wait for the plan
            await helpers.until(lambda: "docker restart" in box_text(), 30, "the box's plan")
            shown = box_text()
            assert f"docker restart -t 10 {name}" in shown, shown
            assert "SIGTERM to its main process" in shown and "its log is kept" in shown
            await helpers.yes_once_shown(pilot)
            # The tail keeps 200 lines (10 s of this run): under load the old
            # run's own "step 0" has scrolled out by the restart, so what is
            # asked is the new run's start right after the old run's steps.
            await helpers.until(
                lambda: restarted_after_old_steps(list(snap.log_tail)),
                60,
                "the restarted run's lines after the old run's",
            )
    finally:
        testbed.container_stop("docker", name)


def restarted_after_old_steps(tail: list[str]) -> bool:
    """The tail holds a step of the old run, then the new run's "started"
    (its stderr) and "step 0", in either order: the two pipes race for the
    log, and the stderr line, stamped first, may be written after the
    stdout one (it was dropped as already seen, db41eea)."""
    old = -1  # the last step seen, so far: the old run's
    for i, line in enumerate(tail):
        if line == "step 0" and old >= 0:
            return "started" in tail[old + 1 :]
        if line.startswith("step "):
            old = i
    return False


def test_restarted_after_old_steps_reads_the_order() -> None:
    assert restarted_after_old_steps(["step 41", "step 42", "started", "step 0"])
    assert restarted_after_old_steps(["step 41", "step 42", "step 0", "started", "step 1"])
    assert not restarted_after_old_steps(["step 41", "step 42", "step 0", "step 1"])  # no stderr
    assert not restarted_after_old_steps(["started", "step 0", "step 1"])  # the old run only
    assert not restarted_after_old_steps(["step 41", "started"])  # no step of the new run yet
    # the old run's own "started", late after its first steps, is not the new run's
    assert not restarted_after_old_steps(["step 0", "step 1", "started", "step 2", "step 0"])


@pytest.mark.timeout(150)
def test_doctor_and_relaunch_from_the_command_line(testbed: Any, testbed_commands: None) -> None:
    """`gputui doctor --host H --docker NAME --json` reads the run from the
    container's log and PID 1; `gputui relaunch --docker NAME --yes` restarts it."""
    import json
    import subprocess

    import scenarios as sc

    name = f"cli{os.getpid() % 10000}-{next(_n)}"
    testbed.container_create("docker", name, PY, "-c", MAIN_BUFFERED)
    where = ["--host", "gpuhost", "--config", str(sc.config_file(testbed)), "--docker", name]
    env = sc.doctor_env(testbed)

    def gputui(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "gputui", *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, cwd="/")

    try:
        helpers.wait_for(lambda: "step 5" in testbed._tool("docker", "logs", name).stdout, 30)
        r = gputui("doctor", *where, "--json")
        doc = json.loads(r.stdout)
        snap = doc["snapshot"]
        assert snap["log"]["path"] == f"docker logs {name}", snap["log"]
        assert snap["process"]["pid"] == 1, snap["process"]
        # no -u: the fix is the container's environment, not r (a restart runs the same command)
        found = [f for f in doc["findings"] if f["kind"] == "buffered_output"]
        assert len(found) == 1, (snap["process"]["buffering"], [f["kind"] for f in doc["findings"]])
        (buffered,) = found
        assert not buffered.get("action"), buffered
        assert "docker run -e PYTHONUNBUFFERED=1" in buffered["fix"], buffered
        r = gputui("relaunch", *where, "--yes")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"Restart docker container {name} (the run is its main process)?" in r.stdout
        assert f"ok: restarted docker container {name}" in r.stdout, r.stdout
        assert testbed._tool("docker", "logs", name).stderr.count("started") == 2
    finally:
        testbed.container_stop("docker", name)
