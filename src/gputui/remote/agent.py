# ruff: noqa: UP022, UP031, SIM105, RUF005
"""gputui's agent: one long-lived python3 process inside the container.

It answers questions about tmux, processes and files as JSON lines:

    request   {"id": 1, "op": "procs", "root_pid": 123}
    response  {"id": 1, "ok": true, "result": {...}}
              {"id": 1, "ok": false, "error": "one line"}

It exits when its stdin reaches EOF (that is how gputui guarantees nothing
is left behind), answers every request (a bad one gets an error response),
and flushes every response. Requests are served by a few worker threads, so
responses may come back out of order: match them by id.

Constraints: this file is sent to the remote python3 as source, so it is
stdlib-only, self-contained (it cannot import gputui) and must run on
Python 3.6 (no dataclasses, no walrus, no `from __future__ import
annotations`, no capture_output=). Locally it is an ordinary importable
module so its functions are unit-tested against real processes; times it
returns are in the remote machine's clock (the client translates them).

Ops and what they return are documented in `OPS` below.
"""

import base64
import errno
import json
import os
import queue
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time

AGENT_VERSION = 1
MAX_REQUEST_BYTES = 1 << 20
MAX_READ_BYTES = 512 * 1024
MAX_RESPONSE_BYTES = 900 * 1024  # a response line stays under the client's line limit (1 MiB)
MAX_CMDLINE_BYTES = 16 * 1024
MAX_TREE = 500  # processes reported per tree
MAX_SCAN = 5000  # processes scanned for pipe readers
MAX_SOURCE_FILES = 200
MAX_WRITE_FILES = 32  # files reported per process as open for writing
MAX_WRITERS = 64  # processes reported by the `writers` op
MAX_WALK_ENTRIES = 3000
SOURCES_TTL_S = 5.0  # the source-file walk is repeated at most this often per process
# A poll reads /proc/PID/stat of the processes new since the last one, those
# whose parent went, and the run's tree; every process's again only this long
# after the last such scan (a pid reused between two polls). A pipe's readers
# (a readlink of every process's fd 0) are looked up again after
# READERS_TTL_S, or when one of them went (issue 24: on a GPU host with
# hundreds of processes these walks were most of the agent's CPU). Round 3:
# a poll walks the tree down its processes' children files instead, without
# listing /proc (ProcReader._tree_by_children); the above is its fallback.
TREE_RESCAN_S = 5.0
READERS_TTL_S = 5.0
# Per process of the run's tree (issue 24, round 3): its command line, exe,
# initial environ and python options are read once per exec; where its fd 1
# pipe leads (readers, their files: a readlink of every process's fd 0 to
# find them) again after TARGET_TTL_S, or at once when fd 1's link changed,
# a reader went or exec'd or a reader's file was renamed or deleted; the
# files it writes again after WRITTEN_TTL_S, or at once when its fd list or
# one of those files changed. fd 1's position and the stat fields are read
# every poll.
TARGET_TTL_S = 30.0
WRITTEN_TTL_S = 5.0
TMUX_RESCAN_S = 5.0  # TmuxWatch lists all of /proc at least this often
MAX_TEXT = 256 * 1024  # bytes of command output returned
TMUX_TIMEOUT_S = 3.0
WORKERS = 4

try:
    CLK_TCK = os.sysconf("SC_CLK_TCK")
except (ValueError, OSError, AttributeError):  # pragma: no cover
    CLK_TCK = 100
try:
    PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):  # pragma: no cover
    PAGE_SIZE = 4096

PYTHON_NAME = re.compile(r"^python[0-9.]*$")
# Read-only tmux subcommands the `tmux` op may run.
TMUX_READ_ONLY = (
    "list-sessions",
    "ls",
    "list-panes",
    "list-windows",
    "display-message",
    "display",
    "capture-pane",
    "show-options",
    "show",
    "has-session",
    "has",
)
SKIP_DIRS = {
    "__pycache__",
    "node_modules",
    "site-packages",
    "dist-packages",
    "wandb",
    "outputs",
    "checkpoints",
}


# ------------------------------------------------------------------ text


def text(s: "str | bytes | None") -> "str | None":
    """A str safe to put in JSON and on a screen: undecodable bytes (which
    os.fsdecode keeps as lone surrogates) become U+FFFD."""
    if s is None:
        return None
    if isinstance(s, bytes):
        return s.decode("utf-8", "replace")
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _read_bytes(path: str, limit: int = 1 << 20) -> "bytes | None":
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def _readlink(path: str) -> "str | None":
    try:
        return os.readlink(path)
    except OSError:
        return None


# ------------------------------------------------------------------ /proc parsing (pure)


def parse_stat(data: str) -> "dict | None":
    """Fields of /proc/PID/stat we use. comm may hold spaces and ')' so the
    fields after it are found from the last ')'."""
    try:
        lp = data.index("(")
        rp = data.rindex(")")
        pid = int(data[:lp].strip())
        comm = data[lp + 1 : rp]
        rest = data[rp + 2 :].split()
        # rest[0] is field 3 (state); field N is rest[N - 3]
        return {
            "pid": pid,
            "comm": comm,
            "state": rest[0],
            "ppid": int(rest[1]),
            "utime": int(rest[11]),
            "stime": int(rest[12]),
            "threads": int(rest[17]),
            "starttime": int(rest[19]),
            "rss_pages": int(rest[21]),
            # What an exec changes (its name, and where the new image's code,
            # stack, argv and environ lie; 0s where we may not look): the
            # key under which what cannot change without one is kept.
            "image": " ".join([comm] + rest[23:26] + rest[45:50]),
        }
    except (ValueError, IndexError):
        return None


def parse_boot_time(proc_stat: str) -> "float | None":
    for line in proc_stat.splitlines():
        if line.startswith("btime "):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def parse_fdinfo(data: str) -> dict:
    """pos (int) and flags (octal -> int) from /proc/PID/fdinfo/N."""
    out = {}
    for line in data.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "pos":
            try:
                out["pos"] = int(value)
            except ValueError:
                pass
        elif key == "flags":
            try:
                out["flags"] = int(value, 8)
            except ValueError:
                pass
    return out


def parse_status_nspid(data: str) -> "int | None":
    """The innermost PID (last field of NSpid:) from /proc/PID/status."""
    for line in data.splitlines():
        if line.startswith("NSpid:"):
            parts = line.split()[1:]
            try:
                return int(parts[-1]) if parts else None
            except ValueError:
                return None
    return None


def stdout_kind(link: "str | None") -> str:
    """Classify the target of /proc/PID/fd/1."""
    if link is None:
        return "closed"
    if link.startswith("pipe:"):
        return "pipe"
    if link.startswith("socket:"):
        return "socket"
    if link == "/dev/null":
        return "null"
    if (
        link.startswith("/dev/pts/")
        or link.startswith("/dev/tty")
        or link in ("/dev/console", "/dev/ptmx")
    ):
        return "tty"
    if link.startswith("/"):
        return "file"
    return "unknown"


# By machine: read(2) and readv(2), what a process waiting for a line from
# its terminal is blocked in (`input()`, getpass, a shell's `read`); and
# select(2)/pselect6(2), where readline waits for its first key (pdb's
# prompt) — counted only with nfds 1, i.e. fd 0 alone (Python <= 3.10's
# time.sleep is a select with nfds 0).
READ_SYSCALLS = {
    "x86_64": ((0, 19), (23, 270)),
    "aarch64": ((63, 65), (72,)),
    "ppc64le": ((3, 145), ()),
    "s390x": ((3, 145), ()),
}


def tty_read(pid: int, machine: "str | None" = None) -> "str | None":
    """The terminal `pid`'s main thread is asleep reading (its path, e.g.
    /dev/pts/3), else None: /proc/PID/syscall names the call it sleeps in
    and its first argument (readable by root or the owner)."""
    calls = READ_SYSCALLS.get(machine or os.uname()[4])
    data = _read_bytes("/proc/%d/syscall" % pid, 512) if calls else None
    words = data.split() if data else []
    try:
        nr, arg0 = int(words[0]), int(words[1], 16)
    except (IndexError, ValueError):
        return None  # "running", or -1 (not in a system call)
    if nr in calls[0]:
        fd = arg0
    elif nr in calls[1] and arg0 == 1:
        fd = 0
    else:
        return None
    link = _readlink("/proc/%d/fd/%d" % (pid, fd)) or ""
    return text(link) if link.startswith(("/dev/pts/", "/dev/tty", "/dev/console")) else None


def is_python_argv(cmdline: "list[str]", exe: "str | None" = None) -> bool:
    names = []
    if cmdline:
        names.append(os.path.basename(cmdline[0]))
    if exe:
        names.append(os.path.basename(exe.replace(" (deleted)", "")))
    return any(PYTHON_NAME.match(n) for n in names)


# Python options that take a value (as the rest of the cluster or the next arg).
_PY_OPTS_WITH_ARG = "WXQ"
_PY_LONG_WITH_ARG = ("--check-hash-based-pycs",)


def python_options(cmdline: "list[str]") -> dict:
    """What the interpreter options of a python argv say.

    Returns {"u": bool, "ignore_env": bool (-E or -I), "script": str|None,
    "module": str|None, "command": bool (-c), "args_start": int}. Options
    are read up to the script, `-m`, `-c` or `-`; `-uB`-style clusters count.
    """
    res = {"u": False, "ignore_env": False, "script": None, "module": None, "command": False}
    i = 1
    n = len(cmdline)
    while i < n:
        arg = cmdline[i]
        if arg == "--":
            if i + 1 < n:
                res["script"] = cmdline[i + 1]
            break
        if arg == "-":
            res["script"] = "-"
            break
        if arg.startswith("--"):
            if arg in _PY_LONG_WITH_ARG:
                i += 1
            i += 1
            continue
        if arg.startswith("-"):
            stop = False
            j = 1
            while j < len(arg):
                c = arg[j]
                if c == "u":
                    res["u"] = True
                elif c in "EI":
                    res["ignore_env"] = True
                elif c in "cm":
                    value = arg[j + 1 :]
                    if not value and i + 1 < n:
                        i += 1
                        value = cmdline[i]
                    if c == "m":
                        res["module"] = value
                    else:
                        res["command"] = True
                    stop = True
                    break
                elif c in _PY_OPTS_WITH_ARG:
                    if j + 1 == len(arg):
                        i += 1  # value is the next arg
                    break  # value is the rest of this arg
                j += 1
            if stop:
                break
            i += 1
            continue
        res["script"] = arg
        break
    return res


def env_value(environ: bytes, name: str) -> "str | None":
    """The value of name in a /proc/PID/environ blob, None when absent."""
    key = name.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key) :].decode("utf-8", "replace")
    return None


# ------------------------------------------------------------------ /proc reading


def boot_time() -> "float | None":
    data = _read_bytes("/proc/stat")
    return parse_boot_time(data.decode("ascii", "replace")) if data else None


def list_pids() -> "list[int]":
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(n) for n in names if n.isdigit()]


