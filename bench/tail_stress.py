"""Log-tail stress: bursts then a slow trickle, followed by the real dashboard
while a busy loop runs on every core.

The test bed (`tests/testbed.py`: OpenSSH sshd on 127.0.0.1, stand-in `pct`
with a real host's 0.4 s start-up) runs a python3 writer in tmux inside a CT,
stdout redirected to the log, as a training run would. For each cycle the
writer prints a burst of N lines (~110 bytes each) at once, then one line a
second. The app is the real one (`ui_scenarios.make_app`: SshTransport,
Monitor, log follower, GputuiApp headless), with `--stale-after 5` so a tail
that stops for more than a few seconds would say "stale" on the status line.

Per cycle it records:
- caught_up_s: burst end (the writer's clock, same machine) -> the follower's
  offset reaches the file size at burst end;
- screen_s: burst end -> the burst's last line is in the Log widget;
- trickle_s: the last trickled line written (or, if later, the tail caught
  up) -> it is in the Log widget;
- counts: lines shown in the Log + skipped by the view + dropped by the
  monitor == lines written (and the follower's count == lines written);
- words: every status-line text shown while the file grew; "stale" or
  "silent" in any of them is a failure, as is a silence finding;
- stall_s: the longest time the file was ahead of the bytes delivered with
  no byte arriving (measured here, apart from gputui's own watchdog), and
  resumes: how often that watchdog resumed the stream.

    python bench/tail_stress.py --runs 20                 # 20 cycles of 200k and of 1M, ~15 min
    python bench/tail_stress.py --runs 2 --bursts 200000  # a quick look
    python bench/tail_stress.py --runs 20 --write         # also updates bench/RESULTS.md

`tests/test_tail_stress.py` runs the same cycles (fewer) as a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from gputui.diagnose import Thresholds  # noqa: E402
from gputui.ui.widgets.logview import LogPanel  # noqa: E402
from results_md import write_block  # noqa: E402
from ui_scenarios import CLEAN_PATH, make_app, settings_for  # noqa: E402

STALE_AFTER_S = 5.0
NOTICE = "⋯ "  # the view's "N lines skipped" notice starts so; the run's lines never do
SILENT_WORDS = ("stale", "silent")
SILENT_FINDINGS = {"busy_but_silent", "progress_stalled"}

# The run: waits for go.<k> (content: burst size), prints the burst (block-
# buffered, as print() to a file is), then `trickle` lines one a second,
# flushed; records each phase in side.jsonl. Lines are ~110 bytes.
WRITER = r"""
import json, os, sys, time
d, trickle = sys.argv[1], int(sys.argv[2])
PAD = "x" * 56
def note(**kw):
    with open(os.path.join(d, "side.jsonl"), "a") as f:
        f.write(json.dumps(kw) + "\n")
k = 0
while True:
    go = os.path.join(d, "go.%d" % k)
    while not os.path.exists(go):
        time.sleep(0.02)
    n = int(open(go).read())
    for i in range(n):
        print("burst %d line %07d step %d loss 1.5000 tok/s 12345 %s" % (k, i, i, PAD))
    sys.stdout.flush()
    note(event="burst_end", k=k, t=time.time(), lines=n, size=os.fstat(1).st_size)
    for j in range(trickle):
        time.sleep(1.0)
        line = "trickle %d line %d step %d loss 1.2500 %s" % (k, j, n + j, PAD)
        print(line, flush=True)
        note(event="trickle", k=k, j=j, t=time.time(), line=line)
    note(event="done", k=k, t=time.time(), lines=n + trickle)
    k += 1
"""


@dataclass
class Cycle:
    burst: int
    lines_written: int = 0
    caught_up_s: float | None = None
    screen_s: float | None = None
    trickle_s: float | None = None
    shown: int = 0
    skipped: int = 0
    dropped: int = 0
    followed: int = 0
    counts_ok: bool = False
    silent_words: list[str] = field(default_factory=list)
    silent_findings: list[str] = field(default_factory=list)
    stall_s: float = 0.0
    resumes: int = 0
    streams: int = 0  # log streams opened during the cycle (a resume or restart opens one)
    status_words: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.caught_up_s is not None
            and self.screen_s is not None
            and self.trickle_s is not None
            and self.counts_ok
            and not self.silent_words
            and not self.silent_findings
        )


@contextlib.contextmanager
def contention(n: int | None = None) -> Iterator[list[int]]:
    """A busy loop on every core (or `n`), ended when the block ends."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(n or os.cpu_count() or 1)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


