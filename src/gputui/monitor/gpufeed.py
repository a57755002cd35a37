"""Where GPU readings come from: a GpuFeed keeps a GpuState up to date.

- `NvidiaSmiFeed`: one long-lived `nvidia-smi --query-gpu … -lms PERIOD` on
  the host (or in the CT), parsed line by line; plus one long-lived shell loop
  on the same side that lists the compute apps every few seconds and, on the
  host, maps each host PID to the CT (`NSpid`, `/lxc/<ct>/` cgroup), and
  every listing reads the GPUs' slow health fields; on the host, a third
  channel follows the kernel log for the driver's Xid lines — no new remote
  process per poll. A stream that ends is restarted with backoff; a lost GPU
  (exit 15) is an event and an error in the state, never a crash; a field an
  older driver refuses is asked again without it.
- `NvmlFeed`: this machine's GPUs through NVML (`--local`), read in a thread
  (with `--local`, this machine's kernel log followed as a host's is).
- `SimulatedGpus`: readings derived from a callback (demo and tests).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import math
import os
import random
import time
from collections.abc import Callable
from typing import Any

from gputui.collect import gpuhealth as gpu_health
from gputui.collect import nvidiasmi as gpu_parse
from gputui.config import Settings
from gputui.containers import cgroup_owner
from gputui.errors import GputuiError
from gputui.model import GpuEvent, GpuHealth, GpuProcess, GpuSample, GpuState, Tools
from gputui.monitor.coalesce import OncePerTurn
from gputui.remote.base import RemoteProcess
from gputui.remote.target import Target
from gputui.tasks import cancel_and_wait

ChangeListener = Callable[[], None]

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0
APPS_PERIOD_S = 5.0
NOT_FOUND_RETRY_S = 300.0
# NVML's per-process utilization (issue 22's hang rule) was a tenth of the
# dashboard's samples on the H200 read every listing: read every UTIL_EVERY_S
# while every GPU holding a process reads at least UTIL_BUSY_PCT % (see
# NvmlFeed._util_due).
UTIL_EVERY_S = 10.0
UTIL_BUSY_PCT = 50.0
# The slow health fields through NVML (ECC, row remaps, PCIe, power limits):
# at the compute-apps listing's pace, as nvidia-smi's feed reads them.
HEALTH_EVERY_S = APPS_PERIOD_S

# One compute-apps listing ("$@": the nvidia-smi argv), ending in "@gputui
# end". For every listed PID it also prints its container's cgroup path
# (/lxc/<ct>/..., .../docker-<id>.scope, .../libpod-<id>.scope, /kubepods...), PID
# namespace and NSpid fields (meaningful on the host; inside a CT they
# describe the CT's view), its state, CPU ticks and its parents' PIDs as its
# CT sees them (NSpid's last field, up to init); then each process's own SM
# utilization (`nvidia-smi pmon -c 1 -s u`); in the loop, then the GPUs'
# slow health fields (collect/gpuhealth.py: ECC, row remaps, the PCIe link —
# read at the listing's pace, not every second). `parse_apps_block` reads it.
_APPS_HEAD = r"""  out=$("$@" 2>&1); rc=$?
  clk=$(getconf CLK_TCK 2>/dev/null)
  printf '%s\n' "$out"
  echo "@gputui rc $rc"
  for pid in $(printf '%s\n' "$out" | cut -d, -f1); do
    case $pid in ''|*[!0-9]*) continue;; esac
    ns=$(grep '^NSpid:' "/proc/$pid/status" 2>/dev/null | cut -f2-)
    cg=$(grep -m 1 -oE '/(lxc|docker|libpod|kubepods)[^ ]*' "/proc/$pid/cgroup" 2>/dev/null)
    pns=$(readlink "/proc/$pid/ns/pid" 2>/dev/null)
    echo "@gputui pid $pid ${cg:--} ${pns:--} $ns"
    st=$(awk '{sub(/^.*\) /, ""); print $1, $2, $12 + $13}' "/proc/$pid/stat" 2>/dev/null)
    [ -n "$st" ] || continue
    anc=""; a=$(echo "$st" | cut -d' ' -f2); i=0
    while [ "$a" -gt 1 ] 2>/dev/null && [ "$i" -lt 12 ]; do
      an=$(grep '^NSpid:' "/proc/$a/status" 2>/dev/null | awk '{print $NF}')
      if [ -z "$an" ] || [ "$an" = 1 ]; then break; fi
      anc="$anc $an"; i=$((i + 1))
      a=$(awk '{sub(/^.*\) /, ""); print $2}' "/proc/$a/stat" 2>/dev/null)
    done
    echo "@gputui stat $pid ${clk:-100} $st$anc"
  done
  if [ "$rc" = 0 ]; then
    if command -v timeout >/dev/null 2>&1; then pm=$(timeout 5 "$1" pmon -c 1 -s u 2>&1)
    else pm=$("$1" pmon -c 1 -s u 2>&1); fi
    printf '%s\n' "$pm" | sed 's/^/@gputui pmon /'
