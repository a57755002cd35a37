"""Plain data the rest of gputui shares: what a run looks like at one moment.

Nothing here does I/O or imports Textual. Units are in the field names
(`_mib`, `_w`, `_pct`, `_s`); times are Unix epoch seconds (float) as seen on
the machine running gputui unless a name says otherwise. `None` always means
"unknown" (e.g. nvidia-smi printed `[N/A]`), never zero.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

# Where a run lives and that place's state (pure: argv and text only)
from gputui.containers import Container, CtStatus


class ConnectionState(str, Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    FAILED = "failed"
    CLOSED = "closed"


# --------------------------------------------------------------------- GPUs


@dataclass
class GpuSample:
    """One reading of one GPU (a row of `nvidia-smi --query-gpu`, or NVML)."""

    index: int
    time: float
    name: str = ""
    uuid: str = ""
    mem_used_mib: float | None = None
    mem_total_mib: float | None = None
    util_pct: float | None = None
    temp_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    # Health (issue 32), read with the samples: the clocks' event reasons
    # (`clocks_event_reasons.active`, a bitmask: collect/gpuhealth.py names
    # the bits) and the SM clock's maximum. None: not read or not supported
    # here — never "all clear", never a fault.
    event_reasons: int | None = None
    sm_clock_max_mhz: float | None = None

    @property
    def mem_frac(self) -> float | None:
        if self.mem_used_mib is None or not self.mem_total_mib:
            return None
        return self.mem_used_mib / self.mem_total_mib


@dataclass
class GpuProcess:
    """A process holding memory on a GPU. `host_pid` is what the driver reports;
    `ct_pid` is the same process as seen inside the container (from NSpid),
    or None when it is not in the watched container / unknown."""

    gpu_uuid: str
    host_pid: int
    used_mib: float | None = None
    name: str = ""
    ct_pid: int | None = None
    in_container: bool | None = None
    # Per-process evidence (None / empty: not read). `util` holds the
    # process's own SM utilization readings (time, %) — NVML per-process
    # utilization or `nvidia-smi pmon` — oldest first, the last ~2 minutes.
    util: list[tuple[float, float]] = field(default_factory=list)
    state: str = ""  # R, S, D, Z ... of the holder (its /proc/PID/stat)
    cpu_s: float | None = None  # CPU time it has used (user + system)
    # Its parents' PIDs in the watched CT's (or plain host's) PID space,
    # nearest first, up to but not including init; [] when its parent is
    # init (reparented: its parent is gone); None when unknown.
    ancestors: list[int] | None = None
    ct_id: int | None = None  # the CT its cgroup is under (/lxc/<id>/), when known
    # A container of another kind its cgroup is in: "docker:<id>",
    # "podman:<id>", "pod:<id>" (the full container ID); "" none or unknown.
    container: str = ""

    @property
    def sm_util(self) -> float | None:
        """Its latest own SM utilization reading."""
        return self.util[-1][1] if self.util else None


@dataclass
class GpuEvent:
    """Text nvidia-smi printed that is not a sample: Xid, ECC, a lost GPU;
    or a kernel-log line of the NVIDIA driver (`NVRM: Xid (PCI:…): 79, …`)."""

    time: float
    text: str
    lost: bool = False  # "Unable to determine the device handle", exit 15, ...
    xid: int | None = None  # the Xid number, when the text is an Xid report
    bus_id: str = ""  # the GPU's PCI address as the report names it ("0000:18:00")
    pid: int | None = None  # the process the driver names (host PID), if any
    source: str = ""  # "kernel log" for the kernel-log reader's; "" nvidia-smi/NVML


@dataclass
class GpuHealth:
    """The slow health fields of one GPU, read every few seconds (not with
    every sample): uncorrectable ECC errors, row remapping, the PCIe link,
    the power limit's default and maximum. None: not read, or the GPU
    does not support it (`[N/A]`, `[Not Supported]`) — never a fault."""

    index: int
    time: float
    bus_id: str = ""
    util_pct: float | None = None  # read with the link: a link is judged under load
    ecc_uncorrected: int | None = None  # ecc.errors.uncorrected.volatile.total
    remap_pending: bool | None = None  # remapped_rows.pending: a reset applies it
    remap_failure: bool | None = None  # remapped_rows.failure: no spare row was left
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    power_default_w: float | None = None  # power.default_limit
    power_max_w: float | None = None  # power.max_limit


class Ring:
    """A bounded history of (time, value) points; old points fall off."""

    def __init__(self, maxlen: int = 600) -> None:
        self._points: deque[tuple[float, float | None]] = deque(maxlen=maxlen)

    def append(self, t: float, value: float | None) -> None:
        self._points.append((t, value))

    def values(self) -> list[float | None]:
        return [v for _, v in self._points]

    def points(self) -> list[tuple[float, float | None]]:
        return list(self._points)

    def held(self) -> Sequence[tuple[float, float | None]]:
        """The points as held, oldest first, not copied: read them at once
        (appending changes them)."""
        return self._points

    def last(self) -> float | None:
        return self._points[-1][1] if self._points else None

    def since(self, t0: float) -> list[tuple[float, float | None]]:
        return [(t, v) for t, v in self._points if t >= t0]

    def newest(self, t0: float) -> list[tuple[float, float | None]]:
        """Like `since` for time-ordered points, walking back from the newest
        (a redraw reads the last minutes, not the whole ring)."""
        out = []
        for p in reversed(self._points):
            if p[0] < t0:
                break
            out.append(p)
        out.reverse()
        return out

    def newest_point(self) -> tuple[float, float | None] | None:
        return self._points[-1] if self._points else None

    def after(self, point: tuple[float, float | None]) -> list[tuple[float, float | None]] | None:
        """The points appended after `point` (one of this ring's, by
        identity), oldest first; None when it is no longer in the ring."""
        out: list[tuple[float, float | None]] = []
        for p in reversed(self._points):
            if p is point:
                out.reverse()
                return out
            out.append(p)
        return None

    def __len__(self) -> int:
        return len(self._points)


@dataclass
class GpuState:
    """Latest sample per GPU, bounded history, processes and events."""

    source: str = ""  # "nvidia-smi (host)", "nvidia-smi (ct)", "nvml", "simulated"
    latest: dict[int, GpuSample] = field(default_factory=dict)
    util_history: dict[int, Ring] = field(default_factory=dict)
    mem_history: dict[int, Ring] = field(default_factory=dict)  # used MiB
    power_history: dict[int, Ring] = field(default_factory=dict)  # W (the zoom view's)
    processes: list[GpuProcess] = field(default_factory=list)
    # True while a feed that lists the GPU processes separately (nvidia-smi's
    # compute-apps loop) has not delivered its first listing: `processes` is
    # then not yet known, not empty.
    processes_pending: bool = False
    events: deque[GpuEvent] = field(default_factory=lambda: deque(maxlen=50))
    error: str | None = None  # e.g. "nvidia-smi not found on host or in CT 200"
    history_len: int = 600
    # The clocks' event reasons per GPU over time (bitmask as a float; None
    # not read): how long a throttle has lasted.
    reasons_history: dict[int, Ring] = field(default_factory=dict)
    health: dict[int, GpuHealth] = field(default_factory=dict)  # the slow fields
    # The kernel-log reader: "" not started; "following …" while it runs;
    # else why it cannot (one line with the fix).
    kernel_log: str = ""

    def add(self, sample: GpuSample) -> None:
        self.latest[sample.index] = sample
        i, t = sample.index, sample.time
        for rings, value in (
            (self.util_history, sample.util_pct),
            (self.mem_history, sample.mem_used_mib),
            (self.power_history, sample.power_w),
        ):
            ring = rings.get(i)
            if ring is None:  # (not setdefault: that made a ring for every sample)
                ring = rings[i] = Ring(self.history_len)
            ring.append(t, value)
        if sample.event_reasons is not None or sample.index in self.reasons_history:
            self.reasons_history.setdefault(sample.index, Ring(self.history_len)).append(
                sample.time,
                None if sample.event_reasons is None else float(sample.event_reasons),
            )

    @property
    def lost(self) -> bool:
        """A GPU is lost now: the newest lost event is not older than the
        oldest of the GPUs' latest samples (some GPU has not been read since).
        Readings of every GPU after it mean it recovered; `events` keeps the
        history."""
        last_lost = max((e.time for e in self.events if e.lost), default=None)
        if last_lost is None:
            return False
        if not self.latest:
            return True
        return last_lost >= min(s.time for s in self.latest.values())


# ---------------------------------------------------------------- tmux


@dataclass
class Pane:
    session: str
    window_index: int
    pane_index: int
    pid: int | None
    dead: bool = False
    dead_status: int | None = None
    dead_signal: int | None = None
    current_command: str = ""
    start_command: str = ""
    current_path: str = ""
    # where the pane was started (`-c DIR`, else the creating client's cwd):
    # the start command's cwd; tmux has no current path for a dead pane
    start_path: str = ""
    start_command_raw: str = ""  # as tmux printed it (collect.tmux.split_start_command reads it)
    # The user's command when gputui's launch wrapper started the pane (it ran
    # with PYTHONUNBUFFERED=1 and `python -u`): "" for any other pane.
    launched_command: str = ""


@dataclass
class Session:
    name: str
    windows: int = 1
    created: float | None = None
    attached: bool = False
    panes: list[Pane] = field(default_factory=list)
    # A session of another tmux server than the default one (another user's,
    # e.g. a run started as `ubuntu` in the CT, or `tmux -L NAME`): its socket,
    # and the user the server runs as. None: the default server.
    socket: str | None = None
    owner: str | None = None
    # The argv that reaches that server as its owner (`setpriv --reuid …
    # tmux -S SOCKET`), built in the CT by the agent (remote/agent.py
    # as_owner): gputui never talks to another user's tmux server as root.
    server_tmux: list[str] | None = None

    @property
    def tmux(self) -> list[str]:
        """The tmux command that reaches this session's server: the default
        one, or another one only as the agent built it (as its owner)."""
        if self.socket is None:
            return ["tmux"]
        if not self.server_tmux:
            from gputui.errors import GputuiError

            raise GputuiError(
                f"tmux server of {self.owner} ({self.socket}): no way to reach it as its owner",
                "act on that session as its owner, inside the container",
            )
        return list(self.server_tmux)

    @property
    def alive(self) -> bool:
        return any(not p.dead for p in self.panes) if self.panes else True

    @property
    def main_pane(self) -> Pane | None:
        return self.panes[0] if self.panes else None


# ---------------------------------------------------------------- processes


@dataclass
class StdoutTarget:
    """Where a process's fd 1 goes.

    kind: "file" | "pipe" | "tty" | "socket" | "null" | "closed" | "unknown".
    For a pipe, `readers` are the processes with the pipe's other end open
    (e.g. tee) and `reader_files` the regular files those readers write.
    A file deleted while open keeps the kernel's " (deleted)" in `path` and
    `reader_files`; `handles` maps such a path to a /proc/PID/fd/N it can
    still be read through.
    """

    kind: str = "unknown"
    path: str | None = None  # file path, "/dev/pts/3", or "pipe:[12345]"
    readers: list[tuple[int, str]] = field(default_factory=list)  # (pid, command)
    reader_files: list[str] = field(default_factory=list)
    handles: dict[str, str] = field(default_factory=dict)

    @property
    def files(self) -> list[str]:
        """The log files this stdout ends up in (a deleted one by its name)."""
        raw = [self.path] if self.kind == "file" and self.path else list(self.reader_files)
        return [undeleted(f) for f in raw]

    @property
    def deleted(self) -> dict[str, str]:
        """Files of `files` that were deleted while open -> where to read them."""
        return {undeleted(f): h for f, h in self.handles.items() if f.endswith(DELETED)}


DELETED = " (deleted)"  # the kernel's mark on a /proc/PID/fd link of an unlinked file


def undeleted(path: str) -> str:
    """A /proc/PID/fd link's path without the kernel's " (deleted)" mark."""
    return path[: -len(DELETED)] if path.endswith(DELETED) else path


@dataclass
class Proc:
    pid: int
    ppid: int = 0
    cmdline: list[str] = field(default_factory=list)
    cwd: str = ""
    state: str = ""  # R, S, D, Z, T ...
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    threads: int | None = None
    start_time: float | None = None  # epoch, in the clock of the machine it runs on
    is_python: bool = False
    stdout: StdoutTarget = field(default_factory=StdoutTarget)
    python_u_flag: bool = False  # `python -u` (or -X / PYTHONUNBUFFERED-like flags)
    env_pythonunbuffered: bool | None = None  # None: environ unreadable
    fd1_pos: int | None = None  # fdinfo pos of fd 1 (bytes written so far, for files)
    source_files: list[tuple[str, float]] = field(default_factory=list)  # (path, mtime)
    # Regular files the process has open for writing (a FileHandler log,
    # `> out.txt`, checkpoints...), /dev excluded, bounded by the agent.
    write_files: list[str] = field(default_factory=list)
    # The terminal it is asleep reading (`input()`, getpass, pdb, a shell's
    # `read`): it waits for someone to answer. None: not reading one.
    reads_tty: str | None = None
    uid: int | None = None  # whose it is (the owner of /proc/PID); None: not known

    @property
    def block_buffered(self) -> bool | None:
        """True when Python will block-buffer stdout (8 KiB) — i.e. the
        process is Python, stdout is not a tty, and neither -u nor
        PYTHONUNBUFFERED is in effect. None when it cannot be told."""
        if not self.is_python:
            return None
        if self.stdout.kind == "tty":
            return False
        if self.python_u_flag or self.env_pythonunbuffered:
            return False
        if self.env_pythonunbuffered is None or self.stdout.kind == "unknown":
            return None
        return True

    @property
    def command(self) -> str:
        return " ".join(self.cmdline)


@dataclass
class PortHolder:
    """A process listening on a TCP port the run's output says was taken
    (the agent's `listeners` op, in the container's network namespace)."""

    port: int
    pid: int  # as the container sees it
    cmdline: list[str] = field(default_factory=list)
    user: str | None = None
    ancestors: list[int] = field(default_factory=list)  # its parent first, up to init
    session: str | None = None  # the tmux session it runs under (one of `sessions`)
    uid: int | None = None  # whose process it is; None: not known

    @property
    def command(self) -> str:
        return " ".join(self.cmdline)

    @property
    def program(self) -> str:
        """Its program's name alone ('sshd', 'python3'): what may be said of
        another user's process, whose command line is not (issue 45)."""
        first = self.cmdline[0].split()[0] if self.cmdline and self.cmdline[0].split() else ""
        return first.rstrip(":").rsplit("/", 1)[-1] or "a process"


