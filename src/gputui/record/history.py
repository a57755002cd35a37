"""The run history: one SQLite file under ~/.local/state/gputui/ (WAL mode).

What it keeps, per target (a host, or a CT on it) and run (one log file, one
generation of it: a truncated or replaced log starts a new run):

- GPU samples: one row per GPU per second for the last hour, then one per
  minute (average and peak) — `rollup()` folds the old seconds into minutes;
- metric points parsed from the log (step, loss, throughput, lr), keyed by
  the byte offset of their line, so reading the log again from 0 after a
  restart or a reconnect adds nothing twice;
- events: findings appearing and clearing, actions (from the audit log),
  session exits, connection changes.

Writes go through one thread (`HistoryWriter`) in batches, so the UI and the
monitor never wait on the disk. Readers open their own connection (WAL lets
a reader and a writer — or two gputui processes — use the file at once).
The file is kept under `max_bytes`: `prune()` drops the oldest data first.
`SCHEMA_VERSION` and `MIGRATIONS` take an older file forward; a file from a
newer gputui is refused with one line, never changed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from gputui.config import DEFAULTS
from gputui.diagnose.compare import MIN_RERUNS, RunPoint, program_changes, same_program, script_of
from gputui.diagnose.reruns import spread_of
from gputui.errors import GputuiError
from gputui.model import Program, RerunSpread

T = TypeVar("T")

DEFAULT_MAX_BYTES = int(DEFAULTS.history_max_mb * 1024 * 1024)
SECONDS_KEPT_S = 3600.0  # GPU samples stay at 1 s resolution this long, then 1 min
FLUSH_EVERY_S = 2.0  # batched writes: at most this long in memory
BUSY_TIMEOUT_MS = 30000  # another gputui writing: wait (the writer thread, never the UI)
PRUNE_FRACTION = 0.1  # each prune step drops this share of the oldest time span

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS targets (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  target_id INTEGER NOT NULL REFERENCES targets(id),
  log_path TEXT NOT NULL,
  inode INTEGER NOT NULL DEFAULT 0,
  generation INTEGER NOT NULL DEFAULT 0,
  first_seen REAL NOT NULL,
  last_seen REAL NOT NULL,
  cursor INTEGER NOT NULL DEFAULT 0,
  throughput_unit TEXT NOT NULL DEFAULT '',
  UNIQUE (target_id, log_path, inode, generation)
);
CREATE TABLE IF NOT EXISTS gpu_samples (
  target_id INTEGER NOT NULL, gpu INTEGER NOT NULL, t INTEGER NOT NULL,
  util REAL, mem_used REAL, mem_total REAL, temp REAL, power REAL,
  PRIMARY KEY (target_id, gpu, t)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS gpu_minutes (
  target_id INTEGER NOT NULL, gpu INTEGER NOT NULL, t INTEGER NOT NULL,
  util REAL, util_max REAL, mem_used REAL, mem_used_max REAL, mem_total REAL,
  temp REAL, power REAL, n INTEGER NOT NULL,
  PRIMARY KEY (target_id, gpu, t)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS metric_points (
  run_id INTEGER NOT NULL, offset INTEGER NOT NULL, t REAL NOT NULL,
  timed INTEGER NOT NULL, step INTEGER, loss REAL, throughput REAL,
  PRIMARY KEY (run_id, offset)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS metric_points_t ON metric_points (t);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY,
  target_id INTEGER NOT NULL,
  run_id INTEGER,
  t REAL NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT '',
  severity TEXT NOT NULL DEFAULT '',
  title TEXT NOT NULL DEFAULT '',
  key TEXT,
  UNIQUE (target_id, kind, key)
);
CREATE INDEX IF NOT EXISTS events_target_t ON events (target_id, t);
"""

# version -> the statements that take a file at version-1 to it
MIGRATIONS: dict[int, str] = {
    1: SCHEMA_V1,
    2: "ALTER TABLE metric_points ADD COLUMN lr REAL;",
    # the names a target was given (`gpu1/200`), next to the address it
    # resolved to (targets.name): `gputui history gpu1` finds it
    3: "CREATE TABLE IF NOT EXISTS target_names ("
    " name TEXT NOT NULL, target_id INTEGER NOT NULL REFERENCES targets(id),"
    " PRIMARY KEY (name, target_id));",
    # what each run ran (issue 49): the last run of the same program is
    # found by it; and the last run the user picked for a run instead
    4: "CREATE TABLE IF NOT EXISTS run_programs ("
    " run_id INTEGER PRIMARY KEY, t REAL NOT NULL, argv TEXT NOT NULL,"
    " cwd TEXT NOT NULL DEFAULT '', script TEXT NOT NULL DEFAULT '', script_mtime REAL,"
    " env TEXT NOT NULL DEFAULT '[]', started REAL, session TEXT NOT NULL DEFAULT '');"
    "CREATE TABLE IF NOT EXISTS run_last ("
    " run_id INTEGER PRIMARY KEY, last_id INTEGER NOT NULL, t REAL NOT NULL);",
}
SCHEMA_VERSION = max(MIGRATIONS)


