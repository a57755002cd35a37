"""A new user's first hour with gputui on a Proxmox host, driven as they
would (the CLI in a subprocess, the dashboard's keys) against the test bed:
real sshd, the stand-in pct's CTs in their own namespaces, real tmux, real
python3 runs writing real logs. Each case failed on the code before its fix."""

from __future__ import annotations

import argparse
import asyncio
import io
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import scenarios as sc
from gputui.actions.kill import KEEP_PANE_NOTE
from gputui.cli.actions import run_async
from gputui.config import RunConfig, Settings
from gputui.model import Severity
from gputui.remote.target import Target
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.result import ResultScreen
from gputui.ui.widgets.banner import Banner
from helpers import wait_for, yes_once_shown
from ui_scenarios import (
    SIZE,
    make_app,
    prepare_run,
    settings_for,
    start_unbuffered,
    until,
)


def read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


LOOP = "import time\nwhile True:\n    print('step 1 | loss 1.0', flush=True)\n    time.sleep(0.3)"


def test_a_log_gputui_will_not_follow_is_a_finding_not_nothing_wrong(testbed: Any, ct: int) -> None:
    """root's run tees into a directory every user may write (a shared
    /workspace made 0777, not sticky): gputui refuses to follow that log as
    root — right — but doctor found it from the run's stdout, said the
    refusal on its `log` line only, then "✓ nothing wrong", exit 0: no step,
    no stall, no buffering would ever be seen. Now a WARNING names the log,
    why and the fix."""
    d = "/tmp/shared"  # the CT's own /tmp (sticky); the directory in it is not
    run = f'mkdir -p {d} && chmod 777 {d} && cd {d} && python3 -c "{LOOP}" | tee train.log'
    sc.tmux_in_ct(testbed, ct, "new", "-d", "-s", "train", run)
    wait_for(
        lambda: testbed.ct_exec(ct, ["test", "-s", f"{d}/train.log"]).returncode == 0,
        10,
        "the run's log",
    )
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"), timeout=60)
    assert r.rc == 1, r.stdout + r.stderr
    f = r.finding("log_not_followed")
    assert f["severity"] == "warning"
    assert f"{d}/train.log" in f["title"], f["title"]
    assert any(f"directory {d} on its way may be changed" in e for e in f["evidence"]), f
    assert "keep the log in a directory only its owner can write" in f["fix"], f["fix"]


def pane_listing(testbed: Any, ct: int, session: str) -> str:
    r = testbed.ct_exec(
        ct,
        ["tmux", "list-panes", "-t", f"={session}", "-F", "#{pane_dead} #{remain-on-exit}"],
    )
    return r.stdout.strip() if r.returncode == 0 else ""


def pids_in(text: bytes) -> set[str]:
    return set(re.findall(r" pid (\d+) step ", text.decode("utf-8", "replace")))


@pytest.mark.timeout(120)
async def test_k_then_r_starts_a_run_that_was_its_sessions_command_again(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """The deploy loop a user types: k, y — then r, y. The run was the
    session's own command (`tmux new -d -s train "python3 … 2>&1 | tee
    train.log"`, no shell around it, remain-on-exit off): the kill ended
    it, tmux closed the pane and the session with it, and r had nothing
    left to start again (9bf7f8c made it say so). Now k sets the pane's
    remain-on-exit first, and says so in its box: the pane stays dead with
    its output, the banner reads as the user's stop, and r starts the run
    again in the same session — a new Python process, its log growing."""
    run = prepare_run(testbed, ct, "train")
    command = f"python3 -u {run.script} 100000 0.2 2>&1 | tee {run.log}"
    sc.tmux_in_ct(testbed, ct, "new", "-d", "-s", "train", "-c", str(run.dir), command)
    wait_for(lambda: pids_in(read(run.log)), 10, "the run's first lines")
    old = pids_in(read(run.log))
    app, _parts = make_app(settings_for(testbed, ct, session="train", interval=0.5))
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.why_not("kill") is None, 30, "k available")
        await pilot.press("k")
        await until(lambda: getattr(app.screen, "plan", None) is not None, 30, "k's plan")
        plan = app.screen.plan  # type: ignore[attr-defined]
        assert KEEP_PANE_NOTE in plan.display, plan.display
        await yes_once_shown(pilot)
        await until(lambda: isinstance(app.screen, ResultScreen), 30, "the kill's result")
        result = app.screen.result  # type: ignore[attr-defined]
        assert result.ok and "pane kept, r starts it again" in result.summary, result
        assert pane_listing(testbed, ct, "train") == "1 on", "the pane kept, dead"
        while isinstance(app.screen, ResultScreen):
            await pilot.press("escape")
            await pilot.pause()
        await asyncio.sleep(3)  # the dead pane read: its KeyboardInterrupt is the user's doing
        said = app.query_one(Banner).finding
        assert said is None or said.severity is not Severity.ERROR, said
        await until(lambda: app.why_not("relaunch") is None, 30, "r available")
        await pilot.press("r")
        await yes_once_shown(pilot)
        await until(lambda: isinstance(app.screen, ResultScreen), 60, "the relaunch's result")
        again = app.screen.result  # type: ignore[attr-defined]
    assert again.ok, (again.summary, again.details)
    assert pane_listing(testbed, ct, "train").startswith("0 "), "the session runs again"
    wait_for(lambda: pids_in(read(run.log)) - old, 10, "the new run's lines")
    size = len(read(run.log))
    wait_for(lambda: len(read(run.log)) > size, 10, "the new log growing")


