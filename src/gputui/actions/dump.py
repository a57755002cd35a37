"""py-spy dump of the run's Python processes (one per rank), saved locally."""

from __future__ import annotations

import re
import time
from pathlib import Path

from gputui.actions.facts import FactsReader, Looked, look
from gputui.actions.inspect import RunInfo, check_owned, find_run
from gputui.actions.plan import (
    ActionError,
    ActionPlan,
    ActionResult,
    Progress,
    check_allowed,
    render_argv,
    say,
)
from gputui.actions.procid import read_proc_ids
from gputui.actions.server import tmux_as_socket_owner
from gputui.config import Settings
from gputui.remote.identity import ROOT_OWNED_SCRIPT, as_owner, identity_words, parse_root_owned
from gputui.remote.target import Target
from gputui.statefiles import private_dir, state_dir, write_private_new

PY_SPY_INSTALL = "pip install py-spy"
PTRACE_FIX = (
    "run as root inside the container, or give it ptrace: start the container/docker with "
    "--cap-add SYS_PTRACE, or `sysctl kernel.yama.ptrace_scope=0` on the host"
)
PTRACE_DENIED = re.compile(r"permission denied|operation not permitted|ptrace", re.I)

PY_SPY_CANDIDATES = ["py-spy", "/usr/local/bin/py-spy", "/root/.local/bin/py-spy"]


def install_where(target: Target) -> str:
    """Where a missing tool goes: 'inside CT 200', 'inside container trainer',
    or, with no container (a plain GPU server, --local, the demo), the machine."""
    if not target.in_container:
        return f"on {target.label}"
    return f"inside {target.container.words}"


async def require_tool(
    target: Target, candidates: list[str], tool: str, install: str, seen: Looked | None = None
) -> str:
    """The first candidate that root owns alone (the file and every
    directory above it root's, ROOT_OWNED_SCRIPT), or ActionError: not
    installed, or installed only where others than root can change it —
    root never runs that one (a `gdb` planted in a user's directory on PATH).
    `seen`: the candidates already looked up by the agent (the same check)."""
    if seen is not None:  # looked up with the run, in the same request
        exe, why = seen.root_tool()
    else:
        find = ["sh", "-c", ROOT_TOOLS_SCRIPT, "gputui-which", ROOT_OWNED_SCRIPT]
        res = await target.run([*find, *candidates], timeout=15.0)
        exe, why = parse_root_tools(res.out)
    if exe is not None:
        return exe
    if not why:
        raise ActionError(
            f"{tool} is not installed on {target.label}",
            f"install it {install_where(target)}: {install}",
        )
    raise ActionError(
        f"{tool} not run: gputui runs as root only a {tool} that root owns ({'; '.join(why)})",
        f"install it for root {install_where(target)}: {install} (as root)",
    )


def in_session(name: str | None) -> str:
    """ " in session 'x'" for a plan's title, or nothing without a session."""
    return f" in session {name!r}" if name else ""


def pids_target(target: Target, name: str | None, pids: list[int]) -> str:
    """A plan's target line for processes picked by PID (dump, flush)."""
    return (
        f"{target.label}"
        + (f" · session {name!r}" if name else "")
        + f" · pids {' '.join(map(str, pids))}"
    )


# "FOUND<TAB>ROOT_OWNED's answer" for each candidate found ($1: that script).
ROOT_TOOLS_SCRIPT = """chk=$1; shift
for c in "$@"; do
  p=$(command -v -- "$c" 2>/dev/null) && [ -n "$p" ] || continue
  printf '%s\\t' "$p"; sh -c "$chk" gputui-root-owned "$p"
done
"""

# "FILE<TAB>UID MODE<TAB>UID MODE" (the file, then its directory, links
# resolved) for each candidate that exists.
OWNERS_SCRIPT = """for f in "$@"; do
  r=$(readlink -f -- "$f" 2>/dev/null) && [ -f "$r" ] || continue
  printf '%s\\t%s\\t%s\\n' "$r" "$(stat -c '%u %a' -- "$r")" "$(stat -c '%u %a' -- "${r%/*}/")"
done
"""


def _next_to(extra: list[str], pythons: list[str]) -> list[str]:
    """py-spy installed next to the training interpreter (the run's own)."""
    out = [a.rsplit("/", 1)[0] + "/py-spy" for a in pythons if a.startswith("/")]
    return list(dict.fromkeys(extra + out))