def default_path() -> Path:
    """$XDG_STATE_HOME/gputui/history.sqlite, else ~/.local/state/gputui/…"""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gputui" / "history.sqlite"


def _private_file(path: Path) -> None:
    """The file 0600 before SQLite opens it (the history holds host names,
    commands and log excerpts), and its directory 0700 when gputui made it
    now or it is gputui's own state directory; a directory the user named
    (`/tmp` for `/tmp/x.sqlite`) is not gputui's to lock. Then the checks of
    `_check_files` (no link, a regular file, the user's own)."""
    parent = path.parent
    made = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if made or parent == default_path().parent:
        with contextlib.suppress(OSError):
            os.chmod(parent, 0o700)
    _create_new(path)
    _check_files(path, owner=os.geteuid())


def _create_new(path: Path) -> None:
    """An empty 0600 file at `path` when nothing is there, made under another
    name and linked into place: no fd of the db's own path is ever opened and
    closed here, so none can drop a lock SQLite holds on it in this process
    (locks on a file are lost when *any* fd of it is closed in the process,
    "How To Corrupt An SQLite Database File" section 2.2). A file system
    without hard links: made at the path with O_EXCL (a new inode)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    if os.path.lexists(path):
        return  # checked by _check_files, through an O_PATH fd
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.new")
    os.close(os.open(tmp, flags, 0o600))
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # no hard links here
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, flags, 0o600))
    finally:
        os.unlink(tmp)


def _check_files(path: Path, *, owner: int | None) -> None:
    """The db, its -wal and its -shm: no symlink, regular files, owned by
    `owner` (None: by the db's owner — a reader of someone's file), and made
    0600. Through O_PATH fds only: closing one does not drop the POSIX locks
    SQLite holds on the file (tests/test_history_locks.py checks that), where
    closing a plain fd would let the next reader reset -shm under the
    writer's mapping of it (SIGBUS) or let two writers in at once."""
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        st = _own_file(p, owner=owner)
        if st is None and p is path:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(p))
        if p is path and owner is None and st is not None:
            owner = st.st_uid


