"""`Context`: what the rules share about one snapshot at one moment,
computed once per diagnosis (the session, the run's process, log silence,
steps, the GPUs' recent history as `GpuView`s). Pure."""

from __future__ import annotations

import os
import re
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from gputui.diagnose.buffering import Buffering, judge
from gputui.diagnose.thresholds import (
    BUSY_WINDOW_S,
    DEFAULT_THRESHOLDS,
    GPU_FRESH_S,
    IDLE_SHORT_S,
    IDLE_SHORT_SAMPLES,
    LOADING_MAX_AGE_S,
    LOADING_UTIL_PCT,
    Thresholds,
)
from gputui.model import (
    ConnectionState,
    CtStatus,
    GpuProcess,
    GpuSample,
    GpuState,
    LogState,
    Metrics,
    Proc,
    Session,
    Snapshot,
    Tools,
)
from gputui.text.words import gib, program_name

# A write that failed because the disk is full (tee's and Python's words).
_ENOSPC_LINE = re.compile(r"No space left on device|\[Errno 28\]|\bENOSPC\b")


_ENOSPC_WORDS = ("No space left on device", "[Errno 28]", "ENOSPC")  # each match holds one
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "tcsh", "csh", "ash"})


def runs_a_script(p: Proc) -> bool:
    """A shell running a script or a command (`bash start.sh`, `sh -c …`),
    not an interactive one at its prompt (`bash`, `-bash`, `bash -l`)."""
    args = p.cmdline[1:]
    return "-c" in args or any(not a.startswith("-") for a in args)


T = TypeVar("T")

# The tail's lines and texts by `n`, and the words found in them, kept from
# one diagnosis to the next while the tail is the same (issue 48: a run that
# writes nothing new for seconds — a buffered one — was scanned for ~60
# words across its last 200 lines every second): (the tail's key, lines by
# n, texts by n, what was read from them: `Context.tail_once`).
_Kept = tuple[tuple[object, ...], dict[int, list[str]], dict[int, str], dict[object, object]]
_KEPT: list[_Kept] = []


def _tail_key(snap: Snapshot) -> tuple[object, ...]:
    """What the recent lines are read from: the log's tail (the follower's
    deque, appended in place: its length, newest line and the log's line
    count move with each line) and the pane's (a new list when it changes)."""
    log, pane = snap.log_tail, snap.pane_tail
    total = snap.log.lines_total if isinstance(snap.log, LogState) else None
    return (
        log,
        len(log) if isinstance(log, deque | list) else None,
        log[-1] if isinstance(log, deque | list) and log else None,
        total,
        pane,
        len(pane) if isinstance(pane, list) else None,
    )


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """The same objects (ints: the same numbers)."""
    return all(x is y or (type(x) is int and x == y) for x, y in zip(a, b, strict=True))


def _kept_tail(snap: Snapshot) -> tuple[dict[int, list[str]], dict[int, str], dict[object, object]]:
    """The kept lines, texts and words of `snap`'s tail, or new empty ones."""
    key = _tail_key(snap)
    kept = _KEPT[0] if _KEPT else None  # (read once: what is returned is this key's)
    if kept is None or not _same(kept[0], key):
        kept = (key, {}, {}, {})
        _KEPT[:] = [kept]
    return kept[1], kept[2], kept[3]