class Probe:
    """Wrappers on the widget instances (nothing in src/ is changed): each
    batch written to the Log, each status-line text shown."""

    def __init__(self) -> None:
        self.shown = 0
        self.last_line = ""
        self.last_line_at = 0.0
        self.seen: dict[str, float] = {}  # watched line -> when it reached the Log
        self.watch: set[str] = set()
        self.texts: list[tuple[float, str]] = []

    def install(self, panel: LogPanel) -> None:
        log = panel.log
        write = log.write_lines

        def write_lines(lines: Any, scroll_end: bool | None = None) -> Any:
            lines = list(lines)
            now = time.time()
            run_lines = [x for x in lines if not x.startswith(NOTICE)]
            self.shown += len(run_lines)
            if run_lines:
                self.last_line, self.last_line_at = run_lines[-1], now
            for x in run_lines:
                if x in self.watch or x.startswith("trickle "):
                    self.seen.setdefault(x, now)
            return write(lines, scroll_end)

        log.write_lines = write_lines  # type: ignore[method-assign]
        state = panel.query_one("#log-state")
        show = state.show_text  # type: ignore[attr-defined]

        def show_text(content: Any, *, layout: bool = False) -> bool:
            self.texts.append((time.time(), getattr(content, "plain", str(content))))
            return bool(show(content, layout=layout))

        state.show_text = show_text  # type: ignore[attr-defined]


def resumes(st: Any) -> int:
    """The watchdog's resumes (0 on a gputui from before the watchdog, so the
    harness also runs against older code)."""
    return int(getattr(st, "resumes", 0))


def side_events(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError:
        return []
    return [json.loads(x) for x in text.splitlines() if x.endswith("}")]


async def run_cycles(
    testbed: Any,
    ct: int,
    bursts: list[int],
    *,
    trickle: int = 4,
    busy: bool = True,
    name: str = "stress",
    timeout_s: float = 120.0,
    progress: Any = None,
) -> list[Cycle]:
    """One dashboard session, one cycle per entry of `bursts`."""
    d = Path(testbed.workspace) / f"tail-{name}-{ct}"
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o777)
    log, side = d / "train.log", d / "side.jsonl"
    for p in (log, side, *d.glob("go.*")):
        p.unlink(missing_ok=True)
    log.touch()
    (d / "writer.py").write_text(WRITER)
    cmd = shlex.join(["python3", str(d / "writer.py"), str(d), str(trickle)])
    cmd = f"exec {cmd} >> {shlex.quote(str(log))} 2>&1"
    session = f"tail{name}"
    r = testbed.ct_exec(
        ct,
        ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "tmux", "new", "-d", "-s", session,
         "sh", "-c", cmd],
    )  # fmt: skip
    if r.returncode != 0:
        raise RuntimeError(f"could not start the writer in CT {ct}: {r.stderr}")
    settings = settings_for(
        testbed,
        ct,
        log=str(log),
        session=session,
        diagnosis=Thresholds(stale_after=STALE_AFTER_S),
        read_only=True,
    )
    app, _parts = make_app(settings)
    probe = Probe()
    cycles: list[Cycle] = []
    try:
        async with app.run_test(headless=True, size=(120, 36)):
            mon: Any = app.monitor
            # The follower must be at the end of the (empty) log before the
            # first burst: one started later reads only the last 256 KiB of
            # it, by design, and the counts would say nothing.
            if not await until(lambda: mon.follower is not None and mon.follower.positioned, 240):
                raise RuntimeError("the dashboard did not start following the log within 240 s")
            probe.install(app.screen.query_one(LogPanel))
            with contention() if busy else contextlib.nullcontext([]):
                for k, n in enumerate(bursts):
                    c = await one_cycle(app, mon, probe, d, side, log, k, n, trickle, timeout_s)
                    cycles.append(c)
                    if progress is not None:
                        progress(c)
    finally:
        with contextlib.suppress(Exception):
            testbed.ct_exec(ct, ["tmux", "kill-session", "-t", session])
    return cycles