def _own_file(p: Path, *, owner: int | None) -> os.stat_result | None:
    """`p`'s stat when it is a regular file (not a symlink) owned by `owner`,
    made 0600 (writers only); None when it does not exist."""
    try:
        fd = os.open(p, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        _refuse_unless_own(p, st, owner)
        if owner == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
            with contextlib.suppress(OSError):  # fchmod refuses an O_PATH fd
                os.chmod(f"/proc/self/fd/{fd}", 0o600)
        return st
    finally:
        os.close(fd)


def _refuse_unless_own(p: Path, st: os.stat_result, owner: int | None) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise GputuiError(
            f"history database {p} is a symbolic link: refused (gputui does not write"
            " through a link someone may have planted)",
            "set [history] path to the file itself, in a directory of your own",
        )
    if not stat.S_ISREG(st.st_mode):
        raise GputuiError(
            f"history database {p} is not a regular file",
            "set [history] path to a file, e.g. ~/.local/state/gputui/history.sqlite",
        )
    if owner is not None and st.st_uid != owner:
        raise GputuiError(
            f"history database file {p} belongs to uid {st.st_uid}, not to uid {owner}:"
            " refused (someone else could read or forge the history through it)",
            f"remove {p} if it is not yours, or set [history] path to a file in a"
            " directory of your own",
        )


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection in WAL mode with the schema up to date (a writer), or a
    plain reader. Errors a user can fix come back as one-line GputuiErrors.
    Nothing here opens and closes a plain fd of the db, -wal or -shm: another
    connection of this process may hold locks on them (see `_check_files`)."""
    path = Path(path).expanduser()
    conn: sqlite3.Connection | None = None
    try:
        if readonly:
            if not path.exists():
                raise GputuiError(
                    f"no history database at {path}",
                    "run `gputui watch` or the dashboard first; they record the history",
                )
            _check_files(path, owner=None)
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        else:
            _private_file(path)
            conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not readonly:
            _set_up_writer(conn, path)
        else:
            check_version(conn, path)
        # a -wal/-shm planted between the check and SQLite's open of it
        _check_files(path, owner=None if readonly else os.geteuid())
    except BaseException as err:
        if conn is not None:
            conn.close()
        if isinstance(err, sqlite3.DatabaseError):
            raise GputuiError(
                f"history database {path} cannot be used: {err}",
                "move it aside (gputui starts a new one) or set [history] path in the config",
            ) from None
        if isinstance(err, OSError):  # its directory cannot be made or the file opened
            raise GputuiError(
                f"history database {path} cannot be created: {err.strerror or err}",
                "set [history] path in the config to a file you can write",
            ) from None
        raise
    return conn


def _set_up_writer(conn: sqlite3.Connection, path: Path) -> None:
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # before the first table
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA journal_size_limit = 8388608")
    migrate(conn, path)


def schema_version(conn: sqlite3.Connection) -> int:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def check_version(conn: sqlite3.Connection, path: Path) -> int:
    v = schema_version(conn)
    if v > SCHEMA_VERSION:
        raise GputuiError(
            f"history database {path} is from a newer gputui (schema {v}, this one knows {SCHEMA_VERSION})",
            "upgrade gputui, or set [history] path to another file",
        )
    return v


def migrate(conn: sqlite3.Connection, path: Path) -> int:
    """Take the file to SCHEMA_VERSION, one step per transaction."""
    conn.execute("BEGIN IMMEDIATE")  # two processes starting at once migrate once
    try:
        v = check_version(conn, path)
        for target in range(v + 1, SCHEMA_VERSION + 1):
            for stmt in MIGRATIONS[target].split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(target),),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION


# ------------------------------------------------------------------ records


@dataclass(frozen=True)
class GpuRow:
    gpu: int
    t: float
    util: float | None
    mem_used: float | None
    mem_total: float | None
    temp: float | None
    power: float | None


@dataclass(frozen=True)
class PointRow:
    offset: int
    t: float
    timed: bool
    step: int | None
    loss: float | None
    throughput: float | None
    lr: float | None = None


@dataclass(frozen=True)
class EventRow:
    t: float
    kind: str  # "incident" | "action" | "exit" | "connection" ("finding": older files)
    name: str  # incident cause, action name, session name, connection state
    state: str = ""  # "open" | "worse" | "resolved" for incidents; ok/failed for actions
    severity: str = ""
    title: str = ""
    key: str | None = None  # dedup key for things seen again after a restart
    run_id: int | None = None


@dataclass(frozen=True)
class RunInfo:
    id: int
    target: str
    log_path: str
    inode: int
    generation: int
    first_seen: float
    last_seen: float
    cursor: int
    throughput_unit: str


# ------------------------------------------------------------------ the writer


class HistoryWriter:
    """Owns the write connection in one thread; everything else submits to it.

    GPU samples and metric points are batched (flushed every FLUSH_EVERY_S
    or on `flush()`); run bookkeeping and finding transitions run at once
    and return futures, so callers on the event loop can await the answer
    (`asyncio.wrap_future`) without blocking."""

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        seconds_kept_s: float = SECONDS_KEPT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path).expanduser() if path else default_path()
        self.max_bytes = int(max_bytes)
        self.seconds_kept_s = seconds_kept_s
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gputui-history")
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._gpu: list[tuple[int, GpuRow]] = []
        self._points: list[tuple[int, PointRow]] = []
        self._targets: dict[str, int] = {}
        self._last_flush = time.monotonic()
        self._last_maintenance = 0.0
        self.writes = 0  # transactions committed (for tests and the benchmark)
        self.closed = False
        # Open now, in the writer thread, so a broken file is one clear error.
        try:
            self._submit(self._open).result()
        except BaseException:
            self._pool.shutdown(wait=False)
            raise

    # -- thread plumbing

    def _submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        if self.closed:
            raise GputuiError("the history database is closed", "this is a bug in gputui")
        return self._pool.submit(fn, *args)

    def _open(self) -> None:
        self._conn = connect(self.path)

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None
        return self._conn

    def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self.writes += 1
        return out

    # -- targets and runs (answered at once)

    def target_id(self, name: str) -> Future[int]:
        return self._submit(self._target_id, name)

    def _target_id(self, name: str) -> int:
        if name in self._targets:
            return self._targets[name]

        def do(c: sqlite3.Connection) -> int:
            c.execute("INSERT OR IGNORE INTO targets (name) VALUES (?)", (name,))
            return int(c.execute("SELECT id FROM targets WHERE name=?", (name,)).fetchone()[0])

        tid = self._tx(do)
        self._targets[name] = tid
        return tid

    def name_target(self, target_id: int, given: str) -> Future[None]:
        """Record the name the user gave a target (`gpu1/200`) next to its address."""
        return self._submit(self._name_target, target_id, given)

    def _name_target(self, target_id: int, given: str) -> None:
        self._tx(
            lambda c: c.execute(
                "INSERT OR IGNORE INTO target_names (name, target_id) VALUES (?, ?)",
                (given, target_id),
            )
        )

    def current_run(self, target: str, log_path: str) -> Future[RunInfo | None]:
        """The newest run of this log on this target, if any."""
        return self._submit(self._current_run, target, log_path)

    def _current_run(self, target: str, log_path: str) -> RunInfo | None:
        tid = self._target_id(target)
        row = self.conn.execute(
            "SELECT id, log_path, inode, generation, first_seen, last_seen, cursor, throughput_unit"
            " FROM runs WHERE target_id=? AND log_path=? ORDER BY first_seen DESC, id DESC LIMIT 1",
            (tid, log_path),
        ).fetchone()
        return _run_info(target, row) if row else None

    def new_run(
        self, target: str, log_path: str, inode: int, t: float, after: int | None = None
    ) -> Future[RunInfo]:
        """The run for this log file: the newest one of this inode, unless it
        is `after` (the run found truncated), then the next generation. Two
        gputui processes that see the same log at once get the same run."""
        return self._submit(self._new_run, target, log_path, inode, t, after)

    def _new_run(
        self, target: str, log_path: str, inode: int, t: float, after: int | None
    ) -> RunInfo:
        tid = self._target_id(target)

        def do(c: sqlite3.Connection) -> RunInfo:
            row = c.execute(
                "SELECT id, log_path, inode, generation, first_seen, last_seen, cursor,"
                " throughput_unit FROM runs WHERE target_id=? AND log_path=? AND inode=?"
                " ORDER BY generation DESC LIMIT 1",
                (tid, log_path, inode),
            ).fetchone()
            if row is not None and (after is None or int(row[0]) > after):
                return _run_info(target, row)  # made already (by another gputui, say)
            gen = int(row[3]) + 1 if row is not None else 0
            cur = c.execute(
                "INSERT INTO runs (target_id, log_path, inode, generation, first_seen, last_seen)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (tid, log_path, inode, gen, t, t),
            )
            return RunInfo(int(cur.lastrowid or 0), target, log_path, inode, gen, t, t, 0, "")

        return self._tx(do)

    def add_points(
        self, run_id: int, points: Sequence[PointRow], cursor: int, t: float, unit: str = ""
    ) -> Future[None]:
        """Metric points of one read of the log, and how far it got — in one
        transaction, so a crash never records the points without the cursor
        (or the reverse). Offsets already stored are ignored."""
        return self._submit(self._add_points, run_id, list(points), cursor, t, unit)

    def _add_points(
        self, run_id: int, points: list[PointRow], cursor: int, t: float, unit: str
    ) -> None:
        def do(c: sqlite3.Connection) -> None:
            c.executemany(
                "INSERT OR IGNORE INTO metric_points"
                " (run_id, offset, t, timed, step, loss, throughput, lr)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (run_id, p.offset, p.t, int(p.timed), p.step, p.loss, p.throughput, p.lr)
                    for p in points
                ],
            )
            c.execute(
                "UPDATE runs SET cursor = MAX(cursor, ?), last_seen = MAX(last_seen, ?),"
                " throughput_unit = CASE WHEN ? != '' THEN ? ELSE throughput_unit END WHERE id=?",
                (cursor, t, unit, unit, run_id),
            )

        self._tx(do)
        self._maybe_maintain()

    # -- what a run ran, and its last run (issue 49)

    def set_program(self, run_id: int, program: Program, session: str, t: float) -> Future[bool]:
        """Keep what run `run_id` ran (the first one told is kept); True when new."""
        return self._submit(self._set_program, run_id, program, session, t)

    def _set_program(self, run_id: int, p: Program, session: str, t: float) -> bool:
        def do(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "INSERT OR IGNORE INTO run_programs"
                " (run_id, t, argv, cwd, script, script_mtime, env, started, session)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    t,
                    json.dumps(list(p.argv)),
                    p.cwd,
                    p.script,
                    p.script_mtime,
                    json.dumps(list(p.env)),
                    p.started,
                    session,
                ),
            )
            return cur.rowcount == 1

        return self._tx(do)

    def pick_last(self, run_id: int, last_id: int, t: float) -> Future[None]:
        """The user's pick: run `last_id` is the last run `run_id` is compared with."""
        return self._submit(self._pick_last, run_id, last_id, t)

    def _pick_last(self, run_id: int, last_id: int, t: float) -> None:
        self._tx(
            lambda c: c.execute(
                "INSERT OR REPLACE INTO run_last (run_id, last_id, t) VALUES (?, ?, ?)",
                (run_id, last_id, t),
            )
        )

    def pair(self, run_id: int, cache: PairCache) -> Future[RunPair | None]:
        """Run `run_id` and its last run, each with its program and points,
        and the spread of the last run's reruns (`cache`: last runs and
        reruns already read — a finished run's points do not change)."""
        return self._submit(read_pair, self.conn, run_id, cache)

    # -- batched

    def add_gpu(self, target_id: int, rows: Iterable[GpuRow]) -> None:
        with self._lock:
            self._gpu.extend((target_id, r) for r in rows)
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= FLUSH_EVERY_S:
            self._last_flush = time.monotonic()
            self._submit(self._flush)

    def flush(self) -> Future[None]:
        self._last_flush = time.monotonic()
        return self._submit(self._flush)

    def _flush(self) -> None:
        with self._lock:
            gpu, self._gpu = self._gpu, []
        if gpu:
            self._tx(
                lambda c: c.executemany(
                    "INSERT OR IGNORE INTO gpu_samples"
                    " (target_id, gpu, t, util, mem_used, mem_total, temp, power)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (tid, r.gpu, int(r.t), r.util, r.mem_used, r.mem_total, r.temp, r.power)
                        for tid, r in gpu
                    ],
                )
            )
        self._maybe_maintain()

    # -- events

    def add_event(self, target_id: int, ev: EventRow) -> Future[bool]:
        """Record an event; True when it was new. A finding's appear (or
        clear) is recorded only when the finding's last recorded state
        differs, so a restart, or a second gputui on the same target, does
        not record — or alert — it twice. Keyed events (actions, exits) are
        recorded once per key."""
        return self._submit(self._add_event, target_id, ev)

    def _add_event(self, target_id: int, ev: EventRow) -> bool:
        def do(c: sqlite3.Connection) -> bool:
            if ev.kind == "incident" and not _incident_is_news(c, target_id, ev):
                return False
            if ev.kind == "finding":
                last = c.execute(
                    "SELECT state FROM events WHERE target_id=? AND kind='finding' AND name=?"
                    " ORDER BY t DESC, id DESC LIMIT 1",
                    (target_id, ev.name),
                ).fetchone()
                if (last[0] if last else "clear") == ev.state:
                    return False
            cur = c.execute(
                "INSERT OR IGNORE INTO events"
                " (target_id, run_id, t, kind, name, state, severity, title, key)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    target_id,
                    ev.run_id,
                    ev.t,
                    ev.kind,
                    ev.name,
                    ev.state,
                    ev.severity,
                    ev.title,
                    ev.key,
                ),
            )
            return cur.rowcount == 1

        return self._tx(do)

    def claim_alert(self, target_id: int, kind: str, state: str, t: float) -> Future[bool]:
        """True for the one gputui process (of those sharing this file) that
        sends this alert: it is keyed by the incident's episode (the id of
        its last recorded opening; `kind` is the incident's cause), so a
        dashboard and `watch` on the same target post it once between them."""
        return self._submit(self._claim_alert, target_id, kind, state, t)

    def _claim_alert(self, target_id: int, kind: str, state: str, t: float) -> bool:
        def do(c: sqlite3.Connection) -> bool:
            row = c.execute(
                "SELECT id FROM events WHERE target_id=? AND kind IN ('finding', 'incident')"
                " AND name=? AND state IN ('appear', 'open') ORDER BY t DESC, id DESC LIMIT 1",
                (target_id, kind),
            ).fetchone()
            episode = str(row[0]) if row else f"t{int(t) // 60}"
            cur = c.execute(
                "INSERT OR IGNORE INTO events (target_id, t, kind, name, state, key)"
                " VALUES (?, ?, 'alert', ?, ?, ?)",
                (target_id, t, kind, state, f"{kind}:{state}:{episode}"),
            )
            return cur.rowcount == 1

        return self._tx(do)

    def open_findings(self, target: str) -> Future[dict[str, EventRow]]:
        """Findings whose last recorded state is "appear" (still open)."""
        return self._submit(self._open_findings, target)

    def _open_findings(self, target: str) -> dict[str, EventRow]:
        """Open incidents: cause -> its last event, `name` the finding kind
        it was at (gputui.record.incidents)."""
        tid = self._target_id(target)
        rows = self.conn.execute(
            "SELECT e.t, e.name, e.state, e.severity, e.title, e.key FROM events e"
            " WHERE e.target_id=? AND e.kind='incident' AND e.id = ("
            "   SELECT id FROM events x WHERE x.target_id=e.target_id AND x.kind='incident'"
            "   AND x.name=e.name ORDER BY x.t DESC, x.id DESC LIMIT 1)",
            (tid,),
        ).fetchall()
        return {
            r[1]: EventRow(
                t=r[0],
                kind="incident",
                name=incident_finding(r[5]) or r[1],
                state=r[2],
                severity=r[3],
                title=r[4],
            )
            for r in rows
            if r[2] != "resolved"
        }

    # -- upkeep

    def _maybe_maintain(self) -> None:
        now = time.monotonic()
        if now - self._last_maintenance >= 60.0:
            self._last_maintenance = now
            self._rollup(self.clock())
            self._prune()

    def rollup(self, now: float | None = None) -> Future[int]:
        return self._submit(self._rollup, self.clock() if now is None else now)

    def _rollup(self, now: float) -> int:
        """Fold GPU seconds older than `seconds_kept_s` into minutes."""
        cut = int(now - self.seconds_kept_s) // 60 * 60

        def do(c: sqlite3.Connection) -> int:
            c.execute(
                "INSERT OR REPLACE INTO gpu_minutes"
                " (target_id, gpu, t, util, util_max, mem_used, mem_used_max, mem_total,"
                "  temp, power, n)"
                " SELECT s.target_id, s.gpu, s.t / 60 * 60,"
                "  (COALESCE(m.util * m.n, 0) + SUM(s.util)) / (COALESCE(m.n, 0) + COUNT(s.util)),"
                "  MAX(COALESCE(m.util_max, 0), MAX(s.util)),"
                "  (COALESCE(m.mem_used * m.n, 0) + SUM(s.mem_used))"
                "    / (COALESCE(m.n, 0) + COUNT(s.mem_used)),"
                "  MAX(COALESCE(m.mem_used_max, 0), MAX(s.mem_used)),"
                "  MAX(s.mem_total), MAX(s.temp), AVG(s.power), COALESCE(m.n, 0) + COUNT(*)"
                " FROM gpu_samples s LEFT JOIN gpu_minutes m"
                "  ON m.target_id = s.target_id AND m.gpu = s.gpu AND m.t = s.t / 60 * 60"
                " WHERE s.t < ? GROUP BY s.target_id, s.gpu, s.t / 60",
                (cut,),
            )
            return c.execute("DELETE FROM gpu_samples WHERE t < ?", (cut,)).rowcount

        return self._tx(do)

    def size_bytes(self) -> int:
        """The database plus its WAL on disk."""
        total = 0
        for p in (self.path, Path(f"{self.path}-wal")):
            with contextlib.suppress(OSError):
                total += p.stat().st_size
        return total

    def prune(self) -> Future[int]:
        return self._submit(self._prune)

    def _used_bytes(self) -> int:
        c = self.conn
        pages = c.execute("PRAGMA page_count").fetchone()[0]
        free = c.execute("PRAGMA freelist_count").fetchone()[0]
        size = c.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)

    def _prune(self) -> int:
        """Drop the oldest data until the file is under max_bytes; returns
        the prune steps taken. Each step removes the oldest PRUNE_FRACTION of
        the time span (minutes, seconds, points, events alike), then hands
        the freed pages back to the file system."""
        steps = 0
        c = self.conn
        while self._used_bytes() > self.max_bytes and steps < 50:
            lo_hi = c.execute(
                "SELECT MIN(lo), MAX(hi) FROM ("
                " SELECT MIN(t) lo, MAX(t) hi FROM gpu_minutes UNION ALL"
                " SELECT MIN(t), MAX(t) FROM gpu_samples UNION ALL"
                " SELECT MIN(t), MAX(t) FROM metric_points UNION ALL"
                " SELECT MIN(t), MAX(t) FROM events)"
            ).fetchone()
            if lo_hi[0] is None:
                break
            lo, hi = float(lo_hi[0]), float(lo_hi[1])
            cut = lo + max(1.0, (hi - lo) * PRUNE_FRACTION)

            def do(c: sqlite3.Connection, cut: float = cut) -> None:
                for table in ("gpu_minutes", "gpu_samples", "metric_points", "events"):
                    c.execute(f"DELETE FROM {table} WHERE t < ?", (cut,))
                c.execute(
                    "DELETE FROM runs WHERE last_seen < ? AND id NOT IN"
                    " (SELECT DISTINCT run_id FROM metric_points)",
                    (cut,),
                )
                for table in ("run_programs", "run_last"):
                    c.execute(f"DELETE FROM {table} WHERE run_id NOT IN (SELECT id FROM runs)")

            self._tx(do)
            steps += 1
        free = c.execute("PRAGMA freelist_count").fetchone()[0]
        pages = c.execute("PRAGMA page_count").fetchone()[0]
        if steps or free * 10 > pages:  # hand freed pages back to the file system
            c.executescript("PRAGMA incremental_vacuum;")  # execute() would free one page only
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return steps

    def close(self) -> None:
        """Write what is pending and close; safe to call twice."""
        if self.closed:
            return
        with contextlib.suppress(Exception):
            self._submit(self._flush).result(timeout=30)
        with contextlib.suppress(Exception):
            self._submit(self._close).result(timeout=30)
        self.closed = True
        self._pool.shutdown(wait=True)

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()
            self._conn = None