@dataclass
class GpuView:
    sample: GpuSample
    recent_util: list[float]  # known readings within BUSY_WINDOW_S
    idle_for: float | None  # how long every reading has been < idle_util_pct (None: not idle)
    idle_samples: int
    idle_whole_history: bool
    mem_rise_mib: float  # rise of used memory within the loading window
    th: Thresholds = DEFAULT_THRESHOLDS
    span_s: float = 0.0  # seconds of readings held for this GPU
    # The run's own processes' SM utilization on this GPU (per-process
    # readings): when known, busy/idle above are judged from it, not from
    # the whole GPU's (another run may keep it busy). None: not known.
    own_util: float | None = None
    min_samples: int = 2  # idle readings needed to call it gone idle (1: per-process averages)

    @property
    def held(self) -> bool:
        m = self.sample.mem_used_mib
        return m is not None and m >= self.th.held_mib

    @property
    def util_median(self) -> float | None:
        if self.recent_util:
            return statistics.median(self.recent_util)
        return self.sample.util_pct

    @property
    def busy(self) -> bool:
        m = self.util_median
        return m is not None and m >= self.th.busy_util_pct

    @property
    def gone_idle(self) -> bool:
        """Every reading below the idle line for gpu_idle_after_s (two readings at least)."""
        return (
            self.idle_for is not None
            and self.idle_for >= self.th.gpu_idle_after_s
            and self.idle_samples >= self.min_samples
        )

    def line(self) -> str:
        s = self.sample
        util = "? %" if s.util_pct is None else f"{s.util_pct:.0f} %"
        total = f" of {gib(s.mem_total_mib)}" if s.mem_total_mib else ""
        own = "" if self.own_util is None else f" (the run's own: {self.own_util:.0f} %)"
        return f"GPU {s.index}: {gib(s.mem_used_mib)}{total} used, {util} util{own}"


