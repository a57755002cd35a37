"""Reading the run history: what `gputui history` prints and the whole-run
view draws. A read-only connection of its own (WAL: a writer may be busy)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from gputui.errors import GputuiError
from gputui.record.history import connect, default_path
from gputui.remote.target import TargetSpec, parse_target

CHART_POINTS = 600  # metric series are thinned to about this many points


@dataclass(frozen=True)
class GpuPoint:
    t: float
    gpu: int
    util: float | None
    mem_used: float | None
    mem_total: float | None


@dataclass(frozen=True)
class MetricRow:
    t: float
    run_id: int
    offset: int
    step: int | None
    loss: float | None
    throughput: float | None
    lr: float | None


@dataclass(frozen=True)
class EventOut:
    t: float
    kind: str
    name: str
    state: str
    severity: str
    title: str


def parse_since(text: str) -> float:
    """`90s`, `30m`, `6h`, `2d`, `1w` or plain seconds -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if not m:
        raise GputuiError(f"--since {text!r} is not a duration", "use e.g. 90s, 30m, 6h, 2d or 1w")
    mult = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
    return float(m.group(1)) * mult


def _label_spec(label: str) -> TargetSpec | None:
    """A recorded target (`root@10.1.2.6:2222 ct 200`) in the target grammar."""
    dest, _, ct_id = label.partition(" ct ")
    try:
        spec = parse_target(dest)
    except ValueError:
        return None
    if ct_id:
        if not ct_id.isdigit():
            return None
        return TargetSpec(spec.host, spec.user, spec.port, int(ct_id))
    return spec


def _names_match(want: TargetSpec, label: str, given: list[str]) -> bool:
    for text in given:
        with contextlib.suppress(ValueError):
            if want.matches(parse_target(text)):
                return True
    spec = _label_spec(label)
    return spec is not None and want.matches(spec)


def _with_given(label: str, given: list[str]) -> str:
    return f"{label} (as {', '.join(given)})" if given else label


