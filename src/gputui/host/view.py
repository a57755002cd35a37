"""A host at a glance: every GPU and who holds it, every container and its health.

Pure: no I/O. `hostwatch.py` gathers the pieces (the host's GPU readings and
compute-apps listing, the host's list of containers, each busy container's
Snapshot from its own monitor) and `build_host_view` turns them into rows:

- a GPU row per GPU: memory, utilization, power, and each process holding it
  with its container (the host PID's `/lxc/<n>` cgroup, else the PID
  namespace of a container whose agent said it), its PID in the container
  (NSpid), the tmux session whose process tree it is in, and that run's log;
  memory held by no live process is flagged;
- a container row per container: status, name, tmux sessions and one word of
  health, named by the same rules as the run view (`diagnose`).

A plain GPU server (no containers) is one row: the host itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gputui.collect.nvidiasmi import AppsListing, parse_compute_apps
from gputui.containers import cgroup_owner
from gputui.diagnose import HELD_MIB, KINDS
from gputui.diagnose.hardware import gpu_issues, health_summary
from gputui.model import ConnectionState, Finding, GpuState, Session, Snapshot

# A link in these states is "down" (a reconnect is under way, or never came up).
DOWN_STATES = (ConnectionState.FAILED, ConnectionState.RECONNECTING)

# The one-word health of a container, worst first (the order rows sort by).
HEALTH_ORDER = (
    "down",
    "dead",
    "full",
    "hung",
    "stalled",
    "buffered",
    "starting",
    "ok",
    "idle",
    "stopped",
)

# Which findings name which word: each finding kind declares its own
# (`host_word`, `host_word_error` for an ERROR: diagnose/registry.py); the
# first word in HEALTH_ORDER among a run's findings wins.


@dataclass
class HostGpuProcess:
    """A process holding GPU memory, as the host's nvidia-smi lists it."""

    host_pid: int
    gpu_uuid: str
    used_mib: float | None
    name: str
    alive: bool  # the host still has /proc/PID
    place: Place = None  # the container it runs in (None: the host, or unknown)
    ct_pid: int | None = None  # its PID inside that container (NSpid's last field)
    pid_ns: str | None = None  # its PID namespace, e.g. "pid:[4026532281]"


@dataclass
class Holder:
    """Who holds a GPU: a process, where it runs, the run it belongs to."""

    host_pid: int
    place: Place
    ct_pid: int | None
    process: str
    used_mib: float | None
    alive: bool
    session: str | None = None
    log: str | None = None


@dataclass
class GpuRow:
    index: int
    name: str
    uuid: str
    mem_used_mib: float | None
    mem_total_mib: float | None
    util_pct: float | None
    power_w: float | None
    holders: list[Holder] = field(default_factory=list)
    unowned_mib: float | None = None  # memory held by no live process (None: not measured)
    # the hardware's own words (diagnose/hardware.py): its mark ("thermal ·
    # x8"), whether it is broken (red), a line per issue, and its health
    # fields as read
    mark: str = ""
    broken: bool = False
    issues: list[str] = field(default_factory=list)
    health: str = ""

    @property
    def orphaned(self) -> bool:
        """Memory is held that no live process accounts for."""
        return self.unowned_mib is not None and self.unowned_mib >= HELD_MIB


@dataclass
class ContainerRow:
    id: Place  # a CT number, "docker:NAME"; None: the host itself (a plain GPU server)
    name: str
    status: str  # "running", "stopped", ... ("host" for the host itself)
    sessions: list[str] = field(default_factory=list)
    health: str = "idle"
    why: str = ""  # the finding behind the word, one line
    gpus: list[int] = field(default_factory=list)  # GPU indexes its processes hold
    watched_session: str | None = None  # the session its health speaks for


@dataclass
class HostView:
    label: str
    connection: ConnectionState = ConnectionState.CONNECTING
    error: str | None = None
    containers_known: bool | None = None  # True: a Proxmox host; False: plain; None: not yet
    gpus: list[GpuRow] = field(default_factory=list)
    containers: list[ContainerRow] = field(default_factory=list)
    gpu_error: str | None = None
    holders_known: bool = False  # the host has listed the GPUs' processes once

    @property
    def complete(self) -> bool:
        """Every part has arrived: GPUs and who holds them, containers and a
        word for each."""
        return (
            self.containers_known is not None
            and (bool(self.gpus and self.holders_known) or bool(self.gpu_error))
            and all(c.health != "starting" for c in self.containers)
        )

    @property
    def health(self) -> str:
        """The worst word of the host (for a tab or a row per host)."""
        if self.connection in DOWN_STATES:
            return "down"
        words = [c.health for c in self.containers] or ["idle"]
        return min(words, key=rank)


