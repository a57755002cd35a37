"""Whose hands run a command: gputui runs as root only what root owns.

gputui acts as root in the container, on a run that is someone's code. What
the run owns — its interpreter, a tool next to its binary, a path in its
command line, its tmux server — is either used with the run owner's
identity (the argv below drops to that uid/gid before anything runs) or not
used at all. Pure functions and fixed script text; no I/O here.
"""

from __future__ import annotations

from gputui.containers.base import FIXED_PATH

SETPRIV = "setpriv"

# Prints "ok PATH" (PATH: the candidate with every link resolved) when the
# file and every directory above it (and above where it was found) belong to
# root and are not writable by group or others (a sticky directory such as
# /tmp may be world-writable: others cannot rename root's entries in it);
# else "no WHY". $1: the candidate path.
ROOT_OWNED_SCRIPT = r"""p=$1
r=$(readlink -f -- "$p" 2>/dev/null) || { echo "no missing"; exit 0; }
[ -f "$r" ] || { echo "no missing"; exit 0; }
d=$(dirname -- "$p"); d=$(readlink -f -- "$d" 2>/dev/null) || d=/
for x in "$r" "$d"; do
  while :; do
    o=$(stat -L -c '%u %a' -- "$x" 2>/dev/null) || { echo "no unreadable $x"; exit 0; }
    set -- $o
    [ "$1" = 0 ] || { printf 'no owner %s %s\n' "$1" "$x"; exit 0; }
    m=$2; [ ${#m} -gt 3 ] && s=${m%???} || s=0; m=${m#"${m%???}"}
    w=$(( (0$m & 022) ))
    if [ "$w" -ne 0 ] && ! { [ -d "$x" ] && [ $(( 0$s & 1 )) -ne 0 ]; }; then
      printf 'no writable %s %s\n' "$2" "$x"; exit 0
    fi
    [ "$x" = / ] && break
    x=$(dirname -- "$x")
  done
done
printf 'ok %s\n' "$r"
"""


def root_owned_argv(path: str) -> list[str]:
    """The argv that checks `path` is root's alone (ROOT_OWNED_SCRIPT)."""
    return ["sh", "-c", ROOT_OWNED_SCRIPT, "gputui-root-owned", path]


def parse_root_owned(text: str) -> tuple[str | None, str]:
    """ROOT_OWNED_SCRIPT's answer -> (resolved path or None, why not)."""
    line = text.strip().splitlines()[-1] if text.strip() else "no unreadable"
    if line.startswith("ok "):
        return line[3:], ""
    words = line.split(" ", 3)
    if len(words) >= 4 and words[1] == "owner":
        return None, f"{words[3]} belongs to uid {words[2]}, not root"
    if len(words) >= 4 and words[1] == "writable":
        return None, f"{words[3]} can be changed by others than root (mode {words[2]})"
    if len(words) >= 2 and words[1] == "missing":
        return None, "not found"
    return None, "could not be checked"


def as_owner_prefix(uid: int, gid: int) -> list[str]:
    """The argv prefix that runs what follows as uid/gid, with no other
    group and no capability left (`setpriv`, util-linux; root's
    capabilities go when every uid becomes non-zero). [] for root: root's
    own run needs no drop. ValueError for a negative or non-integer id."""
    if not (isinstance(uid, int) and isinstance(gid, int)) or uid < 0 or gid < 0:
        raise ValueError(f"not a user and group id: {uid!r}:{gid!r}")
    if uid == 0:
        return []
    return [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]


def as_owner(uid: int, gid: int, argv: list[str]) -> list[str]:
    """argv, run with the identity of the owner uid/gid (see as_owner_prefix)."""
    return [*as_owner_prefix(uid, gid), *argv]


def identity_words(uid: int, name: str | None = None) -> str:
    """'root' / 'uid 65534 (nobody), the run's owner', for a confirm box."""
    if uid == 0:
        return "root"
    return f"uid {uid}" + (f" ({name})" if name else "") + ", the run's owner"


# Runs `$2 ARGS…` as an isolated Python: from `/`; in a container ($1
# `fixed`) found on FIXED_PATH alone, which then comes first on its PATH
# (on the host, $1 `host`, the PATH is the admin's own and kept); as `-I -S` (no cwd or script
# directory on sys.path, no PYTHON* variables, no user site, no
# site-packages or .pth files; `-E -s -S` where -I is unknown); run as root,
# only an interpreter that root owns and nobody else may change (the file,
# links resolved, and its directory). $2: `python3`, or an absolute path.
PYTHON_SCRIPT = f"""cd / || exit 126
was=$PATH; [ "$1" = fixed ] && PATH={FIXED_PATH}
shift
case $1 in
  /*) py=$1 ;;
  *) py=$(command -v -- "$1") || {{ echo "$1: not found" >&2; exit 127; }} ;;
esac
[ "$PATH" = "$was" ] || PATH=$PATH${{was:+:$was}}; export PATH
shift
owned() {{
  s=$(stat -L -c '%u %a' -- "$1" 2>/dev/null) || return 1
  m=${{s#* }}; m=${{m#"${{m%???}}"}}
  [ "${{s%% *}}" = 0 ] && [ $((0$m & 022)) -eq 0 ]
}}
if [ "$(id -u)" = 0 ]; then
  r=$(readlink -f -- "$py") || {{ echo "$py: not found" >&2; exit 127; }}
  if ! owned "$r" || ! owned "${{r%/*}}" || ! owned "${{py%/*}}"; then
    echo "$py is not root's alone (owner or mode): gputui does not run it as root" >&2
    exit 126
  fi
fi
"$py" -I -S -c '' 2>/dev/null || exec "$py" -E -s -S "$@"  # before 3.4: no -I
exec "$py" -I -S "$@"
"""


def python_argv(python: str, args: list[str], name: str, in_container: bool) -> list[str]:
    """argv running `python ARGS` isolated (PYTHON_SCRIPT); `name` is $0."""
    where = "fixed" if in_container else "host"
    return ["/bin/sh", "-c", PYTHON_SCRIPT, name, where, python, *args]
