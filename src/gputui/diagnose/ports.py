"""A port the run could not listen on, read from its output, and the rule
that names who holds it (`port_in_use`). Pure.

torch.distributed's rendezvous store (torchrun, accelerate, deepspeed, a
bare `init_process_group` with MASTER_PORT) listens on one TCP port, 29500
unless told otherwise. A second run started while the first still holds it
(a relaunch by hand, a neighbour's run, a leftover of a killed session)
fails before its first step with one of:

- torch ≥ 2.4 (libuv store): `torch.distributed.DistNetworkError: The
  server socket has failed to listen on any local network address. port:
  29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already
  in use`
- torch ≤ 2.3: `RuntimeError: The server socket has failed to listen on any
  local network address. The server socket has failed to bind to
  [::]:29500 (errno: 98 - Address already in use). The server socket has
  failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).`
  (its `[W socket.cpp] [c10d]` warnings name the port the same way)
- any other server of the run (uvicorn, a metrics exporter): `[Errno 98]
  error while attempting to bind on address ('0.0.0.0', 8000): address
  already in use`, or a bare `OSError: [Errno 98] Address already in use`
  (no port).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.registry import Kind, rule
from gputui.diagnose.whose import RunOwner, run_owner, same_user
from gputui.model import Finding, PortHolder, Severity
from gputui.text.numbers import bounded_int
from gputui.text.untrusted import one_line

RECENT_LINES = 60  # as the other failures: a line counts among the last this many

# every line below holds one of these (looked for before any regex)
WORDS = ("ddress already in use", "EADDRINUSE", "rrno 98")
_TAKEN = re.compile(r"address already in use|EADDRINUSE|errno:? 98\b", re.IGNORECASE)
_PORT = (
    re.compile(r"failed to listen on any local network address\. port: (\d+)"),
    re.compile(r"failed to (?:bind|listen) (?:to|on) \S*:(\d+) \(errno: 98"),
    re.compile(r"bind on address \('[^']*', (\d+)\)"),
    # an address with its port (never a time of day: 12:34:56), or "port N"
    re.compile(r"(?:\b\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]*\]|\blocalhost|\*):(\d{1,5})\b"),
    re.compile(r"\bport[ =:]+(\d{1,5})\b", re.IGNORECASE),
)
TORCH_STORE = "failed to listen on any local network address"


@dataclass(frozen=True)
class PortTaken:
    """One line saying a port was taken: the port (None when the line does
    not name it), whether it is torch.distributed's store, and the line."""

    port: int | None
    torch: bool
    line: str


def port_taken(line: str) -> PortTaken | None:
    """The port `line` says is already in use, or None for any other line."""
    if not any(w in line for w in WORDS) or _TAKEN.search(line) is None:
        return None
    port = None
    for pattern in _PORT:
        m = pattern.search(line)
        port = bounded_int(m.group(1), 1, 65535) if m is not None else None
        if port is not None:
            break
    torch = TORCH_STORE in line or "[c10d]" in line
    return PortTaken(port, torch, line)


def ports_taken(lines: Iterable[str]) -> list[PortTaken]:
    """Each port the lines say is taken, newest line first (one per port;
    a line naming no port only when no line names one)."""
    out: list[PortTaken] = []
    seen: set[int | None] = set()
    for line in reversed(list(lines)):
        hit = port_taken(line)
        if hit is not None and hit.port not in seen:
            seen.add(hit.port)
            out.append(hit)
    named = [h for h in out if h.port is not None]
    return named or out


def is_owners(h: PortHolder, owner: RunOwner) -> bool:
    """Whether holder `h` is the run owner's process (may be stopped on
    their behalf); True when neither side is known (an agent that did not
    say: the words keep "if it is yours")."""
    same = same_user(h.uid, h.user, owner)
    return True if same is None else same


def whose(h: PortHolder) -> str:
    """'uid 0's sshd': another user's process, named by its program alone."""
    who = f"uid {h.uid}" if h.uid is not None else (h.user or "another user")
    return f"{who}'s {short(one_line(h.program), 30)}"