@pytest.mark.timeout(90)
async def test_k_on_a_shared_gpu_does_not_call_a_neighbours_memory_still_held(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """A Proxmox host's GPU is shared: another CT's job holds 39 GiB on it.
    k, y on this run: the box said "ended by SIGINT; GPU memory freed" and,
    under it, "still on GPU GPU-a0: host pid N python3 40000 MiB" — the
    neighbour's, in the words of memory the stop left. Now it is said as
    another's, not one of the run's."""
    neighbour = subprocess.Popen(["sleep", "300"])  # another CT's job, as nvidia-smi lists it
    try:
        testbed.set_gpus(
            {
                "gpus": [{"index": 0, "uuid": "GPU-a0", "memory.used": 40000}],
                "apps": [{"pid": neighbour.pid, "used_memory": 40000, "gpu_uuid": "GPU-a0"}],
            }
        )
        run = prepare_run(testbed, ct, "train")
        start_unbuffered(testbed, run, count=100000, period=0.2)
        app, _parts = make_app(settings_for(testbed, ct, session="train", interval=0.5))
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.why_not("kill") is None, 30, "k available")
            await pilot.press("k")
            await yes_once_shown(pilot)
            await until(lambda: isinstance(app.screen, ResultScreen), 30, "the kill's result")
            result = app.screen.result  # type: ignore[attr-defined]
    finally:
        neighbour.kill()
        neighbour.wait()
        testbed.set_gpus({"gpus": [{"index": 0}]})
    assert result.ok and "GPU memory freed" in result.summary, result.summary
    mine = [d for d in result.details if str(neighbour.pid) in d]
    assert len(mine) == 1, result.details
    assert not mine[0].startswith("still on GPU"), mine
    assert mine[0].endswith("40000 MiB: not one of the run's"), mine