def read_stat(pid: int) -> "dict | None":
    data = _read_bytes("/proc/%d/stat" % pid, 4096)
    return parse_stat(data.decode("utf-8", "replace")) if data else None


def read_cmdline(pid: int) -> "list[str]":
    data = _read_bytes("/proc/%d/cmdline" % pid, MAX_CMDLINE_BYTES)
    if not data:
        return []
    return [text(a) for a in data.rstrip(b"\0").split(b"\0")]


def read_fdinfo(pid: int, fd: int) -> dict:
    data = _read_bytes("/proc/%d/fdinfo/%d" % (pid, fd), 4096)
    return parse_fdinfo(data.decode("ascii", "replace")) if data else {}


def tree_pids(root_pid: int, stats: "dict[int, dict]") -> "list[int]":
    """root_pid and its descendants (breadth first), from ppid links."""
    children = {}  # type: dict
    for pid, st in stats.items():
        children.setdefault(st["ppid"], []).append(pid)
    if root_pid not in stats:
        return []
    out = [root_pid]
    i = 0
    while i < len(out) and len(out) < MAX_TREE:
        out.extend(sorted(children.get(out[i], [])))
        i += 1
    return out[:MAX_TREE]


def written_files(pid: int, limit: int = MAX_WRITE_FILES) -> "list[str]":
    """Regular files pid has open for writing (O_WRONLY/O_RDWR, with or
    without O_APPEND), not /dev, /proc or /sys; fd order, at most `limit`."""
    return [link for link, _fd in written_fds(pid, limit)]


def written_fds(pid: int, limit: int = MAX_WRITE_FILES) -> "list[tuple[str, int]]":
    """written_files with the fd each is open on: [(link, fd)]."""
    out = []  # type: list[tuple[str, int]]
    try:
        fds = sorted(int(fd) for fd in os.listdir("/proc/%d/fd" % pid) if fd.isdigit())
    except OSError:
        return out
    seen = set()  # type: set[str]
    for fd in fds:
        link = _readlink("/proc/%d/fd/%d" % (pid, fd))
        if not link or not link.startswith("/"):
            continue
        if link.startswith(("/dev/", "/proc/", "/sys/")):
            continue
        flags = read_fdinfo(pid, fd).get("flags")
        if flags is None or flags & 3 not in (1, 2):
            continue
        link = text(link)
        if link not in seen:
            seen.add(link)
            out.append((link, fd))
            if len(out) >= limit:
                break
    return out


DELETED = " (deleted)"  # what the kernel adds to a /proc/PID/fd link of an unlinked file


def _writing(pid: int, fd: int) -> bool:
    flags = read_fdinfo(pid, fd).get("flags")
    return flags is not None and flags & 3 in (1, 2)


def file_writers(paths: "set[str]", pids: "list[int]") -> "list[list[int]]":
    """[[pid, fd]] of the processes holding one of `paths` (the same file,
    spelled as /proc/PID/fd links show it) open for writing."""
    me = os.getpid()
    out = []
    for pid in pids[:MAX_SCAN]:
        if pid == me:
            continue
        try:
            fds = os.listdir("/proc/%d/fd" % pid)
        except OSError:
            continue
        for fd in fds:
            if not fd.isdigit():
                continue
            link = _readlink("/proc/%d/fd/%s" % (pid, fd))
            if link is not None and link in paths and _writing(pid, int(fd)):
                out.append([pid, int(fd)])
                break
    return out


def pipe_writers(link: str, reader: int, pids: "list[int]") -> "list[int]":
    """Processes whose stdout or stderr is the pipe `link` ("pipe:[ino]"):
    what feeds a reader such as tee."""
    out = []
    for pid in pids[:MAX_SCAN]:
        if pid == reader:
            continue
        for fd in (1, 2):
            if _readlink("/proc/%d/fd/%d" % (pid, fd)) == link:
                out.append(pid)
                break
    return out


def run_roots(members: "set[int]", stats: "dict[int, dict]") -> "list[int]":
    """The members with no other member among their ancestors: the tops of
    the run (`bash start.sh` above its python, or the python itself)."""
    roots = []
    for pid in sorted(members):
        st = stats.get(pid)
        seen = 0
        parent = st["ppid"] if st else 0
        top = True
        while parent > 1 and seen < 64:
            if parent in members:
                top = False
                break
            pst = stats.get(parent)
            if pst is None:
                break
            parent = pst["ppid"]
            seen += 1
        if top:
            roots.append(pid)
    return roots


def log_writers(path: str) -> dict:
    """Who writes the file `path`: {writers: [{pid, fd, command}], readers:
    [pid] (writers that are log readers like tee, followed back), run: [pid]
    (the processes of the run), roots: [pid] (the tops of the run's trees)}.

    A writer whose stdin is a pipe and which is not Python (tee, a logger)
    is followed back to the processes whose stdout/stderr is that pipe, up
    to 3 levels (`python | tee a | tee b`). Whatever is not followed is the
    run itself (`nohup python train.py > log`, or a FileHandler)."""
    paths = set([path, os.path.abspath(path), os.path.realpath(path)])
    pids = list_pids()
    writers = file_writers(paths, pids)
    members = set()  # type: set
    readers = []
    frontier = [pid for pid, _ in writers]
    seen = set(frontier)
    for _level in range(4):
        nxt = []
        for pid in frontier:
            link0 = _readlink("/proc/%d/fd/0" % pid)
            if _level < 3 and stdout_kind(link0) == "pipe" and not _is_python_pid(pid):
                feeders = pipe_writers(link0, pid, pids)
                if feeders:
                    readers.append(pid)
                    for f in feeders:
                        if f not in seen:
                            seen.add(f)
                            nxt.append(f)
                    continue
            members.add(pid)
        frontier = nxt
        if not frontier:
            break
    stats = {}
    for pid in pids[:MAX_SCAN]:
        st = read_stat(pid)
        if st is not None:
            stats[pid] = st
    members = set(p for p in members if p in stats)
    out_writers = []
    for pid, fd in writers[:MAX_WRITERS]:
        cmd = read_cmdline(pid)
        out_writers.append({"pid": pid, "fd": fd, "command": " ".join(cmd)})
    return {
        "path": path,
        "writers": out_writers,
        "readers": readers[:MAX_WRITERS],
        "run": sorted(members)[:MAX_WRITERS],
        "roots": run_roots(members, stats)[:MAX_WRITERS],
    }


def _is_python_pid(pid: int) -> bool:
    return is_python_argv(read_cmdline(pid), _readlink("/proc/%d/exe" % pid))


_READERS = {}  # type: dict  # (link, writer) -> (monotonic, frozenset(readers), readers)


def pipe_readers(link: str, writer: int, pids: "list[int] | None" = None) -> "list[int]":
    """Processes reading the pipe `link` ("pipe:[ino]"): first those with it
    as fd 0 (tee, a shell pipeline); failing that, any process holding it
    open read-only on some fd (other than the writer). Those found are
    remembered for READERS_TTL_S while they live and still hold it (a
    shell holds a pipeline's read end between its fork of tee and its
    close: found then, it was kept as a reader after it let go)."""
    pids = pids if pids is not None else list_pids()
    key, now = (link, writer), time.monotonic()
    hit = _READERS.get(key)
    if (
        hit is not None
        and now - hit[0] < READERS_TTL_S
        and hit[1].issubset(pids)
        and all(_reads_pipe(p, link) for p in hit[2])
    ):
        return list(hit[2])
    readers = _scan_pipe_readers(link, writer, pids)
    if len(_READERS) > 64:
        _READERS.clear()
    if readers:  # none yet may be a reader between its fork and its dup2
        _READERS[key] = (now, frozenset(readers), readers)
    return list(readers)


def _reads_pipe(pid: int, link: str, fd0_read: bool = False) -> bool:
    """Whether pid holds the pipe `link` open for reading: as its fd 0 (one
    readlink; `fd0_read`: already looked at, not it), else on another fd
    opened read-only."""
    if not fd0_read and _readlink("/proc/%d/fd/0" % pid) == link:
        return True
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return False
    for fd in fds:
        if fd != "0" and _readlink("/proc/%d/fd/%s" % (pid, fd)) == link:
            flags = read_fdinfo(pid, int(fd)).get("flags")
            if flags is not None and flags & 3 == 0:
                return True
    return False


def _scan_pipe_readers(link: str, writer: int, pids: "list[int]") -> "list[int]":
    me = os.getpid()
    pids = [p for p in pids if p not in (writer, me)]
    pids = pids[:MAX_SCAN]
    readers = [p for p in pids if _readlink("/proc/%d/fd/0" % p) == link]
    if readers:
        return readers
    return [p for p in pids if _reads_pipe(p, link, fd0_read=True)]


def stdout_target(
    pid: int, pids: "list[int] | None" = None, depth: int = 0, held: "list | None" = None
) -> dict:
    """Where pid's fd 1 goes: {kind, path, pos, readers: [[pid, command]],
    reader_files: [paths], handles: {path: /proc/PID/fd/N}}. A pipe is
    followed to its readers (e.g. tee) and the files they write; a reader
    whose own stdout is another pipe is followed too (up to 3 levels). A file
    that was deleted while open keeps the kernel's " (deleted)" in its path,
    and `handles` names an fd it can still be read through. `held`, when
    given, gets (reader, pipe) for each reader found."""
    link = _readlink("/proc/%d/fd/1" % pid)
    kind = stdout_kind(link)
    if link is None and os.path.exists("/proc/%d" % pid):
        try:
            os.listdir("/proc/%d/fd" % pid)
        except OSError:
            kind = "unknown"  # not allowed to look
    info = read_fdinfo(pid, 1) if link is not None else {}
    res = {
        "kind": kind,
        "path": text(link),
        "pos": info.get("pos"),
        "readers": [],
        "reader_files": [],
        "handles": {},
    }
    if kind == "file" and link is not None and link.endswith(DELETED):
        res["handles"][text(link)] = "/proc/%d/fd/1" % pid
    if kind == "pipe" and link is not None:
        if pids is None:
            pids = list_pids()
        for r in pipe_readers(link, pid, pids):
            if held is not None:
                held.append((r, link))
            cmd = read_cmdline(r)
            res["readers"].append([r, " ".join(cmd) if cmd else ""])
            for f, fd in written_fds(r):
                if f not in res["reader_files"]:
                    res["reader_files"].append(f)
                if f.endswith(DELETED) and f not in res["handles"]:
                    res["handles"][f] = "/proc/%d/fd/%d" % (r, fd)
            if depth < 3:
                sub = stdout_target(r, pids, depth + 1, held)
                if sub["kind"] == "pipe":
                    res["readers"].extend(sub["readers"])
                    for f in sub["reader_files"]:
                        if f not in res["reader_files"]:
                            res["reader_files"].append(f)
                    for f, h in sub["handles"].items():
                        res["handles"].setdefault(f, h)
    return res