@dataclass
class PortsTaken:
    """Who holds the ports the run could not listen on: `holders` (every
    process listening, a forked child too), `unseen` (ports listened on by a
    process gputui may not look into), `at` (local time of the reading)."""

    ports: list[int] = field(default_factory=list)  # the ports asked about
    holders: list[PortHolder] = field(default_factory=list)
    unseen: list[int] = field(default_factory=list)
    at: float = 0.0
    # the uid the agent runs as (gputui's hands on the target): whose a run
    # in gputui's own tmux server is; None: not known
    me: int | None = None


@dataclass
class GpuOwners:
    """Whose each GPU holder in the watched container (or on the plain host)
    is, as the agent there reads it (/proc/PID/status Uid:, the container's
    own uid — in an unprivileged LXC the host sees it + 100000): by its PID
    as the container sees it (GpuProcess.ct_pid) -> (uid, user name; None:
    not known — gone, unreadable, no passwd entry)."""

    owners: dict[int, tuple[int | None, str | None]] = field(default_factory=dict)
    me: int | None = None  # the uid the agent runs as (whose gputui's own tmux server is)
    at: float = 0.0  # local time of the reading


# ---------------------------------------------------------------- the log


UNREADABLE = "file it may not read"  # LogState.not_a_file of a log this user may not read
# LogState.not_a_file of a log gputui will not follow as root (its error says why and the fix)
NOT_FOLLOWED = "log gputui does not follow as root"