"""
_APPS_TAIL = """  fi
  echo "@gputui end"
"""
APPS_LISTING = _APPS_HEAD + _APPS_TAIL  # a one-off listing (the actions): who holds what
# The loop's listing also reads the slow health fields (issue 32).
APPS_HEALTH_LISTING = _APPS_HEAD + gpu_health.HEALTH_LISTING + _APPS_TAIL

# Long-lived compute-apps loop: the listing above, with the health, every $1 seconds.
APPS_SCRIPT = "n=$1; shift\nwhile :; do\n" + APPS_HEALTH_LISTING + '  sleep "$n"\ndone\n'


def apps_loop_argv(period_s: float = APPS_PERIOD_S) -> list[str]:
    return [
        "sh",
        "-c",
        APPS_SCRIPT,
        "gputui-gpu-apps",
        f"{period_s:g}",
        *gpu_parse.compute_apps_argv(),
    ]


def apps_once_argv() -> list[str]:
    """One listing of the apps loop, for a one-off reading (the actions)."""
    return ["sh", "-c", APPS_LISTING, "gputui-gpu-apps", *gpu_parse.compute_apps_argv()]


def parse_apps_block(
    lines: list[str],
    ct_id: int | None,
    ct_pid_ns: str | None = None,
    before: list[GpuProcess] | None = None,
    t: float | None = None,
) -> tuple[list[GpuProcess], int | None, str]:
    """One listing of the apps loop -> (processes, nvidia-smi exit, its text
    when it failed). Pure.

    A host PID is in CT `ct_id` when its cgroup is under `/lxc/<ct_id>/`
    (containers.cgroup_owner reads the path; a Docker, Podman or
    kubepods cgroup is in no CT), or (no such cgroup, e.g. cgroup v1
    layouts, the test bed; or `ct_id` 0, a container of another kind) when its PID
    namespace is the CT's (`ct_pid_ns`, from the in-CT agent's hello); its
    PID inside the CT is then the last `NSpid` field. Each process gets its
    state, CPU time, parents and CT number (`/lxc/<n>/`); with `t`, its own
    utilization history (`before`'s readings plus pmon's of this listing)."""
    listing = gpu_parse.parse_apps_listing(lines)
    rc, text, pidinfo = listing.rc, listing.text, listing.pids
    procs = gpu_parse.parse_compute_apps(text) if rc == 0 else []
    for p in procs:
        cg, pns, nspids = pidinfo.get(p.host_pid, ("-", "-", []))
        owner = cgroup_owner(cg) if cg.startswith("/") else None
        lxc = owner.number if owner is not None else None
        in_ct: bool | None = None
        if ct_id is None:  # a plain host (or --local): its PIDs are the run's PIDs
            in_ct, nspids = True, [p.host_pid, p.host_pid]
        elif lxc is not None:  # `/lxc/<n>/...`: CT n (`/lxc/²00` is no CT)
            in_ct = lxc == ct_id
        elif owner is not None and ct_id > 0:  # a Docker/pod process is in no CT
            in_ct = False
        elif ct_pid_ns and pns != "-":
            in_ct = pns == ct_pid_ns
        elif nspids:
            in_ct = False if len(nspids) == 1 else None
        p.in_container = in_ct
        if in_ct and len(nspids) > 1:
            p.ct_pid = nspids[-1]
        if lxc is not None:
            p.ct_id = lxc
        elif owner is not None:
            p.container = f"{owner.kind}:{owner.ident}"
        stat = listing.stats.get(p.host_pid)
        if stat is not None:
            p.state, p.cpu_s, p.ancestors = stat[0], stat[1], list(stat[2])
    if t is not None:
        gpu_parse.carry_util(before or [], procs, listing.pmon, t)
    return procs, rc, "" if rc == 0 else text.strip()


class GpuFeed(abc.ABC):
    """Keeps `state` current; calls listeners (on the event loop) on change."""

    def __init__(self) -> None:
        self.state = GpuState()
        self._listeners: list[ChangeListener] = []
        self._notify = OncePerTurn(self._fire)
        self._kick = asyncio.Event()
        self._stopped = False
        self.clock: Callable[[], float] = time.time

    def subscribe(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        """Coalesce: one notification per event-loop turn."""
        self._notify.request()

    def _fire(self) -> None:
        for cb in list(self._listeners):
            cb()

    def kick(self) -> None:
        """Retry now if waiting out a backoff (e.g. the link is back)."""
        self._kick.set()

    async def _backoff(self, seconds: float) -> None:
        """Sleep `seconds`, or less when kicked."""
        self._kick.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._kick.wait(), seconds)

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @property
    def channels(self) -> int:
        """Long-lived remote commands this feed holds open now."""
        return 0

    # ------------------------------------------------------------ kernel log

    async def _kernel_log_loop(self) -> None:
        """Follow the kernel log of the GPUs' machine on one channel (collect/gpuhealth.py
        KERNEL_LOG_SCRIPT): the driver's Xid lines become events. A reader
        refused (no permission) is said in `state.kernel_log` and asked
        again only after NOT_FOUND_RETRY_S; a broken link, with backoff."""
        backoff = BACKOFF_START_S
        while not self._stopped:
            refused = await self._one_kernel_log()
            if self._stopped:
                return
            await self._backoff(NOT_FOUND_RETRY_S if refused else backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _one_kernel_log(self) -> bool:
        """Run the reader until it ends -> whether it was refused."""
        try:
            proc = await self._open_kernel_log()
        except Exception:
            return False
        since: float | None = None
        problem: str | None = None
        try:
            while True:
                raw = await proc.readline()
                if not raw:
                    break
                got = gpu_health.parse_kernel_line(
                    raw.decode("utf-8", "replace"), self.clock(), since
                )
                if got is None:
                    continue
                if got.event is not None:
                    self.state.events.append(got.event)
                    self._changed()
                    continue
                since, problem = self._kernel_status(got.status, since, problem)
        except Exception:  # a broken link: reopen with backoff
            pass
        finally:
            with contextlib.suppress(Exception):
                await self._close_kernel_log(proc)
        return problem is not None

    def _kernel_status(
        self, status: str, since: float | None, problem: str | None
    ) -> tuple[float | None, str | None]:
        """One status line of the reader -> (history cut-off, its problem)."""
        if status.startswith("start "):
            with contextlib.suppress(ValueError):
                since = float(status.split()[1])
        elif status.startswith("via "):
            problem = None
            self.state.kernel_log = f"following the kernel log ({status[4:].strip()})"
        else:
            said = gpu_health.kernel_log_problem(status)
            if said is not None:
                problem = said
                self.state.kernel_log = said
        self._changed()
        return since, problem

    async def _open_kernel_log(self) -> RemoteProcess:
        """Start the kernel-log reader where the GPUs' driver is."""
        raise NotImplementedError

    async def _close_kernel_log(self, proc: RemoteProcess) -> None:
        await proc.close()


