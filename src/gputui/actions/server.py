"""Whose hands start a tmux server: launch and relaunch run `tmux -S SOCK
new-session …`, which starts a server when none answers on SOCK. When a
user's server has ended and its socket file is left, root's tmux would start
a NEW server, as root, on that user's socket path (and the run in it as
root). So a `tmux -S SOCK` that would run as root runs as the owner of SOCK
(of its directory when the socket is gone) — or is refused, one line.
"""

from __future__ import annotations

import os

from gputui.actions.plan import ActionError
from gputui.remote.identity import as_owner
from gputui.remote.target import Target

# $1 = the socket. "link", "notsock", "nodir", or "SOCK|DIR": SOCK is
# "UID GID" of the socket ("none" when it is gone), DIR "UID GID MODE" of
# the directory it is in (not a link).
SOCKET_OWNER_SCRIPT = """s=$1; d=$(dirname -- "$s")
if [ -L "$s" ]; then echo link; exit 0; fi
so=none
if [ -e "$s" ]; then
  [ -S "$s" ] || { echo notsock; exit 0; }
  so=$(stat -c '%u %g' -- "$s")
fi
[ -d "$d" ] && [ ! -L "$d" ] || { echo nodir; exit 0; }
printf '%s|%s\\n' "$so" "$(stat -c '%u %g %a' -- "$d")"
"""


def socket_of(tmux: list[str] | None) -> str | None:
    """The SOCK of a `tmux -S SOCK` that runs with gputui's own identity,
    else None (the default server or `-L NAME`: root's own directory; or an
    argv that already drops to the owner, as the agent builds it)."""
    if not tmux or os.path.basename(tmux[0]) != "tmux" or "-S" not in tmux[:-1]:
        return None
    return tmux[tmux.index("-S") + 1]


def socket_owner(sock: str, answer: str) -> tuple[int, int]:
    """SOCKET_OWNER_SCRIPT's answer -> (uid, gid) whose server SOCK is, or
    ActionError (one line: what, why, what to do)."""
    what = f"tmux socket {sock} not used"
    line = answer.strip()
    why = {
        "link": "it is a symbolic link",
        "notsock": "it is not a socket",
        "nodir": "its directory is missing or a link",
    }.get(line)
    sock_ids, bar, dir_ids = line.partition("|")
    d = dir_ids.split()
    if why is None and (not bar or len(d) != 3 or not all(x.isdigit() for x in d)):
        why = "its owner could not be read"
    if why is not None:
        raise ActionError(f"{what}: {why}", "start the session with tmux's default socket")
    s = sock_ids.split()
    uid, gid = (int(s[0]), int(s[1])) if len(s) == 2 and s[0].isdigit() else (int(d[0]), int(d[1]))
    if d[0] not in ("0", str(uid)) or int(d[2][-3:], 8) & 0o022:
        raise ActionError(
            f"{what}: its directory {os.path.dirname(sock)} is not uid {uid}'s alone "
            f"(owner uid {d[0]}, mode {d[2]}), so another user could put a server there",
            f"chmod 700 {os.path.dirname(sock)}, or use tmux's default socket directory",
        )
    return uid, gid


async def tmux_as_socket_owner(target: Target, tmux: list[str] | None) -> list[str] | None:
    """`tmux` as it may start a server: unchanged when it is root's own
    server; `tmux -S SOCK` as SOCK's owner (setpriv) when SOCK (or, with the
    socket gone, its directory) is another user's; ActionError otherwise."""
    sock = socket_of(tmux)
    if tmux is None or sock is None:
        return tmux
    res = await target.run(["sh", "-c", SOCKET_OWNER_SCRIPT, "gputui-socket-owner", sock])
    uid, gid = socket_owner(sock, res.out)
    return as_owner(uid, gid, tmux)
