"""A run that waits for someone to answer — wandb's "Enter your choice:", a
login or trust_remote_code prompt, a breakpoint() left in the code, a start
script's `read -p` — is named for what it is (`waiting_for_input`), with
the question from the pane and the key that answers it, and is never called
hung, buffered, stalled or loading. The agent reads which call a process
sleeps in (`tty_read`: a read of its terminal, readline's select on fd 0)
on real processes in real ptys; an interactive shell at its prompt is not
a run waiting. End to end on the test bed: each prompt in a CT's tmux
session behind `| tee`, `gputui doctor`. Each fails on the old code (no
such kind: "stalled"/"probably hung" or nothing)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time
from typing import Any

import pytest

import scenarios as sc
from gputui.diagnose import KINDS, diagnose
from gputui.model import Finding, Proc, Severity, Snapshot
from gputui.remote import agent
from helpers import wait_for
from test_diagnose import NOW, run

WANDB = "wandb: Enter your choice: "


def _waiting(
    reads: str | None = "/dev/pts/3", pane: tuple[str, ...] = (WANDB,), **kw: Any
) -> Snapshot:
    """A run whose GPUs idle with memory held and whose log is silent for
    10 min (held_but_idle's "probably hung" on the old code), its Python
    process asleep reading `reads`."""
    snap = run(util=0.0, silent=600.0, last_step_ago=600.0, pane_tail=pane, **kw)
    py = next(p for p in snap.procs if p.is_python)
    py.reads_tty = reads
    return snap


def _kinds(snap: Snapshot) -> list[str]:
    return [f.kind for f in diagnose(snap, NOW) if f.severity != Severity.INFO]


def _word(snap: Snapshot) -> Finding:
    return next(f for f in diagnose(snap, NOW) if f.kind == "waiting_for_input")


def test_a_run_at_a_wandb_prompt_is_waiting_not_hung() -> None:
    snap = _waiting()
    kinds = _kinds(snap)
    assert kinds[0] == "waiting_for_input", kinds
    assert not {"held_but_idle", "progress_stalled", "busy_but_silent"} & set(kinds), kinds
    f = _word(snap)
    assert f.severity == Severity.WARNING and f.action == "attach"
    assert f.title == (
        "the run waits for an answer: wandb: Enter your choice: — PID 12 (python train.py) "
        "reads the terminal"
    )
    assert "asleep reading its terminal /dev/pts/3" in f.evidence[0]
    assert "WANDB_API_KEY" in f.fix and "attach (a)" in f.fix
    assert KINDS["waiting_for_input"].alerts
    snap.procs[1].reads_tty = None  # the old code's view: the hang
    assert _kinds(snap)[0] == "held_but_idle"


def test_a_breakpoint_is_the_debugger_and_continue_is_the_answer() -> None:
    f = _word(
        _waiting(pane=("step 99 | loss 2.0", "> /workspace/train.py(41)<module>()", "(Pdb) "))
    )
    assert (
        f.title == "the run stopped in the debugger: PID 12 (python train.py) waits at a pdb prompt"
    )
    assert "continue (c)" in f.action_label and "PYTHONBREAKPOINT=0" in f.fix


@pytest.mark.parametrize(
    ("question", "fix"),
    [
        ("Do you wish to run the custom code? [y/N] ", "trust_remote_code=True"),
        ("Enter your token (input will not be visible): ", "HF_TOKEN"),
        ("Overwrite the checkpoint dir? (y/n) ", "`yes |`"),
    ],
)
def test_known_questions_say_how_to_answer_them_up_front(question: str, fix: str) -> None:
    assert fix in _word(_waiting(pane=(question,))).fix


def test_an_interactive_shell_at_its_prompt_is_not_a_run_waiting() -> None:
    """The pane's shell after the run ended reads the terminal too."""
    shell = Proc(pid=30, cmdline=["-bash"], state="S", reads_tty="/dev/pts/3")
    quiet = {"last_step_ago": 600.0, "silent": 600.0}
    snap = run(proc=False, extra_procs=(shell,), pane_tail=("root@ct:~# ",), **quiet)
    assert "waiting_for_input" not in _kinds(snap)
    script = Proc(pid=31, cmdline=["bash", "start.sh"], state="S", reads_tty="/dev/pts/3")
    snap = run(proc=False, extra_procs=(script,), pane_tail=("Continue? ",), **quiet)
    assert _kinds(snap)[:1] == ["waiting_for_input"]


def _in_pty(code: str) -> tuple[int, int]:
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", code])
    return pid, fd


@pytest.mark.parametrize(
    "code",
    ["input('Enter your choice: ')", "import getpass; getpass.getpass()", "breakpoint()"],
)
def test_the_agent_sees_a_real_process_asleep_reading_its_terminal(code: str) -> None:
    pid, fd = _in_pty(code)
    try:
        got = wait_for(lambda: agent.tty_read(pid), 10, f"{code} reading its terminal")
        assert got.startswith(("/dev/pts/", "/dev/tty")), got
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def test_a_process_that_sleeps_or_works_is_not_reading_its_terminal() -> None:
    for code in ("import time; time.sleep(30)", "while True: pass"):
        pid, fd = _in_pty(code)
        try:
            time.sleep(0.5)
            assert agent.tty_read(pid) is None, code
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(fd)
    sleeper = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
    try:  # reading a pipe, not a terminal
        time.sleep(0.5)
        assert agent.tty_read(sleeper.pid) is None
    finally:
        sleeper.kill()
        sleeper.wait()
    assert agent.tty_read(os.getpid(), machine="sparc") is None  # a machine not known


PROMPTS = {
    "wandb": (
        "import time\nfor i in range(3):\n    print(f'step {i} | loss 2.0', flush=True)\n"
        "    time.sleep(0.1)\n"
        "print('wandb: (1) Create a W&B account')\nprint('wandb: (2) Use an existing W&B account')\n"
        "print(\"wandb: (3) Don't visualize my results\")\ninput('wandb: Enter your choice: ')\n",
        "the run waits for an answer: wandb: Enter your choice:",
    ),
    "pdb": (
        "print('step 1 | loss 2.0', flush=True)\nbreakpoint()\n",
        "the run stopped in the debugger",
    ),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_doctor_names_a_real_prompt_in_a_ct_session(testbed: Any, ct: int, name: str) -> None:
    code, words = PROMPTS[name]
    r = sc.prepare(testbed, ct, f"ask-{name}", "ask")
    (r.dir / "ask.py").write_text(code)
    sc.launch(testbed, r, f"python3 -u ask.py 2>&1 | tee {r.log}")
    wait_for(lambda: r.log.exists() and "step" in r.log.read_text(), 20, "the run")
    time.sleep(1.0)
    flags = ("--json", "--session", "ask", "--log", str(r.log))
    doc = sc.finish_doctor(sc.start_doctor(testbed, ct, *flags), timeout=60)
    f = doc.finding("waiting_for_input")
    assert doc.kinds()[0] == "waiting_for_input", doc.kinds()
    assert f["title"].startswith(words), f["title"]
    assert f["action"] == "attach"


def test_a_run_that_still_steps_while_a_thread_reads_the_terminal_is_not_waiting() -> None:
    """A thread of the run reads commands from the terminal while it trains
    (the main thread's call is what /proc/PID/syscall shows)."""
    snap = run(last_step_ago=0.5, silent=0.5, pane_tail=("press q to stop > ",))
    next(p for p in snap.procs if p.is_python).reads_tty = "/dev/pts/3"
    assert "waiting_for_input" not in _kinds(snap)


def test_a_run_of_another_user_is_told_the_safe_attach() -> None:
    """Issue 45: `a` on a session whose tmux server is another user's runs
    that user's client; the advice says it is relayed through a terminal of
    gputui's (that user's programs never get the admin's), not a bare `a`."""
    snap = _waiting()
    assert snap.session is not None
    snap.session.socket, snap.session.owner = "/tmp/tmux-65534/default", "nobody"
    snap.session.server_tmux = [
        "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--init-groups", "--",
        "tmux", "-S", "/tmp/tmux-65534/default",
    ]  # fmt: skip
    f = _word(snap)
    assert "relays it through a terminal of its own" in f.fix, f.fix
    assert "uid 65534's programs never get yours" in f.fix