class NvidiaSmiFeed(GpuFeed):
    """nvidia-smi streams on the host or in the CT; see the module docstring.

    where: "host" | "ct" | "auto" (host first, then the CT)."""

    def __init__(
        self,
        target: Target,
        where: str = "auto",
        period_ms: int = 1000,
        *,
        apps_period_s: float = APPS_PERIOD_S,
        clock: Callable[[], float] = time.time,
        kernel_log: bool = True,
    ) -> None:
        super().__init__()
        if where not in ("auto", "host", "ct"):
            raise GputuiError(
                f'unknown GPU source "{where}"', 'use gpu_source = "auto", "host", "ct" or "nvml"'
            )
        self.target = target
        self.where = where
        self.period_ms = period_ms
        self.apps_period_s = apps_period_s
        self.clock = clock
        self.side: str | None = None  # "host" | "ct" once chosen
        self._ct_pid_ns: str | None = None  # the CT's PID namespace (the monitor sets it)
        self._last_apps: tuple[str, list[str]] | None = None  # (side, block) of the last listing
        self.state.processes_pending = True  # until the first compute-apps listing
        self.streams_opened = 0
        self._procs: set[RemoteProcess] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = False
        # the stream's fields: STREAM_FIELDS, fewer on a driver that refuses some
        self.fields: tuple[str, ...] = gpu_parse.STREAM_FIELDS
        self.kernel_log = kernel_log  # follow the host's kernel log (Xid) beside the stream
        self.health_error = ""  # the health queries' failure text ("": none)

    @property
    def channels(self) -> int:
        return len(self._procs)

    @property
    def last_listing(self) -> list[str] | None:
        """The lines of the last compute-apps listing (None: none yet)."""
        return self._last_apps[1] if self._last_apps is not None else None

    @property
    def ct_pid_ns(self) -> str | None:
        """The CT's PID namespace (from the in-CT agent's hello)."""
        return self._ct_pid_ns

    @ct_pid_ns.setter
    def ct_pid_ns(self, value: str | None) -> None:
        if value == self._ct_pid_ns:
            return
        self._ct_pid_ns = value
        # The GPU feed usually lists the apps before the agent is up: map the
        # last listing again now rather than at the next one (APPS_PERIOD_S).
        if self._last_apps is not None:
            self._apply_apps(*self._last_apps)

    def _apply_apps(self, side: str, block: list[str]) -> None:
        """One listing of the apps loop -> state.processes (if it changed)."""
        # the same listing mapped again (the CT's PID namespace became known)
        again = self._last_apps is not None and self._last_apps[1] is block
        self._last_apps = (side, block)
        procs, rc, _ = parse_apps_block(
            block,
            self.target.apps_ct,
            self._ct_pid_ns,
            self.state.processes,
            None if again else self.clock(),
        )
        if again:
            gpu_parse.carry_util(self.state.processes, procs, None, self.clock())
        else:
            self._apply_health(block)
        if rc == 0 or rc is None:
            if side == "ct":
                for p in procs:  # the CT's own view: PIDs are CT PIDs
                    p.in_container = True
                    p.ct_pid = p.host_pid
            if self.state.processes_pending or _procs_key(procs) != _procs_key(
                self.state.processes
            ):
                self.state.processes = procs
                self.state.processes_pending = False
                self._changed()

    def _apply_health(self, block: list[str]) -> None:
        """The listing's health lines -> state.health (GPUs that answered)."""
        lines = gpu_parse.parse_apps_listing(block).health
        if not lines:
            return
        health, self.health_error = gpu_health.parse_health(lines, self.clock())
        if health:
            # the same readings, newer: taken, and no one told — every listing
            # (a few seconds apart) drew the whole dashboard again between two
            # samples' frames; the next frame reads the new times anyway
            same = _health_key(health) == _health_key(self.state.health)
            self.state.health = health
            if not same:
                self._changed()

    def _sides(self) -> list[str]:
        if self.where == "host" or (self.where == "auto" and not self.target.in_container):
            return ["host"]
        if self.where == "ct":
            return ["ct"]
        return ["host", "ct"]

    async def _open(self, side: str, argv: list[str]) -> RemoteProcess:
        if side == "host":
            proc = await self.target.open_host(argv)
        else:
            proc = await self.target.open(argv)
        self.streams_opened += 1
        self._procs.add(proc)
        return proc

    async def _close(self, proc: RemoteProcess) -> None:
        self._procs.discard(proc)
        with contextlib.suppress(Exception):
            await proc.close()

    async def start(self) -> None:
        if self._tasks:
            return
        self._stopped = False
        self._tasks = [asyncio.create_task(self._stream_loop(), name="gpu stream")]

    async def stop(self) -> None:
        self._stopped = True
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        for p in list(self._procs):
            await self._close(p)

    def _source_label(self, side: str) -> str:
        return "nvidia-smi (host)" if side == "host" else "nvidia-smi (ct)"

    # ------------------------------------------------------------ samples

    async def _stream_loop(self) -> None:
        backoff = BACKOFF_START_S
        sides = self._sides()
        i = 0
        not_found: set[str] = set()
        while not self._stopped:
            side = self.side or sides[i % len(sides)]
            ok, status, err = await self._one_stream(side)
            if self._stopped:
                return
            if ok:
                backoff = BACKOFF_START_S
            if status == 127 or (not ok and _is_not_found(err)):
                not_found.add(side)
                if self.side is None and len(not_found) < len(sides):
                    i += 1
                    continue  # auto: try the other side at once
                if not_found >= set(sides):
                    where = " or ".join(
                        "on the host" if s == "host" else f"in {self.target.container.words}"
                        for s in sides
                    )
                    self.state.error = (
                        f"nvidia-smi not found {where} — install the NVIDIA utilities "
                        "or run gputui with --local on the GPU machine"
                    )
                    self._changed()
                    backoff = NOT_FOUND_RETRY_S  # the tools rarely appear on their own
                not_found.clear()
                i = 0
            await self._backoff(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _one_stream(self, side: str) -> tuple[bool, int | None, str]:
        """Run one nvidia-smi stream until it ends -> (got samples, exit, stderr)."""
        fields = self.fields
        fewer = gpu_parse.fallback_fields(fields)
        refused = False  # the driver refused a field: ask again with fewer
        try:
            proc = await self._open(side, gpu_parse.query_gpu_argv(self.period_ms, fields))
        except Exception as e:  # GputuiError, or the transport library's own
            self.state.error = str(e)
            self._changed()
            return False, None, str(e)
        got = False
        try:
            while True:
                line = await proc.readline()
                if not line:
                    break
                text = line.decode("utf-8", "replace")
                item = gpu_parse.parse_gpu_line(text, self.clock(), fields)
                if item is None:
                    continue
                if (
                    isinstance(item, GpuEvent)
                    and not got
                    and fewer is not None
                    and gpu_parse.is_unknown_field_error(item.text)
                ):
                    refused = True
                    continue
                if isinstance(item, GpuSample):
                    if not got:
                        got = True
                        self._chose(side)
                    self.state.add(item)
                    # Readings again (nvidia-smi exits when any GPU is lost):
                    # the error is over; the events keep the history.
                    self.state.error = None
                else:
                    self._event(item)
                self._changed()
            status = None
            with contextlib.suppress(Exception):
                status = await asyncio.wait_for(proc.wait(), 5.0)
            err = ""
            with contextlib.suppress(Exception):
                err = await proc.stderr_text()
        except Exception as e:  # a broken link: restart with backoff
            status, err = None, str(e)
        finally:
            await self._close(proc)
        if fewer is not None and not got and (refused or gpu_parse.is_unknown_field_error(err)):
            self.fields = fewer  # an older driver: ask again at once with what it knows
            return await self._one_stream(side)
        # A stream that ended is an error worth showing (lost GPU, driver).
        if (
            not self._stopped
            and not _is_not_found(err)
            and status != 127
            and (status not in (0, None) or err.strip())
        ):
            text = gpu_parse.explain_exit(status, err)
            lost = status == 15 or gpu_parse.is_lost_text(err)
            self._event(GpuEvent(time=self.clock(), text=text, lost=lost))
            self.state.error = text
            self._changed()
        return got, status, err

    def _event(self, ev: GpuEvent) -> None:
        self.state.events.append(ev)
        if ev.lost:  # one line with the fix; the raw text stays in the event
            self.state.error = gpu_parse.explain_exit(15, ev.text)

    def _chose(self, side: str) -> None:
        if self.side == side:
            return
        self.side = side
        self.state.source = self._source_label(side)
        self._tasks.append(asyncio.create_task(self._apps_loop(side), name="gpu apps"))
        if side == "host" and self.kernel_log:  # where the driver is, so is its kernel log
            self._tasks.append(asyncio.create_task(self._kernel_log_loop(), name="kernel log"))

    async def _open_kernel_log(self) -> RemoteProcess:
        return await self._open("host", gpu_health.kernel_log_argv())

    async def _close_kernel_log(self, proc: RemoteProcess) -> None:
        await self._close(proc)

    # ------------------------------------------------------------ compute apps

    async def _apps_loop(self, side: str) -> None:
        backoff = BACKOFF_START_S
        while not self._stopped:
            try:
                proc = await self._open(side, apps_loop_argv(self.apps_period_s))
            except Exception:
                await self._backoff(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            block: list[str] = []
            try:
                while True:
                    raw = await proc.readline()
                    if not raw:
                        break
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    if line == "@gputui end":
                        self._apply_apps(side, block)
                        block = []
                        backoff = BACKOFF_START_S
                    elif len(block) < 10_000:
                        block.append(line)
            except Exception:  # a broken link: reopen with backoff
                pass
            finally:
                await self._close(proc)
            if self._stopped:
                return
            await self._backoff(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)


def _procs_key(procs: list[GpuProcess]) -> list[tuple[Any, ...]]:
    return [
        (
            p.gpu_uuid,
            p.host_pid,
            p.used_mib,
            p.ct_pid,
            p.in_container,
            p.state,
            p.cpu_s,
            p.sm_util,
            len(p.util),
            tuple(p.ancestors or ()),
        )
        for p in procs
    ]


def _health_key(health: dict[int, GpuHealth]) -> list[tuple[Any, ...]]:
    """What the health readings say, less when they were read."""
    return [tuple(v for k, v in vars(h).items() if k != "time") for _, h in sorted(health.items())]


def _is_not_found(err: str) -> bool:
    low = err.lower()
    return "nvidia-smi" in low and (
        "not found" in low or "no such file" in low or "executable file not found" in low
    )


class NvmlFeed(GpuFeed):
    """This machine's GPUs through NVML (`collect.nvml.NvmlReader`), read in a
    thread every `period_s`; processes every `apps_every` readings. `reader`
    is injectable (tests pass one built on a fake pynvml module)."""

    def __init__(
        self,
        period_s: float = 1.0,
        reader: Any = None,
        *,
        apps_every: int = 2,  # the per-process utilization readings: a hang is seen within 2 s
        clock: Callable[[], float] = time.time,
        kernel_log: Target | None = None,
    ) -> None:
        super().__init__()
        self.period_s = period_s
        self.apps_every = max(1, apps_every)
        self.clock = clock
        self._reader = reader
        self._ready = False
        self._task: asyncio.Task[None] | None = None
        # this machine (a local Target): its kernel log is followed for Xid, as a host's is
        self._klog_target = kernel_log
        self._klog_task: asyncio.Task[None] | None = None
        self._klog_procs: set[RemoteProcess] = set()
        self.reads = 0
        self._util_at = float("-inf")  # per-process utilization last read (clock)
        self._health_at = float("-inf")  # the slow health fields last read (clock)
        self._health_read: dict[int, GpuHealth] | None = None
        self.state.source = "nvml"

    async def start(self) -> None:
        if self._task is None:
            self._stopped = False
            self._task = asyncio.create_task(self._loop(), name="nvml")
            if self._klog_target is not None:
                self._klog_task = asyncio.create_task(self._kernel_log_loop(), name="kernel log")

    async def stop(self) -> None:
        self._stopped = True
        tasks = [t for t in (self._task, self._klog_task) if t is not None]
        self._task = self._klog_task = None
        await cancel_and_wait(tasks)
        for p in list(self._klog_procs):
            await self._close_kernel_log(p)
        if self._reader is not None and self._ready:
            self._ready = False
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._reader.shutdown)

    @property
    def channels(self) -> int:
        return len(self._klog_procs)

    async def _open_kernel_log(self) -> RemoteProcess:
        assert self._klog_target is not None
        proc = await self._klog_target.open_host(gpu_health.kernel_log_argv())
        self._klog_procs.add(proc)
        return proc

    async def _close_kernel_log(self, proc: RemoteProcess) -> None:
        self._klog_procs.discard(proc)
        with contextlib.suppress(Exception):
            await proc.close()

    async def _loop(self) -> None:
        backoff = BACKOFF_START_S
        while True:
            try:
                if not self._ready:
                    await asyncio.to_thread(self._init)
                samples, events, procs = await asyncio.to_thread(self._read_once)
                for s in samples:
                    self.state.add(s)
                for ev in events:
                    self.state.events.append(ev)
                if self._health_read is not None:
                    self.state.health, self._health_read = self._health_read, None
                if procs is not None:
                    for p in procs:  # NVML on this machine: its PIDs are ours
                        p.in_container, p.ct_pid = True, p.host_pid
                    readings = {(p.gpu_uuid, p.host_pid): p.util for p in procs}
                    gpu_parse.carry_util(self.state.processes, procs, None, self.clock())
                    for p in procs:
                        p.util = p.util + readings[(p.gpu_uuid, p.host_pid)]
                    self.state.processes = procs
                self.state.error = next((e.text for e in events if e.lost), None)
                backoff = BACKOFF_START_S
                self._changed()
                await asyncio.sleep(self.period_s)
            except asyncio.CancelledError:
                raise
            except GputuiError as err:
                self._fail(str(err))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            except Exception as err:  # NVMLError has many subclasses; show its text
                self._fail(f"NVML: {err or type(err).__name__}")
                self._ready = False
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _util_due(self, samples: list[GpuSample]) -> bool:
        """Per-process utilization this listing? At the listing's pace (a
        hang seen within seconds) while it could matter: a GPU holding a
        process reads under UTIL_BUSY_PCT, holds processes of more than one
        PID, or one of them last read under it; else every UTIL_EVERY_S
        (a run busy alone on its GPUs: the driver's samples between come
        back then, one point a UTIL_BUCKET_S, collect/nvml.py)."""
        if self.clock() - self._util_at >= UTIL_EVERY_S:
            return True
        held: dict[str, set[int]] = {}
        for p in self.state.processes:
            held.setdefault(p.gpu_uuid, set()).add(p.host_pid)
            if not p.util or p.util[-1][1] < UTIL_BUSY_PCT:
                return True
        if any(len(pids) > 1 for pids in held.values()):
            return True
        return any(
            s.uuid in held and (s.util_pct is None or s.util_pct < UTIL_BUSY_PCT) for s in samples
        )

    def _fail(self, text: str) -> None:
        if self.state.error != text:
            lost = "lost" in text.lower()
            self.state.events.append(GpuEvent(time=self.clock(), text=text, lost=lost))
        self.state.error = text
        self._changed()

    def _init(self) -> None:
        if self._reader is None:
            from gputui.collect.nvml import NvmlReader

            self._reader = NvmlReader()
        self._reader.init()
        self._ready = True

    def _read_once(self) -> tuple[list[GpuSample], list[GpuEvent], list[GpuProcess] | None]:
        r = self._reader
        samples = list(r.read(self.clock()))
        events = list(r.take_events())
        procs = None
        if self.reads % self.apps_every == 0:
            util = self._util_due(samples)
            procs = list(r.processes(util=util))
            if util:
                self._util_at = self.clock()
        self.reads += 1
        if self.clock() - self._health_at >= HEALTH_EVERY_S and hasattr(r, "health"):
            self._health_at = self.clock()  # the loop puts it in the state (this is a thread)
            self._health_read = {h.index: h for h in r.health(self.clock())}
        for p in procs or []:
            facts = local_proc_facts(p.host_pid)
            if facts is not None:
                p.state, p.cpu_s, p.ancestors = facts
        return samples, events, procs


def local_proc_facts(pid: int, proc: str = "/proc") -> tuple[str, float | None, list[int]] | None:
    """(state, CPU seconds, parents' PIDs nearest first, up to init) of a
    process on this machine; None when it is gone or unreadable."""

    def stat(p: int) -> list[str] | None:
        try:
            with open(f"{proc}/{p}/stat", "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        return text[text.rfind(")") + 2 :].split()

    words = stat(pid)
    if words is None or len(words) < 13:
        return None
    try:
        clk = float(os.sysconf("SC_CLK_TCK"))
        cpu: float | None = (int(words[11]) + int(words[12])) / clk
        parent = int(words[1])
    except (ValueError, OSError):
        cpu, parent = None, 0
    anc: list[int] = []
    while parent > 1 and len(anc) < 12:
        anc.append(parent)
        up = stat(parent)
        if up is None or len(up) < 2 or not up[1].isdigit():
            break
        parent = int(up[1])
    return words[0], cpu, anc


class SimulatedGpus(GpuFeed):
    """`n` GPUs whose load follows `follow()` (0.0 idle … 1.0 flat out).

    For the demo and tests: utilisation, power, clock and temperature move
    with the load; memory is held while the load is above zero once."""

    def __init__(
        self,
        n: int,
        follow: Callable[[], float],
        *,
        period_s: float = 1.0,
        mem_total_mib: float = 143771.0,
        name: str = "NVIDIA H200 (simulated)",
        seed: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.n = n
        self.follow = follow
        self.period_s = period_s
        self.mem_total_mib = mem_total_mib
        self.name = name
        self.clock = clock
        self._rng = random.Random(seed)
        self._task: asyncio.Task[None] | None = None
        self._held = [0.0] * n
        self.state.source = "simulated"

    async def start(self) -> None:
        if self._task is None:
            self.tick()
            self._task = asyncio.create_task(self._loop(), name="simulated gpus")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait([task] if task is not None else [])

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            self.tick()

    def tick(self) -> list[GpuSample]:
        """One reading of every GPU, added to the state."""
        now = self.clock()
        try:
            load = float(self.follow())
        except Exception:
            load = 0.0
        load = 0.0 if math.isnan(load) else min(1.0, max(0.0, load))
        out = []
        for i in range(self.n):
            jitter = self._rng.uniform(-0.03, 0.03) if load > 0 else 0.0
            u = min(1.0, max(0.0, load + jitter))
            if load > 0:
                self._held[i] = max(self._held[i], 0.3 + 0.6 * self._rng.uniform(0.9, 1.0))
            s = GpuSample(
                index=i,
                time=now,
                name=self.name,
                uuid=f"GPU-5151ab1e-0000-4000-8000-00000000000{i % 10}",
                mem_used_mib=round(1.0 + self._held[i] * (self.mem_total_mib - 1.0)),
                mem_total_mib=self.mem_total_mib,
                util_pct=round(100.0 * u),
                temp_c=round(32 + 40 * u),
                power_w=round(95 + 590 * u, 1),
                power_limit_w=700.0,
                sm_clock_mhz=345.0 if u < 0.02 else 1980.0,
            )
            self.state.add(s)
            out.append(s)
        self._changed()
        return out

    def release(self) -> None:
        """The run ended: memory is freed."""
        self._held = [0.0] * self.n


class SharedGpus(GpuFeed):
    """The host's GPU feed as one container's monitor sees it (the host
    view): the same readings and history (shared, not copied), and the
    processes of that container only (`place`: a CT's number, "docker:NAME",
    None for the host itself). Starting or stopping it does nothing: the
    host watch owns the streams. The monitor gives it the container's PID
    namespace when the agent says hello."""

    def __init__(self, host_feed: NvidiaSmiFeed, place: int | str | None) -> None:
        super().__init__()
        self.host_feed = host_feed
        self.place = place
        self._ct_pid_ns: str | None = None
        hs = host_feed.state
        self.state.latest = hs.latest
        self.state.util_history = hs.util_history
        self.state.mem_history = hs.mem_history
        self.state.events = hs.events
        self.state.reasons_history = hs.reasons_history  # the throttle's history (issue 32)
        host_feed.subscribe(self.refresh)
        self.refresh()

    @property
    def ct_pid_ns(self) -> str | None:
        """The container's PID namespace (from its agent's hello)."""
        return self._ct_pid_ns

    @ct_pid_ns.setter
    def ct_pid_ns(self, value: str | None) -> None:
        if value != self._ct_pid_ns:
            self._ct_pid_ns = value
            self.refresh()  # the last listing mapped again now, not at the next one

    def refresh(self) -> None:
        hs = self.host_feed.state
        self.state.source = hs.source
        self.state.error = hs.error
        self.state.health = hs.health  # replaced at each listing: taken again
        self.state.kernel_log = hs.kernel_log
        lines = self.host_feed.last_listing
        self.state.processes_pending = hs.processes_pending
        if lines is not None:
            ct_id = 0 if isinstance(self.place, str) else self.place  # 0: by PID namespace only
            procs, rc, _ = parse_apps_block(lines, ct_id, self._ct_pid_ns)
            if rc == 0 or rc is None:
                self.state.processes = procs
        self._changed()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def default_gpu_feed(target: Target, settings: Settings) -> GpuFeed:
    """The GPU feed the settings ask for: NVML (`gpu_source = "nvml"`, or
    --local: this machine's GPUs), else nvidia-smi where `gpu_source` says."""
    source = settings.gpu_source or "auto"
    if source == "nvml" or (settings.local and source == "auto"):
        # NVML reads this machine's GPUs: --local follows this machine's kernel log
        return NvmlFeed(kernel_log=target if settings.local else None)
    return NvidiaSmiFeed(target, where=source)


def note_gpu_tools(feed: GpuFeed | None, tools: Tools) -> None:
    """Where the feed found nvidia-smi (the host, the CT) or did not, into
    the snapshot's tools — the GPU feed knows best."""
    if isinstance(feed, NvidiaSmiFeed):
        if feed.side == "host":
            tools.nvidia_smi_host = True
        elif feed.side == "ct":
            tools.nvidia_smi_ct = True
            if feed.where == "auto":
                tools.nvidia_smi_host = False
        elif feed.state.error and "not found" in feed.state.error:
            tools.nvidia_smi_host = False if feed.where != "ct" else tools.nvidia_smi_host