def rank(word: str) -> int:
    return HEALTH_ORDER.index(word) if word in HEALTH_ORDER else len(HEALTH_ORDER)


# ------------------------------------------------------------------ GPU holders


# Where a process or run lives on a host: a Proxmox CT's number, another
# kind's spec ("docker:trainer", "podman:job"), None for the host itself.
Place = int | str | None


def container_of_cgroup(cgroup: str) -> int | None:
    """`/lxc/203/...` (the apps listing's cgroup path of a host PID) -> 203:
    the number of a numbered container (a Proxmox CT), as its kind reads it."""
    owner = cgroup_owner(cgroup) if cgroup.startswith("/") else None
    return owner.number if owner is not None else None


def host_gpu_processes(
    listing: AppsListing,
    ct_namespaces: dict[str, int | str] | None = None,
    container_ids: dict[str, int | str] | None = None,
) -> list[HostGpuProcess]:
    """The host's compute-apps listing -> processes with their containers.

    A PID is in container N when its cgroup is `/lxc/N/...` (Proxmox VE,
    cgroup v2), else when its PID namespace is one a container's agent
    reported (`ct_namespaces`: namespace -> N). Its PID there is NSpid's last
    field. A Docker/Podman container is known by its cgroup's container ID
    (`container_ids`: full ID -> its key, from `docker ps --no-trunc`) even
    when no agent runs in it. A PID the host no longer has is kept, marked
    not alive."""
    if listing.rc != 0:
        return []
    spaces = ct_namespaces or {}
    out: list[HostGpuProcess] = []
    for p in parse_compute_apps(listing.text):
        cg, pns, nspids = listing.pids.get(p.host_pid, ("-", "-", []))
        place: Place = container_of_cgroup(cg)
        if place is None and container_ids:  # docker-<id>.scope: the listed container of that ID
            owner = cgroup_owner(cg)
            place = container_ids.get(owner.ident) if owner is not None else None
        if place is None and pns != "-":
            place = spaces.get(pns)
        ct_pid = nspids[-1] if place is not None and len(nspids) > 1 else None
        out.append(
            HostGpuProcess(
                host_pid=p.host_pid,
                gpu_uuid=p.gpu_uuid,
                used_mib=p.used_mib,
                name=p.name,
                alive=bool(nspids),
                place=place,
                ct_pid=ct_pid,
                pid_ns=None if pns == "-" else pns,
            )
        )
    return out


@dataclass
class RunIndex:
    """Which session and log a PID belongs to, per container (None: the host):
    {place: {pid as seen there: (session, log)}}."""

    by_pid: dict[Place, dict[int, tuple[str | None, str | None]]] = field(default_factory=dict)

    def add(self, place: Place, pids: Iterable[int], session: str | None, log: str | None) -> None:
        table = self.by_pid.setdefault(place, {})
        for pid in pids:
            table.setdefault(pid, (session, log))

    def find(self, place: Place, pid: int | None) -> tuple[str | None, str | None]:
        if pid is None:
            return (None, None)
        return self.by_pid.get(place, {}).get(pid, (None, None))


def gpu_rows(
    state: GpuState, procs: list[HostGpuProcess], runs: RunIndex, plain_host: bool
) -> list[GpuRow]:
    """One row per GPU with its holders; memory no live holder accounts for."""
    rows: list[GpuRow] = []
    newest = max((s.time for s in state.latest.values()), default=0.0)
    issues = gpu_issues(state, newest)
    for index in sorted(state.latest):
        s = state.latest[index]
        mine = [x for x in issues if x.index == index]
        row = GpuRow(
            index=index,
            name=s.name,
            uuid=s.uuid,
            mem_used_mib=s.mem_used_mib,
            mem_total_mib=s.mem_total_mib,
            util_pct=s.util_pct,
            power_w=s.power_w,
            mark=" · ".join(dict.fromkeys(x.mark for x in mine)),
            broken=any(x.broken for x in mine),
            issues=[x.line for x in mine],
            health=health_summary(state, index),
        )
        live = 0.0
        for p in procs:
            if p.gpu_uuid != s.uuid:
                continue
            pid_there = p.host_pid if plain_host else p.ct_pid
            session, log = runs.find(None if plain_host else p.place, pid_there)
            row.holders.append(
                Holder(
                    host_pid=p.host_pid,
                    place=p.place,
                    ct_pid=pid_there,
                    process=p.name,
                    used_mib=p.used_mib,
                    alive=p.alive,
                    session=session,
                    log=log,
                )
            )
            if p.alive:
                live += p.used_mib or 0.0
        if s.mem_used_mib is not None:
            row.unowned_mib = max(0.0, s.mem_used_mib - live)
        rows.append(row)
    return rows


