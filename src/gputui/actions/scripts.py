"""The fixed shell scripts that actions run in the target, in one place.

Values never enter a script's text: each takes them as positional
arguments (`sh -c SCRIPT NAME ARG...`). The confirm box shows these scripts
with their line breaks, below the command (`plan.render_argv` knows them by
`OWN_SCRIPTS`); the modules that build the commands import them from here:
runspec (WRAPPER), inspect (LINKS_SCRIPT), kill (KILL_SCRIPT), relaunch
(VERIFY_SCRIPT, MOVE_SCRIPT), dump (FIND_TOOL_SCRIPT).
"""

from __future__ import annotations

from gputui.remote.identity import HANDS_SH

# The (re)launch wrapper (runspec.wrapper_argv). $1 = log, $2 = the user's command (a shell command line,
# as written in [run] or in the original tmux call), $3 = the env file or "",
# $4… = the NAMES of the variables in it (never their values).
#
# Secrets ([run] env: API keys) never enter a command line: argv is readable
# by anyone through `ps` / /proc/PID/cmdline, and tmux keeps the pane's start
# command for `list-panes`. `runspec.write_env_argv` first writes NAME=VALUE pairs,
# NUL-terminated, to a new 0600 file in the target (runspec.WRITE_ENV_SCRIPT:
# created, never an existing file, FIFO or link) from stdin; the wrapper reads it
# with `read -d ''` (values may hold newlines), exports, and deletes it before
# anything else runs.
# SIGINT is trapped so the script outlives a Ctrl-C of its child and still
# records the exit code; tee -i ignores SIGINT so the last flushed lines land.
WRAPPER = """set -o pipefail
log=$1; cmd=$2; envfile=$3; shift 3
if [ -n "$envfile" ]; then
  while IFS= read -r -d '' kv; do export "$kv"; done < "$envfile"
  rm -f -- "$envfile"
fi
export PYTHONUNBUFFERED=1
if [ "$log" = - ]; then  # the command writes its log itself: a second writer would garble it
  bash -c "$cmd"
  exit "$?"
fi
trap 'printf "[gputui] SIGINT\\n" >> "$log"' INT
mkdir -p -- "$(dirname -- "$log")"
printf '[gputui] start %s in %s: %s\\n' "$(date '+%Y-%m-%d %H:%M:%S')" "$PWD" "$cmd" >> "$log"
bash -c "$cmd" 2>&1 | tee -a -i -- "$log"
rc=$?
printf '[gputui] exit %s at %s\\n' "$rc" "$(date '+%Y-%m-%d %H:%M:%S')" | tee -a -i -- "$log"
exit "$rc"
"""

# Records "pid<TAB>what<TAB>link" (what: cwd, or an fd number), each ended by
# a NUL, for each pid given; "pid<TAB>cmdline<TAB>HEX": the exact bytes of
# /proc/PID/cmdline in hex, so an argument holding a newline, a tab, 0x1e/0x1f
# or bytes that are not UTF-8 comes back exactly (a relaunch runs that argv
# again). The whole stream goes through one `od` into hex: a link (a working
# directory, a log's path) may hold a newline or end in one, which `$(…)`
# would strip and a line-based reader would split (the relaunch then ran in
# /root). `readlink` ends each link with one newline, which the reader strips.
LINKS_SCRIPT = """for p in "$@"; do
  printf '%s\\tcwd\\t' "$p"; readlink "/proc/$p/cwd" 2>/dev/null; printf '\\000'
  printf '%s\\tcmdline\\t%s\\000' "$p" "$(od -An -v -tx1 < "/proc/$p/cmdline" 2>/dev/null | tr -d ' \\n')"
  for f in /proc/"$p"/fd/*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    printf '%s\\t%s\\t' "$p" "${f##*/}"; readlink "$f" 2>/dev/null; printf '\\000'
  done
done | od -An -v -tx1 | tr -d ' \\n'
"""