class HistoryReader:
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path).expanduser() if path else default_path()
        self.conn: sqlite3.Connection = connect(self.path, readonly=True)

    def close(self) -> None:
        self.conn.close()

    def targets(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM targets ORDER BY name")]

    def target_id(self, name: str) -> int:
        row = self.conn.execute("SELECT id FROM targets WHERE name=?", (name,)).fetchone()
        if row is None:
            hits = self.find(name)
            if len(hits) == 1:
                return self.target_id(hits[0])
            raise GputuiError(
                f"target {name!r} is {len(hits)} recorded targets",
                f"name one of: {', '.join(hits)}",
            )
        return int(row[0])

    def given_names(self) -> dict[str, list[str]]:
        """Recorded target -> the names the user gave it (`gpu1/200`); empty
        for a file from before they were kept."""
        try:
            rows = self.conn.execute(
                "SELECT t.name, n.name FROM target_names n JOIN targets t ON t.id = n.target_id"
                " ORDER BY n.name"
            ).fetchall()
        except sqlite3.OperationalError:  # schema 2: no target_names table
            return {}
        out: dict[str, list[str]] = {}
        for target, given in rows:
            out.setdefault(str(target), []).append(str(given))
        return out

    def find(self, query: str) -> list[str]:
        """The recorded targets `query` names: the target as recorded, a name
        the user gave it (`gpu1/200`, or just `gpu1`: each of its CTs), its
        address in the target grammar (`root@10.1.2.6/200`), else a unique
        part of one. GputuiError when none matches, naming what is recorded."""
        names = self.targets()
        if query in names:
            return [query]
        given = self.given_names()
        exact = [t for t in names if query in given.get(t, [])]
        if exact:
            return exact
        try:
            want: TargetSpec | None = parse_target(query)
        except ValueError:
            want = None
        if want is not None:
            hits = [t for t in names if _names_match(want, t, given.get(t, []))]
            if hits:
                return hits
        parts = [t for t in names if query in t or any(query in g for g in given.get(t, []))]
        if len(parts) == 1:
            return parts
        known = ", ".join(_with_given(t, given.get(t, [])) for t in names) or "none yet"
        raise GputuiError(f"no history for target {query!r}", f"recorded targets: {known}")

    def gpu(self, target: str, since: float, until: float, step_s: int = 0) -> list[GpuPoint]:
        """GPU samples in [since, until]: seconds where kept, minutes before;
        with step_s (e.g. 240) averaged into buckets of that many seconds,
        in time order per GPU."""
        tid = self.target_id(target)
        if step_s <= 1:
            sql = (
                "SELECT t, gpu, util, mem_used, mem_total FROM gpu_minutes"
                " WHERE target_id=? AND t BETWEEN ? AND ?"
                " UNION ALL SELECT t, gpu, util, mem_used, mem_total FROM gpu_samples"
                " WHERE target_id=? AND t BETWEEN ? AND ? ORDER BY 1, 2"
            )
            args: tuple[object, ...] = (tid, since, until, tid, since, until)
        else:  # buckets of step_s: minutes as stored, the kept seconds, each grouped
            # GPU first, as the primary key orders them: no sort, per-GPU time order
            out: list[GpuPoint] = []
            for table in ("gpu_minutes", "gpu_samples"):
                out += [
                    GpuPoint(*r)
                    for r in self.conn.execute(
                        f"SELECT t / ? * ?, gpu, AVG(util), AVG(mem_used), MAX(mem_total)"
                        f" FROM {table} WHERE target_id=? AND t BETWEEN ? AND ?"
                        f" GROUP BY gpu, t / ?",
                        (step_s, step_s, tid, since, until, step_s),
                    )
                ]
            return out
        return [GpuPoint(*r) for r in self.conn.execute(sql, args)]

    def metrics(self, target: str, since: float, until: float) -> list[MetricRow]:
        tid = self.target_id(target)
        runs = [
            int(r[0]) for r in self.conn.execute("SELECT id FROM runs WHERE target_id=?", (tid,))
        ]
        out: list[MetricRow] = []
        for run_id in sorted(runs):  # per run: the primary key orders by offset
            out += [
                MetricRow(*r)
                for r in self.conn.execute(
                    "SELECT t, run_id, offset, step, loss, throughput, lr FROM metric_points"
                    " WHERE run_id=? AND t BETWEEN ? AND ? ORDER BY offset",
                    (run_id, since, until),
                )
            ]
        return out

    def latest_run(self, target: str) -> int | None:
        tid = self.target_id(target)
        row = self.conn.execute(
            "SELECT id FROM runs WHERE target_id=? ORDER BY last_seen DESC, id DESC LIMIT 1",
            (tid,),
        ).fetchone()
        return int(row[0]) if row else None

    def run_first_seen(self, run_id: int) -> float | None:
        """When run `run_id` was first seen; None when unknown."""
        row = self.conn.execute("SELECT first_seen FROM runs WHERE id=?", (run_id,)).fetchone()
        return float(row[0]) if row and row[0] else None

    def run_chart(self, run_id: int, n: int = CHART_POINTS) -> list[MetricRow]:
        """About n of a run's metric points, evenly spread over the log's
        bytes, in log order (a day at 1 line/s is 86,400 points; a chart is a
        few hundred cells wide)."""
        top = self.conn.execute(
            "SELECT MAX(offset) FROM metric_points WHERE run_id=?", (run_id,)
        ).fetchone()[0]
        if top is None:
            return []
        width = max(1, -(-int(top) // n))  # bytes of log per chart point
        sql = (
            "SELECT t, run_id, offset, step, loss, throughput, lr FROM metric_points"
            " WHERE run_id=? AND offset >= ? ORDER BY offset LIMIT 1"
        )
        out: list[MetricRow] = []
        at = 0
        while at <= top:  # one index seek per chart point, not a scan of the run
            row = self.conn.execute(sql, (run_id, at)).fetchone()
            if row is None:
                break
            out.append(MetricRow(*row))
            at = max(at + width, int(row[2]) + 1)
        return out

    def events(self, target: str, since: float, until: float) -> list[EventOut]:
        tid = self.target_id(target)
        rows = self.conn.execute(
            "SELECT t, kind, name, state, severity, title FROM events"
            " WHERE target_id=? AND t BETWEEN ? AND ? ORDER BY t, id",
            (tid, since, until),
        ).fetchall()
        return [EventOut(*r) for r in rows]

    def throughput_unit(self, target: str) -> str:
        tid = self.target_id(target)
        row = self.conn.execute(
            "SELECT throughput_unit FROM runs WHERE target_id=? AND throughput_unit != ''"
            " ORDER BY last_seen DESC LIMIT 1",
            (tid,),
        ).fetchone()
        return str(row[0]) if row else ""


def thin(rows: list[MetricRow], n: int = CHART_POINTS) -> list[MetricRow]:
    """Every k-th row so a chart gets about n points (the last one kept)."""
    if len(rows) <= n:
        return rows
    k = -(-len(rows) // n)
    out = rows[::k]
    if out[-1] is not rows[-1]:
        out.append(rows[-1])
    return out


def render(reader: HistoryReader, target: str, since: float, until: float, fmt: str) -> str:
    """`gputui history` output: "text", "json" or "csv"."""
    gpus = reader.gpu(target, since, until)
    metrics = reader.metrics(target, since, until)
    events = reader.events(target, since, until)
    if fmt == "json":
        return json.dumps(
            {
                "target": target,
                "since": since,
                "until": until,
                "gpu_samples": [asdict(g) for g in gpus],
                "metric_points": [asdict(m) for m in metrics],
                "events": [asdict(e) for e in events],
            },
            ensure_ascii=True,
        )
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(CSV_HEADER)
        for g in gpus:
            w.writerow(["gpu", g.t, g.gpu, g.util, g.mem_used, g.mem_total, ""])
        for m in metrics:
            w.writerow(["metric", m.t, m.run_id, m.step, m.loss, m.throughput, m.lr])
        for e in events:
            texts = (e.kind, e.name, e.state, e.severity, e.title)
            w.writerow(["event", e.t, *map(_csv_safe, texts)])
        return buf.getvalue()
    return _text(target, gpus, metrics, events)


# One header for three kinds of row: each column says what it holds in each
# (it said `a,b,c,d`, issue 46).
CSV_HEADER = [
    "record",
    "time",
    "gpu|run|kind",
    "util_pct|step|name",
    "mem_used_mib|loss|state",
    "mem_total_mib|throughput|severity",
    "-|lr|title",
]


# What a spreadsheet takes as the start of a formula (a tab or CR too: some
# strip it first, then see the `=` after it).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


def _csv_safe(text: str) -> str:
    """A text cell from the run (a session name like `=SUM(1+1)`, a finding
    title quoting the log): a leading formula character guarded with `'`,
    and every control character shown as a stand-in, never written raw."""
    from gputui.text.untrusted import visible

    return visible("'" + text if text[:1] in _FORMULA_START else text)


def _text(
    target: str, gpus: list[GpuPoint], metrics: list[MetricRow], events: list[EventOut]
) -> str:
    import time as _time

    from gputui.text.untrusted import visible

    def ts(t: float) -> str:
        return _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(t))

    out = [f"history of {visible(target)}"]
    n_gpu = len({g.gpu for g in gpus})
    if gpus:
        utils = [g.util for g in gpus if g.util is not None]
        avg = sum(utils) / len(utils) if utils else float("nan")
        out.append(
            f"GPU samples: {len(gpus)} of {n_gpu} GPU(s), {ts(gpus[0].t)} .. {ts(gpus[-1].t)},"
            f" mean util {avg:.0f} %"
        )
    else:
        out.append("GPU samples: none in this range")
    if metrics:
        last = metrics[-1]
        out.append(
            f"metric points: {len(metrics)}; last step {last.step}, loss {last.loss},"
            f" throughput {last.throughput}"
        )
    else:
        out.append("metric points: none in this range")
    out.append(f"events: {len(events)}")
    for e in events:
        words = " ".join(x for x in (e.kind, e.name, e.state) if x)
        out.append(f"  {ts(e.t)}  {visible(words)}  {visible(e.title)}")  # whole: a pipe cuts
    return "\n".join(out) + "\n"