def _run_info(target: str, row: Sequence[Any]) -> RunInfo:
    return RunInfo(
        id=int(row[0]),
        target=target,
        log_path=str(row[1]),
        inode=int(row[2]),
        generation=int(row[3]),
        first_seen=float(row[4]),
        last_seen=float(row[5]),
        cursor=int(row[6]),
        throughput_unit=str(row[7]),
    )


def incident_key(finding_kind: str, t: float) -> str:
    """An incident event's key: the finding kind it is at, and when."""
    return f"{finding_kind}@{t:.3f}"


def incident_finding(key: str | None) -> str:
    return (key or "").partition("@")[0]


def _incident_is_news(c: sqlite3.Connection, target_id: int, ev: EventRow) -> bool:
    """An incident's open, escalation or resolution, unless the history
    already says so (a restart, or a second gputui recording the same
    target): opened while open; the same stage and severity again; resolved
    while not open."""
    last = c.execute(
        "SELECT state, severity, key FROM events WHERE target_id=? AND kind='incident'"
        " AND name=? ORDER BY t DESC, id DESC LIMIT 1",
        (target_id, ev.name),
    ).fetchone()
    was_open = last is not None and last[0] != "resolved"
    if ev.state == "resolved":
        return was_open
    if ev.state == "open":
        return not was_open
    same = last is not None and (last[1], incident_finding(last[2])) == (
        ev.severity,
        incident_finding(ev.key),
    )
    return not (was_open and same)


