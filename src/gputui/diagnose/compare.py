"""The new run against the last one, step for step (issue 49). Pure: points
and programs in, a `VsLast` out; no I/O.

- **The last run** of a run is the most recent earlier run on the same target
  with the same program: the same script (`train.py`, `-m pkg.train`, the
  start script), its arguments compared and the differences listed
  (`program_changes`).
- **The matched window**: the steps both runs reached, less the first tenth
  (warm-up), the new run's last MAX_POINTS points at most. Comparing at the
  same steps, a warm-up or a slow evaluation every N steps weighs the same in
  both.
- **The verdict** (faster / slower / same within noise) is a Welch test on the
  per-step rates of the two runs over that window — the tok/s (or it/s,
  samples/s) the log prints, else steps a second from the line times —
  averaged into BLOCKS consecutive blocks per run first, so a rate the
  program smooths over its last steps (neighbours alike) does not pass for
  many independent readings. The noise is each run's own spread, never a
  fixed percentage; ALPHA two-sided, so a rerun of the same code is called
  slower about ALPHA / 2 of the time (tests/test_compare.py: 20 generated
  noisy pairs).
- **The loss band**: the last run's loss over the same trailing steps, its
  mean ± LOSS_BAND_SD of its own spread (or the new run's, the wider), and
  never narrower than ± LOSS_BAND_REL of the loss itself; the new run's mean
  loss above it "leaves the band". A run's spread is its step-to-step noise
  within one run; two runs of the same code with another seed or data order
  differ by more than that at the same step, and one run cannot measure it.
  Where the loss barely moves from step to step (a plateau, a loss printed
  to four places: on an H100 two runs at 10.384 ± 0.003) a band of 3 sd is
  ± 0.01, 0.1 % of the loss — a rerun leaves it; a change of the loss by
  under 1 % at the same step is not a deploy's doing one can tell.
- **The reruns' spread** (diagnose/reruns.py): where the history holds
  earlier runs of the last run's program with nothing changed, how much
  each moved from the one before (tok/s and loss, at matched steps) is the
  between-run noise one run cannot measure. A change of the rate within
  `rerun_times` (RERUN_BAND_SD, or Student's t at 99 % for few reruns) ×
  that spread is "same" whatever Welch says (on an H100 two reruns of one
  command read +3.5 %); one beyond it keeps Welch's word. The band is never
  wider than RERUN_BAND_MAX, so a real −20 % is told. The loss band's floor
  is then the reruns' loss band (at least LOSS_RERUN_FLOOR) instead of
  LOSS_BAND_REL. With fewer than MIN_RERUNS measured reruns, all of this is
  as without them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import statistics
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from gputui.model import Metrics, Program, RerunSpread, Snapshot, Versus, VsLast

ALPHA = 0.01  # two-sided: a rerun of the same code is called slower ~0.5 % of the time
BLOCKS = 8  # block means per run for the test
MIN_BLOCKS = 4  # fewer: too early for a verdict
MIN_POINTS_ALERT = 20  # matched points of the new run before an alert
WARMUP_FRACTION = 0.1  # of the common steps, left out of the window
MAX_POINTS = 2000  # the new run's points in the window, at most
LOSS_TAIL = 20  # the new run's last points the loss is compared over
LOSS_BAND_SD = 3.0
LOSS_BAND_REL = 0.01  # the band's half-width at least 1 % of the last run's loss
MIN_RERUNS = 2  # measured reruns (changes from one to the next) before their spread counts
RERUN_BAND_SD = 3.0  # a change within this many times the reruns' spread is noise,
RERUN_ALPHA = 0.02  # ... more with few reruns: Student's t at 1 - RERUN_ALPHA/2 for their count
RERUN_BAND_MAX = 0.10  # ... but never a change past ±10 %: a real -20 % is told
LOSS_RERUN_FLOOR = 0.005  # with reruns measured, the loss band at least ±0.5 % of the loss

_PYTHONS = ("python", "pypy")
_LAUNCHERS = {"torchrun", "accelerate", "deepspeed", "uv", "poetry", "env", "nohup", "stdbuf"}
_SHELLS = {"sh", "bash", "dash", "zsh"}
_SCRIPT_ENDS = (".py", ".sh", ".bash")


@dataclass(frozen=True)
class RunPoint:
    """One metric point of a run: its step, when it arrived (local clock),
    the loss and throughput its line printed; `timed`: `t` is when the line
    came (not when a catch-up read it)."""

    step: int | None
    t: float
    loss: float | None = None
    throughput: float | None = None
    timed: bool = True


# ------------------------------------------------------------------ programs


def script_of(argv: Sequence[str]) -> str:
    """The program's own file in an argv: `python -u train.py --bs 8` ->
    `train.py`; `python -m pkg.train` -> `-m pkg.train`; `torchrun
    --nproc_per_node 8 train.py` -> `train.py`; `bash start.sh` ->
    `start.sh`; else the command's name."""
    args = list(argv)
    i = 0
    while i < len(args):
        a = args[i]
        name = os.path.basename(a)
        if "=" in a and not a.startswith("-") and i == 0:  # env VAR=1 ...
            i += 1
            continue
        if name.startswith(_PYTHONS) or name in _LAUNCHERS or name in _SHELLS:
            i += 1
            while i < len(args) and args[i].startswith("-"):
                if args[i] == "-m" and i + 1 < len(args):
                    return f"-m {args[i + 1]}"
                if args[i] == "-c":
                    return "-c"
                nxt = args[i + 1] if i + 1 < len(args) else ""
                script_next = nxt.endswith(_SCRIPT_ENDS)  # `--standalone train.py`
                i += 1 + (0 if script_next else _takes_value(args[i], name))
            continue
        if "=" in a and name == a and not a.startswith("-"):
            i += 1  # VAR=1 after env
            continue
        return a
    return os.path.basename(args[0]) if args else ""


