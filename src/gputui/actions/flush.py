"""Flush live: make a block-buffered Python process write out its stdout
buffer and switch to line buffering, without restarting it (gdb calling into
the interpreter; pauses the process for about a second)."""

from __future__ import annotations

import re

from gputui.actions.dump import (
    PTRACE_DENIED,
    PTRACE_FIX,
    in_session,
    pids_target,
    require_tool,
    session_pythons,
)
from gputui.actions.facts import FactsReader, Looked
from gputui.actions.inspect import file_size
from gputui.actions.plan import (
    ActionError,
    ActionPlan,
    ActionResult,
    Progress,
    check_allowed,
    render_argv,
    say,
)
from gputui.actions.procid import ProcId, changed, pinned, read_proc_ids
from gputui.config import Settings
from gputui.remote.identity import as_owner, identity_words, parse_root_owned, root_owned_argv
from gputui.remote.target import Target

FLUSH_CODE = "import sys;sys.stdout.flush();sys.stdout.reconfigure(line_buffering=True)"
GDB_INSTALL = "apt-get install gdb"
# Where root's gdb is when PATH's first one is not root's alone.
GDB_CANDIDATES = ["gdb", "/usr/bin/gdb", "/usr/local/bin/gdb"]


def gdb_argv(gdb: str, pid: int) -> list[str]:
    return [
        gdb,
        "-p",
        str(int(pid)),
        "-batch",
        "-nx",
        "-ex",
        "call (int)PyGILState_Ensure()",
        "-ex",
        f'call (int)PyRun_SimpleString("{FLUSH_CODE}")',
        "-ex",
        "call (void)PyGILState_Release($1)",
    ]


async def plan_flush(
    target: Target,
    settings: Settings,
    session: str | None = None,
    *,
    pids: list[int] | None = None,
    log: str | None = None,
    gdb: str | None = None,
    tmux: list[str] | None = None,
    facts: FactsReader | None = None,
) -> ActionPlan:
    check_allowed(settings)
    name = session or settings.session
    logs: list[str] = [log] if log else []
    gdbs = [gdb] if gdb else GDB_CANDIDATES
    seen: Looked | None = None
    if pids is None:  # through the agent: the run, gdb and the canary's Python in one request
        info, seen = await session_pythons(target, name, tmux, "flush", facts, gdbs)
        pids = [p.pid for p in info.pythons]
        logs = logs or info.log_files()
        ids = info.ids
    else:
        ids = await read_proc_ids(target, [int(p) for p in pids])
    if not logs and settings.log:
        logs = [settings.log]
    exe = await require_tool(target, gdbs, "gdb", GDB_INSTALL, seen)
    if not pids:
        raise ActionError("no process given to flush", "pass --session NAME or --pid PID")
    canary, who = await plan_canary(target, int(pids[0]), ids.get(int(pids[0])), seen)
    return ActionPlan(
        action="flush",
        title=f"Flush stdout of {len(pids)} Python process(es) live{in_session(name)}?",
        target=pids_target(target, name, pids),
        session=name,
        ct=target.ct_id,
        pids=[int(p) for p in pids],
        commands=[gdb_argv(exe, p) for p in pids],
        notes=[
            "gdb attaches and runs sys.stdout.flush() + line buffering inside each process; "
            "each process pauses briefly (about a second).",
            "first, the same gdb calls on a throw-away process of the same Python: if they "
            "fail there, the run is not touched. That process runs as "
            f"{who}: $ {render_argv(canary)}",
            *(f"log: {lg}" for lg in logs),
        ],
        params={
            "logs": logs,
            "canary": canary,
            "exe": canary[-3],
            "procs": pinned({p: i for p, i in ids.items() if p in set(pids)}),
        },
    )


