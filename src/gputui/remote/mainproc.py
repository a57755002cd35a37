"""A run that is its container's main process (no tmux): where its output
is (`docker logs`, `podman logs`, `kubectl logs`) and how it starts over
(`docker restart`, `podman restart`; a pod's main process starts over only
with a new pod). Host commands, built here; remote/target.py runs them.

`docker logs -t` prefixes each line with its time, RFC3339 with 9 fraction
digits (kubectl: RFC3339 with up to 9); `stamped_line` splits it off and
`stamp_key` makes two stamps comparable, so a stream reopened with `--since
LAST` hands on only the lines after the last one seen: no gap, no repeat.

Pure: argv building and text reading only.
"""

from __future__ import annotations

import calendar
import re
import time

from gputui.containers import Container, log_tools

BACKLOG_LINES = 500  # lines of an existing container log the first stream shows

_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d) ")


def has_logs(container: Container) -> bool:
    """Whether the container kind keeps its main process's output (Docker,
    Podman, a pod: yes; a Proxmox CT, the host: no)."""
    return container.KEEPS_LOGS


def log_source(container: Container) -> str:
    """The name LogChoice follows a container's log stream by, as a person
    reads it: 'docker logs trainer' (never a path: it has no '/' in front)."""
    return logs_words(container)


def is_log_source(path: str | None) -> bool:
    """Whether a log name is a container's log stream ('docker logs NAME')."""
    words = (path or "").split()
    return len(words) >= 3 and words[0] in log_tools() and words[1] == "logs"


def logs_words(container: Container) -> str:
    """How a person reads the log on the host: 'docker logs trainer'."""
    return container.logs_words()


def logs_argv(container: Container, since: str | None, tail: int = BACKLOG_LINES) -> list[str]:
    """The host command that follows the container's output with time
    stamps, stderr merged into stdout (docker logs writes the container's
    stderr to its own): from `since` (a stamp as printed), else the last
    `tail` lines. ValueError for a kind with no logs."""
    argv = container.logs_argv(since, tail)
    if argv is None:
        raise ValueError(f"{container.words} keeps no log of its main process")
    return ["sh", "-c", 'exec "$@" 2>&1', "gputui-logs", *argv]


def stamped_line(line: str) -> tuple[str, str] | None:
    """'2026-12-02T18:00:00.123456789Z text' -> (the stamp, 'text'); None
    for a line with no stamp (the tool's own error: 'Error response from
    daemon: No such container: x')."""
    m = _STAMP.match(line)
    if m is None:
        return None
    return line[: m.end() - 1], line[m.end() :]


def stamp_key(stamp: str) -> tuple[int, int]:
    """A stamp -> (UTC seconds, nanoseconds), comparable whatever the
    number of fraction digits and the zone. ValueError if it is none."""
    m = _STAMP.match(stamp + " ")
    if m is None:
        raise ValueError(f"{stamp!r} is not an RFC3339 time")
    secs = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S"))
    zone = m.group(3)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return secs, int((m.group(2) or "0").ljust(9, "0"))


def key_stamp(key: tuple[int, int]) -> str:
    """(UTC seconds, nanoseconds) -> the stamp `--since` takes:
    '2026-12-02T18:00:00.123456789Z'."""
    head = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(key[0]))
    return f"{head}.{key[1]:09d}Z"


def stamp_time(stamp: str) -> float:
    """A stamp -> Unix time (the host's clock)."""
    secs, ns = stamp_key(stamp)
    return secs + ns / 1e9


# ------------------------------------------------------------ restart


def restart_argv(container: Container) -> list[str] | None:
    """The host command that restarts the container's main process, its
    log kept (docker/podman restart); None for a pod (its main process
    starts over only in a new pod) and kinds with no main process."""
    return container.restart_argv()


def started_argv(container: Container) -> list[str] | None:
    """The host command printing 'STATE STARTED_AT' of a Docker/Podman container."""
    return container.started_argv()