def program_of(
    snap: Snapshot, stopped: Set[int] = frozenset(), env: Sequence[str] = ()
) -> Program | None:
    """What the watched run runs: its training process's argv, directory,
    the script's mtime (from the files it runs) and start; `env`: the
    variables gputui's launch set (names, values never), kept only when the
    pane is gputui's wrapper (PYTHONUNBUFFERED=1 with them). None while no
    process is seen, or the one seen is one the user's action stopped (the
    old run's, still listed)."""
    p = snap.training_proc
    sess = snap.session
    pane = sess.main_pane if sess is not None else None
    if p is None or p.pid in stopped or (pane is not None and pane.pid in stopped):
        return None
    script = script_of(p.cmdline)
    name = os.path.basename(script)
    mtime = next((m for f, m in p.source_files if os.path.basename(f) == name), None)
    launched = pane is not None and bool(pane.launched_command)
    names = ("PYTHONUNBUFFERED=1", *(f"{k}=…" for k in env)) if launched else ()
    return Program(tuple(p.cmdline), p.cwd, script, mtime, names, p.start_time)


def live_points(m: Metrics, since: float) -> list[RunPoint]:
    """The monitor's parsed points of the current run (since the counter's
    last restart, and after `since`: lines read at start-up are the log's
    backlog, their times the read's), as points — step, loss and throughput
    rings joined by time."""
    start = max(since, m.restarted_at or 0.0)
    loss, thr = _by_time(m.loss.points()), _by_time(m.throughput.points())
    out, seen = [], dict[float, int]()
    for t, step in m.step.points():
        k = seen[t] = seen.get(t, -1) + 1  # the k-th line of its batch
        if t >= start and step is not None:
            out.append(RunPoint(int(step), t, _kth(loss, t, k), _kth(thr, t, k)))
    return out


def _by_time(points: list[tuple[float, float | None]]) -> dict[float, list[float | None]]:
    out: dict[float, list[float | None]] = {}
    for t, v in points:
        out.setdefault(t, []).append(v)
    return out