def _holder_words(h: PortHolder, owners: bool = True) -> str:
    if not owners:  # another user's command line never leaves the machine (alerts, history)
        return f"PID {h.pid}, {whose(h)}, listens on port {h.port} — not this run's"
    who = f"PID {h.pid}" + (f" ({h.user})" if h.user else "")
    where = f" in session '{h.session}'" if h.session else ", under no tmux session listed"
    return f"{who} listens on port {h.port}: {short(one_line(h.command), 80)}{where}"


def _port_fix(ctx: Context, port: int | None, tops: list[PortHolder], owners: bool) -> str:
    other = port + 1 if port is not None and port < 65535 else 29501
    elsewhere = (
        f"or start this run on another port: MASTER_PORT={other} (torchrun --master_port "
        f"{other}, or --rdzv-endpoint localhost:{other}; accelerate --main_process_port {other})"
    )
    if not tops:
        look = f"ss -ltnp 'sport = :{port}'" if port is not None else "ss -ltnp"
        return f"find who holds it: `{ctx.in_ct(look)}`, stop it if it is yours, {elsewhere}"
    h = tops[0]
    if not owners:  # never advice to stop a process the run's owner does not own
        return f"{whose(h)} is not this run's: leave it, and use another port — {elsewhere[3:]}"
    if h.session:
        stop = f"if the run in session '{h.session}' is done with, stop it (select it, k)"
    else:
        # outside tmux is not dead: a nohup'd run may hold it (never called a leftover)
        stop = (
            f"PID {h.pid} runs under no tmux session: if it is yours and done with, "
            f"stop it: `{ctx.in_ct(f'kill {h.pid}')}`"
        )
    return f"{stop}, then relaunch this one (r); {elsewhere}"


@rule(Kind("port_in_use", specificity=53, cause="port_in_use", alerts=True, host_word="dead"))
def rule_port_in_use(ctx: Context) -> Finding | None:
    """The run could not listen on a TCP port (torch.distributed's store:
    29500 unless told otherwise; any server of the run) because another
    process holds it: which one (the agent's `listeners` op: its PID,
    command and tmux session), and how to free it or use another port —
    stopping it only when it is the run owner's (issue 45: root's sshd is
    named by its program alone, with no kill in the fix).
    Nothing when the watched run itself holds the port now (the line is an
    earlier attempt's)."""
    if not ctx.recent_hold(RECENT_LINES, WORDS):
        return None
    taken = ports_taken(ctx.recent_lines(RECENT_LINES))
    if not taken:
        return None
    hit = taken[0]
    known = ctx.snap.ports_taken
    asked = known is not None and hit.port in known.ports
    holders = [h for h in known.holders if h.port == hit.port] if known and asked else []
    own = {p.pid for p in ctx.procs}
    if ctx.proc_alive and any(h.pid in own for h in holders):
        return None
    pids = {h.pid for h in holders}
    tops = [h for h in holders if not pids & set(h.ancestors)]  # not a forked child of another
    port = f"port {hit.port}" if hit.port is not None else "its port"
    what = "torch.distributed's store" if hit.torch else "the run"
    owner = run_owner(ctx)
    owners = not tops or is_owners(tops[0], owner)
    if tops and not owners:
        held = f"{whose(tops[0])} holds it — not this run's; use another port"
    elif tops:
        h = tops[0]
        by = f"PID {h.pid} ({short(one_line(h.command), 50)})"
        held = f"{by} in session '{h.session}' holds it" if h.session else f"{by} holds it"
    elif known is not None and asked and hit.port in known.unseen:
        held = "a process of another user holds it (gputui may not look into it)"
    elif asked:
        held = "nothing listens on it now: relaunching may work"
    else:
        held = "another process holds it"
    gone = ctx.run_gone
    ev = [f"the log: {short(one_line(hit.line, 400), 300)}"]
    ev += [_holder_words(h, is_owners(h, owner)) for h in tops[:3]]
    if len(holders) > len(tops):
        ev.append(f"{len(holders) - len(tops)} child process(es) of it hold the socket too")
    return Finding(
        kind="port_in_use",
        severity=Severity.ERROR if gone else Severity.WARNING,
        title=f"{what} could not listen on {port}, already in use: {held}",
        evidence=ev,
        fix=_port_fix(ctx, hit.port, tops, owners),
    )
