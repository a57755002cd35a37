"""Read-only looks at a run inside the target, for planning actions:
the tmux pane, the process tree under it, where its output goes.

Only fixed argv lists and fixed scripts with positional values run here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from gputui.actions.plan import ActionError
from gputui.actions.procid import ProcId, read_proc_ids
from gputui.actions.runspec import session_target, tmux_argv
from gputui.actions.scripts import LINKS_SCRIPT
from gputui.collect import tmux as tmux_parse
from gputui.model import Pane
from gputui.remote.identity import path_reader_argv
from gputui.remote.target import Target

_PYTHON_NAME = re.compile(r"^python[0-9.]*$")
LOG_READERS = {"tee", "cat", "logger", "ts", "pv"}


def argv_from_cmdline(data: bytes) -> list[str]:
    """/proc/PID/cmdline -> argv. Every argument ends in one NUL (an empty
    argument is a lone NUL); bytes that are not UTF-8 become lone
    surrogates (surrogateescape), which the transports send back as the
    same bytes."""
    if not data:
        return []
    if data.endswith(b"\0"):
        data = data[:-1]
    return [a.decode("utf-8", "surrogateescape") for a in data.split(b"\0")]


def argv_from_hex(text: str) -> list[str]:
    try:
        return argv_from_cmdline(bytes.fromhex(text.strip()))
    except ValueError:
        return []


@dataclass
class PsRow:
    pid: int
    ppid: int
    pgid: int
    stat: str
    args: str

    @property
    def argv0(self) -> str:
        return os.path.basename(self.args.split(" ", 1)[0]) if self.args else ""

    @property
    def is_python(self) -> bool:
        return bool(_PYTHON_NAME.match(self.argv0))

    @property
    def zombie(self) -> bool:
        return self.stat.startswith("Z")


@dataclass
class RunInfo:
    """What runs in one tmux session right now."""

    session: str
    pane: Pane | None
    procs: list[PsRow] = field(default_factory=list)  # pane pid and its descendants
    fds: dict[int, dict[int, str]] = field(default_factory=dict)  # pid -> fd -> link
    cwds: dict[int, str] = field(default_factory=dict)
    argvs: dict[int, list[str]] = field(default_factory=dict)  # exact argv from /proc/PID/cmdline
    ids: dict[int, ProcId] = field(default_factory=dict)  # start time, owner, exe of each pid
    # uid of the tmux server's owner when it is another user's (`-S SOCK`):
    # that server says what its panes are, so their processes must be its owner's.
    server_uid: int | None = None

    def foreign(self, pids: list[int]) -> list[ProcId]:
        """Those of `pids` whose owner is not the (other user's) tmux server's
        owner, or whose owner is unknown; [] for root's own server."""
        if self.server_uid is None:
            return []
        return [
            self.ids.get(p) or ProcId(p, 0, -1, -1)
            for p in pids
            if p not in self.ids or self.ids[p].uid != self.server_uid
        ]

    def fd1(self, pid: int) -> str:
        return self.fds.get(pid, {}).get(1, "")

    @property
    def exists(self) -> bool:
        return self.pane is not None

    @property
    def alive(self) -> bool:
        return self.pane is not None and not self.pane.dead

    @property
    def pythons(self) -> list[PsRow]:
        return [p for p in self.procs if p.is_python and not p.zombie]

    @property
    def main_python(self) -> PsRow | None:
        """The topmost Python process (its parent is not Python)."""
        pys = self.pythons
        ids = {p.pid for p in pys}
        for p in pys:
            if p.ppid not in ids:
                return p
        return pys[0] if pys else None

    @property
    def run_pgids(self) -> list[int]:
        """Process groups holding the run's Python processes, or the pane's
        process group when there is no Python process."""
        pgs = sorted({p.pgid for p in self.pythons})
        if not pgs and self.pane and self.pane.pid and not self.pane.dead:
            pane_row = next((p for p in self.procs if p.pid == self.pane.pid), None)
            if pane_row and len(self.procs) > 1:
                pgs = sorted({p.pgid for p in self.procs if p.pid != self.pane.pid}) or [
                    pane_row.pgid
                ]
            elif pane_row:
                pgs = [pane_row.pgid]
        return pgs

    @property
    def group_procs(self) -> list[PsRow]:
        pgs = set(self.run_pgids)
        return [p for p in self.procs if p.pgid in pgs and not p.zombie]

    @property
    def interrupt_pids(self) -> list[int]:
        """Who gets SIGINT: the run's processes except log readers (tee),
        so a plain `| tee` keeps writing what Python flushes on the way out."""
        return [p.pid for p in self.group_procs if p.argv0 not in LOG_READERS]

    def log_files(self) -> list[str]:
        """Files the run's output ends in: tee's arguments, or fd 1 files."""
        out: list[str] = []
        for p in self.procs:
            if p.argv0 == "tee" and not p.zombie:
                out += [
                    link
                    for fd, link in sorted(self.fds.get(p.pid, {}).items())
                    if fd > 2 and _is_file(link)
                ]
        if not out:
            for p in self.pythons:
                if _is_file(self.fd1(p.pid)):
                    out.append(self.fd1(p.pid))
        seen: list[str] = []
        for f in out:
            if f not in seen:
                seen.append(f)
        return seen


def _is_file(link: str) -> bool:
    return (
        link.startswith("/")
        and not link.startswith(("/dev/", "/proc/"))
        and " (deleted)" not in link
    )


def parse_panes(text: str, session: str | None = None) -> list[Pane]:
    """Output of `list_panes_argv` -> its panes (collect.tmux's format and
    parser); with `session`, only that session's panes: a record of another
    session in the answer is never taken for the one asked for."""
    return [
        p
        for s in tmux_parse.parse_panes(text)
        if session is None or s.name == session
        for p in s.panes
    ]


def parse_ps(text: str) -> list[PsRow]:
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 4 or not all(x.isdigit() for x in parts[:3]):
            continue
        rows.append(
            PsRow(
                int(parts[0]),
                int(parts[1]),
                int(parts[2]),
                parts[3],
                parts[4] if len(parts) > 4 else "",
            )
        )
    return rows


def descendants(rows: list[PsRow], root: int) -> list[PsRow]:
    kids: dict[int, list[PsRow]] = {}
    for r in rows:
        kids.setdefault(r.ppid, []).append(r)
    out = [r for r in rows if r.pid == root]
    stack = [root]
    while stack:
        for r in kids.get(stack.pop(), []):
            out.append(r)
            stack.append(r.pid)
    return out


# -ww: the whole command line. Without it ps cuts `args` at the terminal's
# width, or at COLUMNS when set (80 in many shells): an interpreter under a
# long path lost its name and the run's Python went unseen.
PS_ARGV = ["ps", "-ww", "-eo", "pid=,ppid=,pgid=,stat=,args="]


async def list_procs(target: Target) -> list[PsRow]:
    res = await target.run(PS_ARGV, timeout=10.0)
    return parse_ps(res.out) if res.ok else []


def list_panes_argv(session: str, tmux: list[str] | None = None) -> list[str]:
    return tmux_argv(
        tmux, "list-panes", "-s", "-t", session_target(session), "-F", tmux_parse.LIST_PANES_FORMAT
    )


async def find_run(target: Target, session: str, tmux: list[str] | None = None) -> RunInfo:
    """The session's first pane and the processes under it (read-only)."""
    res = await target.run(list_panes_argv(session, tmux), timeout=10.0)
    panes = parse_panes(res.out, session) if res.ok else []
    info = RunInfo(session=session, pane=panes[0] if panes else None)
    if info.pane is None or info.pane.pid is None:
        return info
    info.server_uid = await server_uid(target, tmux)
    rows = await list_procs(target)
    info.procs = descendants(rows, info.pane.pid)
    if info.procs:
        info.cwds, info.argvs, info.fds = await read_links(target, [p.pid for p in info.procs])
        info.ids = await read_proc_ids(target, [p.pid for p in info.procs])
    return info


def check_owned(info: RunInfo, where: str, pids: list[int]) -> None:
    """Refuse (one line) to act on the pane's process or `pids` when one is
    not the tmux server's owner's and the server is another user's: that
    server says which PID its pane has (issue 34: a pane record naming
    root's process, which kill then signalled)."""
    pane_pid = [info.pane.pid] if info.pane is not None and info.pane.pid is not None else []
    bad = info.foreign(pane_pid + list(pids))
    if bad:
        who = "unknown" if bad[0].uid < 0 else f"uid {bad[0].uid}"
        raise ActionError(
            f"session {info.session!r} on {where} is in uid {info.server_uid}'s tmux server, "
            f"but its pane names pid {bad[0].pid} of {who}; nothing was done",
            "act on that process yourself, as its owner, after checking what it is",
        )


def server_socket(tmux: list[str] | None) -> str | None:
    """SOCK of a tmux argv that reaches a server by `-S SOCK` (maybe after a
    setpriv/runuser prefix), else None: the default server, or `-L NAME`."""
    if not tmux:
        return None
    at = max((i for i, a in enumerate(tmux) if os.path.basename(a) == "tmux"), default=-1)
    rest = tmux[at + 1 :] if at >= 0 else []
    return rest[rest.index("-S") + 1] if "-S" in rest[:-1] else None


async def server_uid(target: Target, tmux: list[str] | None) -> int | None:
    """uid of the tmux server `tmux` reaches when it is another user's: the
    owner of its `-S` socket (root's → None, as for the default server).
    An unreadable owner counts as nobody's (-1): nothing will match it."""
    sock = server_socket(tmux)
    if sock is None:
        return None
    res = await target.run(["stat", "-c", "%u", "--", sock], timeout=10.0)
    uid = res.out.strip()
    if not (res.ok and uid.isdigit()):
        return -1
    return int(uid) or None


def link_records(out: bytes) -> list[tuple[int, str, str]]:
    """LINKS_SCRIPT's hex stream -> (pid, what, link) records. A link keeps
    every byte but the one newline `readlink` ends it with (a directory's
    name may end in a newline of its own)."""
    try:
        data = bytes.fromhex(out.decode("ascii", "replace").strip())
    except ValueError:
        return []
    records: list[tuple[int, str, str]] = []
    for raw in data.split(b"\0"):
        parts = raw.decode("utf-8", "surrogateescape").split("\t", 2)
        if len(parts) == 3 and parts[0].isdigit():
            link = parts[2][:-1] if parts[2].endswith("\n") else parts[2]
            records.append((int(parts[0]), parts[1], link))
    return records


async def read_links(
    target: Target, pids: list[int]
) -> tuple[dict[int, str], dict[int, list[str]], dict[int, dict[int, str]]]:
    """(cwds, exact argvs, fd links) of these processes, in one command."""
    links = await target.run(["sh", "-c", LINKS_SCRIPT, "sh", *map(str, pids)], timeout=10.0)
    return links_of(links.stdout)


def links_of(
    out: bytes,
) -> tuple[dict[int, str], dict[int, list[str]], dict[int, dict[int, str]]]:
    """LINKS_SCRIPT's answer -> (cwds, exact argvs, fd links)."""
    cwds: dict[int, str] = {}
    argvs: dict[int, list[str]] = {}
    fds: dict[int, dict[int, str]] = {}
    for pid, what, link in link_records(out):
        if what == "cwd":
            cwds[pid] = link
        elif what == "cmdline":
            argv = argv_from_hex(link)
            if argv:
                argvs[pid] = argv
        elif what.isdigit():
            fds.setdefault(pid, {})[int(what)] = link
    return cwds, argvs, fds


async def file_size(target: Target, path: str) -> int | None:
    # a path the run supplied: with the hands remote/identity.py picks for it
    res = await target.run(path_reader_argv(path, ["stat", "-c", "%s", "--", path]), timeout=10.0)
    out = res.out.strip()
    return int(out) if res.ok and out.isdigit() else None