def _kth(values: dict[float, list[float | None]], t: float, k: int) -> float | None:
    got = values.get(t, [])
    return got[k] if k < len(got) else None


LIVE_SLACK_S = 5.0  # a run's first line reaches the monitor at most this long before
# the recorder takes its new log as a run (it reads the log at once on a rotation)
LIVE_LATE_S = 10.0


def live_of_run(
    stored: Sequence[RunPoint],
    live: Sequence[RunPoint],
    restarted_at: float | None,
    first_seen: float,
) -> list[RunPoint]:
    """The monitor's live points when they are this run's, else none. The
    monitor's step counter may still be the previous run's (the new run's
    first line not in yet) or already a newer run's: with stored points, the
    live point at the last stored step must be that same line (its loss and
    rate); without, the counter's restart must have come with this run — not
    LIVE_SLACK_S before the recorder took its log as a run (that is the
    previous run's restart), nor LIVE_LATE_S after (a newer run's). A ring
    that moved past the last stored step (a fast log) counts when all of it
    is newer."""
    if not live:
        return []
    steps = [p for p in stored if p.step is not None]
    if steps:
        last = steps[-1]
        same = [p for p in live if p.step == last.step]
        if not same:  # the ring moved past it (a fast log): this run's if all newer
            return list(live) if min(p.step or 0 for p in live) > (last.step or 0) else []
        ok = (same[-1].throughput, same[-1].loss) == (last.throughput, last.loss)
        return list(live) if ok else []
    if restarted_at is None or not -LIVE_SLACK_S <= restarted_at - first_seen <= LIVE_LATE_S:
        return []
    return list(live)


def steps_unread(
    stored: Sequence[RunPoint], live: Sequence[RunPoint], last: Sequence[RunPoint]
) -> bool:
    """Whether the steps both runs reached are in the run's log but neither
    in the history (which reads the log once a minute) nor in the monitor's
    rings (a run's last 600 points, `live`: this run's only): the rings
    begin at or past the last run's last step, and the history holds this
    run's steps only short of it. Then the log is to be read before
    comparing — once for a pair of runs: the history holds every shared step
    after it. On an H100, a run 600 steps past the last run's end in its
    first minute shared no step with it: 'no step matched', readings 0 and 0."""
    old = [p.step for p in last if p.step is not None]
    new = [p.step for p in live if p.step is not None]
    if not old or not new:
        return False
    end = max(old)
    mine = [p.step for p in stored if p.step is not None]
    return min(new) >= end and (not mine or mine[-1] < end)


def merge_points(stored: Sequence[RunPoint], live: Sequence[RunPoint]) -> list[RunPoint]:
    """The stored points, then the live ones past the last stored step."""
    last = max((p.step for p in stored if p.step is not None), default=None)
    return list(stored) + [
        p for p in live if p.step is not None and (last is None or p.step > last)
    ]


def _takes_value(flag: str, prog: str) -> int:
    """1 when a launcher's flag is followed by its value (`--nproc_per_node 8`)."""
    if "=" in flag or prog.startswith(_PYTHONS) or prog in _SHELLS:
        return 1 if flag in ("-W", "-X", "-Q") else 0
    return 1 if flag.startswith("--") else 0


def same_program(a: Program, b: Program) -> bool:
    """The same script, by name (a run started from another directory with
    `../train.py` is still that script)."""
    sa, sb = a.script or script_of(a.argv), b.script or script_of(b.argv)
    return bool(sa) and os.path.basename(sa) == os.path.basename(sb)


def _args_after(argv: Sequence[str], script: str) -> list[str]:
    words = list(argv)
    key = script.split(" ")[-1]
    return words[words.index(key) + 1 :] if key in words else words