async def until(fn: Any, timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        await asyncio.sleep(step)
    return False


async def one_cycle(
    app: Any,
    mon: Any,
    probe: Probe,
    d: Path,
    side: Path,
    log: Path,
    k: int,
    n: int,
    trickle: int,
    timeout_s: float,
) -> Cycle:
    c = Cycle(burst=n)
    f = mon.follower
    st = f.state
    panel = app.screen.query_one(LogPanel)
    before = (probe.shown, panel.skipped, app._dropped_lines(), st.lines_total, resumes(st))
    streams_before = f.streams_opened
    texts_from = len(probe.texts)
    pad = "x" * 56
    last_burst = f"burst {k} line {n - 1:07d} step {n - 1} loss 1.5000 tok/s 12345 {pad}"
    probe.watch.add(last_burst)
    tmp = d / f".go.{k}"
    tmp.write_text(str(n))
    tmp.rename(d / f"go.{k}")
    t_end = time.monotonic() + timeout_s
    done: dict[str, Any] | None = None
    burst_end: dict[str, Any] | None = None
    caught_at: float | None = None
    last_off, last_move = st.offset, time.time()
    trickles: list[dict[str, Any]] = []
    findings: set[str] = set()
    while time.monotonic() < t_end:
        await asyncio.sleep(0.02)
        now = time.time()
        events = [e for e in side_events(side) if e.get("k") == k]
        burst_end = next((e for e in events if e["event"] == "burst_end"), burst_end)
        trickles = [e for e in events if e["event"] == "trickle"]
        done = next((e for e in events if e["event"] == "done"), None)
        if st.offset != last_off:
            last_off, last_move = st.offset, now
        elif log.stat().st_size > st.offset:
            c.stall_s = max(c.stall_s, now - last_move)
        if burst_end is not None and caught_at is None and st.offset >= burst_end["size"]:
            caught_at = now
        findings |= {x.kind for x in app.findings} & SILENT_FINDINGS
        if done is not None and trickles and trickles[-1]["line"] in probe.seen:
            break
    if burst_end is not None:
        if caught_at is not None:
            c.caught_up_s = caught_at - burst_end["t"]
        if last_burst in probe.seen:
            c.screen_s = probe.seen[last_burst] - burst_end["t"]
    if trickles and trickles[-1]["line"] in probe.seen:
        # a line written while the tail still works through the burst cannot
        # show before the tail is there: count from the later of the two
        written = max(trickles[-1]["t"], caught_at or 0.0)
        c.trickle_s = max(0.0, probe.seen[trickles[-1]["line"]] - written)
    await asyncio.sleep(0.3)  # the view's last batch
    c.lines_written = n + trickle
    c.shown = probe.shown - before[0]
    c.skipped = panel.skipped - before[1]
    c.dropped = app._dropped_lines() - before[2]
    c.followed = st.lines_total - before[3]
    c.resumes = resumes(st) - before[4]
    c.streams = f.streams_opened - streams_before
    c.counts_ok = c.shown + c.skipped + c.dropped == c.lines_written == c.followed
    words = [t for _, t in probe.texts[texts_from:]]
    c.status_words = sorted({w.split("  ")[0] for w in words})
    c.silent_words = [w for w in words if any(x in w for x in SILENT_WORDS)]
    c.silent_findings = sorted(findings)
    probe.watch.clear()
    return c


def pct(values: list[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def summarize(cycles: list[Cycle]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in sorted({c.burst for c in cycles}):
        cs = [c for c in cycles if c.burst == n]
        row: dict[str, Any] = {"runs": len(cs), "ok": sum(c.ok for c in cs)}
        for key in ("caught_up_s", "screen_s", "trickle_s", "stall_s"):
            vals = [getattr(c, key) for c in cs if getattr(c, key) is not None]
            row[key] = {
                "p50": statistics.median(vals) if vals else None,
                "p95": pct(vals, 0.95) if vals else None,
                "max": max(vals) if vals else None,
                "n": len(vals),
            }
        row["counts_ok"] = sum(c.counts_ok for c in cs)
        row["silent_words"] = sum(len(c.silent_words) for c in cs)
        row["silent_findings"] = sum(len(c.silent_findings) for c in cs)
        row["resumes"] = sum(c.resumes for c in cs)
        row["status_words"] = sorted({w for c in cs for w in c.status_words})
        out[str(n)] = row
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "<!-- tail-stress:start (written by bench/tail_stress.py --write; run.py keeps it) -->",
        "## Log tail under a burst and CPU contention (`bench/tail_stress.py`)",
        "",
        f"{res['date']}, {res['seconds']:.0f} s; {res['machine']}; a busy loop on each of "
        f"{res['busy']} cores for the whole run; load avg before {res['load_before']}.",
        f"Cycles alternate bursts in one dashboard session; each burst is followed by "
        f"{res['trickle']} lines at 1 line/s. Times are from the writer's own clock at burst "
        "end (same machine).",
        "",
        "| burst | runs | all checks ok | burst end → tail at end of file p50 / p95 / max "
        "| → last burst line on screen p50 / max | last trickled line → screen p50 / max (from caught up, if later) "
        "| longest stall | watchdog resumes | stale/silent shown |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    for n, row in res["summary"].items():
        cu, sc, tr, sl = row["caught_up_s"], row["screen_s"], row["trickle_s"], row["stall_s"]
        lines.append(
            f"| {int(n):,} lines | {row['runs']} | {row['ok']} | "
            f"{f(cu['p50'])} / {f(cu['p95'])} / {f(cu['max'])} | {f(sc['p50'])} / {f(sc['max'])} | "
            f"{f(tr['p50'])} / {f(tr['max'])} | {f(sl['max'])} | {row['resumes']} | "
            f"{row['silent_words'] + row['silent_findings']} |"
        )
    lines += [
        "",
        "Checks per run: shown + skipped + dropped lines == lines written == lines the "
        "follower counted; the last trickled line reaches the Log widget; no status text "
        "with 'stale'/'silent' and no silence finding while the file grows "
        f"(`--stale-after {STALE_AFTER_S:g}`). 'Longest stall': the longest time the file "
        "was ahead of the bytes delivered with none arriving, measured by the harness apart "
        "from gputui's own watchdog. Status words seen: "
        + ", ".join(sorted({w for r in res["summary"].values() for w in r["status_words"]}))
        + ".",
        "<!-- tail-stress:end -->",
    ]
    return "\n".join(lines) + "\n"


def write_results(md: str, path: Path = HERE / "RESULTS.md") -> None:
    write_block(md, "<!-- tail-stress:start", "<!-- tail-stress:end -->", path)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from testbed import Testbed

    t0 = time.time()
    load = os.getloadavg()
    tb = Testbed().start()
    tb.set_pct_delay(0.4)
    ct = 960
    tb.ct_create(ct, running=True)
    bursts = [n for _ in range(args.runs) for n in args.bursts]
    try:
        cycles = await run_cycles(
            tb,
            ct,
            bursts,
            trickle=args.trickle,
            busy=not args.idle,
            name="bench",
            progress=lambda c: print(
                f"burst {c.burst:>9,}: caught up {c.caught_up_s}, screen {c.screen_s}, "
                f"trickle {c.trickle_s}, counts {c.counts_ok}, stall {c.stall_s:.2f}, "
                f"resumes {c.resumes}, streams {c.streams}, words {c.status_words}, ok {c.ok}",
                flush=True,
            ),
        )
    finally:
        tb.stop()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
        "seconds": time.time() - t0,
        "machine": f"{os.cpu_count()} cores",
        "busy": 0 if args.idle else os.cpu_count(),
        "load_before": " ".join(f"{x:.1f}" for x in load),
        "trickle": args.trickle,
        "summary": summarize(cycles),
        "cycles": [asdict(c) for c in cycles],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=20, help="cycles per burst size (20)")
    ap.add_argument(
        "--bursts", type=int, nargs="+", default=[200_000, 1_000_000], help="burst sizes"
    )
    ap.add_argument("--trickle", type=int, default=4, help="lines at 1/s after each burst (4)")
    ap.add_argument("--idle", action="store_true", help="no busy loops")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    args = ap.parse_args()
    res = asyncio.run(bench(args))
    md = markdown(res)
    print(md)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    if args.write:
        write_results(md)
    return 0 if all(r["ok"] == r["runs"] for r in res["summary"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
