"""Test fakes for the dashboard: a monitor over a Snapshot you control and an
action backend that records every call (tests and scripts/screenshots.py;
not shipped in the package)."""

from __future__ import annotations

from gputui.actions import ActionPlan, ActionResult, plan_watch_log
from gputui.errors import GputuiError
from gputui.model import LogState, Snapshot
from gputui.monitor import (
    UPDATES,
    Listener,
    LogChanged,
    ProcsChanged,
    SessionsChanged,
    Update,
    news_of,
)


class SceneMonitor:
    """The Monitor API over a Snapshot you control. `set()` publishes a
    change, `push_lines()` new log lines (`log_lines`: those the first
    listener hears of at once)."""

    def __init__(self, snap: Snapshot, log_lines: list[str] | None = None) -> None:
        self.snapshot = snap
        self._first_lines: list[str] = list(log_lines or [])
        self._listeners: list[Listener] = []
        self.pushed: list[str] = []  # every line pushed
        self.started = False
        self.stopped = False
        self.watched: list[str] = []
        self.followed: list[str] = []
        self.refreshes = 0

    def subscribe(self, cb: Listener) -> None:
        self._listeners.append(cb)
        first, self._first_lines = self._first_lines, []
        if first:
            cb(self.snapshot, news_of((), first))

    def unsubscribe(self, cb: Listener) -> None:
        if cb in self._listeners:
            self._listeners.remove(cb)

    def publish(self, kinds: set[type[Update]]) -> None:
        news = news_of(kinds)
        for cb in list(self._listeners):
            cb(self.snapshot, news)

    def set(self, snap: Snapshot, kinds: set[type[Update]] | None = None) -> None:
        self.snapshot = snap
        self.publish(kinds or set(UPDATES))

    def push_lines(self, lines: list[str], dropped: int = 0) -> None:
        """New lines of the log (`dropped`: lines the monitor let go before them)."""
        self.pushed.extend(lines)
        news = news_of((), lines, dropped)
        for cb in list(self._listeners):
            cb(self.snapshot, news)

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def refresh(self) -> None:
        self.refreshes += 1

    def watch_session(self, name: str) -> None:
        self.watched.append(name)
        self.snapshot.session_name = name
        self.publish({SessionsChanged, ProcsChanged})

    def watch_log(self, path: str) -> None:
        self.followed.append(path)
        self.snapshot.log = LogState(path=path, exists=True)
        self.publish({LogChanged})


class RecordingActions:
    """An action backend that plans fixed commands and records every call.
    Tests use it to prove nothing runs without a confirmation. watch_log is
    planned by the real (pure) planner: it only reads the snapshot."""

    def __init__(self, outcome: ActionResult | None = None, fail_plan: str | None = None) -> None:
        self.planned: list[ActionPlan] = []
        self.options: list[object | None] = []  # each plan's options (the palette's switch)
        self.executed: list[ActionPlan] = []
        self.outcome = outcome or ActionResult(True, "done")
        self.fail_plan = fail_plan
        self.raise_on_execute: Exception | None = None
        self.progress = None

    async def plan(self, verb: str, snap: Snapshot, options: object | None = None) -> ActionPlan:
        self.options.append(options)
        if self.fail_plan:
            raise GputuiError(self.fail_plan, "fix it")
        session = snap.session_name or "?"
        if verb == "watch_log":
            proc = snap.training_proc
            files = list(proc.stdout.files) if proc is not None else []
            p = plan_watch_log(proc.pid if proc else None, files, snap.log.path or None)
            self.planned.append(p)
            return p
        commands = {
            "relaunch": [
                ["tmux", "send-keys", "-t", f"={session}:", "C-c"],
                ["mv", "/workspace/train.log", "/workspace/train.log.20260101-120000"],
                [
                    "tmux",
                    "new-session",
                    "-d",
                    "-s",
                    session,
                    "-c",
                    "/workspace",
                    "set -o pipefail; PYTHONUNBUFFERED=1 python3 -u train.py 2>&1"
                    " | tee -a -i /workspace/train.log",
                    ";",
                    "set-option",
                    "-p",
                    "-t",
                    f"={session}:",
                    "remain-on-exit",
                    "on",
                ],
            ],
            "dump": [["py-spy", "dump", "--pid", "4242"]],
        }.get(verb, [[f"gputui-{verb}", session]])
        p = ActionPlan(
            action=verb,
            title=f"{VERB_TITLES.get(verb, verb)} session {session!r}?",
            target=f"{snap.target} · session {session!r} · pid 4242",
            session=session,
            notes=[VERB_NOTES.get(verb, f"{verb} the run in session {session!r}.")],
            commands=commands,
        )
        self.planned.append(p)
        return p

    async def execute(self, plan: ActionPlan) -> ActionResult:
        self.executed.append(plan)
        if self.raise_on_execute is not None:
            raise self.raise_on_execute
        return self.outcome


VERB_TITLES = {"relaunch": "Relaunch unbuffered", "dump": "py-spy dump", "kill": "Kill"}
VERB_NOTES = {
    "relaunch": (
        "Stop the run (SIGINT, then SIGTERM), move the old log aside (never truncated), "
        "and start it again with PYTHONUNBUFFERED=1 and python -u, output through tee -a -i."
    ),
    "dump": "Read every Python thread's stack with py-spy (pauses the process for a moment).",
}