@dataclass
class LogState:
    path: str = ""
    exists: bool | None = None  # None: not checked yet
    size: int | None = None
    mtime: float | None = None  # remote mtime translated to local clock
    offset: int = 0  # bytes consumed so far
    lines_total: int = 0
    last_line_time: float | None = None  # local time the last complete line arrived
    truncations: int = 0
    rotations: int = 0
    error: str | None = None
    # what the path is instead ("directory", or UNREADABLE); never read then
    not_a_file: str | None = None
    # The file was deleted while the run still writes it: read through this
    # /proc/PID/fd/N instead (its lines are gone once that process ends).
    read_via: str | None = None
    # Seconds between consecutive complete lines as they arrived (0 within a
    # burst): the run's own cadence, for the adaptive stale threshold.
    line_gaps: deque[float] = field(default_factory=lambda: deque(maxlen=200))
    # gputui's own side, never the run's: since when (local time) a stat has
    # shown the file ahead of the bytes delivered (None: caught up); `stuck`:
    # ahead and nothing delivered for a while, so the stream is being resumed
    # from `offset`; `resumes`: how often that was needed.
    behind_since: float | None = None
    stuck: bool = False
    resumes: int = 0
    # The file system holding the log (or its directory while it does not
    # exist): bytes free for an unprivileged user and in all; None: unknown.
    fs_free: int | None = None
    fs_total: int | None = None
    # What the appends reaching the log say of the writer, as delivered
    # (diagnose/buffering.py judges stdout buffering from them, not from
    # argv): (local time written, "line" | "block" | "cut", end offset,
    # seconds, bytes). "line": a small append ending a line (the writer
    # flushes its lines); "block": ~8 KiB at once after that many seconds of
    # quiet (Python's buffer); "cut": one stopped mid-line at a 4 KiB
    # boundary and the rest waited that many seconds (C stdio's buffer).
    appends: deque[tuple[float, str, int, float, int]] = field(
        default_factory=lambda: deque(maxlen=64)
    )
    last_append_at: float | None = None  # local time the latest append arrived
    # a container log's write being read: [first stamp, bytes, lines, last
    # stamp, quiet before it (-1: unknown)] (buffering.note_stamped)
    stamp_group: list[float] | None = None
    # The latest append stopped mid-line at a 4 KiB boundary: when it
    # arrived (None: it did not), when it was written, at which byte.
    cut_at: float | None = None
    cut_written: float = 0.0
    cut_offset: int = 0
    cut_size: int = 0  # bytes of that write so far, and the quiet before it
    cut_quiet: float | None = None

    @property
    def behind(self) -> bool:
        """The file holds bytes gputui has not delivered yet."""
        return self.behind_since is not None

    @property
    def written_by(self) -> float | None:
        """The latest the file's last write can have been: its mtime, or —
        an mtime in whole seconds (`stat -c %Y`, the follower's own stat) —
        the end of that second. A backlog line is dated by it: dated by the
        second's start, the steps of a run that started at .38 and wrote
        them by .91 looked older than its process, so the run looked still
        "loading" and a deadlock holding its GPU got no word (CI, load 10)."""
        m = self.mtime
        if m is None:
            return None
        return m + 1.0 if m.is_integer() else m

    def note_line(self, t: float) -> None:
        """Record that a complete line arrived at local time `t`."""
        if self.last_line_time is not None:
            self.line_gaps.append(max(0.0, t - self.last_line_time))
        self.last_line_time = t
        self.lines_total += 1

    def silent_for(self, now: float) -> float | None:
        """Seconds since the last new line (or since mtime when none seen).
        While gputui is behind the file, the run's silence is the file's:
        bytes it wrote that have not arrived yet are not silence."""
        ref = self.last_line_time or self.mtime
        if self.behind and self.mtime is not None and ref is not None:
            ref = max(ref, self.mtime)
        return None if ref is None else max(0.0, now - ref)