# $1 SIGINT wait (ds; 0 = skip SIGINT), $2 SIGTERM wait (ds), $3 SIGKILL wait (ds),
# then process group ids, "--", then the pids that get SIGINT.
KILL_SCRIPT = """t_int=$1; t_term=$2; t_kill=$3; shift 3
pgs=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do pgs="$pgs $1"; shift; done
[ "$#" -gt 0 ] && shift
ints="$*"
alive() {
  ps -eo pgid=,stat= | awk -v pgs="$pgs" 'BEGIN { n = split(pgs, a, " "); for (i = 1; i <= n; i++) g[a[i]] = 1 }
    ($1 in g) && $2 !~ /^Z/ { f = 1 } END { exit !f }'
}
waitgone() {
  n=0
  while alive; do
    [ "$n" -ge "$1" ] && return 1
    sleep 0.1; n=$((n + 1))
  done
  return 0
}
if ! alive; then echo "gone none"; exit 0; fi
if [ "$t_int" -gt 0 ] && [ -n "$ints" ]; then
  echo "sent SIGINT"; kill -s INT $ints 2>/dev/null
  if waitgone "$t_int"; then echo "gone SIGINT"; exit 0; fi
fi
echo "sent SIGTERM"; for g in $pgs; do kill -s TERM -- "-$g" 2>/dev/null; done
if waitgone "$t_term"; then echo "gone SIGTERM"; exit 0; fi
echo "sent SIGKILL"; for g in $pgs; do kill -s KILL -- "-$g" 2>/dev/null; done
if waitgone "$t_kill"; then echo "gone SIGKILL"; exit 0; fi
echo "still alive"
ps -ww -eo pid=,pgid=,stat=,args= | awk -v pgs="$pgs" 'BEGIN { n = split(pgs, a, " "); for (i = 1; i <= n; i++) g[a[i]] = 1 }
  ($2 in g) { print "left " $0 }'
exit 1
"""

# $1 log, $2 how long (ds), $3 a grep pattern matching a dead pane's line,
# then the tmux list-panes argv. Prints "t DS SIZE" when the log size changes
# (and at the start and end), then "panes" and the list-panes output; stops
# early when the pane has died.
VERIFY_SCRIPT = (
    HANDS_SH
    + """log=$1; n=$2; dead=$3; shift 3
us=$(printf '\\037')  # tmux 3.4 prints the 0x1f separator as the text \\037
h=$(gputui_hands "$log")  # the log's size, read with the hands HANDS_SH picks
case $h in unsafe*|nosetpriv*) echo "refused $h" ;; esac  # not read at all: said, not "missing"
size() { s=$(hands_run stat -c %s -- "$log" 2>/dev/null) || s=-1; echo "$s"; }
last=$(size); echo "t 0 $last"; i=0
while [ "$i" -lt "$n" ]; do
  sleep 0.1; i=$((i + 1))
  cur=$(size)
  [ "$cur" != "$last" ] && { echo "t $i $cur"; last=$cur; }
  if [ $((i % 5)) -eq 0 ] && "$@" 2>/dev/null | sed 's/\\\\037/'"$us"'/g' | grep -q "$dead"; then
    break
  fi
done
echo "t $i $(size)"
echo panes
"$@"
"""
)

# $1 = log. Moves it to log.YYYYmmdd-HHMMSS (or .N when taken); never overwrites.
# Only a regular file (not a link, FIFO or device) is moved.
MOVE_SCRIPT = """log=$1
[ -e "$log" ] || [ -L "$log" ] || { echo "none"; exit 0; }
[ -f "$log" ] && [ ! -L "$log" ] || { echo "$log is no longer a regular file" >&2; exit 3; }
ts=$(date +%Y%m%d-%H%M%S)
dest="$log.$ts"; n=1
while [ -e "$dest" ]; do dest="$log.$ts.$n"; n=$((n + 1)); done
mv -n -- "$log" "$dest" || exit 1
[ -e "$dest" ] && [ ! -e "$log" ] || { echo "not moved" >&2; exit 1; }
printf 'moved %s\\n' "$dest"
"""

# Print the first usable tool among the candidates ($@).
FIND_TOOL_SCRIPT = """for c in "$@"; do
  p=$(command -v -- "$c" 2>/dev/null) && [ -n "$p" ] && { printf '%s\\n' "$p"; exit 0; }
done
exit 1
"""

# Shown in the confirm box as scripts (their own line breaks), not as one quoted word.
OWN_SCRIPTS = frozenset(
    (WRAPPER, LINKS_SCRIPT, KILL_SCRIPT, VERIFY_SCRIPT, MOVE_SCRIPT, FIND_TOOL_SCRIPT)
)
