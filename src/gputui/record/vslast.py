"""Two runs of the history side by side (issue 49): `gputui history
--compare LAST THIS` as a table, CSV or JSON, `--pick-last`, the runs a
target has (their ids), and the `vs_last` object doctor's JSON and the
history's share. The comparison itself is diagnose/compare.py's."""

from __future__ import annotations

import csv
import io
import json
import math
import shlex
import time
from collections.abc import Sequence
from typing import Any

from gputui.diagnose.compare import (
    RunPoint,
    compare,
    figures,
    live_points,
    merge_points,
    short_number,
    vs_last_dict,
)
from gputui.errors import GputuiError
from gputui.model import Snapshot, VsLast
from gputui.record.history import (
    RunPair,
    RunSide,
    find_last_run,
    read_side,
    reruns_of,
)
from gputui.record.query import HistoryReader
from gputui.text.untrusted import visible


def vs_of(
    pair: RunPair | None,
    unit: str = "",
    snap: Snapshot | None = None,
    unread: Sequence[RunPoint] = (),
) -> VsLast | None:
    """The comparison of a pair read from the history: the stored points of
    its run, then those of its log's lines the history has not read yet
    (`unread`), then those the monitor parsed since (`snap`)."""
    if pair is None or pair.last is None:
        return None
    this = merge_points(pair.this.points, unread)
    if snap is not None:
        this = merge_points(this, live_points(snap.metrics, 0.0))
    return compare_pair(pair, this, unit)


def compare_pair(pair: RunPair, this: Sequence[Any], unit: str = "") -> VsLast:
    """The pair's run, its points `this`, against its last run (which it has)."""
    assert pair.last is not None
    return compare(
        pair.last.points,
        this,
        this_run=pair.this.run_id,
        last_run=pair.last.run_id,
        old=pair.last.program,
        new=pair.this.program,
        first_step=(pair.this.first_step_s, pair.last.first_step_s),
        unit=pair.this.unit or pair.last.unit or unit,
        picked=pair.picked,
        reruns=pair.reruns,
    )


def _run_exists(reader: HistoryReader, run_id: int) -> None:
    if reader.conn.execute("SELECT 1 FROM runs WHERE id=?", (run_id,)).fetchone() is None:
        raise GputuiError(
            f"no run {run_id} in the history",
            "list the runs and their ids with `gputui history TARGET --runs`",
        )


def pair_of(reader: HistoryReader, last_id: int | None, this_id: int) -> RunPair:
    """Run `this_id` against `last_id` (None: its last run as the dashboard
    finds it — the user's pick, else the same program's latest before)."""
    _run_exists(reader, this_id)
    picked = True
    if last_id is None:
        last_id, picked = find_last_run(reader.conn, this_id)
        if last_id is None:
            raise GputuiError(
                f"run {this_id} has no earlier run of the same program in the history",
                "name the two runs: gputui history --compare LAST_ID THIS_ID",
            )
    _run_exists(reader, last_id)
    return RunPair(
        read_side(reader.conn, this_id),
        read_side(reader.conn, last_id),
        picked,
        reruns_of(reader.conn, last_id),
    )


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "–"


def _command(side: RunSide) -> str:
    return shlex.join(side.program.argv) if side.program is not None else "(not recorded)"


def _steps(side: RunSide) -> str:
    steps = [p.step for p in side.points if p.step is not None]
    return f"{min(steps):,}–{max(steps):,}" if steps else "–"


def render_compare(pair: RunPair, fmt: str, how: str = "") -> str:
    """The table ("text"), "csv" or "json" of `gputui history --compare`;
    `how`: how the last run was chosen, in words."""
    assert pair.last is not None
    vs = vs_of(pair)
    assert vs is not None
    if fmt == "json":
        return (
            json.dumps(
                {
                    "last": _side_dict(pair.last),
                    "this": _side_dict(pair.this),
                    "vs_last": vs_last_dict(vs),
                },
                ensure_ascii=True,
            )
            + "\n"
        )
    rows = _rows(pair, vs, raw=fmt == "csv")
    if fmt == "csv":
        from gputui.record.query import _csv_safe

        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["figure", "last_run", "this_run", "change_pct"])
        for name, old, new, change in rows:
            w.writerow([name, _csv_safe(old), _csv_safe(new), change])
        return buf.getvalue()
    width = max(len(r[1]) for r in rows if r[0] not in ("verdict", "what changed"))
    width = min(max(width, 12), 40)
    out = [
        f"run {pair.this.run_id} against run {pair.last.run_id}"
        + (" (picked)" if pair.picked else " (its last run: the same program, before it)")
    ]
    out.append(f"  {'':<14} {'last run':<{width}}  {'this run':<{width}}  change")
    for name, old, new, change in rows:
        if name in ("verdict", "what changed", "test", "reruns"):
            out.append(f"  {name:<14} {visible(new)}")
            continue
        old_s, new_s = visible(old)[:width], visible(new)[:width]
        out.append(f"  {name:<14} {old_s:<{width}}  {new_s:<{width}}  {change}".rstrip())
    return "\n".join(out) + "\n"