# ------------------------------------------------------------------ health


def health_word(findings: list[Finding], snap: Snapshot) -> tuple[str, str]:
    """One word for a container's run, and the finding behind it, from the
    same findings the run view shows: dead / full (the log's disk) / hung /
    stalled / buffered / ok / idle (no session and no run found)."""
    candidates: list[tuple[str, Finding]] = []
    seen: set[str] = set()
    for f in findings:  # each kind declares its word (diagnose/registry.py)
        k = KINDS.get(f.kind)
        if k is None or f.kind in seen:
            continue
        seen.add(f.kind)
        word = k.word(f)
        if word:
            candidates.append((word, f))
    if candidates:
        word, finding = min(candidates, key=lambda c: rank(c[0]))
        return word, finding.title
    if not snap.sessions and not snap.procs:
        if snap.tools.probed and not snap.tools.tmux:
            return "idle", "tmux is not installed: no session can be seen"
        return "idle", "no tmux session and no run found"
    return "ok", ""


def _gpus_of(place: Place, rows: list[GpuRow]) -> list[int]:
    return [r.index for r in rows if any(h.place == place and h.alive for h in r.holders)]


def container_rows(
    listing: list[tuple[int | str, str, str]],
    snapshots: dict[int | str, tuple[Snapshot, list[Finding]]],
    gpus: list[GpuRow],
) -> list[ContainerRow]:
    """listing: (number, status, name) from the host; snapshots: the busy
    containers' monitors' Snapshots and findings."""
    rows: list[ContainerRow] = []
    for number, status, name in listing:
        row = ContainerRow(id=number, name=name, status=status, gpus=_gpus_of(number, gpus))
        if status != "running":
            row.health = "stopped" if status == "stopped" else status
        elif number not in snapshots:
            row.health = "starting"
        else:
            snap, findings = snapshots[number]
            fill_from_snapshot(row, snap, findings)
        rows.append(row)
    return rows


def host_row(snap: Snapshot | None, findings: list[Finding], gpus: list[GpuRow]) -> ContainerRow:
    """A plain GPU server: the host itself is the one row."""
    row = ContainerRow(id=None, name="the host", status="host", gpus=_gpus_of(None, gpus))
    if snap is None:
        row.health = "starting"
    else:
        fill_from_snapshot(row, snap, findings)
    return row


def ended_badly(session: Session) -> str | None:
    """Why a session's run needs a person, from tmux alone: every pane dead
    and the main one killed by a signal or ended non-zero (or tmux lost its
    status), or ended 0 through a pipe (`| tee log`: the 0 is tee's, and a
    crash looks the same). None: alive, or finished with exit status 0."""
    pane = session.main_pane
    if session.alive or pane is None:
        return None
    name = session.name
    if pane.dead_signal:
        return f"session {name} died: killed (signal {pane.dead_signal})"
    if pane.dead_status == 0 and "|" in (pane.start_command or ""):
        return f"session {name} ended; its exit status 0 is the pipe's (tee's), not the run's"
    if pane.dead_status == 0:
        return None  # finished: as the run view, nothing to do
    if pane.dead_status is None:
        return f"session {name} died (exit status unknown)"
    return f"session {name} died with exit status {pane.dead_status}"


def fill_from_snapshot(row: ContainerRow, snap: Snapshot, findings: list[Finding]) -> None:
    """The word is the worst of the container's runs: the watched (newest)
    session's from the diagnosis, each other session's from tmux (a dead
    pane that did not end with exit status 0 is "dead"); the row then
    names, and Enter opens, the session the word speaks for."""
    row.sessions = [s.name for s in snap.sessions]
    row.watched_session = snap.session_name
    if snap.connection in DOWN_STATES:
        row.health, row.why = "down", snap.connection_error or "connection lost"
        return
    row.health, row.why = health_word(findings, snap)
    for session in snap.sessions:
        if session.name == snap.session_name or rank("dead") >= rank(row.health):
            continue
        why = ended_badly(session)
        if why is not None:
            row.health, row.why, row.watched_session = "dead", why, session.name