# ---------------------------------------------------------------- metrics


@dataclass
class MetricPoint:
    time: float
    step: int | None = None
    loss: float | None = None
    throughput: float | None = None  # in `throughput_unit`
    throughput_unit: str = ""  # "tok/s", "it/s", "samples/s"


@dataclass
class Metrics:
    step: Ring = field(default_factory=lambda: Ring(600))
    loss: Ring = field(default_factory=lambda: Ring(600))
    # the step each loss was printed with (None: its line said none), point
    # for point beside `loss`: a log read whole gives every line one time,
    # and a loss's step is its line's, not the time's
    loss_step: Ring = field(default_factory=lambda: Ring(600))
    throughput: Ring = field(default_factory=lambda: Ring(600))
    throughput_unit: str = ""
    last_step: int | None = None
    last_step_time: float | None = None  # local time the step counter last advanced
    step_intervals: deque[float] = field(default_factory=lambda: deque(maxlen=200))
    preset: str = ""  # which parser matched

    advance_times: deque[float] = field(default_factory=lambda: deque(maxlen=201))
    restarts: int = 0  # times the step counter went back (a relaunch, a new epoch bar)
    restarted_at: float | None = None  # when it last did: the losses before are another run's

    def add(self, p: MetricPoint) -> None:
        if p.step is not None:
            if self.last_step is not None and p.step < self.last_step:
                # a new run (relaunch) or a per-epoch counter: start counting again
                self.restarts += 1
                self.restarted_at = p.time
                self.last_step, self.last_step_time = p.step, p.time
                self.step_intervals.clear()
                self.advance_times.clear()
                self.advance_times.append(p.time)
            elif self.last_step is None or p.step > self.last_step:
                if self.last_step_time is not None:
                    self.step_intervals.append(p.time - self.last_step_time)
                self.last_step = p.step
                self.last_step_time = p.time
                self.advance_times.append(p.time)
            self.step.append(p.time, float(p.step))
        if p.loss is not None:
            self.loss.append(p.time, p.loss)
            self.loss_step.append(p.time, float(p.step) if p.step is not None else None)
        if p.throughput is not None:
            self.throughput.append(p.time, p.throughput)
            if p.throughput_unit:
                self.throughput_unit = p.throughput_unit

    @property
    def median_step_interval(self) -> float | None:
        """Median seconds between advances of the step counter. When most
        advances arrived in the same write (a block-buffered log delivers
        8 KiB of steps at once) the per-line gaps are ~0 and say nothing: use
        the average over the whole span instead."""
        if not self.step_intervals:
            return None
        xs = sorted(self.step_intervals)
        n = len(xs)
        same_write = sum(1 for x in xs if x < 0.001)
        if same_write * 2 >= n and len(self.advance_times) >= 2:
            span = self.advance_times[-1] - self.advance_times[0]
            if span > 0:
                return span / (len(self.advance_times) - 1)
        return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


