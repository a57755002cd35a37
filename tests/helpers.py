"""Helpers shared by the tests: wait until a condition holds (failing with
what was awaited), a transport that records the commands gputui starts, and
the settings a Monitor reads."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from typing import Any

from gputui.config import Settings
from gputui.remote.base import CommandResult, RemoteProcess, Transport


async def until(
    fn: Callable[[], Any], timeout: float = 10.0, what: str = "condition", poll: float = 0.02
) -> Any:
    """Await until `fn()` returns something true (polled every `poll` s); that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(poll)


def wait_for(
    fn: Callable[[], Any], timeout: float = 5.0, what: str = "condition", poll: float = 0.05
) -> Any:
    """Blocking `until`, for synchronous tests and setup."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(poll)


def dead_pane_with_status(
    tmux: Callable[[list[str]], Any],
    session: str,
    start: Callable[[], None],
    attempts: int = 5,
    output: str | None = None,
) -> str:
    """Run `start()` (which creates `session` with remain-on-exit and lets
    its command die) until tmux records the dead pane's exit status or
    signal — and, given `output`, holds that text of the command's in the
    pane; return "dead|status|signal".

    A command that prints and exits at once can die before tmux read its
    pty: the pane then holds only "Pane is dead" (a loaded fresh-clone run:
    `echo ImportError…; exit 3` left no ImportError in tmux itself), and
    nothing gputui captures can show it. Like the status below, tmux's loss.

    tmux 3.3a sometimes marks a pane dead and never fills in its status
    (measured here: 3–7 of 15 instant exits). That is tmux's loss, not the
    code under test, which can only report what tmux has; so the fixture
    retries instead of the assertion being loosened. `tmux(args)` runs tmux
    and returns a CompletedProcess."""
    fmt = "#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}"
    state = ""
    for _ in range(attempts):
        start()
        began = time.monotonic()
        nudged = began
        while time.monotonic() < began + 5.0:
            r = tmux(["list-panes", "-t", f"={session}:", "-F", fmt])
            state = (r.stdout or "").strip()
            if state.startswith("1|") and state != "1||":
                if output is None or _holds(tmux, session, output):
                    return state
                break  # dead without its output: start it again
            if state == "1||" and time.monotonic() - nudged > 1.0:
                # Dead, its process a zombie tmux has not reaped: tmux 3.3a
                # can miss the SIGCHLD (measured with three busy loops beside
                # it: 18 of 40 SIGTERMed panes still zombies after 10 s).
                # Another child of the server exiting makes it reap them all
                # (0 of 40 with this nudge).
                tmux(["run-shell", "true"])
                nudged = time.monotonic()
            time.sleep(0.05)
        tmux(["kill-session", "-t", f"={session}"])
    kept = "" if output is None else f" with {output!r} in its pane"
    raise AssertionError(f"tmux never recorded the exit of {session}{kept}: last state {state!r}")


def _holds(tmux: Callable[[list[str]], Any], session: str, text: str) -> bool:
    """`session`'s pane holds `text` (a dead pane's content is final; a
    moment for tmux to have drawn what it read)."""
    for _ in range(10):
        if any(text in line for line in pane_text(tmux, session)):
            return True
        time.sleep(0.05)
    return False


def pane_text(tmux: Callable[[list[str]], Any], session: str) -> list[str]:
    """The non-blank lines tmux holds for `session`'s pane, history included
    (what a failing test shows of the pane beside what gputui saw)."""
    r = tmux(["capture-pane", "-p", "-J", "-S", "-50", "-t", f"={session}:"])
    return [x for x in (r.stdout or "").splitlines() if x.strip()] or [f"({r.stderr!r})"]


class CountingTransport(Transport):
    """Delegates to a real transport and records every command gputui starts."""

    def __init__(self, inner: Transport) -> None:
        super().__init__()
        self.inner = inner
        self.label = inner.label
        self.calls: list[tuple[float, str, list[str]]] = []  # (monotonic, run|open, argv)
        inner.on_state(self._set_state)

    @property  # type: ignore[override]
    def rtt_ms(self) -> float | None:
        return self.inner.rtt_ms

    @rtt_ms.setter
    def rtt_ms(self, value: float | None) -> None:
        pass

    async def connect(self) -> None:
        await self.inner.connect()

    async def run(
        self, argv: list[str], *, timeout: float = 10.0, input: bytes | None = None
    ) -> CommandResult:
        self.calls.append((time.monotonic(), "run", list(argv)))
        return await self.inner.run(argv, timeout=timeout, input=input)

    async def open(self, argv: list[str], *, watchdog: bool = True) -> RemoteProcess:
        self.calls.append((time.monotonic(), "open", list(argv)))
        return await self.inner.open(argv, watchdog=watchdog)

    async def close(self) -> None:
        await self.inner.close()

    def pct_execs(self, since: float = 0.0) -> list[list[str]]:
        return [a for t, _, a in self.calls if t >= since and a[:2] == ["pct", "exec"]]


def monitor_settings(**kw: Any) -> Settings:
    """Settings for a Monitor under test: fast polling, GPUs read on the host."""
    base: dict[str, Any] = {"interval": 0.25, "gpu_source": "host"}
    base.update(kw)
    return Settings(**base)


def run_on_a_terminal(
    argv: list[str], env: dict[str, str], timeout: float, *, join_s: float = 5.0, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """Run argv with stdout on a pseudo-terminal (so gputui draws its
    dashboard, as in a real terminal: a pipe gets doctor's text) and stderr
    captured; the screen's bytes are read off and dropped.

    The reader thread owns the pty's master side and closes it itself when
    its read ends (EIO: the last holder of the slave side closed it). It
    was closed here after a 5 s join: a reader still in its read (a process
    left holding the terminal, or a thread not scheduled on a loaded
    machine) then read the same descriptor number again — by then another
    file of this worker's next test (shown: 60,000 bytes written into a
    pipe opened after it were all taken by this thread). A relay test's
    pipe lost a piece of a line that way: JSONDecodeError under load."""
    import os
    import pty
    import threading

    master, slave = pty.openpty()

    def drain() -> None:
        try:
            while os.read(master, 65536):
                pass
        except OSError:  # EIO: the last holder of the slave side closed it
            pass
        finally:
            os.close(master)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        return subprocess.run(
            argv, stdout=slave, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env, **kw
        )
    finally:
        os.close(slave)
        reader.join(join_s)  # still reading: a process holds the terminal; the thread closes it


def flush_cannot_work_here(result: Any) -> str | None:
    """Why this machine cannot flush a live process (the test then checks the
    refusal and skips the rest), or None. Two machine facts, not gputui's
    doing: ptrace refused, and gdb 13 or older on a CPU with AMX — it cannot
    write back a thread's registers after its call ("Couldn't write extended
    state", XSTATE_HINT), so gputui's canary refuses before touching the run.
    The refusal is asserted here: the run was not touched and the user is
    told why; tests/test_flush_canary.py checks the canary itself."""
    from gputui.actions.flush import XSTATE_HINT

    details = " ".join(result.details)
    if "ptrace was refused" in details:
        return f"ptrace is refused here: {result.details}"
    if not result.ok and XSTATE_HINT in result.details:
        assert "not tried" in result.summary and "nothing was done" in result.summary
        assert any("was not touched" in d for d in result.details), result.details
        return "this machine's gdb cannot call into a process on an AMX CPU (gdb 14+ can)"
    return None


async def yes_once_shown(pilot: Any, timeout: float = 30.0) -> None:
    """Press y in the confirm box once its plan has been shown (painted). A y
    before that runs nothing, by design (ui/screens/confirm.py, issue 46), and
    on a loaded machine reading and painting the plan can take seconds: a
    test that pressed y after one pause ran nothing and waited in vain."""
    from gputui.ui.screens.confirm import ConfirmScreen

    def shown() -> bool:
        box = pilot.app.screen
        return isinstance(box, ConfirmScreen) and box.state == "shown"

    await until(shown, timeout, "the confirm box's plan shown")
    await pilot.press("y")


def facts_of(agent: Any) -> Any:
    """The monitor's question to its agent (Monitor.run_facts), asked of
    this real AgentClient: what ActionBackend gives a plan (actions/facts.py)."""

    async def facts(request: dict[str, Any]) -> dict[str, Any] | None:
        answer = await agent.call("facts", timeout=10.0, **request)
        return answer if isinstance(answer, dict) else None

    return facts