def parse_root_tools(text: str) -> tuple[str | None, list[str]]:
    """ROOT_TOOLS_SCRIPT -> (the first root-owned tool, why each other is not)."""
    why: list[str] = []
    for line in text.split("\n"):
        found, tab, answer = line.partition("\t")
        if not tab:
            continue
        exe, reason = parse_root_owned(answer)
        if exe is not None:
            return exe, why
        why.append(f"{found}: {reason}")
    return None, why


def owned_by(text: str, uid: int) -> str | None:
    """OWNERS_SCRIPT -> the first file that uid alone can change (the file is
    uid's and not writable by group or others; its directory is uid's or
    root's and not writable by group or others), or None."""
    for line in text.split("\n"):
        f = line.split("\t")
        if len(f) != 3 or " " not in f[1] or " " not in f[2]:
            continue
        (fu, fm), (du, dm) = f[1].split(" ", 1), f[2].split(" ", 1)
        if fu == str(uid) and du in ("0", str(uid)) and _safe_mode(fm) and _safe_mode(dm):
            return f[0]
    return None


def _safe_mode(mode: str) -> bool:
    return mode.isdigit() and int(mode[-3:], 8) & 0o022 == 0


async def pick_py_spy(
    target: Target,
    extra: list[str],
    argv0s: list[str],
    owners: set[tuple[int, int]],
    seen: Looked | None = None,
) -> tuple[list[str], list[str]]:
    """(argv prefix that runs py-spy, notes). Root runs only a py-spy root
    owns (the file and every directory above it root's); a py-spy next to
    the run's Python that the run's owner owns runs as that owner (setpriv),
    never as root; anything else is refused, with what to install. `seen`:
    the candidates already looked up by the agent (the same check)."""
    if seen is not None:
        exe, why = seen.root_tool()
    else:
        find = ["sh", "-c", ROOT_TOOLS_SCRIPT, "gputui-which", ROOT_OWNED_SCRIPT]
        res = await target.run([*find, *extra, *PY_SPY_CANDIDATES], timeout=15.0)
        exe, why = parse_root_tools(res.out)
    if exe is not None:
        return [exe], []
    near = _next_to(extra, argv0s)
    stats = ""
    if near:
        stats = (await target.run(["sh", "-c", OWNERS_SCRIPT, "gputui-owners", *near])).out
    found = [ln.split("\t", 1)[0] for ln in stats.split("\n") if "\t" in ln]
    (uid, gid) = next(iter(owners)) if len(owners) == 1 else (0, 0)
    mine = owned_by(stats, uid) if uid != 0 else None
    if mine is not None:
        return as_owner(uid, gid, [mine]), [
            f"py-spy runs as {identity_words(uid)}: it is the run's own copy ({mine}), "
            "not root's, so root does not run it"
        ]
    if not why and not found:
        raise ActionError(
            f"py-spy is not installed on {target.label}",
            f"install it {install_where(target)}: {PY_SPY_INSTALL}",
        )
    what = "; ".join(why + [f"{f}: not root's (next to the run's Python)" for f in found])
    raise ActionError(
        f"py-spy not run: gputui runs as root only a py-spy that root owns ({what})",
        f"install it for root {install_where(target)}: {PY_SPY_INSTALL} (as root)",
    )


async def session_pythons(
    target: Target,
    name: str | None,
    tmux: list[str] | None,
    verb: str,
    facts: FactsReader | None = None,
    tools: list[str] | None = None,
) -> tuple[RunInfo, Looked | None]:
    """The run in tmux session `name`, for an action (`verb`) on its Python
    processes: refused in one line when no session was named, none has that
    name, no Python runs in it, or one of them is not the session owner's.
    Through `facts`, in one request with `tools` looked up (the Looked; None
    when read by commands)."""
    if not name:
        raise ActionError("no tmux session given", "pass --session NAME or --pid PID")
    tmux = await tmux_as_socket_owner(target, tmux)  # never root's hands on a user's server
    seen = await look(facts, name, tmux, tools)
    info = seen.info if seen is not None else await find_run(target, name, tmux)
    if not info.exists:
        raise ActionError(
            f"no tmux session named {name!r} on {target.label}",
            "check the session name or pass --pid PID",
        )
    if not info.pythons:
        raise ActionError(
            f"no Python process runs in session {name!r}",
            f"the run has ended or is not Python; nothing to {verb}",
        )
    check_owned(info, target.label, [p.pid for p in info.pythons])
    return info, seen