# ---------------------------------------------------------------- the last run


@dataclass(frozen=True)
class Program:
    """What a run ran, as the history keeps it beside the run (issue 49):
    its argv, where, the script's mtime, the environment variables gputui's
    launch set (names, and PYTHONUNBUFFERED=1), when its process started
    (local clock). `script` is the program's own file (`train.py`, `-m
    pkg.train`, `start.sh`): two runs with the same script are the same
    program, their arguments compared."""

    argv: tuple[str, ...] = ()
    cwd: str = ""
    script: str = ""
    script_mtime: float | None = None
    env: tuple[str, ...] = ()
    started: float | None = None


@dataclass(frozen=True)
class Versus:
    """One figure of the new run against the last run's at the same step."""

    name: str  # "tok/s", "loss", "s/step", "first step"
    new: float | None
    old: float | None

    @property
    def percent(self) -> float | None:
        """(new - old) / old in %; None when either is unknown or old is 0."""
        if self.new is None or self.old is None or self.old == 0:
            return None
        return (self.new - self.old) / abs(self.old) * 100.0


@dataclass(frozen=True)
class RerunSpread:
    """How much earlier reruns of the last run's program moved, with no
    change between them (issue 49; diagnose/reruns.py measures it): each
    rerun against the one before it at their matched steps, as
    `compare` sees a new run against its last. `rate`, `loss`: the root
    mean square of those changes (a fraction: 0.04 = ±4 %), None when
    fewer than MIN_RERUNS of them could be measured; `n_rate`, `n_loss`:
    how many were."""

    runs: tuple[int, ...]  # the reruns' ids in the history, oldest first (the last run last)
    rate: float | None = None
    loss: float | None = None
    n_rate: int = 0
    n_loss: int = 0


