"""`gputui --local` inside tmux does not watch its own session (issue 46:
the "training process" was gputui itself).

Real tmux on a private socket: session "train" runs a Python loop writing
its log; then session "me", the newest, whose pane runs `gputui doctor
--local --json` — as a user who opens a tmux session to run gputui in. It
must watch "train", not its own pane; named with --session, its own session
is still watched (the user asked).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.model import Pane, Session
from gputui.monitor.sessionwatch import choose_session
from gputui.remote.local import own_ancestry

LOOP = "import time\nwhile True:\n    print('step 1 | loss 1.0', flush=True)\n    time.sleep(0.5)"


def doctor_in_a_pane(tmp_path: Path, env: dict[str, str], *extra: str) -> dict:
    out, err = tmp_path / "doctor.json", tmp_path / "doctor.err"
    out.unlink(missing_ok=True)
    (tmp_path / "none.toml").write_text("")
    argv = [sys.executable, "-m", "gputui", "doctor", "--local", "--json"]
    argv += ["--config", str(tmp_path / "none.toml"), *extra]
    pane = f"{shlex.join(argv)} > {shlex.quote(str(out))} 2> {shlex.quote(str(err))}; sleep 60"
    subprocess.run(["tmux", "new-session", "-d", "-s", "me", pane], env=env, check=True)
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and out.read_text().strip().endswith("}")):
            assert time.monotonic() < deadline, f"no doctor output; stderr: {err.read_text()}"
            time.sleep(0.2)
        time.sleep(0.2)
        return json.loads(out.read_text())
    finally:
        subprocess.run(["tmux", "kill-session", "-t", "=me"], env=env, capture_output=True)


@pytest.mark.timeout(180)
def test_local_inside_tmux_watches_the_run_not_its_own_session(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTUI", "TMUX"))}
    env.update(HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path), TMUX_TMPDIR=str(tmp_path))
    log = tmp_path / "train.log"
    run = f"exec {shlex.quote(sys.executable)} -c {shlex.quote(LOOP)} > {shlex.quote(str(log))}"
    subprocess.run(["tmux", "new-session", "-d", "-s", "train", run], env=env, check=True)
    try:
        deadline = time.monotonic() + 10
        while not (log.exists() and log.stat().st_size > 0):
            assert time.monotonic() < deadline, "the run never wrote its log"
            time.sleep(0.1)
        time.sleep(1.1)  # "me" is created a second later: the most recent session
        doc = doctor_in_a_pane(tmp_path, env)
        snap = doc["snapshot"]
        assert snap["session"]["name"] == "train", snap["session"]
        assert snap["log"]["path"] == str(log), snap["log"]
        asked = doctor_in_a_pane(tmp_path, env, "--session", "me")  # named: watched
        assert asked["snapshot"]["session"]["name"] == "me", asked["snapshot"]["session"]
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True, timeout=10)


def test_choose_session_skips_only_a_session_whose_main_pane_is_gputuis() -> None:
    own = own_ancestry()
    assert os.getpid() in own and os.getppid() in own
    mine = Session("me", created=20.0, panes=[Pane("me", 0, 0, os.getppid())])
    run = Session("train", created=10.0, panes=[Pane("train", 0, 0, 1)])
    assert choose_session([run, mine], None, own) == "train"
    assert choose_session([run, mine], None) == "me"  # not under --local
    assert choose_session([mine], None, own) is None  # nothing else: nothing to watch
    assert choose_session([run, mine], "me", own) == "me"  # asked for