def _rows(pair: RunPair, vs: VsLast, *, raw: bool = False) -> list[tuple[str, str, str, str]]:
    """The table's rows; `raw`: numbers as numbers (CSV), not `42.4k`."""
    assert pair.last is not None
    rows = [
        ("run", str(pair.last.run_id), str(pair.this.run_id), ""),
        ("command", _command(pair.last), _command(pair.this), ""),
        ("first seen", _when(pair.last.first_seen), _when(pair.this.first_seen), ""),
        ("steps", _steps(pair.last), _steps(pair.this), ""),
        ("compared at", f"step {vs.step:,}" if vs.step is not None else "–", "", ""),
    ]
    for v in (vs.rate, vs.loss, vs.step_time, vs.first_step):
        if v is None:
            continue
        if raw:
            change = "" if v.percent is None else f"{v.percent:.2f}"
            rows.append((v.name, _raw(v.old), _raw(v.new), change))
            continue
        change = "" if v.percent is None else f"{v.percent:+.1f} %"
        rows.append((v.name, short_number(v.old), short_number(v.new), change))
    rows.append(("verdict", "", vs.verdict or "too early to tell", ""))
    rows.append(("test", "", vs.test, ""))
    rows.append(("reruns", "", _reruns_row(vs), ""))
    rows.append(("what changed", "", "; ".join(vs.changes) or "nothing gputui can see", ""))
    return rows


def _reruns_row(vs: VsLast) -> str:
    """The last run's earlier reruns and how much they moved, in words."""
    r = vs.reruns
    if r is None:
        return "fewer than 2 earlier reruns of the last run, unchanged: their spread not known"
    ids = ", ".join(str(i) for i in r.runs)
    if r.rate is None:
        return f"runs {ids}: too few measured to tell their spread"
    loss = f", loss ±{r.loss * 100:.2f} %" if r.loss is not None else ""
    return f"runs {ids}: rate ±{r.rate * 100:.1f} % from one to the next{loss}"


def _raw(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:.6g}"


def _side_dict(side: RunSide) -> dict[str, Any]:
    p = side.program
    return {
        "run": side.run_id,
        "first_seen": side.first_seen,
        "steps": len(side.points),
        "argv": list(p.argv) if p else None,
        "cwd": p.cwd if p else None,
        "script": p.script if p else None,
        "script_mtime": p.script_mtime if p else None,
        "env": list(p.env) if p else None,
        "first_step_s": side.first_step_s,
        "unit": side.unit,
    }


def runs_text(reader: HistoryReader, target: str, since: float) -> str:
    """The target's runs since `since`, newest last, each with its id (for
    --compare and --pick-last), command and steps."""
    tid = reader.target_id(target)
    rows = reader.conn.execute(
        "SELECT id, first_seen, last_seen FROM runs WHERE target_id=? AND last_seen >= ?"
        " ORDER BY first_seen, id",
        (tid, since),
    ).fetchall()
    out = [f"runs of {visible(target)} (id, first seen, steps, command):"]
    for run_id, first, _last in rows:
        side = read_side(reader.conn, int(run_id))
        out.append(
            f"  {run_id:>5}  {_when(first)}  steps {_steps(side):<14} {visible(_command(side))[:100]}"
        )
    if not rows:
        out.append("  none in this range")
    return "\n".join(out) + "\n"


def figures_line(vs: VsLast) -> str:
    return ", ".join(figures(vs))


def newest_run(conn: Any, target: str, log_path: str) -> tuple[int, int, int] | None:
    """(id, cursor, inode) of the newest run of the log `log_path` (any log
    when empty) on `target` in the history: the run a dashboard or `watch`
    records now."""
    row = conn.execute(
        "SELECT r.id, r.cursor, r.inode FROM runs r JOIN targets t ON t.id = r.target_id"
        " WHERE t.name=? AND (?='' OR r.log_path=?) ORDER BY r.first_seen DESC, r.id DESC"
        " LIMIT 1",
        (target, log_path, log_path),
    ).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row is not None else None
