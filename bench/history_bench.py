"""History benchmark: 24 h of 8 GPUs at 1 Hz plus 1 log line/s.

    .venv/bin/python bench/history_bench.py            # full: a simulated day, 60 s of watch
    .venv/bin/python bench/history_bench.py --quick    # an hour, 10 s of watch

Measures, on a real SQLite file through the real HistoryWriter (the batches
a recorder makes: one GPU transaction per 2 s, one metric transaction per
10 s, a rollup per simulated minute):

- write: wall and CPU seconds for the whole day, and per simulated hour;
- size: the database plus its WAL at the end (target ≤ 50 MB);
- 24 h chart query: the whole-run view's `load()` for the 24 h range
  (loss and throughput of the run, GPUs averaged per minute, events),
  median of 7 (target ≤ 200 ms);
- `gputui watch`'s CPU per target: the real `gputui watch local` process
  following a log that gets 1 line/s, recording into its own history,
  process CPU over wall time (utime+stime from /proc).

Writes the figures between the history markers in bench/RESULTS.md and
prints them; `--json` prints the raw figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gputui.demo.history import fill
from gputui.record.history import HistoryWriter
from results_md import write_block

HERE = Path(__file__).resolve().parent
BEGIN, END = "<!-- history-bench begin -->", "<!-- history-bench end -->"
TARGET = "root@gpu-bench ct 200"


def bench_write(hours: float, tmp: Path) -> dict[str, Any]:
    path = tmp / "history.sqlite"
    t_end = time.time()
    w = HistoryWriter(path, clock=lambda: t_end)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    points = fill(w, TARGET, t_end, hours=hours, gpus=8, lines_per_s=1.0)
    w.rollup(t_end).result()
    w.prune().result()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    size_open = w.size_bytes()
    w.close()
    size = sum(p.stat().st_size for p in tmp.glob("history.sqlite*"))
    return {
        "hours": hours,
        "gpu_rows": int(hours * 3600 * 8),
        "metric_points": points,
        "write_wall_s": round(wall, 2),
        "write_cpu_s": round(cpu, 2),
        "write_cpu_s_per_hour": round(cpu / hours, 3),
        "transactions": w.writes,
        "size_bytes_open": size_open,
        "size_bytes": size,
        "path": str(path),
        "t_end": t_end,
    }


def bench_query(path: Path, t_end: float, n: int = 7) -> dict[str, Any]:
    from gputui.ui.screens.wholerun import load

    times, cpu, data = [], [], None
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.thread_time()
        data = load(path, TARGET, 86400.0, t_end)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
    assert data is not None and not data.error, data
    return {
        "query_ms_median": round(statistics.median(times), 1),
        "query_ms_max": round(max(times), 1),
        "query_cpu_ms_median": round(statistics.median(cpu), 1),
        "query_runs": n,
        "points_drawn": len(data.metrics),
        "gpu_points": sum(len(v) for v in data.util.values()),
        "events": len(data.events),
    }


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_watch(seconds: float, tmp: Path) -> dict[str, Any]:
    log = tmp / "train.log"
    log.write_text("")
    cfg = tmp / "watch.toml"
    cfg.write_text(f'[history]\npath = "{tmp / "watch.sqlite"}"\n')
    stop = threading.Event()

    def writer() -> None:
        step = 0
        with open(log, "a") as f:
            while not stop.is_set():
                step += 1
                f.write(f"step {step} loss {2 + 1 / step:.4f} | 5200 tok/s\n")
                f.flush()
                stop.wait(1.0)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gputui",
            "watch",
            "local",
            "--log",
            str(log),
            "--config",
            str(cfg),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(8.0)  # start-up (imports, first poll) is not the steady state
        c0, t0 = _cpu_s(proc.pid), time.perf_counter()
        time.sleep(seconds)
        c1, t1 = _cpu_s(proc.pid), time.perf_counter()
        rss_kb = next(
            int(x.split()[1])
            for x in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            if x.startswith("VmRSS:")
        )
    finally:
        proc.terminate()
        proc.wait(30)
        stop.set()
    return {
        "watch_seconds": seconds,
        "watch_cpu_pct": round(100 * (c1 - c0) / (t1 - t0), 2),
        "watch_rss_mb": round(rss_kb / 1024, 1),
        "watch_exit": proc.returncode,
    }


def bench_watch_ssh(seconds: float, tmp: Path) -> dict[str, Any]:
    """The real `gputui watch` over ssh to the bench bed (tests/testbed.py:
    real sshd, stand-in `pct` with its start-up delay, stand-in nvidia-smi
    with 8 GPUs at 1 Hz) following a 1 line/s run in a CT."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from harness import BenchBed, pct_calls

    bed = BenchBed(ct=978).start()
    try:
        bed.control(rate=1.0)
        cfg = tmp / "watch-ssh.toml"
        cfg.write_text(f'[history]\npath = "{tmp / "watch-ssh.sqlite"}"\n')
        tk = bed.tb.transport_kwargs()
        argv = [
            sys.executable, "-m", "gputui", "watch", f"{tk['user']}@{tk['host']}/{bed.ct}",
            "--port", str(tk["port"]), "-i", tk["identity_file"],
            "--known-hosts", tk["known_hosts"], "--config", str(cfg),
        ]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(15.0)  # connect, agent, first full read of the log
            c0, t0, p0 = _cpu_s(proc.pid), time.perf_counter(), pct_calls(bed.pct_log)
            time.sleep(seconds)
            c1, t1, p1 = _cpu_s(proc.pid), time.perf_counter(), pct_calls(bed.pct_log)
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        bed.stop()
    return {
        "ssh_watch_seconds": seconds,
        "ssh_watch_cpu_pct": round(100 * (c1 - c0) / (t1 - t0), 2),
        "ssh_watch_pct_exec_per_min": round((p1 - p0) * 60 / (t1 - t0), 2),
        "ssh_watch_exit": proc.returncode,
    }


