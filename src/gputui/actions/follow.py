"""watch_log: follow the file the run's stdout really reaches. Only the
dashboard's view changes (the monitor's log stream); nothing runs on the
process, so it is allowed in --read-only too. Pure: the plan is built from
what the snapshot already knows."""

from __future__ import annotations

from gputui.actions.plan import ActionError, ActionPlan


def plan_watch_log(pid: int | None, stdout_files: list[str], following: str | None) -> ActionPlan:
    """The plan to switch the log view to the first file `pid`'s stdout
    reaches (`following`: the log the view shows now)."""
    if not stdout_files:
        raise ActionError("the process's stdout reaches no file", "pass --log PATH")
    path = stdout_files[0]
    return ActionPlan(
        action="watch_log",
        title="Follow the log the process really writes",
        target=path,
        pids=[pid] if pid is not None else [],
        commands=[["tail", "-c", "+0", "-F", path]],
        notes=[
            f"pid {pid if pid is not None else '?'}'s stdout reaches {path}; the log view "
            f"follows {following or 'nothing'}. Switch the log view to {path}. "
            "Nothing is run on the process."
        ],
        params={"log": path},
    )