# ------------------------------------------------------------------ runs compared (issue 49)

MIN_STEPS = 2  # a run with fewer step points is no run to compare with
MAX_RERUN_RUNS = 8  # the last run and its earlier reruns read for their spread, at most
FIRST_TIMED = 5  # the time to the first step: from a timed line among the first this many


@dataclass(frozen=True)
class RunSide:
    """One run of a comparison: its id, what it ran, its points, the
    seconds from its start to its first step (None: unknown)."""

    run_id: int
    program: Program | None
    points: list[RunPoint]
    first_step_s: float | None
    unit: str = ""
    first_seen: float = 0.0


@dataclass(frozen=True)
class RunPair:
    this: RunSide
    last: RunSide | None
    picked: bool
    reruns: RerunSpread | None = None  # the last run's own reruns' spread


def read_program(conn: sqlite3.Connection, run_id: int) -> Program | None:
    try:
        row = conn.execute(
            "SELECT argv, cwd, script, script_mtime, env, started FROM run_programs WHERE run_id=?",
            (run_id,),
        ).fetchone()
    except sqlite3.OperationalError:  # a file from before schema 4, opened read-only
        return None
    if row is None:
        return None
    argv = tuple(str(a) for a in json.loads(row[0]))
    return Program(
        argv,
        str(row[1]),
        str(row[2]) or script_of(argv),
        None if row[3] is None else float(row[3]),
        tuple(str(e) for e in json.loads(row[4])),
        None if row[5] is None else float(row[5]),
    )