def _module_file(module: str, dirs: "list[str]") -> "str | None":
    rel = module.replace(".", "/")
    for d in dirs:
        for cand in (rel + ".py", rel + "/__main__.py"):
            path = os.path.join(d, cand)
            if os.path.isfile(path):
                return path
    return None


def source_files(cmdline: "list[str]", cwd: "str | None", start: "float | None") -> list:
    """The code a python process runs, as [[path, mtime]]: the script (or the
    `-m` module's file under cwd), always; plus the .py files in the script's
    directory tree modified after the process started (bounded walk: at most
    MAX_WALK_ENTRIES entries, depth 4, skipping hidden dirs, caches, envs).
    Files loaded from elsewhere (site-packages) are not looked at."""
    opts = python_options(cmdline)
    base = cwd or "/"
    main = None
    if opts["script"] and opts["script"] != "-":
        main = os.path.normpath(os.path.join(base, opts["script"]))
    elif opts["module"]:
        main = _module_file(opts["module"], [base])
    out = []
    if not main:
        return out
    try:  # the run's paths: no link another user could change is followed as root
        out.append([text(main), stat_run_path(main, as_owner=False).st_mtime])
    except OSError:
        return out
    root = os.path.dirname(main)
    if opts["module"]:
        root = base
    if root in ("/", "") or start is None:
        return out
    try:
        top = open_run_path(root, O_PATH | os.O_DIRECTORY)
    except OSError:
        return out
    try:
        return _newer_sources(root, top, main, start, out)
    finally:
        os.close(top)


def _newer_sources(root: str, top: int, main: str, start: float, out: list) -> list:
    """source_files' walk below the directory `top` (an fd of `root`): links
    are not followed and each entry is stat'ed in its directory's fd."""
    seen = 0
    root_depth = root.rstrip("/").count("/")
    for dirpath, dirnames, filenames, dfd in os.fwalk(".", dir_fd=top):
        dirpath = os.path.normpath(os.path.join(root, dirpath))
        dirnames[:] = [
            d
            for d in sorted(dirnames)
            if not d.startswith(".") and d not in SKIP_DIRS and not d.endswith("env")
        ]
        if dirpath.count("/") - root_depth >= 4:
            dirnames[:] = []
        for name in sorted(filenames):
            seen += 1
            if seen > MAX_WALK_ENTRIES or len(out) >= MAX_SOURCE_FILES:
                return out
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            if path == main:
                continue
            try:
                mtime = os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mtime
            except OSError:
                continue
            if mtime > start:
                out.append([text(path), mtime])
        seen += len(dirnames)
        if seen > MAX_WALK_ENTRIES:
            return out
    return out