class Context:
    """What the rules share, computed once per diagnosis."""

    def __init__(
        self, snap: Snapshot, now: float, threshold: float, th: Thresholds = DEFAULT_THRESHOLDS
    ) -> None:
        self.snap = snap
        self.now = now
        self.threshold = threshold
        self.th = th
        self.gpus: GpuState = snap.gpus if isinstance(snap.gpus, GpuState) else GpuState()
        self.log: LogState = snap.log if isinstance(snap.log, LogState) else LogState()
        self.metrics: Metrics = snap.metrics if isinstance(snap.metrics, Metrics) else Metrics()
        self.tools: Tools = snap.tools if isinstance(snap.tools, Tools) else Tools()
        self.procs: list[Proc] = [p for p in (snap.procs or []) if isinstance(p, Proc)]
        self.sessions: list[Session] = [s for s in (snap.sessions or []) if isinstance(s, Session)]
        self._recent, self._recent_text, self._tail_memo = _kept_tail(snap)
        self._once: dict[str, object] = {}

    def once(self, key: str, make: Callable[[], T]) -> T:
        """`make()`, made once per diagnosis under `key`: what several rules
        of one module read (the GPUs' issues: four hardware rules)."""
        if key not in self._once:
            self._once[key] = make()
        return self._once[key]  # type: ignore[return-value]

    def recent_lines(self, n: int) -> list[str]:
        """The last `n` lines of the log (else of the pane), empty ones left
        out, newest last: what the run's own words are read from (taken once
        per `n` and diagnosis: several rules read them; do not change it)."""
        lines = self._recent.get(n)
        if lines is None:
            lines = [ln for ln in list(self.snap.log_tail or [])[-n:] if ln]
            if not lines:
                lines = [ln for ln in list(self.snap.pane_tail or [])[-n:] if ln]
            self._recent[n] = lines
        return lines

    def recent_hold(self, n: int, words: tuple[str, ...]) -> bool:
        """Whether one of `words` is in the last `n` lines (`recent_lines`):
        one substring scan of their text, before a rule's per-line regex —
        nearly no line holds one, and a regex (or even a word test) per line
        of the tail, for every rule, twice a second, was a third of a
        diagnosis."""
        return self.tail_once((n, words), lambda: any(word in self._text(n) for word in words))

    def _text(self, n: int) -> str:
        text = self._recent_text.get(n)
        if text is None:
            text = self._recent_text[n] = "\n".join(self.recent_lines(n))
        return text

    def tail_once(self, key: object, make: Callable[[], T]) -> T:
        """`make()` of what the tails (log and pane) hold, kept under `key`
        from one diagnosis to the next until they change (`_kept_tail`)."""
        if key not in self._tail_memo:
            self._tail_memo[key] = make()
        return self._tail_memo[key]  # type: ignore[return-value]

    # -- connection / container ------------------------------------------
    @property
    def connection_down(self) -> bool:
        return self.snap.connection in (ConnectionState.RECONNECTING, ConnectionState.FAILED)

    @property
    def run_unread(self) -> bool:
        """The run was read before and no poll has read it since (the agent
        lost, the container stopped): what the snapshot holds of it is old."""
        return bool(self.snap.run_unread) and self.snap.run_read_at is not None

    @property
    def ct_usable(self) -> bool:
        return self.snap.ct_status not in (CtStatus.STOPPED, CtStatus.MISSING)

    @property
    def ct_words(self) -> str:
        c = self.snap.container
        return c.words if c is not None else "the host"

    def in_ct(self, argv: str) -> str:
        """A command line as the user types it on the host to run it in the container."""
        c = self.snap.container
        return c.phrase(argv) if c is not None else argv

    # -- session / process -----------------------------------------------
    @cached_property
    def session(self) -> Session | None:
        for s in self.sessions:
            if s.name == self.snap.session_name:
                return s
        return None

    @cached_property
    def session_dead(self) -> bool:
        if not self.snap.session_name:
            return False
        if self.snap.session_gone:
            return True
        s = self.session
        return s is not None and bool(s.panes) and not s.alive

    @property
    def run_known_gone(self) -> bool:
        """We know no run is alive: the watched session died or is not there,
        or the container is down."""
        if not self.ct_usable:
            return True
        if not self.snap.session_name:
            return False
        if self.session_dead:
            return True
        return self.session is None and (self.tools.tmux is not None or bool(self.sessions))

    @cached_property
    def proc(self) -> Proc | None:
        pys = [p for p in self.procs if p.is_python]
        for p in pys:
            if p.stdout is None or p.stdout.kind != "tty":
                return p
        return pys[0] if pys else None

    @cached_property
    def waiting_input(self) -> Proc | None:
        """A process of the run asleep reading its terminal — waiting for
        someone to answer (`input()`, a login prompt, getpass, pdb, a start
        script's `read`): a Python process, or a shell running a script;
        never an interactive shell at its prompt (a pane whose run ended)."""
        if not self.ct_usable or self._still_going():
            return None
        for p in self.procs:
            if not p.reads_tty or p.state == "Z":
                continue
            shell = program_name(p.command).lstrip("-") in SHELLS
            if p.is_python or (shell and runs_a_script(p)):
                return p
        return None

    @property
    def run_gone(self) -> bool:
        """The run is over: known gone (its session dead or missing, the
        container down), or no live Python process of it is seen, or it
        waits at a prompt (a start script's "press any key" after its
        error) — a failure's word is then an ERROR, a WARNING while the run
        goes on."""
        return self.run_known_gone or not self.proc_alive or self.waiting_input is not None

    def _still_going(self) -> bool:
        """Steps or lines still come (the last within a few step times, or
        2 s): a thread of the run reads the terminal while it trains."""
        m = self.metrics
        step_gap = max(2.0, 3 * (m.median_step_interval or 0.0))
        if m.last_step_time is not None and self.now - m.last_step_time < step_gap:
            return True
        last = self.log.last_line_time
        return last is not None and self.now - last < 2.0

    @property
    def proc_alive(self) -> bool:
        return self.proc is not None and self.proc.state != "Z" and not self.session_dead

    def proc_age(self) -> float | None:
        p = self.proc
        if p is None or p.start_time is None:
            return None
        return max(0.0, self.now - p.start_time)

    @cached_property
    def buffering(self) -> Buffering:
        """Whether the run's stdout is block-buffered, judged by the log
        (argv and environment only make a suspicion; see buffering.py)."""
        return judge(self.proc, self.log, self.now)

    @property
    def block_buffered(self) -> bool | None:
        """True: the log showed a block buffer; False: cleared (the program
        flushes, or -u/PYTHONUNBUFFERED/a terminal); None: not known yet."""
        return self.buffering.block_buffered

    @property
    def maybe_buffered(self) -> bool:
        """Block-buffered, or suspected and not cleared by the log yet."""
        return self.buffering.maybe

    # -- log ---------------------------------------------------------------
    @cached_property
    def log_silent_s(self) -> float | None:
        """Seconds with no new log line, counted at most from the process start
        (an old log's mtime says nothing about a process started since)."""
        silent = self.log.silent_for(self.now)
        if silent is None and self.snap.started:
            silent = max(0.0, self.now - self.snap.started)
        age = self.proc_age()
        if silent is not None and age is not None:
            silent = min(silent, age)
        return silent

    @property
    def log_silent(self) -> bool:
        return self.log_silent_s is not None and self.log_silent_s > self.threshold

    @cached_property
    def enospc(self) -> tuple[str, str] | None:
        """(where, line): the last line of the pane (tee says it there) or
        the log (Python's OSError) that says a write failed for lack of space
        (read again only when the tails changed)."""
        return self.tail_once("enospc", self._enospc)

    def _enospc(self) -> tuple[str, str] | None:
        for src, lines in (("pane", self.snap.pane_tail), ("log", self.snap.log_tail)):
            # one substring scan of the whole tail first: a regex per line
            # of a 200-line tail, every tick, was a tenth of gputui's CPU
            # while a log streamed (issue 24)
            joined = "\n".join(lines or ())
            if not any(word in joined for word in _ENOSPC_WORDS):
                continue
            for ln in reversed(list(lines or [])):
                # torch's "unable to write to file </torch_…>" is /dev/shm's
                # (failures.py's shm_exhausted), not the log's disk
                if ln and _ENOSPC_LINE.search(ln) and "</torch_" not in ln:
                    return src, ln.strip()
        return None

    @cached_property
    def disk_full(self) -> bool:
        """The log's file system has less than disk_full_below_mib free; or,
        with its space unknown (no statvfs), the output says a write failed
        for lack of space. The log's silence is then the disk's doing."""
        free = self.log.fs_free
        if free is not None:
            return free < self.th.disk_full_below_mib * 1024 * 1024
        return self.log.path != "" and self.enospc is not None

    @property
    def disk_silenced(self) -> bool:
        """The log's silence is the disk's doing: it is full, or a write
        failed for lack of space (tee never writes that file again) and
        the log has been silent since."""
        if self.disk_full:
            return True
        return self.enospc is not None and self.proc_alive and self.log_silent

    def no_step_for(self) -> float | None:
        """Seconds since the step counter last advanced, counted at most from
        the process start; with no step seen, since the last line."""
        last = self.metrics.last_step_time
        if last is None:
            return self.no_progress_for()
        gap = max(0.0, self.now - last)
        age = self.proc_age()
        return min(gap, age) if age is not None else gap

    @cached_property
    def cadence(self) -> tuple[float, str] | None:
        """(seconds, "step" | "line"): the run's usual gap between steps, else
        between log lines; None when neither is known yet."""
        med = self.metrics.median_step_interval
        if med is not None:
            return med, "step"
        gaps = [g for g in (self.log.line_gaps or []) if g > 0]
        if len(gaps) >= 3:
            return statistics.median(gaps), "line"
        return None

    @property
    def stale_as_set(self) -> bool:
        """The user set --stale-after ([ui] stale_after) and the log has been
        silent past it: "stale after N s" means stale to the rules too,
        whatever the run's step interval (the log pane says "stale" then)."""
        return self.th.stale_after is not None and self.log_silent

    @property
    def overdue_after(self) -> float:
        """A step is overdue after k × the median step interval, and never
        before the stale threshold; once the log is silent past the user's
        own --stale-after, at that threshold."""
        if self.stale_as_set:
            return self.threshold
        c = self.cadence
        return max(self.threshold, self.th.step_overdue_factor * (c[0] if c else 0.0))

    @property
    def step_overdue(self) -> bool:
        gap = self.no_step_for()
        return gap is not None and gap >= self.overdue_after

    def no_progress_for(self) -> float | None:
        """Seconds since the run last showed progress (a step, else a line)."""
        ts = [t for t in (self.metrics.last_step_time, self.log.last_line_time) if t is not None]
        if ts:
            return max(0.0, self.now - max(ts))
        return self.log_silent_s

    # -- GPUs --------------------------------------------------------------
    @cached_property
    def gpu_views(self) -> list[GpuView]:
        """Fresh readings of the GPUs this run uses (all GPUs when the
        process-to-GPU mapping is unknown)."""
        run_uuids = self._run_gpu_uuids()
        views = []
        for idx in sorted(self.gpus.latest or {}):
            s = self.gpus.latest[idx]
            if not isinstance(s, GpuSample) or s.time is None:
                continue
            if self.now - s.time > GPU_FRESH_S:
                continue
            if run_uuids and s.uuid and s.uuid not in run_uuids:
                continue
            views.append(self._view(idx, s))
        return views

    def _run_gpu_uuids(self) -> set[str]:
        pids = {p.pid for p in self.procs}
        return {
            gp.gpu_uuid
            for gp in (self.gpus.processes or [])
            if gp.ct_pid is not None and gp.ct_pid in pids and gp.gpu_uuid
        }

    def _view(self, idx: int, s: GpuSample) -> GpuView:
        """A GPU's readings as the rules judge them. The histories hold up to
        600 readings a GPU (10 min): they are walked back from the newest as
        far as a judgement needs (the last 30 s, the idle streak, the loading
        window), not copied whole for each GPU each second."""
        util_ring = (self.gpus.util_history or {}).get(idx)
        pts: Sequence[tuple[float, float | None]] = (
            util_ring.held() if util_ring is not None and len(util_ring) else [(s.time, s.util_pct)]
        )
        own = run_own_util(self.gpus.processes or [], self.run_pids, s.uuid)
        if own:  # the run's own readings: what another run does on this GPU is not ours
            pts = own
        recent = _newest_values(pts, self.now - BUSY_WINDOW_S)
        # the trailing streak of idle readings
        streak_start = None
        n = 0
        for t, v in reversed(pts):
            if v is None or v >= self.th.idle_util_pct:
                break
            streak_start = t
            n += 1
        idle_for = None if streak_start is None else max(0.0, self.now - streak_start)
        whole = n == len(pts)
        mem_ring = (self.gpus.mem_history or {}).get(idx)
        rise = 0.0
        if mem_ring is not None:
            window = _newest_values(mem_ring.held(), self.now - self.th.loading_window_s)
            if len(window) >= 2:
                rise = window[-1] - min(window)
        span = max(0.0, self.now - pts[0][0]) if pts else 0.0
        own_now = own[-1][1] if own else None
        # a per-process reading is an average over its whole period (pmon,
        # NVML's samples since the last one): one idle reading is enough
        return GpuView(s, recent, idle_for, n, whole, rise, self.th, span, own_now, 1 if own else 2)

    @cached_property
    def run_pids(self) -> set[int]:
        return {p.pid for p in self.procs}

    @property
    def steps_since_start(self) -> bool:
        """A step was seen since the run's process started (a relaunch's old
        steps do not count)."""
        last = self.metrics.last_step_time
        if last is None or self.metrics.last_step is None:
            return False
        p = self.proc
        return p is None or p.start_time is None or last >= p.start_time

    @property
    def held(self) -> list[GpuView]:
        return [g for g in self.gpu_views if g.held]

    @property
    def busy(self) -> list[GpuView]:
        return [g for g in self.gpu_views if g.busy]

    @property
    def held_mib(self) -> float:
        return sum(g.sample.mem_used_mib or 0.0 for g in self.held)

    @property
    def run_held_mib(self) -> float | None:
        """The memory the watched run's own processes hold, on every GPU;
        None when the driver's per-process list does not name them."""
        mine = [
            gp.used_mib
            for gp in self.gpus.processes or []
            if gp.ct_pid is not None and gp.ct_pid in self.run_pids and gp.used_mib is not None
        ]
        return sum(mine) if mine else None

    @property
    def own_readings(self) -> bool:
        """The idle judgement is from the run's own per-process utilization
        (another process may keep the same GPU busy)."""
        return any(g.own_util is not None for g in self.gpu_views)

    # -- the judgements the rules share --------------------------------------
    @cached_property
    def loading(self) -> bool:
        """Memory rising while utilization stays low, in a young process; or a
        young process busy on CPU that has not made a step yet."""
        if not self.proc_alive or not self.gpu_views:
            return False
        if any(
            g.util_median is not None and g.util_median >= LOADING_UTIL_PCT for g in self.gpu_views
        ):
            return False
        age = self.proc_age()
        young = age is None or age < LOADING_MAX_AGE_S
        if not young or self.steps_since_start:
            return False  # loading ends at the first step: a hang after it is a hang
        rising = sum(g.mem_rise_mib for g in self.gpu_views) >= self.th.loading_rise_mib
        p = self.proc
        cpu_prep = (
            age is not None
            and self.metrics.last_step is None
            and p is not None
            and p.cpu_pct is not None
            and p.cpu_pct >= self.th.cpu_busy_pct
        )
        return rising or cpu_prep

    @cached_property
    def idle_held(self) -> list[GpuView]:
        """GPUs of the run that hold memory and have gone idle."""
        return [g for g in self.held if g.gone_idle]

    @cached_property
    def stalled(self) -> bool:
        """The escalation's first step: a step is overdue (k × median, at
        least the stale threshold) and a GPU holding memory has gone idle."""
        if not self.proc_alive or self.loading or not self.idle_held:
            return False
        if self.log.behind:
            return False  # the file holds lines gputui has not delivered: steps may be in them
        return self.step_overdue

    @cached_property
    def hung(self) -> bool:
        """The second step: the idle GPUs have stayed idle for the hang window
        (or, in a doctor's short watch, for all of it, with no step for the
        hang window), and no step for the hang window or the overdue time,
        whichever is shorter."""
        if not self.proc_alive or self.loading or not self.idle_held:
            return False
        no_step = self.no_step_for()
        hang = self.th.hang_after_s
        quiet = min(hang, self.overdue_after)
        if no_step is None or no_step < quiet:
            return False
        for g in self.idle_held:
            idle = g.idle_for or 0.0
            short_but_all = (
                g.idle_whole_history
                and idle >= IDLE_SHORT_S
                and g.idle_samples >= IDLE_SHORT_SAMPLES
                and no_step >= hang
            )
            if not (idle >= hang or short_but_all):
                return False
        return True

    @cached_property
    def log_written_by_run(self) -> bool:
        """Some process of the run has the watched log open for writing (a
        `logging.FileHandler`, `open(log, "a")`, tee...)."""
        if not self.log.path:
            return False
        watched = os.path.normpath(self.log.path)
        return any(
            os.path.normpath(f) == watched
            for p in self.procs
            for f in (getattr(p, "write_files", None) or [])
            if f
        )

    @cached_property
    def drift_files(self) -> list[str]:
        """Files the process's stdout really reaches, when the watched log is
        not one of them and no process of the run writes it by itself."""
        p = self.proc
        if p is None or p.stdout is None or not self.log.path:
            return []
        files = [f for f in p.stdout.files if f]
        if not files:
            return []
        watched = os.path.normpath(self.log.path)
        if any(os.path.normpath(f) == watched for f in files):
            return []
        if self.log_written_by_run:
            return []
        return files


def _newest_values(pts: Sequence[tuple[float, float | None]], t0: float) -> list[float]:
    """The known values of the time-ordered `pts` from `t0` on, oldest
    first, walking back from the newest."""
    out = []
    for t, v in reversed(pts):
        if t < t0:
            break
        if v is not None:
            out.append(v)
    out.reverse()
    return out


def run_own_util(
    gprocs: Iterable[GpuProcess], run_pids: set[int], uuid: str
) -> list[tuple[float, float | None]]:
    """The watched run's own SM utilization on GPU `uuid`, summed over its
    processes there, one point per listing (oldest first); [] when the run
    has no process with per-process readings on it."""
    mine = [
        gp
        for gp in gprocs
        if gp.gpu_uuid == uuid and gp.ct_pid is not None and gp.ct_pid in run_pids
    ]
    if not mine or not all(gp.util for gp in mine):
        return []
    sums: dict[float, float] = {}
    for gp in mine:
        for t, v in gp.util:
            sums[t] = sums.get(t, 0.0) + v
    return sorted(sums.items())