def read_points(conn: sqlite3.Connection, run_id: int) -> list[RunPoint]:
    """A run's points with a step, in log order."""
    return [
        RunPoint(int(r[0]), float(r[1]), r[2], r[3], bool(r[4]))
        for r in conn.execute(
            "SELECT step, t, loss, throughput, timed FROM metric_points"
            " WHERE run_id=? AND step IS NOT NULL ORDER BY offset",
            (run_id,),
        )
    ]


def first_step_s(program: Program | None, points: list[RunPoint]) -> float | None:
    """Seconds from the run's process start to its first step line (both
    on this machine's clock); None when either is unknown. The first line
    the monitor timed stands for it when it is among the run's first
    FIRST_TIMED points (the first read of a new log may stamp a line or two
    with the read's time)."""
    first = next((p for p in points[:FIRST_TIMED] if p.timed), None)
    if program is None or program.started is None or first is None:
        return None
    s = first.t - program.started
    return s if s >= 0 else None


def read_side(conn: sqlite3.Connection, run_id: int) -> RunSide:
    program = read_program(conn, run_id)
    points = read_points(conn, run_id)
    row = conn.execute(
        "SELECT throughput_unit, first_seen FROM runs WHERE id=?", (run_id,)
    ).fetchone()
    unit, seen = (str(row[0]), float(row[1])) if row else ("", 0.0)
    return RunSide(run_id, program, points, first_step_s(program, points), unit, seen)