@dataclass(frozen=True)
class VsLast:
    """The watched run against the last one, step for step (issue 49;
    diagnose/compare.py makes it). `verdict`: "faster", "slower", "same"
    (within the noise both runs' own spread says), or "" (too few matched
    steps yet). `enough`: enough matched steps to alert on."""

    this_run: int | None
    last_run: int | None
    step: int | None = None  # the step compared at (the last both runs reached)
    window: tuple[int, int] | None = None  # the matched steps the verdict is over
    verdict: str = ""
    enough: bool = False
    test: str = ""  # the test in words: "Welch t = -6.2, df 13, |t| > 3.0 (p < 0.01)"
    rate: Versus | None = None  # throughput (higher is faster), else steps/s
    loss: Versus | None = None
    step_time: Versus | None = None  # median s/step
    first_step: Versus | None = None  # seconds from start to the first step
    loss_band: tuple[float, float] | None = None  # the last run's loss band at `step`
    loss_out: bool = False  # the new loss is above that band
    changes: tuple[str, ...] = ()  # what changed between the two, in words
    picked: bool = False  # the user picked the last run (else: found by its program)
    n_new: int = 0  # points of each run in the window
    n_old: int = 0
    reruns: RerunSpread | None = None  # the last run's own reruns' spread, when known