def table(r: dict[str, Any]) -> str:
    mb = r["size_bytes"] / 1e6
    full = r["hours"] >= 24
    q_ok = r["query_ms_median"] <= 200
    q_cpu_ok = r["query_cpu_ms_median"] <= 200
    rows = [
        (
            "simulated",
            f"{r['hours']:g} h × 8 GPUs at 1 Hz + 1 line/s "
            f"({r['gpu_rows']:,} GPU rows, {r['metric_points']:,} metric points)",
            "",
        ),
        (
            "write time (wall / CPU)",
            f"{r['write_wall_s']} s / {r['write_cpu_s']} s ({r['write_cpu_s_per_hour']} CPU s "
            f"per hour of history; {r['transactions']:,} transactions)",
            "",
        ),
        (
            "database size at the end",
            f"{mb:.1f} MB",
            ("≤ 50 MB: " + ("met" if mb <= 50 else "MISSED")) if full else "(quick run)",
        ),
        (
            "24 h chart query (whole-run view `load`)",
            f"{r['query_ms_median']} ms median wall, {r['query_cpu_ms_median']} ms CPU "
            f"(max {r['query_ms_max']} ms, n={r['query_runs']}; {r['points_drawn']} metric "
            f"points, {r['gpu_points']:,} GPU points, {r['events']} events)",
            "≤ 200 ms: "
            + ("met" if q_ok else "met in CPU, MISSED in wall time" if q_cpu_ok else "MISSED"),
        ),
        (
            "`gputui watch` CPU per target (local, 1 line/s, no GPUs)",
            f"{r['watch_cpu_pct']} % of a core over {r['watch_seconds']:g} s; "
            f"RSS {r['watch_rss_mb']} MB",
            "",
        ),
    ]
    if "ssh_watch_cpu_pct" in r:
        rows.append(
            (
                "`gputui watch` CPU per target (ssh + pct to the bench bed, 8 GPUs 1 Hz, 1 line/s)",
                f"{r['ssh_watch_cpu_pct']} % of a core over {r['ssh_watch_seconds']:g} s; "
                f"{r['ssh_watch_pct_exec_per_min']} new pct exec per minute",
                "",
            )
        )
    out = ["| measure | figure | target |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(out)


def write_results(text: str) -> None:
    write_block(f"{BEGIN}\n{text}\n{END}", BEGIN, END, HERE / "RESULTS.md")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="an hour of history, 10 s of watch")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    ap.add_argument("--no-ssh", action="store_true", help="skip watch over the ssh bench bed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        r = bench_write(1.0 if args.quick else 24.0, tmp)
        r.update(bench_query(Path(r["path"]), r["t_end"]))
        r.update(bench_watch(10.0 if args.quick else 60.0, tmp))
        if not args.no_ssh:
            r.update(bench_watch_ssh(10.0 if args.quick else 120.0, tmp))
    r["machine"] = f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    r["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    md = (
        f"## History, alerts and watch (`bench/history_bench.py`{' --quick' if args.quick else ''})\n\n"
        f"{r['date']}, {r['machine']} (shared machine: one run, figures are indicative).\n\n"
        + table(r)
    )
    print(json.dumps(r, indent=2) if args.json else md)
    if not args.no_write and not args.quick:
        write_results(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