def find_last_run(conn: sqlite3.Connection, run_id: int) -> tuple[int | None, bool]:
    """(the last run of `run_id`, whether the user picked it): the pick,
    else the most recent earlier run on the same target whose program has
    the same script and which made steps."""
    with contextlib.suppress(sqlite3.OperationalError):
        row = conn.execute("SELECT last_id FROM run_last WHERE run_id=?", (run_id,)).fetchone()
        if row is not None:
            return int(row[0]), True
    return same_program_before(conn, run_id), False


def same_program_before(conn: sqlite3.Connection, run_id: int) -> int | None:
    """The most recent earlier run on the same target whose program has the
    same script and which made steps (a pick aside)."""
    me = conn.execute("SELECT target_id, first_seen FROM runs WHERE id=?", (run_id,)).fetchone()
    mine = read_program(conn, run_id)
    if me is None or mine is None:
        return None
    for (other,) in conn.execute(
        "SELECT id FROM runs WHERE target_id=? AND id != ? AND (first_seen < ? OR"
        " (first_seen = ? AND id < ?)) ORDER BY first_seen DESC, id DESC LIMIT 50",
        (me[0], run_id, me[1], me[1], run_id),
    ).fetchall():
        theirs = read_program(conn, int(other))
        if theirs is None or not same_program(theirs, mine):
            continue
        if _has_steps(conn, int(other)):
            return int(other)
    return None