# ---------------------------------------------------------------- findings


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        """0 for the most severe: findings sort by it, the banner shows the first."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass
class Finding:
    """One thing that is wrong, why we think so, and the key that fixes it."""

    kind: str  # stable id: "busy_but_silent", "held_but_idle", "session_dead", ...
    severity: Severity
    title: str  # one line, in words
    evidence: list[str] = field(default_factory=list)
    action: str = ""  # action id: "relaunch", "dump", "kill", "flush", "launch", ""
    action_label: str = ""  # e.g. "relaunch unbuffered"; the UI adds the key
    fix: str = ""  # a command or instruction when no key fixes it
    alt_action: str = ""  # a second key that also helps, e.g. "flush"
    alt_action_label: str = ""  # e.g. "flush live"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        return d


# ---------------------------------------------------------------- snapshot


@dataclass
class Tools:
    """What exists on the target (inside the CT when there is one)."""

    tmux: str | None = None  # version string, or None when missing
    python3: str | None = None
    py_spy: str | None = None
    nvidia_smi_host: bool | None = None
    nvidia_smi_ct: bool | None = None
    gdb: str | None = None
    # The CT's tools were probed (the agent's hello, doctor's probe): until
    # then every None above means "not known yet", not "missing".
    probed: bool = False


# ---------------------------------------------------------------- the kernel's OOM kills


@dataclass(frozen=True)
class OomKill:
    """One process the OOM killer took, as the kernel logged it. `t`: when
    (local clock), from its stamp; None when the stamp or the uptime was
    not there. `memcg`: the victim's cgroup (`task_memcg=`, "" unknown);
    `cgroup_limit`: a cgroup's limit ran out, not the machine's RAM."""

    pid: int
    name: str
    text: str
    t: float | None = None
    anon_rss_kib: int | None = None
    total_vm_kib: int | None = None
    memcg: str = ""
    limit_cgroup: str = ""  # oom_memcg=: the cgroup whose limit ran out
    cgroup_limit: bool = False


@dataclass
class KernelOomRead:
    """What one read of the kernel log found: `via` the reader that could
    read it ("" none could), `refused` each reader's refusal as it said it,
    `kills` the OOM kills it holds (oldest first), `where` the machine read
    ("the host", "the run's machine"), `at` when (local clock)."""

    where: str
    at: float
    via: str = ""
    kills: list[OomKill] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    # the run's Python processes as last seen alive (the kernel's PIDs are
    # the host's: they match only where gputui's PIDs are the kernel's own)
    run_pids: frozenset[int] = frozenset()

    @property
    def readable(self) -> bool:
        return bool(self.via)


@dataclass(frozen=True)
class YourKill:
    """The user's own k that stopped the watched run (the audit log says it):
    when it ended (epoch) and by which signal."""

    at: float
    ended_by: str | None = None


@dataclass
class Snapshot:
    """Everything gputui knows about one target at `time`."""

    time: float
    target: str  # e.g. "root@10.1.2.6 ct 200"
    connection: ConnectionState = ConnectionState.CONNECTING
    connection_error: str | None = None
    rtt_ms: float | None = None
    container: Container | None = None  # where the run lives; None: the host itself
    ct_status: CtStatus = CtStatus.UNKNOWN
    tools: Tools = field(default_factory=Tools)
    gpus: GpuState = field(default_factory=GpuState)
    sessions: list[Session] = field(default_factory=list)
    session_name: str | None = None  # the session being watched
    session_gone: bool = False  # the watched session existed and is now gone
    pane_tail: list[str] = field(default_factory=list)  # capture-pane of the watched pane
    procs: list[Proc] = field(default_factory=list)  # the watched pane's process tree
    # Where `procs` came from: "session" (the watched tmux pane), "log" (the
    # processes writing the log, found without tmux), "" (no run found).
    run_found_by: str = ""
    log: LogState = field(default_factory=LogState)
    log_tail: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    metrics: Metrics = field(default_factory=Metrics)
    started: float = 0.0  # when monitoring began (local clock)
    # OOM kills the kernel counted in the run's cgroups (memory.events
    # `oom_kill`, the CT's and the run's own): (first count seen, latest
    # count, local time the latest rose). None: not readable.
    oom: tuple[int, int, float | None] | None = None
    # Who listens on the ports the run's output says were taken (read only
    # while such a line is among the last ones); None: not asked (no agent,
    # or no such line).
    ports_taken: PortsTaken | None = None
    # Whose each GPU holder in the watched container is (the agent's `owners`
    # op, asked for the holders not of the run); None: not asked (no agent).
    gpu_owners: GpuOwners | None = None
    # The watched run against the last run of the same program (issue 49):
    # set by whoever reads the history (the recorder, doctor); None: none known.
    vs_last: VsLast | None = None
    # The host's containers by key ("lxc:201", "docker:<full id>") -> name,
    # as the host lists them (read once at start): a GPU holder in another
    # container is named "CT 201 (eval-box)", "container trainer2".
    container_names: dict[str, str] = field(default_factory=dict)
    # Since when (local time) the target's tmux sessions have not been listed
    # although asked (the agent never answered, or stopped answering); None:
    # listed lately. `listing_problem`: why, as the last failed ask said it.
    listing_late_since: float | None = None
    listing_problem: str = ""
    listing_session: str | None = None  # the session the user named (--session), if any
    # The kernel log's OOM kills, read once when the run's process vanished
    # (collect/oomkills.py); None: not read (the run runs, or no read yet).
    kernel_oom: KernelOomRead | None = None
    # When a poll last read the run's processes and tmux sessions (local
    # time; None: none yet), and why none has since ("": the last poll did):
    # the agent in the container stopped answering, the container stopped.
    # Unread, `procs` and `sessions` are as of `run_read_at`, never live;
    # a stopped container's are cleared (its processes ended with it).
    run_read_at: float | None = None
    run_unread: str = ""
    # When the container was seen running again after it was seen stopped
    # (local time): the watched session, gone since, ended with it. None once
    # the watched session is seen again (or no restart seen).
    ct_restarted_at: float | None = None
    # The user's own kill of the run whose pane is dead now (doctor reads it
    # from the audit log): the run was stopped, it did not die. None: none.
    your_kill: YourKill | None = None

    @property
    def ct_id(self) -> int | None:
        """The Proxmox CT's number; None on a plain host and other kinds."""
        return self.container.id if self.container is not None else None

    @property
    def session(self) -> Session | None:
        for s in self.sessions:
            if s.name == self.session_name:
                return s
        return None

    @property
    def training_proc(self) -> Proc | None:
        """The main Python process of the run: the first Python process in
        the tree whose stdout is not a tty, else the first Python process."""
        pys = [p for p in self.procs if p.is_python]
        for p in pys:
            if p.stdout.kind != "tty":
                return p
        return pys[0] if pys else None
