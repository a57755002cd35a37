"""Wrap a remote argv so it ends when its stdin closes.

Closing an ssh channel does not stop the command behind it (there is no pty,
and sshd refuses signal requests for root before OpenSSH 10). So long-lived
commands run under a small POSIX `sh` script that

* starts the command in its own session / process group (`setsid`, where the
  host has it) with stdin from /dev/null,
* copies the channel's stdin to /dev/null in the background; when that ends
  (channel closed, connection lost, client gone) it sends SIGTERM to the
  command's whole process group — so children it spawned (the `tail` that
  `pct exec` / `nsenter` started inside the container) end too — then
  SIGKILL a second later if anything is still there,
* exits with the command's own exit status when the command ends first.

The command itself is never spliced into the script: it is passed as the
positional parameters of `sh -c SCRIPT sh ARGV...` and run as `"$@"`, and the
whole argv is quoted once by the transport (`shlex.join`).
"""

from __future__ import annotations

from collections.abc import Sequence

# $p: the command (a session leader when setsid exists, so -$p is its group)
# $w: the watcher subshell, which owns the `cat` reading our stdin
WATCHDOG_SCRIPT = r"""exec 3<&0
if command -v setsid >/dev/null 2>&1; then
  setsid "$@" </dev/null 3<&- &
else
  "$@" </dev/null 3<&- &
fi
p=$!
stop() { kill -TERM "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; }
alive() { kill -0 "-$p" 2>/dev/null || kill -0 "$p" 2>/dev/null; }
(
  trap 'kill "$c" 2>/dev/null; exit 0' TERM
  cat <&3 >/dev/null 2>&1 &
  c=$!
  wait "$c"
  stop
  i=0
  while alive && [ "$i" -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null
) </dev/null >/dev/null 2>&1 &
w=$!
exec 3<&-
trap 'stop; kill "$w" 2>/dev/null; exit 129' HUP
trap 'stop; kill "$w" 2>/dev/null; exit 143' TERM
trap 'stop; kill "$w" 2>/dev/null; exit 130' INT
wait "$p" 2>/dev/null
rc=$?
kill "$w" 2>/dev/null
exit "$rc"
"""


def with_watchdog(argv: Sequence[str]) -> list[str]:
    """argv wrapped so that it (and its process group) ends on stdin EOF."""
    if not argv:
        raise ValueError("empty argv: nothing to run")
    return ["sh", "-c", WATCHDOG_SCRIPT, "gputui-watchdog", *argv]