async def plan_canary(
    target: Target, pid: int, run: ProcId | None, seen: Looked | None = None
) -> tuple[list[str], str]:
    """The canary's argv and whose identity it has: the run's interpreter
    (resolved now, when the box opens) started as the run's owner; as root
    only when the run is root's and the interpreter is root's alone. A
    user's interpreter runs the user's code at start-up (a .pth file).
    `seen`: the agent's answer, which checked a root run's interpreter too."""
    if run is None or not run.exe.startswith("/") or run.exe.endswith(" (deleted)"):
        raise ActionError(
            f"cannot tell which Python pid {pid} runs (it has ended, or its executable is "
            "unreadable or deleted)",
            "r relaunches it unbuffered (PYTHONUNBUFFERED=1); the old log is kept",
        )
    command = [run.exe, "-c", CANARY_CODE]
    if run.uid != 0:
        return as_owner(run.uid, run.gid, command), identity_words(run.uid)
    if seen is not None and run.exe in seen.root_exes:
        ok, why = seen.root_exes[run.exe]
        resolved = run.exe if ok else None
    else:
        res = await target.run(root_owned_argv(run.exe))
        resolved, why = parse_root_owned(res.out)
    if resolved is None:
        raise ActionError(
            f"flush not planned: the run's Python {run.exe} is not root's alone ({why}), "
            "and the test process would start it as root",
            "r relaunches it unbuffered (PYTHONUNBUFFERED=1); the old log is kept",
        )
    return command, "root (the run and its Python are root's)"


_CALL_RESULT = re.compile(r"^\$2 = (-?\d+)", re.M)


# A throw-away Python process of the same interpreter as the run, for gdb to
# call into first. Seen on a real H200 machine (gdb 13.1): gdb could not
# restore a thread's registers after its call ("Couldn't write extended state
# status: Bad address"); the training run it had attached to crashed (a futex
# error) or hung. Only when the same calls work on the stand-in is the run
# touched. $1: how many words the canary's command has, then those words
# (the interpreter resolved when the box opened, as the run's owner), then
# gdb and its arguments after -p.
CANARY_CODE = "import time; time.sleep(60)"
CANARY_SCRIPT = (
    'n=$1; shift; cmd=("${@:1:n}"); shift "$n"; '
    '"${cmd[@]}" </dev/null >/dev/null 2>&1 & p=$!; '
    'sleep 1; g=$1; shift; "$g" -p "$p" "$@"; s=$?; kill "$p" 2>/dev/null; exit $s'
)


# Why, found on that machine (bench/gpu/xstate_check.py, docs/real-gpu.md):
# gdb 13 writes the registers back from a fixed 2,696-byte XSAVE buffer; with
# AMX enabled the CPU's XSAVE area is 11,008 bytes, and Linux refuses a
# PTRACE_SETREGSET of any other size with EFAULT. gdb 16.3 sizes it from the
# CPU and flushed the same run there.
XSTATE_HINT = (
    "why: this gdb cannot write back the registers of a CPU with a large XSAVE area "
    "(AMX: 11,008 bytes; gdb 13 and older use 2,696); gdb 14 or newer can"
)


def canary_argv(canary: list[str], gdb_command: list[str]) -> list[str]:
    """The same gdb calls as `gdb_command`, on a throw-away process started
    with the argv `canary`."""
    gdb = gdb_command[0]
    rest = gdb_command[gdb_command.index("-p") + 2 :]
    head = ["bash", "-c", CANARY_SCRIPT, "gputui-flush-canary", str(len(canary))]
    return [*head, *canary, gdb, *rest]


def gdb_call_worked(text: str, exit_status: int | None) -> bool:
    m = _CALL_RESULT.search(text)
    return exit_status == 0 and m is not None and m.group(1) == "0" and "Couldn't" not in text