def program_changes(old: Program, new: Program) -> list[str]:
    """What changed between two runs of a program, in words: the arguments
    (each flag's old and new value), the environment gputui set, the working
    directory, the script's mtime."""
    out: list[str] = []
    script = new.script or script_of(new.argv)
    a, b = _args_after(old.argv, script), _args_after(new.argv, script)
    if a != b:
        out += _arg_changes(_flags(a), _flags(b))
    if old.script and new.script and old.script != new.script:
        out.append(f"script {old.script} → {new.script}")
    if set(old.env) != set(new.env):
        added = sorted(set(new.env) - set(old.env))
        gone = sorted(set(old.env) - set(new.env))
        out += [f"env {e} set" for e in added] + [f"env {e} not set" for e in gone]
    if old.cwd and new.cwd and old.cwd != new.cwd:
        out.append(f"directory {old.cwd} → {new.cwd}")
    if old.script_mtime is not None and new.script_mtime is not None:
        dt = new.script_mtime - old.script_mtime
        if abs(dt) >= 1.0:
            out.append(f"{os.path.basename(script) or 'the script'} modified ({_ago(dt)} later)")
    return out


def _flags(args: list[str]) -> dict[str, str]:
    """`--bs 8 --lr=3e-4 -v data` -> {'--bs': '8', '--lr': '3e-4', '-v': '', '#1': 'data'}."""
    out: dict[str, str] = {}
    i, pos = 0, 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not _is_number(a):
            if "=" in a:
                k, _, v = a.partition("=")
                out[k] = v
            elif i + 1 < len(args) and not (
                args[i + 1].startswith("-") and not _is_number(args[i + 1])
            ):
                out[a] = args[i + 1]
                i += 1
            else:
                out[a] = ""
        else:
            pos += 1
            out[f"#{pos}"] = a
        i += 1
    return out


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _arg_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    out = []
    for k in list(old) + [k for k in new if k not in old]:
        name = f"argument {k[1:]}" if k.startswith("#") else k
        if k not in new:
            out.append(f"{name} {old[k]} dropped".replace("  ", " ").strip())
        elif k not in old:
            out.append(f"{name} {new[k]} added".replace("  ", " ").strip())
        elif old[k] != new[k]:
            out.append(f"{name} {old[k]} → {new[k]}")
    return out


def _ago(dt: float) -> str:
    s = abs(dt)
    words = f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"
    return words if dt >= 0 else f"-{words}"


# ------------------------------------------------------------------ the test


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (Cornish-Fisher expansion about the normal's;
    within 1 % of the table for df >= 3, which MIN_BLOCKS keeps)."""
    z = statistics.NormalDist().inv_cdf(p)
    df = max(df, 1.0)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def welch(new: Sequence[float], old: Sequence[float]) -> tuple[float, float]:
    """Welch's t of mean(new) - mean(old), and its Welch-Satterthwaite df."""
    n1, n2 = len(new), len(old)
    m1, m2 = statistics.fmean(new), statistics.fmean(old)
    v1, v2 = statistics.variance(new), statistics.variance(old)
    a, b = v1 / n1, v2 / n2
    se2 = a + b
    floor = (1e-9 * max(abs(m1), abs(m2), 1e-12)) ** 2  # identical readings: no 0/0
    if se2 <= floor:
        diff = m1 - m2
        return (
            0.0 if abs(diff) <= 1e-9 * max(abs(m2), 1e-12) else math.copysign(math.inf, diff)
        ), 1e9
    df = se2**2 / ((a * a / (n1 - 1) if a else 0.0) + (b * b / (n2 - 1) if b else 0.0) or 1e-300)
    return (m1 - m2) / math.sqrt(se2), df


