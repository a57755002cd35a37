"""The kernel's OOM killer's own lines (issue 47): the one-shot read of the
kernel log gputui makes when a run's process vanished with no word in its
log, and parsing what it prints. Pure.

A process the OOM killer takes gets SIGKILL: it writes nothing, and behind
`| tee` the shell prints no "Killed". The kernel says it, once, in its log:

    [ 7097.0052] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,
        mems_allowed=0,global_oom,task_memcg=/lxc/200/ns/user.slice,task=python,pid=7899,uid=0
    [ 7097.0053] Out of memory: Killed process 7899 (python) total-vm:26184840kB,
        anon-rss:15370088kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:38964kB oom_score_adj:0

"Out of memory:" is the machine's RAM (a global OOM); "Memory cgroup out of
memory:" (CONSTRAINT_MEMCG, `oom_memcg=`) is a cgroup's limit — a
container's memory, not the host's. Kernels before 4.19 write "Out of memory:
Kill process N (x) score S or sacrifice child" and then a bare "Killed
process N (x) total-vm:…". The PIDs are the kernel's (the host's PID
namespace), the stamps seconds since boot.

Reading it is often refused: `kernel.dmesg_restrict` without root, a user
outside adm/systemd-journal, an unprivileged container (dmesg: "Operation
not permitted"; journalctl there holds the container's own journal, no
kernel line). What was refused is kept and said, never taken for "no kill".
"""

from __future__ import annotations

import re

from gputui.model import KernelOomRead, OomKill
from gputui.text.numbers import bounded_float, bounded_int

# `@gputui up SECONDS` (/proc/uptime: the stamps' clock), then per reader
# `@gputui via dmesg|journalctl` and its OOM lines (the last 40), or
# `@gputui refused dmesg|journalctl: <its first line>`. dmesg first (the
# kernel's buffer itself); journalctl -k where dmesg is refused — it counts
# only when it holds kernel lines (in a container it holds none).
OOM_READ_SCRIPT = r"""pat='Killed process|oom-kill:'
echo "@gputui up $(cut -d' ' -f1 /proc/uptime 2>/dev/null)"
if command -v dmesg >/dev/null 2>&1; then
  if out=$(dmesg 2>&1); then
    echo "@gputui via dmesg"
    printf '%s\n' "$out" | grep -E "$pat" | tail -n 40
    exit 0
  fi
  echo "@gputui refused dmesg: $(printf '%s\n' "$out" | head -n 1)"
else
  echo "@gputui refused dmesg: not installed"
fi
if command -v journalctl >/dev/null 2>&1; then
  out=$(journalctl -k -o short-monotonic --no-pager 2>&1)
  if printf '%s\n' "$out" | grep -q ' kernel: '; then
    echo "@gputui via journalctl"
    printf '%s\n' "$out" | grep -E "$pat" | tail -n 40
    exit 0
  fi
  why=$(printf '%s\n' "$out" | grep -v -e '^ ' -e '^$' | head -n 1)
  echo "@gputui refused journalctl: ${why:-no kernel messages in its journal}"
else
  echo "@gputui refused journalctl: not installed"
fi
"""
READ_TIMEOUT_S = 8.0  # once per vanishing, inside a poll: a slow host delays that poll only


def oom_read_argv() -> list[str]:
    return ["sh", "-c", OOM_READ_SCRIPT, "gputui-oom-read"]


_STAMP = re.compile(r"^\s*\[\s*(\d{1,10}(?:\.\d{1,9})?)\]")
_KILLED = re.compile(
    r"(?:(Memory cgroup out of memory|Out of memory)(?: \(oom_kill_allocating_task\))?: )?"
    r"Killed process (\d{1,10}) \((.{0,64}?)\) total-vm:\s?([\d,]{1,24})kB,"
    r"\s?anon-rss:\s?([\d,]{1,24})kB"
)
_OOM_KILL = re.compile(r"oom-kill:(\S{0,2000})")


def _kib(text: str) -> int | None:
    return bounded_int(text.replace(",", ""), 0, 1 << 50)


def _fields(spec: str) -> dict[str, str]:
    out = {}
    for part in spec.split(","):
        k, eq, v = part.partition("=")
        if eq:
            out[k] = v
    return out


def parse_oom_read(out: str, where: str, at: float) -> KernelOomRead:
    """`oom_read_argv()`'s output, read at local time `at`, -> what it found."""
    read = KernelOomRead(where=where, at=at)
    uptime: float | None = None
    cgroups: dict[int, dict[str, str]] = {}  # pid -> its oom-kill: line's fields
    for raw in out.splitlines()[:400]:
        line = raw.strip()
        if line.startswith("@gputui "):
            word, _, rest = line[len("@gputui ") :].partition(" ")
            if word == "up":
                uptime = bounded_float(rest.strip(), 0.0, 1e10)
            elif word == "via":
                read.via = rest.strip()[:40]
            elif word == "refused":
                tool, _, why = rest.strip().partition(": ")
                said = why if why.startswith(tool + ":") else f"{tool}: {why}"
                read.refused.append(said[:200])
            continue
        stamp_m = _STAMP.match(line)
        stamp = bounded_float(stamp_m.group(1), 0.0, 1e10) if stamp_m else None
        known = uptime is not None and stamp is not None and stamp <= uptime + 1.0
        t = at - (uptime - stamp) if known and uptime is not None and stamp is not None else None
        m = _OOM_KILL.search(line)
        if m is not None:
            f = _fields(m.group(1))
            pid = bounded_int(f.get("pid", ""), 1, 1 << 31)
            if pid is not None:
                cgroups[pid] = f
            continue
        k = _KILLED.search(line)
        pid = bounded_int(k.group(2), 1, 1 << 31) if k else None
        if k is None or pid is None:
            continue
        f = cgroups.get(pid, {})
        read.kills.append(
            OomKill(
                pid=pid,
                name=k.group(3),
                text=line[k.start() if not k.group(1) else k.start(1) :][:300],
                t=t,
                anon_rss_kib=_kib(k.group(5)),
                total_vm_kib=_kib(k.group(4)),
                memcg=f.get("task_memcg", "")[:200],
                limit_cgroup=f.get("oom_memcg", "")[:200],
                cgroup_limit=(k.group(1) or "").startswith("Memory cgroup")
                or f.get("constraint") == "CONSTRAINT_MEMCG",
            )
        )
    return read