async def canary_refusal(target: Target, plan: ActionPlan) -> ActionResult | None:
    """None when gdb can call into a stand-in process here; else the result
    that says why the run was not touched."""
    res = await target.run(canary_argv(plan.params["canary"], plan.commands[0]), timeout=60.0)
    text = res.out + res.err
    if gdb_call_worked(text, res.exit_status):
        return None
    said = [ln for ln in text.splitlines() if ln.strip() and "LWP" not in ln][-6:]
    return ActionResult(
        ok=False,
        summary="flush not tried: gdb could not call into a test Python process here, "
        "so it could crash or hang the run; nothing was done to it",
        details=[
            "gdb ran the same calls on a throw-away process of the run's Python first:",
            *(f"  gdb: {ln}" for ln in said),
            f"the run (pid {', '.join(str(p) for p in plan.pids)}) was not touched",
            *([XSTATE_HINT] if "Couldn't write extended state" in text else []),
            "fix: r relaunches it unbuffered (PYTHONUNBUFFERED=1); the old log is kept",
        ],
        data={"bytes": 0, "grown": {}, "canary": text[-2000:]},
    )


async def check_same_python(target: Target, plan: ActionPlan) -> None:
    """Refuse when a process the box showed is another one now, or runs
    another executable than the one the canary would start."""
    from gputui.actions.kill import CHANGED_FIX

    if "canary" not in plan.params:
        raise ActionError(
            "this flush's plan does not name the test process it would start",
            "plan the action again (press its key again)",
        )
    want = plan.params.get("procs") or {}
    now = await read_proc_ids(target, [int(p) for p in want])
    lines = changed(want, now)
    first = now.get(int(plan.pids[0])) if plan.pids else None
    if not lines and first is not None and first.exe != plan.params["exe"]:
        lines = [f"pid {first.pid} runs {first.exe} now, not {plan.params['exe']}"]
    if lines:
        raise ActionError(lines[0], CHANGED_FIX)


async def execute_flush(
    target: Target, plan: ActionPlan, progress: Progress = None
) -> ActionResult:
    logs: list[str] = plan.params.get("logs", [])
    await check_same_python(target, plan)
    say(progress, "gdb: trying the calls on a throw-away Python process first…")
    refused = await canary_refusal(target, plan)
    if refused is not None:
        return refused
    before = {lg: await file_size(target, lg) for lg in logs}
    details: list[str] = []
    failed = 0
    denied = False
    for argv in plan.commands:
        pid = argv[argv.index("-p") + 1]
        say(progress, f"gdb flush pid {pid}…")
        res = await target.run(argv, timeout=60.0)
        text = res.out + res.err
        m = _CALL_RESULT.search(text)
        if res.ok and m and m.group(1) == "0":
            details.append(f"pid {pid}: flushed, now line-buffered")
            continue
        failed += 1
        if PTRACE_DENIED.search(text) and "No such process" not in text:
            denied = True
        why = next((ln for ln in text.splitlines() if "ptrace" in ln.lower() or "rror" in ln), "")
        if m and m.group(1) != "0":
            why = "PyRun_SimpleString raised inside the process"
        elif "No symbol" in text:
            why = "no Python symbols found (is this a Python process?)"
        details.append(f"pid {pid}: failed — {why or f'gdb exit {res.exit_status}'}")
        tail = [ln for ln in text.splitlines() if ln.strip()][-6:]
        details += [f"  gdb: {ln}" for ln in tail]  # what gdb said, to judge what went wrong
    import asyncio

    await asyncio.sleep(0.3)  # tee needs a moment to copy what was flushed
    after = {lg: await file_size(target, lg) for lg in logs}
    grown = {lg: (after[lg] or 0) - (before[lg] or 0) for lg in logs}
    for lg, n in grown.items():
        details.append(f"{lg}: {before[lg]} -> {after[lg]} bytes (+{n})")
    if denied:
        details.append(f"ptrace was refused — fix: {PTRACE_FIX}")
    total = sum(grown.values())
    ok = failed == 0
    summary = f"flushed {len(plan.commands) - failed} of {len(plan.commands)} process(es)" + (
        f"; {total} bytes appeared in the log" if logs else "; no log file known to measure"
    )
    return ActionResult(
        ok=ok, summary=summary, details=details, data={"bytes": total, "grown": grown}
    )