async def plan_dump(
    target: Target,
    settings: Settings,
    session: str | None = None,
    *,
    pids: list[int] | None = None,
    native: bool = False,
    locals_: bool = False,
    py_spy: str | None = None,
    tmux: list[str] | None = None,
    facts: FactsReader | None = None,
) -> ActionPlan:
    check_allowed(settings)
    name = session or settings.session
    extra = [py_spy] if py_spy else []
    seen: Looked | None = None
    if pids is None:
        info, seen = await session_pythons(
            target, name, tmux, "dump", facts, [*extra, *PY_SPY_CANDIDATES]
        )
        pys = info.pythons
        pids = [p.pid for p in pys]
        argv0s = [(info.argvs.get(p.pid) or [p.args.split(" ", 1)[0]])[0] for p in pys]
        listing = [f"  pid {p.pid}: {p.args[:120]}" for p in pys]
        ids = info.ids
    else:
        argv0s, listing = [], [f"  pid {p}" for p in pids]
        ids = await read_proc_ids(target, [int(p) for p in pids])
    owners = {(ids[p].uid, ids[p].gid) for p in pids if p in ids}
    exe, how = await pick_py_spy(target, extra, argv0s, owners, seen)
    flags = (["--native"] if native else []) + (["--locals"] if locals_ else [])
    commands = [[*exe, "dump", "--pid", str(int(p)), *flags] for p in pids]
    return ActionPlan(
        action="dump",
        title=f"py-spy dump of {len(pids)} Python process(es){in_session(name)}?",
        target=pids_target(target, name, pids),
        session=name,
        ct=target.ct_id,
        pids=[int(p) for p in pids],
        commands=commands,
        notes=["Reads the stacks with ptrace (pauses each process for a moment):", *listing, *how],
        params={"native": native, "locals": locals_},
    )


async def execute_dump(target: Target, plan: ActionPlan, progress: Progress = None) -> ActionResult:
    parts: list[str] = []
    errors: list[str] = []
    denied = False
    for argv in plan.commands:
        pid = argv[argv.index("--pid") + 1]
        say(progress, f"py-spy dump --pid {pid}…")
        res = await target.run(argv, timeout=60.0)
        text = (res.out + ("\n" + res.err if res.err.strip() else "")).strip()
        if res.ok:
            parts.append(f"===== pid {pid} =====\n{res.out.rstrip()}")
        else:
            if res.exit_status in (126, 127) and (
                "not found" in res.err or "No such file" in res.err
            ):
                return ActionResult(
                    ok=False,
                    summary=f"py-spy is missing on {target.label}",
                    details=[f"fix: {PY_SPY_INSTALL}"],
                )
            if PTRACE_DENIED.search(text):
                denied = True
            errors.append(
                f"pid {pid}: {text.splitlines()[0] if text else f'exit {res.exit_status}'}"
            )
            parts.append(f"===== pid {pid} (failed) =====\n{text}")
    output = "\n\n".join(parts) + "\n"
    saved = save_dump(output, plan)
    where = f"in {target.container.words}" if target.in_container else f"on {target.label}"
    details = [f"ran {where}: {render_argv(argv)}" for argv in plan.commands]
    details += errors
    if denied:
        details.append(f"ptrace was refused — fix: {PTRACE_FIX}")
    ok = not errors
    n_ok = len(plan.commands) - len(errors)
    summary = f"py-spy: {n_ok} of {len(plan.commands)} stack dump(s); saved to {saved}"
    if denied:
        summary = f"py-spy could not attach (ptrace refused); {summary}"
    return ActionResult(
        ok=ok, summary=summary, details=details, output=output, saved_path=str(saved)
    )


def save_dump(text: str, plan: ActionPlan) -> Path:
    d = private_dir(state_dir() / "dumps")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", plan.session or "pids")[:40]
    path = d / f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}.txt"
    n = 1
    while path.exists():
        path = d / f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}-{n}.txt"
        n += 1
    header = f"# gputui py-spy dump · {plan.target} · {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
    return write_private_new(path, header + text)
