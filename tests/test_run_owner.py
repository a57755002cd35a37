"""gputui runs as root only what root owns (issue 21, items 2, 3, 7, 8, 9).
In a CT of the test bed, an unprivileged user (uid 65534) owns the run: its
own tmux server, its own venv (an interpreter copy, a py-spy next to it, a
.pth file), its own paths in the start command. Each test checks a thing
root must not do with the run's hands: run the user's py-spy or interpreter,
move a file the start command names, write a secret into a planted FIFO,
act on a PID that is another process now. Real tmux, real processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import helpers
from gputui.actions import (
    RunSeen,
    execute,
    plan_dump,
    plan_flush,
    plan_kill,
    plan_launch,
    plan_relaunch,
)
from gputui.actions import plan as actions_plan
from gputui.actions.plan import ActionError
from gputui.config import RunConfig, Settings
from gputui.remote.agent_client import AgentClient
from gputui.remote.local import LocalTransport
from gputui.remote.target import Target

UID = 65534  # nobody
PY = os.path.realpath(sys.executable)
DROP = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups"]
LOOP = """\
import sys, time
print("started", flush=True)
i = 0
while True:
    print("step %d" % i, flush=True)
    i += 1
    time.sleep(0.2)
"""


@dataclass
class Owned:
    """The user's directory (its venv in v/), its tmux server's socket."""

    ct: int
    dir: Path
    sock: str

    @property
    def tmux(self) -> list[str]:
        return ["tmux", "-S", self.sock]

    @property
    def python(self) -> Path:
        return self.dir / "v" / "bin" / "python3"


@pytest.fixture
async def target(testbed_commands: None, ct: int) -> AsyncIterator[Target]:
    tr = LocalTransport()
    await tr.connect()
    try:
        yield Target(tr, ct)
    finally:
        await tr.close()


@pytest.fixture(params=["commands", "agent"])
async def facts(request: Any, target: Target) -> AsyncIterator[Any]:
    """How a plan reads the run: by commands, or in one request to the agent
    in the CT (actions/facts.py: the dashboard's way), which looks at the old
    log with the owner's hands too."""
    if request.param == "commands":
        yield None
        return
    agent = await AgentClient.start(target, timeout=30)
    try:
        yield helpers.facts_of(agent)
    finally:
        await agent.close()


@pytest.fixture
def owned(testbed: Any, ct: int) -> Iterator[Owned]:
    """A directory of uid 65534 in the shared workspace, with a venv whose
    interpreter is a copy (venv --copies: the user's own binary), and the
    user's tmux server (its socket in that directory)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another user")
    # /var/tmp is shared with the CT; a short path: `ps` cuts its args at 80 columns
    d = Path(tempfile.mkdtemp(prefix="g", dir="/var/tmp"))
    d.chmod(0o755)
    subprocess.run([PY, "-m", "venv", "--copies", "--without-pip", str(d / "v")], check=True)
    (d / "loop.py").write_text(LOOP)
    subprocess.run(["chown", "-R", f"{UID}:{UID}", str(d)], check=True)
    o = Owned(ct, d, str(d / "sock"))
    try:
        yield o
    finally:
        testbed.ct_exec(ct, [*DROP, *o.tmux, "kill-server"])
        shutil.rmtree(d, ignore_errors=True)


def start(testbed: Any, o: Owned, command: str, cwd: str | None = None) -> None:
    """The user's run: `tmux -S SOCK new-session -d -s job COMMAND` as uid 65534."""
    where = cwd or str(o.dir)
    new = ["new-session", "-d", "-s", "job", "-c", where, command]
    # SHELL set: tmux's server takes its default-shell from SHELL, else the
    # passwd entry — nobody's is nologin, and CI runs with no SHELL at all
    env = ["env", f"HOME={o.dir}", "SHELL=/bin/sh"]
    r = testbed.ct_exec(o.ct, [*DROP, *env, *o.tmux, *new])
    assert r.returncode == 0, r.stderr


def start_loop(testbed: Any, o: Owned) -> Path:
    log = o.dir / "job.log"
    start(testbed, o, f"{o.python} -u loop.py 2>&1 | tee job.log; sleep 600")
    helpers.wait_for(lambda: log.exists() and b"step 1" in log.read_bytes(), 20, "the run")
    return log


def ct_pids(testbed: Any, ct: int, needle: str) -> list[int]:
    """The CT's processes whose command line holds `needle`, not the tmux
    server's own (its args name the first session's command: k keeps a
    pane that is the run itself, so the server outlives the run)."""
    out = testbed.ct_exec(ct, ["ps", "-ww", "-eo", "pid=,args="]).stdout
    rows = [ln.split(None, 1) for ln in out.splitlines()]
    return [int(r[0]) for r in rows if len(r) == 2 and needle in r[1] and r[1].split()[0] != "tmux"]


# ------------------------------------------------------------------ 9: a PID is a process


async def test_kill_refuses_a_pid_that_is_another_process_now(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """The box opened on the run's Python at pid P; before the key, that
    process ended and another — same command line — got pid P (PID reuse,
    forced with ns_last_pid). Root must not signal it: refused, re-plan."""
    start_loop(testbed, owned)
    plan = await plan_kill(target, Settings(), "job", int_wait=1.0, term_wait=1.0, tmux=owned.tmux)
    p = plan.params["leader"]
    assert p in plan.pids
    testbed.ct_exec(owned.ct, ["kill", "-9", str(p)])
    helpers.wait_for(lambda: p not in ct_pids(testbed, owned.ct, "loop.py"), 10, "run gone")
    again = (
        f'echo $(({p} - 1)) > /proc/sys/kernel/ns_last_pid && cd "$1" && '
        f"{{ setsid {' '.join(DROP)} {owned.python} -u loop.py >/dev/null 2>&1 & }}; echo $!"
    )
    for _ in range(20):  # another process may take the pid first: try again
        r = testbed.ct_exec(owned.ct, ["sh", "-c", again, "sh", str(owned.dir)])
        got = int(r.stdout.strip() or 0)
        if got == p:
            break
        testbed.ct_exec(owned.ct, ["kill", "-9", str(got)])
    else:
        pytest.skip("could not make the kernel reuse the pid here")
    result = await execute(target, plan)
    assert not result.ok and "plan the action again" in result.summary, result.summary
    assert f"pid {p}" in result.summary and "another process" in result.summary
    assert p in ct_pids(testbed, owned.ct, "loop.py")  # the new process was not touched
    testbed.ct_exec(owned.ct, ["kill", "-9", str(p)])


async def test_kill_refuses_when_the_session_has_another_pane(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """The session was started again (same name) since the box opened."""
    start_loop(testbed, owned)
    plan = await plan_kill(target, Settings(), "job", tmux=owned.tmux)
    testbed.ct_exec(owned.ct, [*DROP, *owned.tmux, "kill-session", "-t", "=job"])
    start(testbed, owned, "sleep 600")
    result = await execute(target, plan)
    assert not result.ok and "another pane" in result.summary, result.summary
    assert "plan the action again" in result.summary
    assert ct_pids(testbed, owned.ct, "sleep 600")  # the new session's process is untouched


# ------------------------------------------------------------------ 2: the run's py-spy


async def test_dump_never_runs_the_runs_own_py_spy_as_root(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """A `py-spy` next to the run's interpreter, the user's file: `d` (no
    confirm box) ran it as root. Now it runs as its owner, or not at all."""
    marker = owned.dir / "spy-marker"
    spy = owned.python.parent / "py-spy"
    spy.write_text(
        f"#!/bin/sh\nid -u >> {marker}\n"
        "printf 'Thread 1 (active): MainThread\\n    train_step (loop.py:6)\\n'\n"
    )
    spy.chmod(0o755)
    os.chown(spy, UID, UID)
    start_loop(testbed, owned)
    try:
        plan = await plan_dump(target, Settings(), "job", tmux=owned.tmux)
    except ActionError as err:  # refused is fine too: it says why and what to install
        assert "pip install py-spy" in str(err), err
        assert not marker.exists()
        return
    result = await execute(target, plan)
    assert marker.exists(), (result.summary, result.details)
    assert marker.read_text().split() == [str(UID)]  # the user's id, never root's 0
    assert f"uid {UID}" in plan.display and plan.commands[0][0] == "setpriv"
    assert result.ok and "train_step" in result.output


async def test_dump_refuses_a_py_spy_in_the_users_directory_whoever_owns_the_file(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """root's own file, but in a directory the user can change: not root's
    alone, and not the user's to run either: refused, with the fix."""
    spy = owned.python.parent / "py-spy"
    spy.write_text(f"#!/bin/sh\nid -u >> {owned.dir / 'spy-marker'}\n")
    spy.chmod(0o755)  # root's file
    start_loop(testbed, owned)
    with pytest.raises(ActionError) as err:
        await plan_dump(target, Settings(), "job", tmux=owned.tmux)
    text = str(err.value)
    assert "py-spy not run" in text and str(spy) in text and "pip install py-spy" in text
    assert "\n" not in text and not (owned.dir / "spy-marker").exists()


# ------------------------------------------------------------------ 3: the run's interpreter


async def test_flush_canary_never_starts_the_users_interpreter_as_root(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """The run's Python is the user's copy (venv --copies) with a .pth file
    in its site-packages: code every start of that interpreter runs. The
    flush's test process started it as root; now as its owner, and the box
    says so, with the exact command."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed here")
    marker = owned.dir / "pth-marker"
    (site,) = (owned.dir / "v" / "lib").glob("python3*/site-packages")
    pth = site / "zz-marker.pth"
    pth.write_text(f"import os; open({str(marker)!r}, 'a').write('%d\\n' % os.getuid())\n")
    os.chown(pth, UID, UID)
    start_loop(testbed, owned)
    helpers.wait_for(marker.exists, 10, "the run's own start")
    assert set(marker.read_text().split()) == {str(UID)}
    starts = len(marker.read_text().split())
    plan = await plan_flush(target, Settings(), "job", tmux=owned.tmux)
    result = await execute(target, plan)
    if "ptrace was refused" in " ".join(result.details):
        pytest.skip(f"ptrace is refused here: {result.details}")
    helpers.wait_for(lambda: len(marker.read_text().split()) > starts, 10, "the test process")
    assert set(marker.read_text().split()) == {str(UID)}  # never root's 0
    assert f"uid {UID}" in plan.display and str(owned.python) in plan.display
    assert plan.params["canary"][0] == "setpriv"


# ------------------------------------------------------------------ 7: a path the run chose


@pytest.fixture
def victim() -> Iterator[Path]:
    """A root file in /etc (the CT shares this file system) a start command names."""
    v = Path("/etc") / f"gputui-victim-{os.getpid()}-{os.urandom(4).hex()}"
    v.write_text("root's own file\n")
    try:
        yield v
    finally:
        for f in Path("/etc").glob(v.name + "*"):
            f.unlink()


async def test_relaunch_refuses_to_move_a_file_the_start_command_names(
    target: Target, testbed: Any, owned: Owned, victim: Path, facts: Any
) -> None:
    """`… > ../../etc/VICTIM` in the user's start command: relaunch, as
    root, moved /etc/VICTIM aside. Now it refuses, says why, and stops nothing."""
    start(testbed, owned, f"sleep 600; python3 t.py > ../../etc/{victim.name}", cwd="/var/tmp")
    helpers.wait_for(lambda: ct_pids(testbed, owned.ct, "sleep 600"), 10, "the run")
    refusal = ""
    try:
        plan = await plan_relaunch(
            target, Settings(), "job", tmux=owned.tmux, facts=facts, log=str(victim)
        )
    except ActionError as err:
        refusal = str(err)
    else:
        result = await execute(target, plan)
        refusal = "" if result.ok else result.summary
    assert victim.read_text() == "root's own file\n"
    assert sorted(Path("/etc").glob(victim.name + "*")) == [victim]
    assert f"relaunch refused: the old log {victim} is owned by uid 0" in refusal, refusal
    assert "[run]" in refusal and "\n" not in refusal
    assert ct_pids(testbed, owned.ct, "sleep 600")  # nothing was stopped


async def test_relaunch_moves_the_users_own_log_as_the_user(
    target: Target, testbed: Any, owned: Owned, facts: Any
) -> None:
    log = owned.dir / "job.log"
    start(testbed, owned, f"{owned.python} -u loop.py > job.log 2>&1")
    helpers.wait_for(lambda: log.exists() and b"step 1" in log.read_bytes(), 20, "the run")
    plan = await plan_relaunch(
        target, Settings(), "job", tmux=owned.tmux, facts=facts, log=str(log)
    )
    move = plan.params["move_log"]
    assert move[0] == "setpriv" and f"--reuid={UID}" in move and move in plan.commands
    assert f"as uid {UID}" in plan.display
    result = await execute(target, plan)
    moved = Path(result.data["moved_log"])
    assert moved.name.startswith("job.log.") and b"step 1" in moved.read_bytes()
    assert moved.stat().st_uid == UID


async def test_launch_leaves_alone_a_session_started_after_the_box_opened(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """No session 'late' when the box opened; one appeared before the key
    (someone else's). Launch must not remove it: it was never confirmed."""
    run = RunConfig(command="sleep 300", cwd=str(owned.dir), session="late", log="late.log")
    plan = await plan_launch(target, Settings(run=run))
    r = testbed.ct_exec(owned.ct, ["tmux", "new-session", "-d", "-s", "late", "sleep 301"])
    assert r.returncode == 0, r.stderr
    result = await execute(target, plan)
    assert not result.ok, result.summary
    assert ct_pids(testbed, owned.ct, "sleep 301")  # still there
    assert not ct_pids(testbed, owned.ct, "sleep 300")


# ------------------------------------------------------------------ 8: a FIFO at the env file


async def test_launch_writes_no_secret_into_a_fifo_planted_at_the_env_file(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """The user plants a FIFO (and reads it) at the env file's path in the
    CT's /tmp: `set -C` let the secret go into it. Now: refused, not written."""
    secret = f"sk-{os.urandom(12).hex()}"
    run = RunConfig(
        command="sleep 300", cwd=str(owned.dir), session="envrun", log="env.log",
        env={"API_KEY": secret},
    )  # fmt: skip
    plan = await plan_launch(target, Settings(run=run))
    path = plan.params["env_file"]
    stolen = owned.dir / "stolen"
    plant = 'cd / && mkfifo "$1" && { timeout 30 cat "$1" > "$2" 2>/dev/null & }'
    r = testbed.ct_exec(owned.ct, [*DROP, "sh", "-c", plant, "sh", path, str(stolen)])
    assert r.returncode == 0, r.stderr
    helpers.wait_for(stolen.exists, 10, "the reader")
    result = await execute(target, plan)
    assert not result.ok, result.summary
    assert "something else is already at this path" in result.summary, result.summary
    assert "nothing was written" in result.summary
    assert secret not in stolen.read_text()
    assert not ct_pids(testbed, owned.ct, "sleep 300")  # nothing started


# ------------------------------------------------------------------ gdb from root's PATH


async def test_flush_never_runs_a_gdb_planted_in_a_users_directory_on_path(
    target: Target, testbed: Any, owned: Owned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `gdb` in a directory the user owns, first on root's PATH: flush
    (the test process, then the run) ran it as root. Now root takes only a
    gdb root owns alone — root's own elsewhere, or none, with the fix."""
    marker = owned.dir / "gdb-marker"
    bin_dir = owned.dir / "bin"
    bin_dir.mkdir()
    planted = bin_dir / "gdb"
    planted.write_text(f"#!/bin/sh\nid -u >> {marker}\nexit 1\n")
    planted.chmod(0o755)
    subprocess.run(["chown", "-R", f"{UID}:{UID}", str(bin_dir)], check=True)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    start_loop(testbed, owned)
    try:
        plan = await plan_flush(target, Settings(), "job", tmux=owned.tmux)
    except ActionError as err:  # no root-owned gdb here: refused, with the fix
        assert "apt-get install gdb" in str(err) and "\n" not in str(err), err
    else:
        await execute(target, plan)
        assert not marker.exists(), f"root ran the user's gdb: uid {marker.read_text()}"
        assert plan.commands[0][0] != str(planted), plan.commands
    with pytest.raises(ActionError) as named:  # the planted one, named: refused, one line
        await plan_flush(target, Settings(), "job", gdb=str(planted), tmux=owned.tmux)
    text = str(named.value)
    assert "gdb not run: gputui runs as root only a gdb that root owns" in text, text
    assert str(planted) in text and "apt-get install gdb (as root)" in text
    assert "\n" not in text
    assert not marker.exists(), marker.read_text()  # never run, as root or anyone


async def test_the_tool_probes_never_run_a_planted_gdb_or_py_spy_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gdb --version` and `py-spy --version` (the agent's hello, and the
    probe `gputui doctor` and the monitor run without an agent) ran PATH's
    first copy as root: a user's planted one. Now it is named, not run."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the planted tools must not be root's")
    from gputui.monitor.tools import probe_tools
    from gputui.remote.agent import Agent

    tmp_path.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "marker"
    for tool in ("gdb", "py-spy"):
        (bin_dir / tool).write_text(f"#!/bin/sh\nid -u >> {marker}\necho planted 1.0\n")
        (bin_dir / tool).chmod(0o755)
    subprocess.run(["chown", "-R", f"{UID}:{UID}", str(bin_dir)], check=True)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    hello = Agent().op_hello({})["tools"]
    tr = LocalTransport()
    await tr.connect()
    try:
        probed = await probe_tools(Target(tr, None))
    finally:
        await tr.close()
    assert not marker.exists(), f"root ran a planted tool: uid {marker.read_text().split()}"
    why = f"not run, not root's: {bin_dir / 'gdb'} belongs to uid {UID}, not root"
    assert hello["gdb"] == why and probed.gdb == why, (hello, probed)
    assert "not root's" in (hello["py-spy"] or "") and "not root's" in (probed.py_spy or "")


# ------------------------------------------------------------------ a long interpreter path


async def test_a_python_under_a_long_path_is_still_the_runs_python(
    target: Target, testbed: Any, owned: Owned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's interpreter lives under a path of over 100 characters, and
    gputui runs with COLUMNS=80 (a shell that exports its width): `ps -eo
    args` cut the path at 80 columns, the process was no longer seen as
    Python, and kill/dump/flush picked the wrong processes (or none)."""
    deep = owned.dir / ("d" * 40) / ("e" * 40)
    deep.mkdir(parents=True)
    python = deep / "v" / "bin" / "python3"
    subprocess.run([PY, "-m", "venv", "--copies", "--without-pip", str(deep / "v")], check=True)
    subprocess.run(["chown", "-R", f"{UID}:{UID}", str(owned.dir)], check=True)
    assert len(str(python)) > 100
    log = owned.dir / "job.log"
    start(testbed, owned, f"{python} -u loop.py 2>&1 | tee job.log; sleep 600")
    helpers.wait_for(lambda: log.exists() and b"step 1" in log.read_bytes(), 20, "the run")
    out = testbed.ct_exec(owned.ct, ["ps", "-ww", "-eo", "pid=,args="]).stdout
    (pid,) = [int(ln.split()[0]) for ln in out.splitlines() if ln.split()[1:2] == [str(python)]]
    monkeypatch.setenv("COLUMNS", "80")
    plan = await plan_kill(target, Settings(), "job", tmux=owned.tmux)
    assert plan.params["leader"] == pid, (plan.params["leader"], plan.notes)
    assert plan.params["leader_args"] == f"{python} -u loop.py"
    assert any(str(python) in note for note in plan.notes), plan.notes


# ------------------------------------------------------------------ a user's socket, its server gone


def root_tmux_servers(sock: str) -> list[int]:
    """tmux processes of uid 0 whose argv names `sock` (from /proc)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            uid = (d / "status").read_text().split("\nUid:", 1)[1].split()[0]
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if uid == "0" and argv[0].endswith(b"tmux") and sock.encode() in argv:
            found.append(int(d.name))
    return found


def kill_users_server(testbed: Any, o: Owned) -> None:
    """SIGKILL the user's tmux server: it ends, its socket file stays."""
    r = testbed.ct_exec(o.ct, [*DROP, *o.tmux, "display-message", "-p", "#{pid}"])
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r.stderr
    testbed.ct_exec(o.ct, ["kill", "-9", r.stdout.strip()])
    gone = [*DROP, *o.tmux, "list-sessions"]
    helpers.wait_for(lambda: testbed.ct_exec(o.ct, gone).returncode != 0, 10, "server gone")
    assert Path(o.sock).is_socket()


async def test_no_root_tmux_server_on_a_users_socket_left_behind(
    target: Target, testbed: Any, owned: Owned
) -> None:
    """The user's server ended (killed) and left its socket. Relaunch (box
    opened while it ran) and launch then ran `tmux -S SOCK new-session` as
    root: a NEW server, root's, on the user's socket path, the run in it as
    root. Now tmux there runs as the socket's owner: no server of uid 0."""
    run = RunConfig(command="sleep 300", cwd=str(owned.dir), session="job", log="job.log")
    start(testbed, owned, "sleep 600")
    try:
        plan = await plan_relaunch(target, Settings(run=run), "job", tmux=owned.tmux)
        kill_users_server(testbed, owned)
        result = await execute(target, plan)
        assert not root_tmux_servers(owned.sock), (result.summary, result.details)
        assert result.ok, (result.summary, result.details)  # the run, as its owner
        kill_users_server(testbed, owned)
        plan = await plan_launch(target, Settings(run=run), tmux=owned.tmux)
        result = await execute(target, plan)
        assert not root_tmux_servers(owned.sock), (result.summary, result.details)
        assert result.ok, (result.summary, result.details)
        assert f"--reuid={UID}" in plan.commands[-1]
        kill_users_server(testbed, owned)  # attach-session starts a server too
        attach = await actions_plan("attach", target, Settings(), RunSeen("job", tmux=owned.tmux))
        subprocess.run(
            attach.commands[0], stdin=subprocess.DEVNULL, capture_output=True, timeout=30
        )
        assert not root_tmux_servers(owned.sock)
        assert Path(owned.sock).stat().st_uid != 0  # no server of root's came and went there
    finally:
        for pid in root_tmux_servers(owned.sock):  # the old code's, had it started one
            os.kill(pid, 9)


async def test_kill_dump_and_flush_read_a_users_server_as_its_owner(
    target: Target, testbed: Any, owned: Owned, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct caller (the CLI, a script) hands kill, dump and flush root's
    raw `tmux -S SOCK` for the user's live server. A root tmux client on a
    user's server is root's hands on what the run owns (its server can make
    the client write files): every tmux command on SOCK now runs as the
    socket's owner, and the actions still find and end the run."""
    start_loop(testbed, owned)
    ran: list[list[str]] = []
    real_run = target.run

    async def recorded(argv: list[str], **kw: Any) -> Any:
        ran.append(list(argv))
        return await real_run(argv, **kw)

    monkeypatch.setattr(target, "run", recorded)
    for planner, tool in ((plan_dump, "py-spy"), (plan_flush, "gdb")):
        try:  # found through its server; refused only for a tool missing here
            assert (await planner(target, Settings(), "job", tmux=owned.tmux)).pids
        except ActionError as err:
            assert tool in str(err) and "session" not in str(err), err
    kill = await plan_kill(target, Settings(), "job", int_wait=1.0, term_wait=1.0, tmux=owned.tmux)
    assert kill.pids
    result = await execute(target, kill)
    assert result.ok, (result.summary, result.details)
    on_sock = [a for a in ran if owned.sock in a and "tmux" in " ".join(a)]
    assert on_sock, ran
    as_root = [a for a in on_sock if a[0] != "setpriv" and "gputui-socket-owner" not in a]
    assert not as_root, as_root
    assert all(f"--reuid={UID}" in a for a in on_sock if a[0] == "setpriv")
    helpers.wait_for(lambda: not ct_pids(testbed, owned.ct, "loop.py"), 20, "the run ended")