class ProcReader:
    """Reads process trees; remembers CPU ticks between calls for cpu_pct."""

    def __init__(self, sources_ttl: float = SOURCES_TTL_S) -> None:
        self.sources_ttl = sources_ttl
        self._lock = threading.Lock()
        self._last = {}  # type: dict  # pid -> (starttime, ticks, monotonic)
        self._sources = {}  # type: dict  # (pid, starttime) -> (monotonic, files)
        self._fixed = {}  # type: dict  # (pid, starttime) -> (image, fields fixed at exec)
        self._targets = {}  # type: dict  # (pid, starttime) -> (monotonic, fd 1 link, files, target, (reader, pipe) pairs)
        self._written = {}  # type: dict  # (pid, starttime) -> (monotonic, fds, files, written)
        self._scan = None  # type: tuple | None  # (monotonic of the full scan, {pid: stat})
        self._scan_lock = threading.Lock()
        self._nprocs = 0  # processes at the last listing of /proc
        self._forgot = 0.0  # monotonic of that listing
        self.boot = boot_time()

    def cpu_pct(self, pid: int, st: dict, now: float) -> "float | None":
        ticks = st["utime"] + st["stime"]
        with self._lock:
            prev = self._last.get(pid)
            self._last[pid] = (st["starttime"], ticks, now)
        if prev is None or prev[0] != st["starttime"] or now - prev[2] <= 0.05:
            return None
        return round(100.0 * (ticks - prev[1]) / CLK_TCK / (now - prev[2]), 1)

    def sources(
        self,
        pid: int,
        st: dict,
        cmdline: "list[str]",
        cwd: "str | None",
        start: "float | None",
        now: float,
    ) -> list:
        """source_files(), walked at most every `sources_ttl` s per process."""
        key = (pid, st["starttime"])
        with self._lock:
            hit = self._sources.get(key)
        if hit is not None and now - hit[0] < self.sources_ttl:
            return hit[1]
        files = source_files(cmdline, cwd, start)
        with self._lock:
            self._sources[key] = (now, files)
        return files

    def forget_dead(self, alive: "set[int]") -> None:
        with self._lock:
            for pid in [p for p in self._last if p not in alive]:
                del self._last[pid]
            for cache in (self._sources, self._fixed, self._targets, self._written):
                for key in [k for k in cache if k[0] not in alive]:
                    del cache[key]

    def fixed(self, pid: int, st: dict) -> dict:
        """What cannot change without an exec: command line, exe, python
        options and the initial environ's PYTHONUNBUFFERED; read once per
        (pid, start time, image)."""
        key = (pid, st["starttime"])
        with self._lock:
            hit = self._fixed.get(key)
        if hit is not None and hit[0] == st["image"]:
            return hit[1]
        cmdline = read_cmdline(pid)
        exe = _readlink("/proc/%d/exe" % pid)
        d = {
            "cmdline": cmdline,
            "exe": text(exe),
            "is_python": is_python_argv(cmdline, exe),
            "python_u_flag": False,
            "env_pythonunbuffered": None,
            "env_pythonunbuffered_value": None,
            "ignore_environment": False,
            "script": None,
            "module": None,
        }
        if d["is_python"]:
            opts = python_options(cmdline)
            d["python_u_flag"] = opts["u"]
            d["ignore_environment"] = opts["ignore_env"]
            d["script"] = opts["script"]
            d["module"] = opts["module"]
            environ = _read_bytes("/proc/%d/environ" % pid)
            if environ is not None or os.access("/proc/%d/environ" % pid, os.R_OK):
                value = env_value(environ or b"", "PYTHONUNBUFFERED")
                d["env_pythonunbuffered_value"] = value
                # -E / -I make Python ignore PYTHON* variables.
                d["env_pythonunbuffered"] = bool(value) and not opts["ignore_env"]
        # Kept only with a command line: a zombie shows none, and neither does a
        # process inside execve (its new comm and exe already there, its
        # arguments not yet): kept, that empty read would stand until its next
        # exec (seen under load, CI run g); read again, it is right next poll.
        if cmdline:
            with self._lock:
                self._fixed[key] = (st["image"], d)
        return d

    def stdout(self, pid: int, st: dict, pids: "list[int] | None", now: float) -> dict:
        """stdout_target(); a pipe's readers and their files are kept for
        TARGET_TTL_S while fd 1's link is the same, every reader runs the
        same command and still holds the pipe (the shell that forked tee
        holds it a moment too) and every file they write is still there
        under its name (the position is read each call)."""
        key = (pid, st["starttime"])
        link = _readlink("/proc/%d/fd/1" % pid)
        with self._lock:
            hit = self._targets.get(key)
        if (
            hit is not None
            and link is not None
            and hit[1] == link
            and now - hit[0] < TARGET_TTL_S
            and _same_readers(hit[3]["readers"])
            and all(_reads_pipe(r, pipe) for r, pipe in hit[4])
            and _same_files(hit[2])
        ):
            res = dict(hit[3])
            res["pos"] = read_fdinfo(pid, 1).get("pos")
            return res
        held: list = []
        res = stdout_target(pid, pids, held=held)
        # Kept only once complete: a reader just started may hold the pipe
        # before it has opened its file (tee between its exec and its open)
        # or before its exec (no command yet) — kept, the run's log would be
        # unknown for TARGET_TTL_S after its start.
        readers = res["readers"]
        complete = bool(readers) and all(r[1] for r in readers) and bool(res["reader_files"])
        if res["kind"] == "pipe" and res["path"] == text(link) and complete:
            with self._lock:
                self._targets[key] = (now, link, _file_ids(res["reader_files"]), res, held)
        return res

    def written(self, pid: int, st: dict, now: float) -> "list[str]":
        """written_files(), read again after WRITTEN_TTL_S, or at once when
        pid's fd list changed or one of the files was renamed or deleted."""
        key = (pid, st["starttime"])
        fds = _fds(pid)
        with self._lock:
            hit = self._written.get(key)
        if (
            hit is not None
            and fds is not None
            and hit[1] == fds
            and now - hit[0] < WRITTEN_TTL_S
            and _same_files(hit[2])
        ):
            return list(hit[3])
        files = written_files(pid)
        if fds is not None:
            with self._lock:
                self._written[key] = (now, fds, _file_ids(files), files)
        return list(files)

    def proc(self, pid: int, st: dict, pids: "list[int] | None", now: float, sources: bool) -> dict:
        fixed = self.fixed(pid, st)
        cwd = _readlink("/proc/%d/cwd" % pid)
        start = None
        if self.boot is not None:
            start = self.boot + st["starttime"] / float(CLK_TCK)
        d = {
            "pid": pid,
            "ppid": st["ppid"],
            "comm": text(st["comm"]),
            "cwd": text(cwd),
            "state": st["state"],
            "cpu_pct": self.cpu_pct(pid, st, now),
            "rss_bytes": st["rss_pages"] * PAGE_SIZE,
            "threads": st["threads"],
            "start_time": start,
            "stdout": self.stdout(pid, st, pids, now),
            "fd1_pos": None,
            "source_files": [],
            "write_files": self.written(pid, st, now),
            # asleep in a read of its terminal: waiting for an answer
            "reads_tty": tty_read(pid) if st["state"] == "S" else None,
            "uid": _owner_uid(pid),
        }
        d.update(fixed)
        d["cmdline"] = list(fixed["cmdline"])
        d["fd1_pos"] = d["stdout"]["pos"]
        if fixed["is_python"] and sources:
            d["source_files"] = self.sources(pid, st, d["cmdline"], cwd, start, now)
        return d

    def _tree_stats(self, root_pid: int, pids: "list[int]", now: float) -> dict:
        """{pid: stat} of root_pid's tree. The ppid links of the other
        processes are those of the last poll, read again for the processes
        new since then and those whose parent went (reparented); all of
        them are read every TREE_RESCAN_S, or when a process of the tree
        has another start time or parent than it had."""
        with self._scan_lock:
            scan = self._scan
            if scan is not None and now - scan[0] < TREE_RESCAN_S:
                fresh = self._tree_from(root_pid, scan[1], pids)
                if fresh is not None:
                    return fresh
            stats = {}
            for pid in pids:
                st = read_stat(pid)
                if st is not None:
                    stats[pid] = st
            self._scan = (now, stats)
            return {pid: stats[pid] for pid in tree_pids(root_pid, stats)}

    @staticmethod
    def _tree_from(root_pid: int, known: dict, pids: "list[int]") -> "dict | None":
        """_tree_stats from the last poll's stats (updated in place); None
        when the tree's own stat files disagree with them."""
        alive = set(pids)
        gone = {p for p in known if p not in alive}
        for p in gone:
            del known[p]
        orphans = {p for p, st in known.items() if st["ppid"] in gone} if gone else set()
        for pid in pids:
            if pid not in known or pid in orphans:
                st = read_stat(pid)
                if st is None:
                    known.pop(pid, None)
                else:
                    known[pid] = st
        fresh = {}
        for pid in tree_pids(root_pid, known):
            st = read_stat(pid)
            old = known[pid]
            if st is None or st["starttime"] != old["starttime"] or st["ppid"] != old["ppid"]:
                return None
            fresh[pid] = known[pid] = st
        return fresh

    def _tree_by_children(self, root_pid: int, now: float) -> "dict | None":
        """_tree_stats without a listing of /proc: the tree walked down its
        processes' children files (/proc/PID/task/TID/children, every
        thread's). None (list /proc) when a process of the tree went, the
        kernel has no children files, or the tree's threads are so many that
        their children files would cost more than the listing (issue 24,
        round 3)."""
        with self._scan_lock:
            known = self._scan[1] if self._scan is not None else {}
            budget = max(8, self._nprocs // 4)  # children files worth one listing
            fresh = {}  # type: dict
            order = [root_pid]
            i = 0
            while i < len(order) and len(order) < MAX_TREE:
                pid = order[i]
                i += 1
                st = read_stat(pid)
                if st is None:
                    return None
                budget -= st["threads"]
                kids = _children(pid) if budget >= 0 else None
                if kids is None:
                    return None
                fresh[pid] = known[pid] = st
                order.extend(sorted(kids))
            for pid in order[i:MAX_TREE]:  # (a tree of MAX_TREE: the last ones' stat)
                st = read_stat(pid)
                if st is None:
                    return None
                fresh[pid] = known[pid] = st
            return fresh

    def tree(self, root_pid: int, sources: bool = True) -> list:
        now = time.monotonic()
        pids = None  # type: list[int] | None
        stats = self._tree_by_children(root_pid, now)
        if stats is None or now - self._forgot >= TREE_RESCAN_S:
            pids = list_pids()  # (what the caches hold of processes gone is forgotten)
            self._nprocs, self._forgot = len(pids), now
        if stats is None:
            stats = self._tree_stats(root_pid, pids or [], now)
        out = []
        for pid, st in stats.items():
            out.append(self.proc(pid, st, pids, now, sources))
        if pids is not None:
            self.forget_dead(set(pids))
        return out


class TmuxWatch:
    """Whether any tmux server's panes may have changed since the last look,
    read from /proc alone: the tmux servers (comm `tmux: server`) and their
    children (the panes' processes), each with its start time and parent,
    and the servers' open files (a live pane's pty, a client). A pane that
    ends, a new session or window, a server that starts or stops, a pane's
    process reparented when its session went, a client that attaches: each
    changes this (not a rename, nor a dead pane's session killed: tmux closed
    that pane's pty when it died) (issue 24: a `tmux list-panes` subprocess a
    poll was a fifth of the agent's CPU).

    Per call, the servers found by the last scan of /proc are looked at:
    each one's stat, its children (/proc/PID/task/TID/children) and fd list,
    and the request's socket files (a server that starts makes a new one).
    All of /proc is scanned again (a listdir, a stat of each process new
    since the last scan and of each server and pane process) every
    TMUX_RESCAN_S, and at once when a known server went or changed, a socket
    file or directory the request lists changed, or the kernel has no
    children files (issue 24, round 3: the listdir of /proc was most of
    this watch's cost)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # pid -> (ppid, starttime, is a tmux server, its unix socket paths)
        self._known = {}  # type: dict
        self._members = set()  # type: set
        self._scanned = None  # type: float | None  # monotonic of the last full scan
        self._sockets = {}  # type: dict  # request's key -> its socket files then
        self.scans = 0  # full scans of /proc (tests)

    def _note(self, pid: int) -> None:
        st = read_stat(pid)
        if st is None:
            self._known.pop(pid, None)
        else:
            server = (text(st["comm"]) or "").startswith("tmux: server")
            old = self._known.get(pid)
            if old is not None and old[1] == st["starttime"] and (old[3] or not server):
                paths = old[3]  # (a server that was starting may have bound its socket since)
            else:
                paths = _listening(pid) if server else ()
            self._known[pid] = (st["ppid"], st["starttime"], server, paths)

    def signature(self, listed: "Listed") -> frozenset:
        """The state of the servers whose socket paths `listed.wanted` (a
        function of a tuple of paths) accepts, and of those whose sockets
        are not known (not ours to read)."""
        with self._lock:
            now = time.monotonic()
            sockets = listed.sockets()
            sig = None
            if (
                self._scanned is not None
                and now - self._scanned < TMUX_RESCAN_S
                and self._sockets.get(listed.key) == sockets
            ):
                sig = self._quick(listed.wanted)
            if sig is None:
                sig = self._full(listed.wanted)
                self._scanned = now
                self.scans += 1
            if len(self._sockets) > 16:
                self._sockets.clear()
            self._sockets[listed.key] = sockets
        return frozenset(sig)

    def _wanted(self, wanted) -> "list[int]":
        known = self._known
        return [p for p, v in known.items() if v[2] and (not v[3] or wanted(v[3]))]

    def _full(self, wanted) -> list:
        alive = set(list_pids())
        for pid in [p for p in self._known if p not in alive]:
            del self._known[pid]
        for pid in alive:
            if pid not in self._known or pid in self._members:
                self._note(pid)
        known = self._known
        servers = {p for p, v in known.items() if v[2]}
        self._members = servers | {p for p, v in known.items() if v[0] in servers}
        servers = set(self._wanted(wanted))
        sig = [(p, v[0], v[1]) for p, v in known.items() if p in servers or v[0] in servers]
        # A server's open files: each live pane's pty, each attached client.
        return sig + [(p, _fds(p)) for p in servers]

    def _quick(self, wanted) -> "list | None":
        """_full's answer from the servers it found: None when one of them
        went or changed or its children cannot be read."""
        sig = []  # type: list
        servers = self._wanted(wanted)
        for pid in list(servers):
            st = read_stat(pid)
            if st is None:  # it stopped (one that starts in its place makes a new socket)
                del self._known[pid]
                servers.remove(pid)
                continue
            if st["starttime"] != self._known[pid][1]:
                return None
            kids = _children(pid)
            if kids is None:
                return None
            sig.append((pid, st["ppid"], st["starttime"]))
            for kid in kids:
                kst = read_stat(kid)
                if kst is not None:
                    sig.append((kid, kst["ppid"], kst["starttime"]))
        return sig + [(p, _fds(p)) for p in servers]


def _children(pid: int) -> "list[int] | None":
    """pid's child processes, from each of its threads' children file (no
    CONFIG_PROC_CHILDREN, or pid gone: None)."""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    out = []  # type: list[int]
    for tid in tasks:
        data = _read_bytes("/proc/%d/task/%s/children" % (pid, tid))
        if data is None:
            return None
        out.extend(int(w) for w in data.split())
    return out


def _listening(pid: int) -> tuple:
    """The unix socket paths process `pid` has open (a tmux server's own)."""
    inodes = set()
    for fd in _fds(pid) or ():
        link = _readlink("/proc/%d/fd/%s" % (pid, fd)) or ""
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    data = _read_bytes("/proc/%d/net/unix" % pid, 8 << 20) if inodes else None
    paths = []
    for line in (data or b"").decode("utf-8", "replace").splitlines()[1:]:
        words = line.split()
        if len(words) >= 8 and words[6] in inodes:
            paths.append(words[7])
    return tuple(paths)


def _same_readers(readers: "list[list]") -> bool:
    """Whether each of stdout_target's [[pid, command]] still runs that
    command (not gone, nor exec'd since: a reader found between its fork
    and its exec of tee)."""
    for pid, command in readers:
        cmd = read_cmdline(pid)
        if (" ".join(cmd) if cmd else "") != command or not cmd:
            return False
    return True


def _file_ids(paths: "list[str]") -> "list[tuple]":
    """_file_id of each of the files open under `paths` (a deleted one,
    marked " (deleted)", is not looked up: (path,))."""
    return [(p,) if p.endswith(DELETED) else _file_id(p, False) for p in paths]


def _same_files(ids: "list[tuple]") -> bool:
    """Whether _file_ids would answer `ids` again: each file still there
    under its name (not renamed, deleted or replaced)."""
    return _file_ids([ident[0] for ident in ids]) == ids


def _fds(pid: int) -> "tuple | None":
    try:
        return tuple(sorted(os.listdir("/proc/%d/fd" % pid)))
    except OSError:
        return None


def _file_id(path: str, mtime: bool) -> tuple:
    """(path, device, inode[, mtime]) of a file, (path,) where it is not."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return (path,)
    return (path, st.st_dev, st.st_ino) + ((st.st_mtime_ns,) if mtime else ())


class Listed:
    """The tmux servers a `tmux` request lists: `wanted`, a function of a
    server's socket paths; `sockets()`, what the socket files it would list
    look like now (a server that starts makes a new one); `key` names it."""

    def __init__(self, key: str, wanted, paths: "list[str]", dirs: "list[str]") -> None:
        self.key = key
        self.wanted = wanted
        self._paths = sorted(paths)
        self._dirs = sorted(dirs)

    def sockets(self) -> tuple:
        """Each listed socket's inode; each tmux-UID directory under the
        listed temporary directories, with its mtime (a socket made or
        removed in it)."""
        out = [_file_id(p, False) for p in self._paths]
        for d in self._dirs:
            try:
                names = sorted(n for n in os.listdir(d) if n.startswith("tmux-"))
            except OSError:
                names = []
            out.extend(_file_id(os.path.join(d, n), True) for n in names)
        return tuple(out)


def _listed_by(args: dict) -> Listed:
    """Which servers a `tmux` request lists, by their socket paths: its
    `socket`; else the default server and, with `other_servers`, every
    socket under $TMUX_TMPDIR (or /tmp) /tmux-UID/ (other_tmux_sockets)."""
    if args.get("socket"):
        want = {str(args["socket"]), os.path.realpath(str(args["socket"]))}
        return Listed(
            "socket " + str(args["socket"]),
            lambda paths: any(p in want for p in paths),
            list(want),
            [],
        )
    tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
    dirs = list({tmpdir, os.path.realpath(tmpdir)})
    roots = tuple(os.path.join(d, "tmux-") for d in dirs)
    if args.get("other_servers"):
        return Listed("other", lambda paths: any(p.startswith(roots) for p in paths), [], dirs)
    name = str(args.get("socket_name") or "default")
    own = {os.path.join(r + str(os.getuid()), name) for r in roots}
    return Listed("name " + name, lambda paths: any(p in own for p in paths), list(own), [])


class ReusedListing:
    """The last answer of a `tmux` op, given again while the tmux servers'
    panes are unchanged (TmuxWatch) and it is younger than the request's
    `reuse_s`: its session names, attached flags and current commands are
    then at most that old; anything TmuxWatch sees is listed at once."""

    def __init__(self) -> None:
        self.watch = TmuxWatch()
        self._lock = threading.Lock()
        self._last = {}  # type: dict  # request key -> (monotonic, signature, answer)
        self.runs = 0  # listings actually run (tests)

    def get(self, args: dict, reuse_s: float, run) -> dict:
        key = json.dumps(
            [args.get(k) for k in ("socket", "socket_name", "commands", "other_servers")],
            default=str,
        )
        sig = self.watch.signature(_listed_by(args))
        now = time.monotonic()
        with self._lock:
            hit = self._last.get(key)
        if hit is not None and now - hit[0] < reuse_s and hit[1] == sig:
            return hit[2]
        answer = run()
        self.runs += 1
        with self._lock:
            self._last = {key: (now, sig, answer)}
        return answer


# ------------------------------------------------------------------ commands


def run_argv(argv: "list[str]", timeout: float = TMUX_TIMEOUT_S) -> dict:
    """Run argv (no shell); {exit, stdout, stderr} with output capped."""
    try:
        p = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
    except FileNotFoundError:
        return {"exit": 127, "stdout": "", "stderr": "%s: not found" % argv[0]}
    except subprocess.TimeoutExpired:
        return {"exit": None, "stdout": "", "stderr": "timed out after %gs" % timeout}
    except OSError as e:
        return {"exit": 126, "stdout": "", "stderr": "%s: %s" % (argv[0], e.strerror)}
    return {
        "exit": p.returncode,
        "stdout": text(p.stdout[:MAX_TEXT]),
        "stderr": text(p.stderr[:MAX_TEXT]),
    }


def root_owned(path: str) -> "tuple[str | None, str]":
    """(path, links resolved; "") when the file and every directory above it
    (and above where it was found) belong to root and cannot be changed by
    others (a sticky directory such as /tmp may be world-writable: others
    cannot rename root's entries in it); else (None, why). The stdlib twin
    of gputui.remote.identity.ROOT_OWNED_SCRIPT: root runs only what root owns."""
    real = os.path.realpath(path)
    if not os.path.isfile(real):
        return None, "not found"
    for start in (real, os.path.realpath(os.path.dirname(path) or ".")):
        x = start
        while True:
            try:
                st = os.stat(x)
            except OSError:
                return None, "%s could not be checked" % x
            if st.st_uid != 0:
                return None, "%s belongs to uid %d, not root" % (x, st.st_uid)
            sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
            if st.st_mode & 0o022 and not sticky_dir:
                mode = stat.S_IMODE(st.st_mode)
                return None, "%s can be changed by others than root (mode %o)" % (x, mode)
            if x == "/":
                break
            x = os.path.dirname(x)
    return real, ""


def tool_version(argv: "list[str]", root_only: bool = False) -> "str | None":
    """The tool's first line of `--version`, None when it is not on PATH.
    root_only (a tool actions run as root: py-spy, gdb): as root, only a
    copy root owns alone is run; another is named, not run."""
    exe = shutil.which(argv[0])
    if exe is None:
        return None
    if root_only and os.geteuid() == 0:
        real, why = root_owned(exe)
        if real is None:
            return "not run, not root's: %s" % why
        argv = [real] + argv[1:]
    r = run_argv(argv, timeout=3.0)
    out = (r["stdout"] or r["stderr"] or "").strip().splitlines()
    return out[0] if out else argv[0]


MAX_TMUX_SERVERS = 8  # other tmux servers listed besides the default one


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def as_owner(argv: "list[str]", uid: int, gid: int, name: str) -> "list[str]":
    """argv, to be run as the user `uid` (group `gid` and that user's
    supplementary groups): `setpriv --reuid U --regid G --init-groups --
    argv`, or `runuser -u NAME -- argv`; argv itself when it is our own uid.

    The principle (docs/architecture.md, "What the code never does"): gputui runs as root only what
    root owns; whatever is taken from the run (its tmux server, interpreter,
    tools, paths) is used with the run owner's identity or not at all. A
    tmux server can make its client open files (hooks: `save-buffer PATH`,
    `load-buffer PATH`), so a root client would write and read as root for
    it. ValueError (one line: whose, why, what to do) when it cannot."""
    if uid == os.geteuid():
        return list(argv)
    if os.geteuid() != 0:
        raise ValueError(
            "%s not used: it is %s's and gputui runs as %s, not root, so it cannot act as %s "
            "(connect as %s to watch it)" % (argv[0], name, _user_name(os.geteuid()), name, name)
        )
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--reuid=%d" % uid, "--regid=%d" % gid, "--init-groups", "--"] + argv
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", name, "--"] + argv
    raise ValueError(
        "%s not used: it is %s's and neither setpriv nor runuser is there to run it as %s "
        "(install util-linux where the run is)" % (argv[0], name, name)
    )


def tmux_server_argv(path: str) -> "list[str]":
    """`tmux -S path`, as the server's owner (as_owner), once the socket is
    checked: a socket (not a link) in a directory (not a link) of the same
    owner that nobody else may write to (tmux makes tmux-UID/ 0700) — else
    another user could swap the socket between this check and its use.
    ValueError (one line, naming the owner and what to do) otherwise."""
    import pwd

    try:
        st = os.lstat(path)
        dst = os.lstat(os.path.dirname(path) or ".")
    except OSError as e:
        raise ValueError("tmux socket %s: %s" % (path, e.strerror)) from None
    if not stat.S_ISSOCK(st.st_mode):
        raise ValueError("tmux socket %s: not a socket" % path)
    owner = _user_name(st.st_uid)
    where = "tmux server of %s (%s) not used: " % (owner, path)
    if not stat.S_ISDIR(dst.st_mode) or dst.st_uid != st.st_uid:
        raise ValueError(
            where + "its directory is not %s's own (owner uid %d); "
            "start the server with tmux's default socket directory" % (owner, dst.st_uid)
        )
    if dst.st_mode & 0o022:
        raise ValueError(
            where + "its directory can be written by others (mode %o); "
            "chmod 700 %s" % (stat.S_IMODE(dst.st_mode), os.path.dirname(path))
        )
    try:
        pw = pwd.getpwuid(st.st_uid)
    except KeyError:
        raise ValueError(
            where + "no user has uid %d (no passwd entry), so it cannot be reached as its "
            "owner; add that user (or stop that server)" % st.st_uid
        ) from None
    try:
        return as_owner(["tmux", "-S", path], pw.pw_uid, pw.pw_gid, pw.pw_name)
    except ValueError as e:
        raise ValueError("tmux server of %s (%s): %s" % (owner, path, e)) from None


def other_tmux_sockets(limit: int = MAX_TMUX_SERVERS) -> "list[dict]":
    """The tmux servers besides this user's default one: every socket under
    $TMUX_TMPDIR (or /tmp) /tmux-UID/ — another user's server (a run started
    as `ubuntu` in the CT) or a named one (`tmux -L`). Each is
    {socket, owner, tmux: the argv that reaches it as its owner} or
    {socket, owner, skipped: why it is not used} (tmux_server_argv)."""
    tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
    own = os.path.join(tmpdir, "tmux-%d" % os.getuid(), "default")
    out = []  # type: list[dict]
    try:
        dirs = sorted(d for d in os.listdir(tmpdir) if d.startswith("tmux-"))
    except OSError:
        return out
    for d in dirs:
        base = os.path.join(tmpdir, d)
        try:
            names = sorted(os.listdir(base))
        except OSError:
            continue
        for name in names:
            path = os.path.join(base, name)
            if path == own:
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISSOCK(st.st_mode) and text(path) == path:  # -S takes it as it is
                server = {"socket": path, "owner": _user_name(st.st_uid)}  # type: dict
                try:
                    server["tmux"] = tmux_server_argv(path)
                except ValueError as e:
                    server["skipped"] = str(e)
                out.append(server)
                if len(out) >= limit:
                    return out
    return out


def _tmux_base(args: dict) -> "list[str]":
    """The tmux argv a request names: its `socket` reached as the socket's
    owner (tmux_server_argv; ValueError when it cannot be), a `-L` name of
    our own, or the default server."""
    if args.get("socket"):
        return tmux_server_argv(str(args["socket"]))
    if args.get("socket_name"):
        return [root_tmux(), "-L", str(args["socket_name"])]
    return [root_tmux()]


def root_tmux() -> str:
    """The tmux this agent runs with its own identity: found on PATH (the
    system directories first: gputui.remote.identity.PYTHON_SCRIPT); as
    root, only a copy root owns alone (issue 34: a `tmux` a user put on
    PATH ran as root) — ValueError, one line, for another. "tmux" when
    there is none (run_argv then says it is not found)."""
    exe = shutil.which("tmux")
    if exe is None or os.geteuid() != 0:
        return exe or "tmux"
    real, why = root_owned(exe)
    if real is None:
        raise ValueError(
            "tmux %s not run as root: %s; install tmux from the system's packages" % (exe, why)
        )
    return real


# ------------------------------------------------------------------ ops


def oom_kill_count(pid=None, root="/sys/fs/cgroup", proc="/proc", known=None):
    """(count, files): the kernel's OOM-kill count for the cgroups this
    container (and the process `pid`) live in — the largest `oom_kill` in
    memory.events (cgroup v2: the container's own cgroup is the root of its
    view, and the count is hierarchical) or memory.oom_control (v1), None
    when none is readable — and the files of `pid`'s cgroups, so the caller
    can ask for them again once `pid` is gone (`known`)."""
    base_files = [
        os.path.join(root, "memory.events"),
        os.path.join(root, "memory", "memory.oom_control"),
    ]
    files = []
    if pid:
        try:
            with open(os.path.join(proc, str(int(pid)), "cgroup")) as f:
                lines = f.read().splitlines()
        except (OSError, ValueError):
            lines = []
        for line in lines:
            parts = line.split(":", 2)
            if len(parts) != 3 or not parts[2].startswith("/"):
                continue
            sub = parts[2].strip("/")
            base = root if parts[1] == "" else os.path.join(root, "memory")
            if parts[1] not in ("", "memory"):
                continue
            while sub:
                leaf = "memory.events" if parts[1] == "" else "memory.oom_control"
                files.append(os.path.join(base, sub, leaf))
                sub = os.path.dirname(sub)
    prefix = root.rstrip("/") + "/"
    extra = [str(f) for f in known or [] if str(f).startswith(prefix) and ".." not in str(f)]
    best = None
    for path in base_files + files + extra:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] == "oom_kill" and words[1].isdigit():
                n = int(words[1])
                best = n if best is None else max(best, n)
    return best, [f for f in files if os.path.exists(f)]


# ---------------------------------------------------------------- run paths
# A path the run supplied (its log, its script, a file it writes) is opened
# or stat'ed here through open_run_path / stat_run_path only (issue 45;
# tests/test_run_paths.py fails on any other open or stat of one): as root,
# no symbolic link another user could change is followed — openat2 with
# RESOLVE_NO_SYMLINKS where the kernel has it, else (or where a link is on
# the way) a walk that opens one component at a time with O_NOFOLLOW and
# follows a link only where root alone could have made it (root's link in a
# directory of root's that others may not write, or sticky). A path with
# another user's link on the way is stat'ed with that user's hands
# (setpriv), or not read at all. Not root: the kernel checks our own hands.

O_PATH = getattr(os, "O_PATH", 0o10000000)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)
SYS_OPENAT2 = 437  # the same number on every Linux architecture (5.6+)
RESOLVE_NO_SYMLINKS = 0x04
MAX_LINK_HOPS = 40
_PROC_FD = re.compile(r"^/proc/[0-9]+/fd/[0-9]+$")
_OPENAT2 = []  # type: list  # [libc, OpenHow] once loaded, [None] where absent


class UntrustedLink(OSError):
    """A symbolic link on the way that `uid` (not root) could change."""

    def __init__(self, where: str, uid: int, gid: int) -> None:
        OSError.__init__(
            self,
            errno.ELOOP,
            "a symbolic link uid %d could change is on the way: %s" % (uid, where),
        )
        self.uid = uid
        self.gid = gid


def _openat2(path: str, flags: int) -> "int | None":
    """openat2(path, flags, RESOLVE_NO_SYMLINKS): an fd; None where the
    kernel (or a seccomp filter, or ctypes) does not offer it; OSError."""
    if not _OPENAT2:
        try:
            import ctypes

            class OpenHow(ctypes.Structure):
                _fields_ = [(n, ctypes.c_uint64) for n in ("flags", "mode", "resolve")]

            _OPENAT2.extend([ctypes.CDLL(None, use_errno=True), OpenHow, ctypes])
        except Exception:
            _OPENAT2.append(None)
    if _OPENAT2[0] is None:
        return None
    libc, how_type, ctypes = _OPENAT2
    how = how_type(flags | O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS)
    fd = libc.syscall(
        ctypes.c_long(SYS_OPENAT2),
        ctypes.c_int(-100),  # AT_FDCWD
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
        return None  # no openat2 here: the walk
    raise OSError(err, os.strerror(err), path)


def _trust_link(name: str, where: str, dir_fd: int) -> None:
    """UntrustedLink unless link `name` (in the directory dir_fd) is root's
    and in a directory of root's that others may not write (or sticky)."""
    lst = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    dst = os.fstat(dir_fd)
    open_dir = dst.st_mode & 0o022 and not dst.st_mode & stat.S_ISVTX
    if lst.st_uid != 0:
        raise UntrustedLink(where, lst.st_uid, lst.st_gid)
    if dst.st_uid != 0 or open_dir:
        raise UntrustedLink(where, dst.st_uid, dst.st_gid)


def _walk_open(path: str, flags: int, hops: int = 0) -> int:
    """`path` opened one component at a time with O_NOFOLLOW (see above)."""
    if hops > MAX_LINK_HOPS:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
    path = path if path.startswith("/") else os.path.join(os.getcwd(), path)
    parts = [x for x in path.split("/") if x not in ("", ".")]
    fd = os.open("/", (flags if not parts else O_PATH | os.O_DIRECTORY) | O_CLOEXEC)
    done = "/"
    try:
        for i, name in enumerate(parts):
            where = os.path.join(done, name)
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                _trust_link(name, where, fd)
                to = os.readlink(name, dir_fd=fd)
                rest = "/".join(parts[i + 1 :])
                to = to if to.startswith("/") else os.path.join(done, to)
                return _walk_open(os.path.join(to, rest) if rest else to, flags, hops + 1)
            last = i == len(parts) - 1
            want = flags if last else O_PATH | os.O_DIRECTORY
            nfd = os.open(name, want | os.O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
            done = where
            if last and stat.S_ISLNK(os.fstat(fd).st_mode):  # swapped for a link meanwhile
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        out, fd = fd, -1
        return out
    finally:
        if fd >= 0:
            os.close(fd)


def open_run_path(path: str, flags: int = os.O_RDONLY) -> int:
    """An fd of `path`, a path the run supplied, opened as described above;
    OSError (UntrustedLink for another user's link on the way)."""
    if os.geteuid() != 0 or _PROC_FD.match(path):
        # a deleted log read through its writer's fd (/proc/PID/fd/N): the
        # kernel's link to a file that process opened, no path walked
        return os.open(path, flags | O_CLOEXEC)
    try:
        fd = _openat2(path, flags)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        fd = None  # a link on the way: the walk says whose
    return fd if fd is not None else _walk_open(path, flags)


STAT_AS_OWNER = (
    "import os, sys\n"
    "s = os.stat(sys.argv[1])\n"
    "print(s.st_mode, s.st_ino, s.st_dev, s.st_nlink, s.st_uid, s.st_gid, s.st_size, "
    "repr(s.st_atime), repr(s.st_mtime), repr(s.st_ctime))\n"
)


def stat_run_path(path: str, as_owner: bool = True) -> os.stat_result:
    """os.stat of `path`, a path the run supplied (see above): with another
    user's link on the way, that user's stat (`as_owner`) or UntrustedLink."""
    try:
        fd = open_run_path(path, O_PATH)
    except UntrustedLink as e:
        if not as_owner or not shutil.which("setpriv"):
            raise
        drop = ["setpriv", "--reuid=%d" % e.uid, "--regid=%d" % e.gid, "--clear-groups", "--"]
        argv = drop + [sys.executable, "-I", "-S", "-c", STAT_AS_OWNER, path]
        got = run_argv(argv, timeout=5.0)
        words = got.get("stdout", "").split()
        if got.get("exit") != 0 or len(words) != 10:
            raise OSError(errno.EACCES, "not readable by uid %d" % e.uid, path) from None
        return os.stat_result([int(w) for w in words[:7]] + [float(w) for w in words[7:]])
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def fs_space(path: str) -> dict:
    """{fs_free, fs_total}: bytes free (for an unprivileged user, f_bavail)
    and in all on the file system holding `path`, or its nearest existing
    directory when it does not exist yet; {} when statvfs fails."""
    probe = path
    while True:
        try:
            fd = open_run_path(probe, O_PATH)  # a path the run supplied
            try:
                v = os.fstatvfs(fd)
            finally:
                os.close(fd)
            return {"fs_free": v.f_bavail * v.f_frsize, "fs_total": v.f_blocks * v.f_frsize}
        except OSError:
            parent = os.path.dirname(probe.rstrip("/")) or "/"
            if parent == probe:
                return {}
            probe = parent


MAX_PORT_HOLDERS = 16  # processes reported by the `listeners` op
MAX_GPU_OWNERS = 64  # PIDs the `owners` op answers for


def listening_inodes(ports, proc="/proc") -> dict:
    """{socket inode: port} of the TCP sockets listening (state 0A) on one of
    `ports`, IPv4 and IPv6, in this process's network namespace (the
    container's, where the run binds)."""
    want = set(int(p) for p in ports)
    found = {}
    for name in ("tcp", "tcp6"):
        data = _read_bytes("%s/net/%s" % (proc, name), 16 << 20)
        for line in (data or b"").decode("ascii", "replace").splitlines()[1:]:
            words = line.split()
            if len(words) < 10 or words[3] != "0A":
                continue
            try:
                port = int(words[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if port in want:
                found[words[9]] = port
    return found


def _ancestors(ppid: int, depth: int = 16) -> "list[int]":
    """ppid and its parents up to init (at most `depth`): which tmux pane a
    process runs under."""
    out = []
    while ppid > 1 and len(out) < depth:
        out.append(ppid)
        st = read_stat(ppid)
        ppid = st["ppid"] if st else 0
    return out


def _owner_uid(pid: int) -> "int | None":
    """Whose process `pid` is (the owner of /proc/PID); None when it is gone."""
    try:
        return os.stat("/proc/%d" % pid).st_uid
    except OSError:
        return None


def status_uid(data: str) -> "int | None":
    """The real uid (first field of Uid:) from /proc/PID/status: whose the
    process is and who may signal it (root's /proc/PID of a non-dumpable
    process says nothing of it)."""
    for line in data.splitlines():
        if line.startswith("Uid:"):
            parts = line.split()[1:]
            return int(parts[0]) if parts and parts[0].isdigit() else None
    return None


def pid_owners(pids) -> dict:
    """Whose each of `pids` is, as this agent's PID namespace and user
    namespace see them (in an unprivileged CT: the CT's uid, not the host's
    uid + 100000): {owners: [{pid, uid, user}] (uid null: gone or
    unreadable), uid: the uid this agent runs as}."""
    out = []
    for pid in pids:
        data = _read_bytes("/proc/%d/status" % int(pid), 16384)
        uid = status_uid(data.decode("utf-8", "replace")) if data is not None else None
        name = _user_name(uid) if uid is not None else None
        out.append({"pid": int(pid), "uid": uid, "user": name if name != str(uid) else None})
    return {"owners": out, "uid": os.geteuid()}


def port_listeners(ports, limit: int = MAX_SCAN) -> dict:
    """Who listens on each of `ports`: {listeners: [{port, pid, uid, user,
    cmdline, ancestors (ppid first), starttime}], unseen: [ports listened on
    by a process this agent may not look into (another user's, the agent not
    being root)]}. Every process holding the socket is listed (a forked
    child inherits it)."""
    inodes = listening_inodes(ports)
    held = []
    owned = set()
    if inodes:
        for pid in list_pids()[:limit]:
            ports_of_pid = set()
            for fd in _fds(pid) or ():
                link = _readlink("/proc/%d/fd/%s" % (pid, fd)) or ""
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    ports_of_pid.add(inodes[link[8:-1]])
                    owned.add(link[8:-1])
            st = read_stat(pid) if ports_of_pid else None
            if st is None:
                continue
            uid = _owner_uid(pid)
            who = {
                "pid": pid,
                "uid": uid,
                "user": _user_name(uid) if uid is not None else None,
                "cmdline": read_cmdline(pid),
                "ancestors": _ancestors(st["ppid"]),
                "starttime": st["starttime"],
            }
            for port in sorted(ports_of_pid)[: MAX_PORT_HOLDERS - len(held)]:
                held.append(dict(who, port=port))
    unseen = sorted(set(p for i, p in inodes.items() if i not in owned))
    return {"listeners": held, "unseen": unseen, "uid": os.geteuid()}


# ------------------------------------------------------------------ a plan's facts

PS_ARGV = ["ps", "-ww", "-eo", "pid=,ppid=,pgid=,stat=,args="]  # gputui.actions.inspect's
MAX_FACT_ROOTS = 8  # panes of one session whose processes a `facts` answer holds


def _ps_tree(out: str, root: int) -> "list[int]":
    """root and its descendants, from `ps -eo pid=,ppid=,…` lines."""
    kids = {}  # type: dict
    seen = set()  # type: set
    for line in out.splitlines():
        f = line.split(None, 2)
        if len(f) >= 2 and f[0].isdigit() and f[1].isdigit():
            kids.setdefault(int(f[1]), []).append(int(f[0]))
            seen.add(int(f[0]))
    if root not in seen:
        return []
    out_pids = [root]
    i = 0
    while i < len(out_pids) and len(out_pids) < MAX_TREE:
        out_pids.extend(sorted(kids.get(out_pids[i], [])))
        i += 1
    return out_pids[:MAX_TREE]


def _readlink_bytes(path: str) -> bytes:
    try:
        return os.readlink(path.encode()) + b"\n"  # as readlink(1) prints it
    except OSError:
        return b""


def links_hex(pids: "list[int]") -> str:
    """gputui.actions.scripts.LINKS_SCRIPT's answer, read here: each pid's
    cwd, its cmdline (hex) and each fd's link, as NUL-ended records, hex."""
    out = []
    for p in pids:
        out.append(b"%d\tcwd\t" % p + _readlink_bytes("/proc/%d/cwd" % p) + b"\0")
        cmd = _read_bytes("/proc/%d/cmdline" % p) or b""
        out.append(b"%d\tcmdline\t" % p + base64.b16encode(cmd).lower() + b"\0")
        try:
            fds = sorted(os.listdir("/proc/%d/fd" % p), key=lambda n: int(n) if n.isdigit() else -1)
        except OSError:
            fds = []
        for fd in fds:
            link = _readlink_bytes("/proc/%d/fd/%s" % (p, fd))
            out.append(b"%d\t%s\t" % (p, fd.encode()) + link + b"\0")
    return base64.b16encode(b"".join(out)).decode("ascii").lower()


def proc_ids_text(pids: "list[int]") -> str:
    """gputui.actions.procid.PROC_ID_SCRIPT's answer, read here: per pid
    "PID<TAB>START<TAB>UID<TAB>GID<TAB>EXE-HEX" or "PID<TAB>gone"."""
    lines = []
    for p in pids:
        st = read_stat(p)
        status = _read_bytes("/proc/%d/status" % p, 16384)
        if st is None or status is None:
            lines.append("%d\tgone" % p)
            continue
        ids = {}
        for line in status.decode("utf-8", "replace").splitlines():
            if line.startswith(("Uid:", "Gid:")):
                ids[line[:3]] = line.split()[1]
        try:
            exe = os.readlink(("/proc/%d/exe" % p).encode())
        except OSError:
            exe = b""
        lines.append(
            "%d\t%d\t%s\t%s\t%s"
            % (
                p,
                st["starttime"],
                ids.get("Uid", ""),
                ids.get("Gid", ""),
                base64.b16encode(exe).decode("ascii").lower(),
            )
        )
    return "".join(line + "\n" for line in lines)


def _pane_pids(listing: str, session: str, name_at: int, pid_at: int, sep: str) -> "list[int]":
    """The pids of `session`'s panes in a list-panes answer (the client's
    format: fields split by `sep`, records ended by a newline). Every record
    naming the session counts, a forged one too: the client parses the same
    answer with its own checks and uses these facts only when its pane is
    one of these (gputui.actions.facts)."""
    out = []  # type: list[int]
    for record in listing.split("\n"):
        f = record.rstrip("\x1e").split(sep)
        ok = len(f) > max(name_at, pid_at) and f[name_at] == session and f[pid_at].isdigit()
        if ok and int(f[pid_at]) not in out:
            out.append(int(f[pid_at]))
    return out[:MAX_FACT_ROOTS]


def root_tools(candidates: "list[str]") -> "list[list]":
    """Each candidate found on PATH: [found, its real path when root owns it
    alone (root_owned) else null, why not]."""
    out = []
    for c in candidates:
        found = shutil.which(c)
        if found:
            real, why = root_owned(found)
            out.append([found, real, why])
    return out


def root_exes(pids: "list[int]") -> dict:
    """For each executable a root process of `pids` runs: {exe (hex): [root
    owns it alone, why not]} (root_owned) — flush's test process starts it."""
    out = {}  # type: dict
    for p in pids:
        status = _read_bytes("/proc/%d/status" % p, 16384) or b""
        uid = next((ln.split()[1] for ln in status.splitlines() if ln.startswith(b"Uid:")), None)
        try:
            exe = os.readlink(("/proc/%d/exe" % p).encode())
        except OSError:
            continue
        key = base64.b16encode(exe).decode("ascii").lower()
        if uid == b"0" and key not in out:
            real, why = root_owned(os.fsdecode(exe))
            out[key] = [real is not None, why]
    return out


def _int_or(word: str) -> int:
    return int(word) if word.isdigit() else -1


def _ps_all() -> dict:
    """`ps` of every process, its whole output (run_argv caps what it keeps)."""
    try:
        argv = [_ps_exe()] + PS_ARGV[1:]
        p = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=10.0,
        )
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"exit": None, "stdout": "", "stderr": "ps: %s" % e}
    return {"exit": p.returncode, "stdout": p.stdout.decode("utf-8", "replace"), "stderr": ""}


def _ps_exe() -> str:
    """`ps` as root runs it: a copy root owns alone (ValueError otherwise)."""
    exe = shutil.which("ps")
    if exe is None or os.geteuid() != 0:
        return exe or "ps"
    real, why = root_owned(exe)
    if real is None:
        raise ValueError("ps %s not run as root: %s" % (exe, why))
    return real


def run_facts(args: dict) -> dict:
    """What a plan reads of a tmux session's run, in one answer (gputui.
    actions.inspect.find_run's facts, the same text each of its commands
    prints): the session's panes, then — with a live pane — every process's
    `ps` line, the links and identities of the pane's process and its
    descendants; the tools asked for (root_tools); for `-S` servers the
    socket's owner; the logs asked for looked at as the run's owner would
    (log_checks). With no `session`: only the `logs` looked at with the
    `owners`' hands given (a log the plan found in the first answer)."""
    logs = [str(x) for x in args.get("logs") or [] if str(x).startswith("/")]
    if "session" not in args:
        owners = [(int(u), int(g)) for u, g in args.get("owners") or []]
        return {
            "log_checks": log_checks(logs[:MAX_LOG_CHECKS], owners, str(args.get("setpriv") or ""))
        }
    out = {"panes": run_argv(_tmux_base(args) + [str(a) for a in args["list_panes"]])}
    sock = args.get("socket")
    owners = []  # type: list  # whose hands look at the logs (relaunch.run_owner's answer)
    if sock:
        try:
            st = os.lstat(str(sock))  # tmux_server_argv refused a link above
            out["socket_ids"] = [st.st_uid, st.st_gid]
            owners = [(st.st_uid, st.st_gid)] if st.st_uid != 0 else []
        except OSError:
            out["socket_ids"] = None
    out["tools"] = root_tools([str(c) for c in args.get("tools") or []])
    fields = args["fields"]  # [session_name index, pane_pid index, separator]
    roots = _pane_pids(out["panes"]["stdout"] or "", str(args["session"]), *fields)
    if roots:
        listing = _ps_all()
        pids = []  # type: list[int]
        for root in roots:
            pids += [p for p in _ps_tree(listing.get("stdout") or "", root) if p not in pids]
        # only the trees' lines: a host's whole `ps` may pass the answer's size
        mine = set(pids)
        lines = (listing.get("stdout") or "").splitlines()
        kept = [ln for ln in lines if ln.split(None, 1)[:1] and _int_or(ln.split()[0]) in mine]
        out["ps"] = dict(listing, stdout="".join(ln + "\n" for ln in kept))
        out["roots"] = roots
        out["links"] = links_hex(pids)
        out["ids"] = proc_ids_text(pids)
        out["root_exes"] = root_exes(pids)
    if not owners:
        owners = [_ids_of(r) for r in roots if _ids_of(r) is not None] or [(0, 0)]
    out["log_checks"] = log_checks(logs[:MAX_LOG_CHECKS], owners, str(args.get("setpriv") or ""))
    return out


def _ids_of(pid: int) -> "tuple | None":
    """(real uid, real gid) of a process; None when it is gone."""
    status = _read_bytes("/proc/%d/status" % pid, 16384)
    ids = {}
    for line in (status or b"").decode("utf-8", "replace").splitlines():
        if line.startswith(("Uid:", "Gid:")) and len(line.split()) > 1:
            ids[line[:3]] = line.split()[1]
    if not (ids.get("Uid", "").isdigit() and ids.get("Gid", "").isdigit()):
        return None
    return int(ids["Uid"]), int(ids["Gid"])


# $1 = log: "none", "link", or "TYPE|UID|LINKS<TAB>its directory, links
# resolved" (gputui.actions.relaunch reads it: log_refusal).
LOG_CHECK_SCRIPT = """log=$1
if [ -L "$log" ]; then echo link; exit 0; fi
[ -e "$log" ] || { echo none; exit 0; }
printf '%s\\t%s\\n' "$(stat -c '%F|%u|%h' -- "$log")" "$(readlink -f -- "$(dirname -- "$log")")"
"""
MAX_LOG_CHECKS = 4


def log_checks(paths: "list[str]", owners: list, setpriv: str) -> list:
    """LOG_CHECK_SCRIPT on each path with each owner's hands (`setpriv`
    drops root to uid/gid with no other group, as gputui.remote.identity.
    as_owner does; root's own run: root's) -> [[path, uid, gid, answer | null]]."""
    out = []
    for uid, gid in owners[:2]:
        hands = [] if uid == 0 else [setpriv, "--reuid=%d" % uid, "--regid=%d" % gid]
        hands += ["--clear-groups", "--"] if hands else []
        if hands and not setpriv:
            continue
        for path in paths:
            r = run_argv(hands + ["sh", "-c", LOG_CHECK_SCRIPT, "gputui-log-check", path], 5.0)
            out.append([path, uid, gid, r["stdout"] if r["exit"] == 0 else None])
    return out


class Agent:
    def __init__(self) -> None:
        self.procs = ProcReader()
        self.started = time.time()
        self.listings = ReusedListing()

    def op_hello(self, args: dict) -> dict:
        out = {}  # type: dict
        if args.get("tools", True):  # off: three programs not started (a plan's agent)
            out["tools"] = {
                "tmux": tool_version(["tmux", "-V"], root_only=True),
                "py-spy": tool_version(["py-spy", "--version"], root_only=True),
                "gdb": tool_version(["gdb", "--version"], root_only=True),
                "nvidia-smi": shutil.which("nvidia-smi"),
                "tee": shutil.which("tee"),
            }
        return {
            **out,
            "agent_version": AGENT_VERSION,
            "python": sys.version.split()[0],
            "pid": os.getpid(),
            "uid": os.getuid(),
            "hostname": socket.gethostname(),
            "boot_time": self.procs.boot,
            # read last, as the answer leaves: the tools' probes (three
            # programs started, seconds on a busy machine) before it skewed
            # the client's clock offset by half their time (issue 31)
            "clock": time.time(),
            "clk_tck": CLK_TCK,
            "pid_ns": _readlink("/proc/self/ns/pid"),
        }

    def op_ping(self, args: dict) -> dict:
        return {"clock": time.time()}

    def op_procs(self, args: dict) -> list:
        root = int(args["root_pid"])
        return self.procs.tree(root, sources=bool(args.get("sources", True)))

    def op_writers(self, args: dict) -> dict:
        """The run writing `path`, found without tmux (see log_writers)."""
        return log_writers(str(args["path"]))

    def op_tmux(self, args: dict) -> dict:
        """Run tmux read-only subcommands: `commands` is a list of argv lists
        that follow `tmux [-S socket]` (the client sends the formats it
        parses, from gputui.collect.tmux) -> {results: [{exit, stdout, stderr}]}.
        `reuse_s`: the last answer to the same request, when it is younger
        than that and no tmux pane has changed since (ReusedListing)."""
        reuse_s = float(args.get("reuse_s") or 0)
        if reuse_s > 0:
            return self.listings.get(args, reuse_s, lambda: self._tmux(args))
        return self._tmux(args)

    def _tmux(self, args: dict) -> dict:
        base = _tmux_base(args)
        commands = []
        for cmd in args["commands"]:
            if not isinstance(cmd, list) or not cmd or cmd[0] not in TMUX_READ_ONLY:
                raise ValueError("tmux: only read-only subcommands %s" % (TMUX_READ_ONLY,))
            commands.append([str(a) for a in cmd])
        out = {"results": [run_argv(base + cmd) for cmd in commands]}  # type: dict
        if args.get("other_servers") and len(base) == 1:  # the default server
            # `other_servers`: the same commands on every other server found,
            # each as its owner -> servers: [{socket, owner, results | skipped}]
            out["servers"] = servers = other_tmux_sockets()
            for server in servers:
                if "tmux" in server:
                    server["results"] = [run_argv(server["tmux"] + cmd) for cmd in commands]
        return out

    def op_capture(self, args: dict) -> dict:
        lines = max(1, min(int(args.get("lines", 50)), 10000))
        argv = _tmux_base(args) + [
            "capture-pane",
            "-p",
            "-J",
            "-t",
            str(args["target"]),
            "-S",
            str(-lines),
        ]
        return run_argv(argv)

    def op_stat(self, args: dict) -> list:
        out = []
        for path in args["paths"]:
            path = str(path)
            try:
                st = stat_run_path(
                    path
                )  # a path the run supplied: never a link of another's, as root
            except OSError as e:
                d = {"path": path, "exists": False, "error": e.strerror}
                d.update(fs_space(path))
                out.append(d)
                continue
            d = {
                "path": path,
                "exists": True,
                "size": st.st_size,
                "mtime": st.st_mtime,
                "inode": st.st_ino,
                "dev": st.st_dev,
                "is_file": stat.S_ISREG(st.st_mode),
            }
            d.update(fs_space(path))
            out.append(d)
        return out

    def op_oom(self, args):
        count, files = oom_kill_count(args.get("pid"), known=args.get("files"))
        return {"oom_kill": count, "files": files}

    def op_listeners(self, args: dict) -> dict:
        return port_listeners([int(p) for p in args["ports"]][:8])

    def op_owners(self, args: dict) -> dict:
        return pid_owners([int(p) for p in args["pids"]][:MAX_GPU_OWNERS])

    def op_read(self, args: dict) -> dict:
        path = str(args["path"])
        offset = max(0, int(args.get("offset", 0)))
        n = max(0, min(int(args.get("max_bytes", 65536)), MAX_READ_BYTES))
        with os.fdopen(open_run_path(path), "rb") as f:  # a path the run supplied
            st = os.fstat(f.fileno())
            truncated = offset > st.st_size
            if truncated:
                data = b""
            else:
                f.seek(offset)
                data = f.read(n)
        return {
            "data": base64.b64encode(data).decode("ascii"),
            "offset": offset + len(data),
            "size": st.st_size,
            "inode": st.st_ino,
            "mtime": st.st_mtime,
            "truncated": truncated,
        }

    def op_pidmap(self, args: dict) -> list:
        """For host PIDs (agent on the host): the PID inside the container
        (last NSpid field), its PID namespace and its cgroup paths. Which
        container a cgroup path is the client's to read (gputui.containers
        knows the kinds); the agent reads none."""
        out = []
        for pid in args["pids"]:
            pid = int(pid)
            status = _read_bytes("/proc/%d/status" % pid, 16384)
            cgroup = _read_bytes("/proc/%d/cgroup" % pid, 16384)
            cg_text = cgroup.decode("utf-8", "replace") if cgroup is not None else None
            ns = _readlink("/proc/%d/ns/pid" % pid)
            lines = cg_text.splitlines() if cg_text is not None else []
            out.append(
                {
                    "pid": pid,
                    "exists": status is not None,
                    "ct_pid": parse_status_nspid(status.decode("utf-8", "replace"))
                    if status
                    else None,
                    "pid_ns": ns,
                    "cgroups": [text(line.split(":", 2)[-1]) for line in lines if line],
                    "cgroup": text(cg_text.strip().splitlines()[-1])
                    if cg_text and cg_text.strip()
                    else None,
                    "cmdline": read_cmdline(pid),
                }
            )
        return out

    def handle(self, line: bytes) -> dict:
        """One request line -> one response dict; never raises."""
        try:
            req = json.loads(line.decode("utf-8", "replace"))
        except Exception as e:
            return {"id": None, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        return self.answer(req)

    def answer(self, req) -> dict:
        """One request (a decoded JSON value) -> one response dict; never raises."""
        rid = None
        try:
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
            rid = req.get("id")
            op = req.get("op")
            fn = getattr(self, "op_%s" % op, None) if isinstance(op, str) else None
            if fn is None:
                raise ValueError("unknown op %r" % (op,))
            return {"id": rid, "ok": True, "result": fn(req)}
        except KeyError as e:
            return {"id": rid, "ok": False, "error": "missing argument %s" % e}
        except Exception as e:  # a bad request must never kill the agent
            return {"id": rid, "ok": False, "error": "%s: %s" % (type(e).__name__, e)}

    def op_facts(self, args: dict) -> dict:
        """Every fact a plan on a tmux session's run needs (run_facts)."""
        return run_facts(args)

    def op_batch(self, args: dict) -> list:
        """Several requests in one round trip (one packet each way, where
        four were eight), answered in order: [{ok, result | error}]."""
        out = []
        for req in args["calls"]:
            if isinstance(req, dict) and req.get("op") == "batch":
                out.append({"ok": False, "error": "ValueError: a batch cannot hold a batch"})
                continue
            resp = self.answer(req)
            resp.pop("id", None)
            out.append(resp)
        return out


OPS = {
    "hello": "tools=true -> agent_version, python, pid, uid, hostname, boot_time, clock, clk_tck,"
    " pid_ns, tools (when asked)",
    "ping": "-> clock",
    "procs": "root_pid, sources=true -> [proc dict] (root first, breadth first; "
    "write_files: files each has open for writing)",
    "tmux": "commands (argv lists after `tmux`), socket?, socket_name?, other_servers?,"
    " reuse_s? (the last answer again while no pane changed and younger) -> results",
    "capture": "target, lines=50, socket? -> exit, stdout, stderr",
    "stat": "paths -> [{path, exists, size, mtime, inode, dev, is_file | error,"
    " fs_free, fs_total (bytes of the file system holding it; absent if unknown)}]",
    "read": "path, offset, max_bytes -> data (base64), offset, size, inode, mtime, truncated",
    "writers": "path -> {path, writers: [{pid, fd, command}], readers, run, roots}",
    "pidmap": "pids -> [{pid, exists, ct_pid, pid_ns, cgroup, cgroups, cmdline}]",
    "oom": "pid?, files? -> {oom_kill: the OOM kills counted in the CT's (and pid's, and"
    " files') cgroups, or null; files: pid's cgroup files, to ask for once it is gone}",
    "listeners": "ports (TCP) -> {listeners: [{port, pid, uid, user, cmdline, ancestors,"
    " starttime}], unseen: [ports whose listener this agent may not look into]}",
    "facts": "session, list_panes (argv after tmux), fields ([name at, pid at, separator]),"
    " socket?, socket_name?, tools? -> panes, socket_ids?, tools [[found, root's real path"
    " | null, why]], logs?, setpriv? -> log_checks [[path, uid, gid, answer]], and with a"
    " live pane: ps, roots (the panes' pids read), links (hex), ids (text), root_exes;"
    " without session: logs, owners [[uid, gid]], setpriv? -> log_checks alone",
    "owners": "pids -> {owners: [{pid, uid (Uid: of /proc/PID/status, as this agent's"
    " namespace sees it; null: gone), user}], uid: the agent's own}",
    "batch": "calls (a list of requests without id) -> [{ok, result | error}] in order",
}


# ------------------------------------------------------------------ main loop


def serve(stdin, stdout) -> None:
    """Answer requests from the binary stream stdin on stdout until EOF."""
    agent = Agent()
    out_lock = threading.Lock()
    jobs = queue.Queue()

    def send(resp: dict) -> None:
        data = (json.dumps(resp, ensure_ascii=True, default=str) + "\n").encode("ascii")
        if len(data) > MAX_RESPONSE_BYTES:
            err = {
                "id": resp.get("id"),
                "ok": False,
                "error": "response too large (%d bytes)" % len(data),
            }
            data = (json.dumps(err) + "\n").encode("ascii")
        with out_lock:
            try:
                stdout.write(data)
                stdout.flush()
            except (OSError, ValueError):
                os._exit(0)  # nobody is listening any more

    def worker() -> None:
        while True:
            line = jobs.get()
            send(agent.handle(line))
            jobs.task_done()

    for _ in range(WORKERS):
        t = threading.Thread(target=worker)
        t.daemon = True
        t.start()

    while True:
        try:
            line = stdin.readline(MAX_REQUEST_BYTES)
        except (OSError, ValueError):
            break
        if not line:
            break
        if not line.endswith(b"\n") and len(line) >= MAX_REQUEST_BYTES:
            # too long: skip the rest of the line, answer with an error
            while True:
                rest = stdin.readline(MAX_REQUEST_BYTES)
                if not rest or rest.endswith(b"\n"):
                    break
            send({"id": None, "ok": False, "error": "request longer than 1 MiB"})
            continue
        if not line.strip():
            continue
        jobs.put(line)
    # EOF: give in-flight requests a moment, then leave.
    deadline = time.time() + 1.0
    while jobs.unfinished_tasks and time.time() < deadline:
        time.sleep(0.01)


def main() -> None:
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the protocol
    try:
        os.nice(5)
    except OSError:
        pass
    try:
        serve(stdin, stdout)
    except KeyboardInterrupt:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
