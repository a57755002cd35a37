"""Which process a PID is: its start time (/proc/PID/stat field 22), its
owner (real uid/gid) and its executable. A PID alone names a process only
until it ends; kill, relaunch and flush fix these when the confirm box opens
and refuse at action time when any of them changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.remote.target import Target

# Per pid: "PID<TAB>START<TAB>UID<TAB>GID<TAB>EXE-HEX", or "PID<TAB>gone". The
# command name in /proc/PID/stat may hold spaces, ')' or newlines: the fields
# are counted after its last ") ". The exe path comes back in hex (any byte).
PROC_ID_SCRIPT = r"""set -f
for p in "$@"; do
  s=$(cat "/proc/$p/stat" 2>/dev/null) || { printf '%s\tgone\n' "$p"; continue; }
  set -- ${s##*) }
  shift 19
  ids=$(awk '/^Uid:/ { u = $2 } /^Gid:/ { g = $2 } END { print u "\t" g }' "/proc/$p/status" 2>/dev/null)
  e=$(readlink "/proc/$p/exe" 2>/dev/null)
  printf '%s\t%s\t%s\t%s\n' "$p" "$1" "$ids" "$(printf '%s' "$e" | od -An -v -tx1 | tr -d ' \n')"
done
"""


@dataclass(frozen=True)
class ProcId:
    pid: int
    start: int  # clock ticks after boot
    uid: int
    gid: int
    exe: str = ""  # "" when unreadable (a kernel thread, or gone)


def proc_id_argv(pids: list[int]) -> list[str]:
    return ["sh", "-c", PROC_ID_SCRIPT, "gputui-procid", *(str(int(p)) for p in pids)]


def parse_proc_ids(text: str) -> dict[int, ProcId]:
    """PROC_ID_SCRIPT's output -> {pid: ProcId}; gone or unreadable pids are left out."""
    out: dict[int, ProcId] = {}
    for line in text.split("\n"):
        f = line.split("\t")
        if len(f) != 5 or not all(x.isdigit() for x in f[:4]):
            continue
        try:
            exe = bytes.fromhex(f[4]).decode("utf-8", "surrogateescape")
        except ValueError:
            exe = ""
        out[int(f[0])] = ProcId(int(f[0]), int(f[1]), int(f[2]), int(f[3]), exe)
    return out


async def read_proc_ids(target: Target, pids: list[int]) -> dict[int, ProcId]:
    if not pids:
        return {}
    res = await target.run(proc_id_argv(pids), timeout=10.0)
    return parse_proc_ids(res.stdout.decode("utf-8", "surrogateescape"))


def pinned(ids: dict[int, ProcId]) -> dict[str, list[int]]:
    """What a plan keeps of each process: {"PID": [start, uid, gid]} (JSON-safe)."""
    return {str(p.pid): [p.start, p.uid, p.gid] for p in ids.values()}


def changed(want: dict[str, list[int]], now: dict[int, ProcId]) -> list[str]:
    """Lines naming each pinned process that is now another one (same PID,
    other start time or owner). A process that has ended is not a change."""
    out = []
    for key, (start, uid, gid) in want.items():
        cur = now.get(int(key))
        if cur is not None and (cur.start, cur.uid, cur.gid) != (start, uid, gid):
            out.append(f"pid {key} is another process now (started again since the box opened)")
    return out