def block_means(xs: Sequence[float], blocks: int = BLOCKS) -> list[float]:
    """`xs` cut into at most `blocks` runs of consecutive values (at least
    two values each), each replaced by its mean."""
    k = min(blocks, len(xs) // 2)
    if k <= 0:
        return []
    out = []
    for i in range(k):
        part = xs[i * len(xs) // k : (i + 1) * len(xs) // k]
        out.append(statistics.fmean(part))
    return out


def verdict(new: Sequence[float], old: Sequence[float], alpha: float = ALPHA) -> tuple[str, str]:
    """("faster" | "slower" | "same" | "", the test in words) for two series
    of rates (higher is faster) over the same steps."""
    b_new, b_old = block_means(new), block_means(old)
    if len(b_new) < MIN_BLOCKS or len(b_old) < MIN_BLOCKS:
        return "", f"too few matched steps yet ({len(new)} and {len(old)} points)"
    t, df = welch(b_new, b_old)
    crit = t_quantile(1 - alpha / 2, df)
    words = (
        f"Welch t = {t:+.1f} over {len(b_new)} and {len(b_old)} block means,"
        f" df {min(df, 999):.0f}: |t| {'>' if abs(t) > crit else '≤'} {crit:.1f} (p {'<' if abs(t) > crit else '≥'} {alpha:g})"
    )
    if t > crit:
        return "faster", words
    if t < -crit:
        return "slower", words
    return "same", words


# ------------------------------------------------------------------ matching


def _stepped(points: Sequence[RunPoint]) -> list[RunPoint]:
    """The points with a step, in order, the counter only going up (a
    counter that went back — a per-epoch bar — keeps its last stretch)."""
    out: list[RunPoint] = []
    for p in points:
        if p.step is None:
            continue
        if out and p.step < (out[-1].step or 0):
            out = []
        out.append(p)
    return out


def window(old: Sequence[RunPoint], new: Sequence[RunPoint]) -> tuple[int, int] | None:
    """The matched steps: both runs reached them, the warm-up left out."""
    if not old or not new:
        return None
    lo = max(old[0].step or 0, new[0].step or 0)
    hi = min(old[-1].step or 0, new[-1].step or 0)
    if hi <= lo:
        return None
    lo = lo + int((hi - lo) * WARMUP_FRACTION)
    inside = [p for p in new if lo <= (p.step or 0) <= hi]
    if len(inside) > MAX_POINTS:
        lo = inside[-MAX_POINTS].step or lo
    return lo, hi


def _in(points: Sequence[RunPoint], w: tuple[int, int]) -> list[RunPoint]:
    return [p for p in points if w[0] <= (p.step or 0) <= w[1]]


def step_rates(points: Sequence[RunPoint]) -> list[float]:
    """Steps a second between the moments lines arrived: lines that came in
    one batch share a time, so each batch counts once (its last step), and
    the rate is from one batch to the next. Points a catch-up read stamped
    (not timed) break the chain."""
    chains: list[list[tuple[float, int]]] = [[]]  # (time, last step) per arrival
    for p in points:
        g = chains[-1]
        if not p.timed or p.step is None:
            if g:
                chains.append([])
        elif g and abs(p.t - g[-1][0]) <= 1e-3:
            g[-1] = (g[-1][0], p.step)
        else:
            g.append((p.t, p.step))
    out: list[float] = []
    for g in chains:
        for (t0, s0), (t1, s1) in itertools.pairwise(g):
            if s1 > s0 and t1 > t0:
                out.append((s1 - s0) / (t1 - t0))
    return out


def rates(points: Sequence[RunPoint], use_throughput: bool) -> list[float]:
    if use_throughput:
        return [p.throughput for p in points if p.throughput is not None]
    return step_rates(points)


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _sd(xs: Sequence[float]) -> float:
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def rerun_times(n: int) -> float:
    """How many times the spread of `n` measured reruns a change may be and
    still be their noise: RERUN_BAND_SD, or Student's t for n degrees of
    freedom when more (2 reruns: 6.8, 3: 4.5, 5: 3.4) — a spread measured on
    two reruns may be small by chance."""
    return max(RERUN_BAND_SD, t_quantile(1 - RERUN_ALPHA / 2, n))


def rerun_band(spread: float | None, n: int) -> float | None:
    """The half-width (a fraction) within which a change is the reruns'
    noise: rerun_times(n) × their spread, at most RERUN_BAND_MAX; None with
    fewer than MIN_RERUNS measured reruns."""
    if spread is None or n < MIN_RERUNS:
        return None
    return min(rerun_times(n) * spread, RERUN_BAND_MAX)


def rerun_words(change_pct: float, spread: float, n: int) -> str:
    """'+3.5 % within the 3 reruns' spread ±10.0 % (4.5 × ±2.2 % from one
    rerun to the next)'."""
    band = rerun_band(spread, n) or 0.0
    inside = abs(change_pct) <= band * 100
    times = rerun_times(n)
    capped = f", at most ±{RERUN_BAND_MAX * 100:.0f} %" if times * spread > RERUN_BAND_MAX else ""
    return (
        f"{change_pct:+.1f} % {'within' if inside else 'beyond'} the {n} reruns' spread"
        f" ±{band * 100:.1f} % ({times:.1f} × ±{spread * 100:.1f} % from one rerun"
        f" to the next{capped})"
    )


def against_reruns(
    word: str, test: str, rate: Versus, reruns: RerunSpread | None
) -> tuple[str, str]:
    """The verdict with the reruns' spread: a change within their band is
    "same"; beyond it, Welch's word stands (named only past both the run's
    own noise and the reruns')."""
    change = rate.percent
    if not word or change is None or reruns is None or reruns.rate is None:
        return word, test
    band = rerun_band(reruns.rate, reruns.n_rate)
    if band is None:
        return word, test
    words = rerun_words(change, reruns.rate, reruns.n_rate)
    return ("same" if abs(change) <= band * 100 else word), f"{test}; {words}"


def loss_versus(
    old: Sequence[RunPoint],
    new: Sequence[RunPoint],
    w: tuple[int, int],
    reruns: RerunSpread | None = None,
) -> tuple[Versus | None, tuple[float, float] | None, bool]:
    """The loss over the new run's last LOSS_TAIL points up to the window's
    end, against the last run's over the same steps; its band (never
    narrower than LOSS_BAND_REL of the loss, or with reruns measured, than
    their band); out of it."""
    tail = [p for p in _in(new, w) if p.loss is not None][-LOSS_TAIL:]
    if not tail:
        return None, None, False
    lo = tail[0].step or 0
    theirs = [p.loss for p in old if p.loss is not None and lo <= (p.step or 0) <= w[1]]
    mine = [p.loss for p in tail if p.loss is not None]
    if len(theirs) < 3 or len(mine) < 3:
        return Versus("loss", _mean(mine), _mean(theirs)), None, False
    m_old, m_new = statistics.fmean(theirs), statistics.fmean(mine)
    floor = rerun_band(reruns.loss, reruns.n_loss) if reruns is not None else None
    rel = LOSS_BAND_REL if floor is None else max(floor, LOSS_RERUN_FLOOR)
    half = max(LOSS_BAND_SD * max(_sd(theirs), _sd(mine)), rel * abs(m_old), 1e-12)
    band = (m_old - half, m_old + half)
    return Versus("loss", m_new, m_old), band, m_new > band[1]


def _median_step_time(points: Sequence[RunPoint]) -> float | None:
    r = step_rates(points)
    return 1.0 / statistics.median(r) if len(r) >= 3 else None


def compare(
    old_points: Sequence[RunPoint],
    new_points: Sequence[RunPoint],
    *,
    this_run: int | None = None,
    last_run: int | None = None,
    old: Program | None = None,
    new: Program | None = None,
    first_step: tuple[float | None, float | None] = (None, None),
    unit: str = "",
    picked: bool = False,
    reruns: RerunSpread | None = None,
) -> VsLast:
    """The new run against the last at the same steps. `first_step`: the
    (new, old) seconds from each run's start to its first step; `reruns`:
    the spread of the last run's own earlier reruns (diagnose/reruns.py)."""
    o, n = _stepped(old_points), _stepped(new_points)
    changes = tuple(program_changes(old, new)) if old and new else ()
    ttfs = Versus("first step", *first_step) if any(x is not None for x in first_step) else None
    base = VsLast(
        this_run, last_run, changes=changes, picked=picked, first_step=ttfs, reruns=reruns
    )
    w = window(o, n)
    if w is None:
        return base
    ow, nw = _in(o, w), _in(n, w)
    use_thr = (
        sum(p.throughput is not None for p in nw) >= 2
        and sum(p.throughput is not None for p in ow) >= 2
    )
    r_new, r_old = rates(nw, use_thr), rates(ow, use_thr)
    word, test = verdict(r_new, r_old) if r_new and r_old else ("", "no rate to compare")
    rate = Versus((unit or "tok/s") if use_thr else "steps/s", _mean(r_new), _mean(r_old))
    word, test = against_reruns(word, test, rate, reruns)
    loss, band, out = loss_versus(o, n, w, reruns)
    st_new, st_old = _median_step_time(nw), _median_step_time(ow)
    return VsLast(
        this_run,
        last_run,
        step=w[1],
        window=w,
        verdict=word,
        enough=bool(word) and len(r_new) >= MIN_POINTS_ALERT and len(r_old) >= MIN_POINTS_ALERT,
        test=test,
        rate=rate,
        loss=loss,
        step_time=Versus("s/step", st_new, st_old) if st_new or st_old else None,
        first_step=ttfs,
        loss_band=band,
        loss_out=out,
        changes=changes,
        picked=picked,
        n_new=len(r_new),
        n_old=len(r_old),
        reruns=reruns,
    )


# ------------------------------------------------------------------ words


def short_number(x: float | None) -> str:
    """47512 -> '47.5k', 2.3456 -> '2.346', 0.1234 -> '0.123'."""
    if x is None or not math.isfinite(x):
        return "–"
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.1f}M"
    if a >= 1e4:
        return f"{x / 1e3:.1f}k"
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.3g}" if a < 0.01 else f"{x:.3f}" if a < 10 else f"{x:.2f}"