async def test_r_on_a_run_that_died_starts_it_again_where_it_was_started(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """The README's own loop: `tmux new -s train -c DIR 'python3 train.py 2>&1
    | tee train.log'` with remain-on-exit on, the run dies at its import
    (ModuleNotFoundError), the user fixes train.py and relaunches. tmux has
    no current path for a dead pane and there is no process left to read one
    from: the plan said "start session 'train' in /root", moved /root/
    train.log and ran `python3 train.py` there — "can't open file
    '/root/train.py'". Now the pane's start path: DIR, DIR/train.log."""
    run = prepare_run(testbed, ct, "train")
    script = run.dir / "train.py"
    script.write_text("import flash_attn\n")
    command = "python3 train.py 2>&1 | tee train.log"
    sc.tmux_in_ct(
        testbed, ct, "new", "-d", "-s", "train", "-c", str(run.dir), command,
        ";", "set", "-p", "-t", "train", "remain-on-exit", "on",
    )  # fmt: skip
    wait_for(lambda: b"ModuleNotFoundError" in read(run.log), 10, "the run's death")
    script.write_text(LOOP)  # the fix
    args = argparse.Namespace(yes=True, json=False, session="train")
    out = io.StringIO()
    rc = await run_async(
        "relaunch", args, Settings(), target=Target(testbed.transport(), ct), out=out
    )
    said = out.getvalue()
    assert rc == 0, said
    assert f"start session 'train' in {run.dir}:" in said, said
    wait_for(lambda: b"step 1 | loss 1.0" in read(run.log), 10, "the new run's steps")
    assert [p.name for p in run.dir.glob("train.log.*")], "the old log moved aside beside it"


async def test_the_cli_verbs_reach_a_run_in_another_users_tmux(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """The run was started in the CT as its user (`su - alice -c 'tmux new
    -d -s job …'`), gputui logs in as root. doctor and the dashboard find
    the session on alice's tmux server and act on it through it, as alice;
    `gputui kill --session job` said "no tmux session named 'job'". Now the
    CLI verbs look for the session on every server as the dashboard does."""
    home = "/tmp/nobody"  # in the CT's own /tmp, as its tmux socket (/tmp/tmux-65534)
    drop = f"setpriv --reuid=65534 --regid=65534 --clear-groups env HOME={home} SHELL=/bin/sh"
    script = (
        f"mkdir -p {home} && cat > {home}/job.py && chown -R 65534:65534 {home} && cd {home} "
        f"&& {drop} tmux new -d -s job 'python3 job.py | tee job.log'"
    )
    r = testbed.ct_exec(ct, ["env", "-i", f"PATH={sc.CLEAN_PATH}", "sh", "-c", script], input=LOOP)
    assert r.returncode == 0, r.stderr
    wait_for(
        lambda: testbed.ct_exec(ct, ["test", "-s", f"{home}/job.log"]).returncode == 0,
        10,
        "the run's log",
    )
    args = argparse.Namespace(yes=False, json=False, session="job")
    out = io.StringIO()
    rc = await run_async(
        "kill",
        args,
        Settings(),
        target=Target(testbed.transport(), ct),
        out=out,
        ask=lambda prompt: "y",
    )
    said = out.getvalue()
    assert rc == 0, said
    assert "Stop the run in session 'job'" in said and "ended by SIGINT" in said, said
    assert "pane kept, r starts it again" in said, said  # set through alice's server
    ps = testbed.ct_exec(ct, ["ps", "-eo", "args="]).stdout  # tmux's own args name it still
    assert not [a for a in ps.splitlines() if a.startswith("python3 job.py")], ps


@pytest.mark.timeout(90)
async def test_a_ct_stopped_under_the_dashboard_offers_no_key_into_it(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """`pct stop` (or a host's shutdown of the CT) while the dashboard
    watches: the banner said "container N is stopped — fix: pct start N" and
    beside it "[f] flush live [d] py-spy dump", and k opened a confirm box
    for the run's processes — the sessions and processes last seen before
    it stopped. Now no verb applies in a stopped CT, each says why."""
    run = prepare_run(testbed, ct, "train")
    start_unbuffered(testbed, run, count=100000, period=0.2)
    app, _parts = make_app(settings_for(testbed, ct, session="train", interval=0.5))
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.why_not("kill") is None, 30, "k available")
        testbed.ct_stop(ct)
        await until(lambda: any(f.kind == "ct_stopped" for f in app.findings), 30, "the stopped CT")
        await pilot.pause(0.5)
        for verb in ("kill", "dump", "flush", "attach", "relaunch"):
            assert app.why_not(verb) == f"CT {ct} is stopped", (verb, app.why_not(verb))
        banner = str(app.query_one(Banner).render())
        assert f"pct start {ct}" in banner and "[f]" not in banner and "[d]" not in banner, banner
        await pilot.press("k")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_r_on_a_run_whose_command_changes_directory_starts_it_where_tmux_did(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """`tmux new -s train -c DIR 'cd sub && python3 train.py 2>&1 | tee
    ../train.log'`: the relaunch took the pane's current directory, DIR/sub
    (where the shell went), and ran `cd sub && …` there — no DIR/sub/sub,
    the new run never started. (The same for a `python3 train.py` that
    moves itself, as hydra does, into outputs/….) Now the pane's start
    path: the command runs where tmux ran it, its log the one the run wrote."""
    run = prepare_run(testbed, ct, "train")
    (run.dir / "sub").mkdir()
    (run.dir / "sub" / "train.py").write_text(LOOP)
    sc.tmux_in_ct(
        testbed, ct, "new", "-d", "-s", "train", "-c", str(run.dir),
        "cd sub && python3 train.py 2>&1 | tee ../train.log",
    )  # fmt: skip
    wait_for(lambda: b"step 1 " in read(run.log), 10, "the run's steps")
    args = argparse.Namespace(yes=True, json=False, session="train")
    out = io.StringIO()
    rc = await run_async(
        "relaunch", args, Settings(), target=Target(testbed.transport(), ct), out=out
    )
    said = out.getvalue()
    assert rc == 0, said
    assert f"start session 'train' in {run.dir}:" in said, said
    assert f"tee -a -i {run.log}," in said, said
    assert list(run.dir.glob("train.log.*")), "the old log moved aside"
    wait_for(lambda: b"step 1 " in read(run.log), 10, "the new run's steps")


COUNT = """import time
for i in range(1, 100000):
    print(f"step {i} | loss 1.0", flush=True)
    time.sleep(0.05)
"""


async def relaunch_by_cli(testbed: Any, ct: int, session: str) -> str:
    """`gputui relaunch --session S --yes` over ssh: what it printed."""
    args = argparse.Namespace(yes=True, json=False, session=session)
    out = io.StringIO()
    rc = await run_async(
        "relaunch", args, Settings(), target=Target(testbed.transport(), ct), out=out
    )
    assert rc == 0, out.getvalue()
    return out.getvalue()


async def test_r_on_a_start_script_that_tees_its_log_writes_each_line_once(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """`tmux new -s train 'bash start.sh'`, start.sh running `python3
    train.py 2>&1 | tee start.log`: the relaunch found the log from the
    run's tee and piped the script's output into a tee of its own on the
    same file — two writers at two offsets: lines twice, lines cut ('0
    tok/s'), gputui's own start line overwritten. Now a command that writes
    its log itself is left to write it alone; and so again on the next r."""
    run = prepare_run(testbed, ct, "train", log="start.log")
    (run.dir / "train.py").write_text(COUNT)
    (run.dir / "start.sh").write_text("python3 train.py 2>&1 | tee start.log\n")
    sc.tmux_in_ct(testbed, ct, "new", "-d", "-s", "train", "-c", str(run.dir), "bash start.sh")
    wait_for(lambda: b"step 5 " in read(run.log), 10, "the run's steps")
    for _ in range(2):  # the second r relaunches what the first started
        said = await relaunch_by_cli(testbed, ct, "train")
        assert f"{run.log} written by the command itself" in said, said
        wait_for(lambda: b"step 40 " in read(run.log), 15, "the new run's steps")
        assert writers(testbed, ct, str(run.log)) == ["tee"], "one writer of the log"
        lines = read(run.log).decode().splitlines()
        steps = [int(x.split()[1]) for x in lines[:-1]]  # the last may be half-written
        assert steps == list(range(1, len(steps) + 1)), lines[:50]


def writers(testbed: Any, ct: int, path: str) -> list[str]:
    """The programs in the CT that hold `path` open (their comm)."""
    script = (
        'for p in /proc/[0-9]*; do for f in "$p"/fd/*; do '
        '[ "$(readlink "$f")" = "$1" ] && cat "$p/comm"; done; done 2>/dev/null; true'
    )
    r = testbed.ct_exec(ct, ["sh", "-c", script, "-", path])
    return sorted(r.stdout.split())


async def test_a_launch_into_a_directory_others_may_write_says_why_its_log_was_not_read(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """[run] writes its log in a directory every user may write (a shared
    0777 /workspace): the launch ran and its log grew, but the verify may
    not read it as root and said "running; no log at … yet after 3 s" — a
    run that writes nothing. Now it says the log was not read, and why."""
    d = "/tmp/shared"  # the CT's own /tmp (sticky); the directory in it is not
    r = testbed.ct_exec(ct, ["sh", "-c", f"mkdir -p {d} && chmod 777 {d}"], input=LOOP)
    assert r.returncode == 0, r.stderr
    testbed.ct_exec(ct, ["sh", "-c", f"cat > {d}/train.py"], input=LOOP)
    run = RunConfig(command="python3 train.py", cwd=d, session="job", log=f"{d}/train.log")
    args = argparse.Namespace(yes=True, json=False, session=None)
    out = io.StringIO()
    rc = await run_async(
        "launch", args, Settings(run=run), target=Target(testbed.transport(), ct), out=out
    )
    said = out.getvalue()
    assert rc == 0, said
    assert f"ok: launched 'job': running; log {d}/train.log not read: directory {d} " in said
    assert "no log at" not in said, said


@pytest.mark.timeout(60)
async def test_a_session_not_there_offers_no_launch_key_without_a_run_command(
    testbed: Any, ct: int
) -> None:
    """`gputui --host gpu1 --ct N --session train` as the quick start has
    it, no config: the session is not there (a typo, or it ended) and the
    banner's key was "[l] launch" — which needs the config's [run] command
    and did nothing. Now the fix it hid is shown, and why l is off."""
    app, _parts = make_app(settings_for(testbed, ct, session="train", interval=0.5))
    async with app.run_test(size=SIZE):
        await until(
            lambda: any(f.kind == "session_missing" for f in app.findings), 30, "the finding"
        )
        await until(lambda: app.query_one(Banner).finding is not None, 10, "the banner")
        banner = str(app.query_one(Banner).render())
        assert "[l] launch" not in banner, banner
        assert "fix: pick the right session with --session NAME" in banner, banner
        assert "l launch: no [run] command in the config" in banner, banner


def test_doctor_on_a_ct_with_two_runs_names_the_one_it_did_not_report_on(
    testbed: Any, ct: int
) -> None:
    """Two runs in one CT (train and eval), no --session: doctor reports on
    the newest and said nothing of the other — a user asking about train
    read eval's report. Now the session line names the other and the flag."""
    for name in ("train", "eval"):
        run = prepare_run(testbed, ct, name)
        start_unbuffered(testbed, run, count=100000, period=0.2)
        time.sleep(1.1)  # tmux's session_created is in seconds: eval is the newest
    r = sc.finish_doctor(sc.start_doctor(testbed, ct), timeout=60)
    line = next(x for x in r.stdout.splitlines() if x.startswith("session"))
    assert "eval: alive" in line and "not reported on: train (--session NAME)" in line, r.stdout


async def test_doctor_after_gputui_kill_says_stopped_by_you_not_died(
    testbed: Any, ct: int, pct_without_delay: None
) -> None:
    """`gputui kill` of a run that is its session's command keeps the pane
    (remain-on-exit) with the run's last words — KeyboardInterrupt, exit 0
    behind tee. doctor then said '✗ ERROR: session train exited 0, but its
    output ends in an error: KeyboardInterrupt', exit 1: a crash, for the
    user's own stop. Now the audit log's kill of that pane says it: the run
    ended, stopped by you (INFO)."""
    run = prepare_run(testbed, ct, "train")
    command = f"python3 -u {run.script} 100000 0.2 2>&1 | tee {run.log}"
    sc.tmux_in_ct(testbed, ct, "new", "-d", "-s", "train", "-c", str(run.dir), command)
    wait_for(lambda: pids_in(read(run.log)), 10, "the run's first lines")
    args = argparse.Namespace(yes=True, json=False, session="train", force=False)
    out = io.StringIO()
    rc = await run_async("kill", args, Settings(), target=Target(testbed.transport(), ct), out=out)
    assert rc == 0 and KEEP_PANE_NOTE in out.getvalue(), out.getvalue()
    assert pane_listing(testbed, ct, "train") == "1 on", "the pane kept, dead"
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json", "--session", "train"), timeout=60)
    kinds = [f["kind"] for f in r.doc["findings"]] if r.doc else []
    assert "session_dead" not in kinds, r.stdout
    f = r.finding("run_stopped")
    assert f["severity"] == "info", f
    assert "ended: stopped by you (k, " in f["title"] and "SIGINT" in f["title"], f["title"]
    assert r.rc == 0, r.stdout
    # a dashboard opened since reads the same (its banner leaves it out while the
    # kill's window is open, as any consequence of the user's own action)
    app, _parts = make_app(settings_for(testbed, ct, session="train", interval=0.5))
    async with app.run_test(size=SIZE):
        snap = app.monitor.snapshot
        await until(lambda: snap.your_kill is not None, 30, "the kill read from the audit log")
        kinds = [f.kind for f in app.diagnose(snap, time.time())]
    assert "run_stopped" in kinds and "session_dead" not in kinds, kinds