def _has_steps(conn: sqlite3.Connection, run_id: int) -> bool:
    n = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM metric_points WHERE run_id=?"
        " AND step IS NOT NULL LIMIT ?)",
        (run_id, MIN_STEPS),
    ).fetchone()[0]
    return bool(n >= MIN_STEPS)


@dataclass
class PairCache:
    """What `read_pair` keeps between calls for one recorder: the last run,
    by id, with the cursor it was read at (a finished run's points do not
    change); the reruns of each last run, by id; the spread measured from
    them, with the (id, cursor) pairs it was measured on (their points are
    not kept: a long run's reruns hold many)."""

    sides: dict[int, tuple[int, RunSide]] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    spread: tuple[tuple[tuple[int, int], ...], RerunSpread | None] = ((), None)


def _cursor(conn: sqlite3.Connection, run_id: int) -> int:
    row = conn.execute("SELECT cursor FROM runs WHERE id=?", (run_id,)).fetchone()
    return int(row[0]) if row else -1


def _cached_side(conn: sqlite3.Connection, run_id: int, cache: PairCache) -> RunSide:
    cursor = _cursor(conn, run_id)
    if cache.sides.get(run_id, (None,))[0] != cursor:  # read again only when it grew
        cache.sides = {run_id: (cursor, read_side(conn, run_id))}
    return cache.sides[run_id][1]


def rerun_group(conn: sqlite3.Connection, last_id: int) -> list[int]:
    """The last run and the earlier runs on its target that ran the same
    program with nothing changed (`program_changes` empty: the same
    arguments, environment, directory, script mtime) and made steps, oldest
    first, at most MAX_RERUN_RUNS; runs of another config between them
    (a deploy tried and undone) are passed over."""
    me = conn.execute("SELECT target_id, first_seen FROM runs WHERE id=?", (last_id,)).fetchone()
    prog = read_program(conn, last_id)
    group = [last_id]
    if me is None or prog is None:
        return group
    for (other,) in conn.execute(
        "SELECT id FROM runs WHERE target_id=? AND id != ? AND (first_seen < ? OR"
        " (first_seen = ? AND id < ?)) ORDER BY first_seen DESC, id DESC LIMIT 50",
        (me[0], last_id, me[1], me[1], last_id),
    ).fetchall():
        theirs = read_program(conn, int(other))
        if theirs is None or not same_program(theirs, prog) or program_changes(theirs, prog):
            continue
        if _has_steps(conn, int(other)):
            group.append(int(other))
        if len(group) >= MAX_RERUN_RUNS:
            break
    return group[::-1]


def reruns_of(
    conn: sqlite3.Connection, last_id: int, cache: PairCache | None = None
) -> RerunSpread | None:
    """The spread of the last run's reruns (none: fewer than 3 runs in its
    group), measured again only when one of them grew."""
    cache = cache if cache is not None else PairCache()
    if last_id not in cache.groups:
        cache.groups = {last_id: rerun_group(conn, last_id)}
    group = cache.groups[last_id]
    if len(group) < MIN_RERUNS + 1:
        return None
    key = tuple((i, _cursor(conn, i)) for i in group)
    if cache.spread[0] != key:
        runs = ((i, read_points(conn, i)) for i in group)  # two runs' points at a time
        cache.spread = (key, spread_of(runs))
    return cache.spread[1]


def read_pair(
    conn: sqlite3.Connection, run_id: int, cache: PairCache | None = None
) -> RunPair | None:
    """Run `run_id` and its last run (None when it has none), with the
    spread of the last run's earlier reruns."""
    if conn.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone() is None:
        return None
    last_id, picked = find_last_run(conn, run_id)
    this = read_side(conn, run_id)
    if last_id is None:
        return RunPair(this, None, picked)
    cache = cache if cache is not None else PairCache()
    reruns = reruns_of(conn, last_id, cache)
    return RunPair(this, _cached_side(conn, last_id, cache), picked, reruns)