def pct_words(v: Versus) -> str:
    p = v.percent
    return "" if p is None else f"{p:+.0f} %" if abs(p) >= 1 else f"{p:+.1f} %"


def headline(vs: VsLast) -> str:
    """`47.5k tok/s +12 % vs last (42.4k) at step 400` (the rate, else the loss)."""
    at = f" at step {vs.step:,}" if vs.step is not None else ""
    v = vs.rate if vs.rate is not None and vs.rate.new is not None else vs.loss
    if v is None or v.new is None:
        return "no step of this run matched the last one's yet"
    return f"{short_number(v.new)} {v.name} {pct_words(v)} vs last ({short_number(v.old)}){at}"


def figures(vs: VsLast) -> list[str]:
    """Each figure, new vs last: 'loss 2.310 vs 2.350 (-2 %)'."""
    out = []
    for v in (vs.rate, vs.loss, vs.step_time, vs.first_step):
        if v is None or (v.new is None and v.old is None):
            continue
        unit = " s" if v.name == "first step" else ""
        out.append(
            f"{v.name} {short_number(v.new)}{unit} vs {short_number(v.old)}{unit}"
            + (f" ({pct_words(v)})" if v.percent is not None else "")
        )
    return out


def summary(vs: VsLast) -> str:
    """One line: 'run 14 against its last run 12: faster — 47.5k tok/s +12 %
    vs last (42.4k) at step 400; what changed: --bs 32 → 64'."""
    which = "the run picked" if vs.picked else "its last run"
    word = vs.verdict or "too early to tell"
    line = f"run {vs.this_run} against {which} {vs.last_run}: {word} — {headline(vs)}"
    if reruns := reruns_said(vs):
        line += f", {reruns}"
    if vs.loss_out:
        line += ", loss above the last run's band"
    if vs.changes:
        line += "; what changed: " + "; ".join(vs.changes)
    return line


