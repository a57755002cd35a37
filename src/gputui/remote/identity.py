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


# Whose hands read a path the run supplied (issue 34 for the follower, issue
# 45 for every reader): the one decision every shell reader of such a path
# makes first (the log follower, the history's reads, relaunch's verify, a
# file's size). A shell function; `gputui_hands PATH` prints:
#   self          gputui does not run as root: its own hands (the kernel checks them)
#   root          nobody but root can change any directory on the way: root's hands
#   as UID GID    the owner of the path (of the nearest directory while it is
#                 missing) when not root; for a root file, the one other user
#                 who owns a directory on the way (lexical, and with links
#                 resolved) and could swap it: read with that user's hands
#   unsafe DIR    a directory others may write (not sticky) above a root
#                 file, or two such users: not read at all
#   nosetpriv UID it is UID's and setpriv is missing to read it as them
# What lies below a directory of root's that no one else may pass (0700)
# cannot be changed by anyone else, whatever its own mode or owner: a file
# there (on both its paths) is read as root. `hands_run ARGV…` runs ARGV with
# the hands in $h (set to gputui_hands' answer first); 1 when there are none.
HANDS_SH = r"""gputui_hands() {  # $1: a path the run supplied -> whose hands read it (see HANDS_SH)
  [ "$(id -u)" = 0 ] || { echo self; return 0; }
  p=$1
  owner=; other=; bad=
  walk() {  # $1 and each directory above it, in one stat (lstat: a link is its own)
    x=$1; w0=$1; set --
    while :; do
      set -- "$@" "$x"
      case $x in /) break ;; */*) x=${x%/*}; x=${x:-/} ;; *) break ;; esac
    done
    out=$(stat -c '%u %g %a %F' -- "$@" 2>/dev/null) && [ -n "$out" ] || return 0
    n=0; while read -r _; do n=$((n + 1)); done <<E
$out
E
    shift $(($# - n))  # what is missing is at the leaf end: the rest answered, in order
    wo=; wb=; ws=
    while read -r u g m f; do
      if [ -z "$owner" ]; then owner="$u $g"
      elif [ "$u" != 0 ]; then
        [ -n "$wo" ] && [ "$wo" != "$u $g" ] && wb=$1
        wo="$u $g"; ws=  # its owner could swap what is below: no seal under it counts
      fi
      t=0; [ ${#m} -gt 3 ] && t=${m%???}; m=${m#"${m%???}"}
      if [ "$f" = directory ]; then
        if [ $((0$m & 022)) -ne 0 ] && [ $((0$t & 1)) -eq 0 ]; then wb=$1; ws=; fi
        # root's, and nobody else may pass: nothing below it can be changed by others
        if [ "$u" = 0 ] && [ $((0$m & 1)) -eq 0 ] && { [ "$g" = 0 ] || [ $((0$m & 010)) -eq 0 ]; }; then
          wo=; wb=; ws=1
        fi
      fi
      shift
    done <<E
$out
E
    [ -n "$wo" ] && [ -n "$other" ] && [ "$other" != "$wo" ] && bad=$w0
    other=${wo:-$other}; bad=${wb:-$bad}; sealed=${sealed:-$ws}; [ -n "$ws" ] || sealed=no
  }
  sealed=
  walk "$p"
  r=$(readlink -f -- "${p%/*}" 2>/dev/null) && [ "$r" != "${p%/*}" ] && walk "$r"
  set -- $owner
  [ "$sealed" = 1 ] && set -- 0  # nobody else can reach it: root's hands are safe
  if [ "${1:-0}" = 0 ]; then
    [ -n "$bad" ] && { echo "unsafe $bad"; return 0; }
    set -- $other
  fi
  if [ "${1:-0}" != 0 ]; then
    command -v setpriv >/dev/null 2>&1 || { echo "nosetpriv $1"; return 0; }
    echo "as $1 $2"; return 0
  fi
  echo root
}
hands_run() {  # the argv after it, with the hands in $h (gputui_hands' answer); 1: none
  case $h in
    self|root) "$@" ;;
    "as "*) u=${h#as }; setpriv --reuid="${u%% *}" --regid="${u#* }" --clear-groups -- "$@" ;;
    *) return 1 ;;
  esac
}
"""

# $1 the path, then the argv that reads it: run as gputui_hands says, or
# `@gputui unsafe DIR` / `@gputui nosetpriv UID` on stdout and nothing run.
PATH_READER_SCRIPT = (
    HANDS_SH
    + r"""p=$1; shift
h=$(gputui_hands "$p")
case $h in
  self|root) exec "$@" ;;
  "as "*) set -- ${h#as } "$@"; u=$1; g=$2; shift 2
    exec setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@" ;;
  *) echo "@gputui $h"; exit 0 ;;
esac
"""
)


def path_reader_argv(path: str, argv: list[str], name: str = "gputui-hands") -> list[str]:
    """argv, run with the hands `gputui_hands` picks for `path` (a path the
    run supplied): root's only where nobody else can change the way to it,
    else its owner's (setpriv); not at all where it is unsafe."""
    return ["sh", "-c", PATH_READER_SCRIPT, name, path, *argv]


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