def reruns_said(vs: VsLast) -> str:
    """'within the 3 reruns' spread ±11 %' (or 'beyond'), when the reruns'
    spread judged the rate; else ''."""
    r, v = vs.reruns, vs.rate
    if not vs.verdict or r is None or v is None or v.percent is None:
        return ""
    band = rerun_band(r.rate, r.n_rate)
    if band is None:
        return ""
    inside = abs(v.percent) <= band * 100
    return f"{'within' if inside else 'beyond'} the {r.n_rate} reruns' spread ±{band * 100:.0f} %"


def _reruns_dict(r: RerunSpread | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {
        "runs": list(r.runs),
        "rate_spread_pct": _num(r.rate * 100) if r.rate is not None else None,
        "loss_spread_pct": _num(r.loss * 100) if r.loss is not None else None,
        "rate_reruns": r.n_rate,
        "loss_reruns": r.n_loss,
        "rate_band_pct": _pct(rerun_band(r.rate, r.n_rate)),
        "loss_band_pct": _pct(rerun_band(r.loss, r.n_loss)),
    }


def _pct(x: float | None) -> float | None:
    return None if x is None else _num(x * 100)


def _num(x: float | None) -> float | None:
    return None if x is None or x != x or x in (float("inf"), float("-inf")) else x


def _versus_dict(v: Versus | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {"name": v.name, "new": _num(v.new), "last": _num(v.old), "change_pct": _num(v.percent)}


def vs_last_dict(vs: VsLast | None) -> dict[str, Any] | None:
    """The comparison as facts (doctor-json.md's `vs_last`)."""
    if vs is None:
        return None
    return {
        "this_run": vs.this_run,
        "last_run": vs.last_run,
        "picked": vs.picked,
        "step": vs.step,
        "window": list(vs.window) if vs.window is not None else None,
        "verdict": vs.verdict,
        "enough": vs.enough,
        "test": vs.test,
        "headline": headline(vs),
        "rate": _versus_dict(vs.rate),
        "loss": _versus_dict(vs.loss),
        "step_time": _versus_dict(vs.step_time),
        "first_step": _versus_dict(vs.first_step),
        "loss_band": [_num(x) for x in vs.loss_band] if vs.loss_band is not None else None,
        "loss_out": vs.loss_out,
        "changes": list(vs.changes),
        "readings": {"this": vs.n_new, "last": vs.n_old},
        "reruns": _reruns_dict(vs.reruns),
    }


# A live verdict is said once it has held this many checks in a row (the
# recorder compares every 5 s): on a lent H100 the tok/s of one unchanged
# script moved in stretches of ±15–20 %, and the check on the steps so far
# printed "faster" twice and "slower" once for a rerun of the same code, each
# for a check or a few; doctor's one look at the whole window said "same".
HOLD_CHECKS = 3


@dataclass
class SteadyVerdict:
    """The verdict (and the loss band's word) as said, for one pair of runs:
    a new one replaces it only after HOLD_CHECKS checks in a row agree. The
    figures stay the latest; only the words wait."""

    pair: tuple[int | None, int | None] = (None, None)
    said: tuple[str, bool] = ("", False)
    seen: tuple[str, bool] = ("", False)
    held: int = 0

    def settle(self, vs: VsLast) -> VsLast:
        if (vs.this_run, vs.last_run) != self.pair:  # another run or another last: anew
            self.pair, self.said, self.seen, self.held = (
                (vs.this_run, vs.last_run),
                ("", False),
                ("", False),
                0,
            )
        now = (vs.verdict, vs.loss_out)
        self.held = self.held + 1 if now == self.seen else 1
        self.seen = now
        if self.held >= HOLD_CHECKS:
            self.said = now
        verdict, loss_out = self.said
        if (verdict, loss_out) == now:
            return vs
        return dataclasses.replace(vs, verdict=verdict, loss_out=loss_out)
