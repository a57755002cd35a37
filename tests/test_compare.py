"""The new run against the last one (issue 49): the pure comparison —
which program a run ran, what changed, the matched window, the verdict
(Welch on block means of per-step rates), the loss band — and the rules
that alert on it."""

from __future__ import annotations

import random

import pytest

from gputui.diagnose import diagnose
from gputui.diagnose.compare import (
    RunPoint,
    compare,
    figures,
    headline,
    program_changes,
    same_program,
    script_of,
    t_quantile,
    verdict,
)
from gputui.model import Program, Snapshot

RERUNS = 20


def noisy_run(
    n: int, rate: float, seed: int, *, noise: float = 0.05, smooth: float = 0.0, loss0: float = 2.0
) -> list[RunPoint]:
    """A run's points: tok/s around `rate` (its first 10 steps at half:
    warm-up), each step's line at the time its rate says, a loss that falls
    with noise. `smooth`: the program prints an average of its last steps
    (neighbouring readings alike)."""
    rnd = random.Random(seed)
    pts, t, shown = [], 1000.0, None
    for s in range(n):
        r = rate * (1 + rnd.gauss(0, noise)) * (0.5 if s < 10 else 1.0)
        shown = r if shown is None or not smooth else smooth * shown + (1 - smooth) * r
        t += 2048 / r
        pts.append(RunPoint(s, t, loss0 * 0.998**s + rnd.gauss(0, 0.02), shown))
    return pts


@pytest.mark.parametrize("smooth", [0.0, 0.9])
def test_no_false_slower_over_20_reruns_of_the_same_code(smooth: float) -> None:
    """Twenty pairs of runs of one program, each with its own noise: never
    "slower" (nor "faster"); the verdict is "same" in each."""
    words = [
        compare(
            noisy_run(300, 42_400, 2 * i, smooth=smooth),
            noisy_run(300, 42_400, 2 * i + 1, smooth=smooth),
        ).verdict
        for i in range(RERUNS)
    ]
    assert words == ["same"] * RERUNS


@pytest.mark.parametrize(("factor", "word"), [(0.9, "slower"), (1.12, "faster"), (0.96, "slower")])
def test_a_slower_or_faster_variant_is_told_in_each_of_20_pairs(factor: float, word: str) -> None:
    for i in range(RERUNS):
        vs = compare(noisy_run(300, 42_400, 2 * i), noisy_run(300, 42_400 * factor, 2 * i + 1))
        assert vs.verdict == word, (i, vs.test)
        assert vs.enough


def test_the_noise_is_each_runs_own_not_a_fixed_percentage() -> None:
    """5 % slower is within the noise of runs whose rate swings by 40 %, and
    far beyond it for runs that hold steady within 0.5 %."""
    wild = compare(noisy_run(200, 1000, 1, noise=0.4), noisy_run(200, 950, 2, noise=0.4))
    calm = compare(noisy_run(200, 1000, 1, noise=0.005), noisy_run(200, 950, 2, noise=0.005))
    assert wild.verdict == "same"
    assert calm.verdict == "slower"


def test_headline_and_figures_at_the_same_step() -> None:
    old = noisy_run(800, 42_400, 1, noise=0.01)
    new = noisy_run(401, 47_500, 2, noise=0.01)
    vs = compare(old, new, this_run=9, last_run=7, unit="tok/s", first_step=(41.0, 38.0))
    assert vs.step == 400  # the last step both reached
    assert vs.verdict == "faster"
    text = headline(vs)
    assert (
        text.startswith("47.")
        and "k tok/s +12 % vs last (42." in text
        and text.endswith("at step 400")
    )
    assert any(f.startswith("first step 41.0 s vs 38.0 s") for f in figures(vs))
    assert vs.step_time is not None and vs.step_time.new < vs.step_time.old


def test_too_few_matched_steps_is_no_verdict() -> None:
    vs = compare(noisy_run(300, 1000, 1), noisy_run(6, 1000, 2))
    assert vs.verdict == "" and not vs.enough


def test_rates_from_line_times_when_the_log_prints_none() -> None:
    """No tok/s in the log: steps a second from the lines' arrival; lines a
    catch-up read stamped all at once (not timed) say nothing."""

    def bare(pts: list[RunPoint]) -> list[RunPoint]:
        return [RunPoint(p.step, p.t, p.loss, None) for p in pts]

    vs = compare(bare(noisy_run(300, 1000, 1)), bare(noisy_run(300, 800, 2)))
    assert vs.rate is not None and vs.rate.name == "steps/s"
    assert vs.verdict == "slower"
    untimed = [RunPoint(p.step, 5.0, p.loss, None, timed=False) for p in noisy_run(300, 1000, 1)]
    assert compare(untimed, bare(noisy_run(300, 800, 2))).verdict == ""


def test_loss_leaves_the_band() -> None:
    old = noisy_run(300, 1000, 1)
    worse = noisy_run(300, 1000, 2, loss0=2.6)
    same = noisy_run(300, 1000, 3)
    assert compare(old, worse).loss_out
    assert not compare(old, same).loss_out


def plateau_run(n: int, rate: float, loss: float, sd: float, seed: int) -> list[RunPoint]:
    """A run's lines as bench/gpu/train_torch.py prints them on an H100
    (`step N | loss 10.3881 | tok/s 364560`): a loss on its plateau, four
    places, its step-to-step noise `sd`; tok/s ±3 %."""
    rnd = random.Random(seed)
    pts, t = [], 1000.0
    for s in range(n):
        r = rate * (1 + rnd.gauss(0, 0.03))
        t += 8192 / r
        pts.append(RunPoint(s, t, round(loss + rnd.gauss(0, sd), 4), round(r)))
    return pts


def test_a_tiny_loss_spread_is_no_band_to_leave() -> None:
    """Round 10 on an H100: both runs' loss at 10.38 with spreads of a few
    thousandths — a band of ± 0.01 (0.1 % of the loss), and a deploy whose
    loss sat 0.2 % higher at the same steps was told "the deploy made the
    loss worse: 10.4 … above the last run's band 10.4–10.4". The band is
    never narrower than 1 % of the loss; a loss 3 % higher still leaves it."""
    old = plateau_run(400, 366_600, 10.3838, 0.003, 1)  # batch 16
    near = plateau_run(400, 154_700, 10.405, 0.006, 2)  # batch 4: noisier, +0.2 %
    vs = compare(old, near)
    assert vs.loss_band is not None and vs.loss is not None
    assert not vs.loss_out, (vs.loss, vs.loss_band)
    assert vs.loss_band[1] - vs.loss_band[0] >= 0.02 * 10.38
    worse = plateau_run(400, 154_700, 10.70, 0.006, 3)  # +3 %: the deploy's doing
    assert compare(old, worse).loss_out
    for seed in range(RERUNS):  # reruns of the same code: never out
        again = plateau_run(400, 366_600, 10.3838, 0.003, 100 + seed)
        assert not compare(old, again).loss_out


def test_t_quantile_matches_the_table() -> None:
    for df, want in ((3, 5.841), (7, 3.499), (14, 2.977), (30, 2.750)):
        assert abs(t_quantile(0.995, df) - want) / want < 0.01


def test_identical_readings_are_same_and_any_difference_is_told() -> None:
    assert verdict([5.0] * 16, [5.0] * 16)[0] == "same"
    assert verdict([4.0] * 16, [5.0] * 16)[0] == "slower"


def test_script_of_argv() -> None:
    assert script_of(["/usr/bin/python3.11", "-u", "train.py", "--bs", "8"]) == "train.py"
    assert script_of(["python", "-m", "pkg.train", "--x"]) == "-m pkg.train"
    assert script_of(["torchrun", "--nproc_per_node", "8", "train.py"]) == "train.py"
    assert script_of(["torchrun", "--standalone", "train.py", "--bs", "8"]) == "train.py"
    assert script_of(["bash", "start.sh"]) == "start.sh"
    assert script_of(["env", "A=1", "python3", "x/train.py"]) == "x/train.py"
    assert script_of(["./run-training"]) == "./run-training"


def test_same_program_and_what_changed() -> None:
    old = Program(("python", "train.py", "--bs", "32", "--lr=3e-4"), "/w", "train.py", 100.0, ())
    new = Program(
        ("python", "-u", "train.py", "--bs", "64", "--lr=3e-4", "--compile"),
        "/w",
        "train.py",
        400.0,
        ("PYTHONUNBUFFERED=1",),
    )
    other = Program(("python", "eval.py"), "/w", "eval.py")
    assert same_program(old, new) and not same_program(old, other)
    assert program_changes(old, new) == [
        "--bs 32 → 64",
        "--compile added",
        "env PYTHONUNBUFFERED=1 set",
        "train.py modified (5 min later)",
    ]
    assert program_changes(old, old) == []


def test_slower_than_last_alerts_only_with_enough_steps() -> None:
    old = noisy_run(300, 42_400, 1)
    snap = Snapshot(time=0.0, target="t")
    snap.vs_last = compare(old, noisy_run(300, 38_000, 2), this_run=2, last_run=1, unit="tok/s")
    kinds = [f.kind for f in diagnose(snap, 0.0)]
    assert "slower_than_last" in kinds
    f = next(f for f in diagnose(snap, 0.0) if f.kind == "slower_than_last")
    assert f.title.startswith("the deploy made it slower: 38.")
    assert "--compare 1 2" in f.fix
    snap.vs_last = compare(old, noisy_run(15, 38_000, 2))  # a few steps: too early
    assert "slower_than_last" not in [f.kind for f in diagnose(snap, 0.0)]
    snap.vs_last = compare(old, noisy_run(300, 42_400, 3))
    assert not {"slower_than_last", "loss_above_last"} & {f.kind for f in diagnose(snap, 0.0)}


def test_loss_above_last_alerts() -> None:
    snap = Snapshot(time=0.0, target="t")
    snap.vs_last = compare(noisy_run(300, 1000, 1), noisy_run(300, 1000, 2, loss0=2.6))
    f = next(f for f in diagnose(snap, 0.0) if f.kind == "loss_above_last")
    assert "above the last run's band" in f.title


def test_lines_of_one_batch_count_once_for_the_step_rate() -> None:
    """Ten steps a second, arriving two at a time every 0.2 s (the log's
    batches share one time): 10 steps/s, not 5 (the pair's first line
    right after the last batch) nor infinite."""
    pts = [RunPoint(s, 100.0 + 0.2 * (s // 2), None, None) for s in range(40)]
    from gputui.diagnose.compare import step_rates

    assert {round(r, 6) for r in step_rates(pts)} == {10.0}


def test_doctor_json_and_text_carry_the_comparison_with_documented_keys() -> None:
    """doctor's `snapshot.vs_last`: every key named in doctor-json.md; the
    text report's line."""
    from pathlib import Path

    from gputui.doctor.report import doctor_dict, render_text

    snap = Snapshot(time=0.0, target="t")
    old = Program(("python", "train.py", "--bs", "32"), script="train.py")
    new = Program(("python", "train.py", "--bs", "64"), script="train.py")
    snap.vs_last = compare(
        noisy_run(300, 42_400, 1),
        noisy_run(300, 38_000, 2),
        this_run=2,
        last_run=1,
        old=old,
        new=new,
        unit="tok/s",
        first_step=(3.0, 2.0),
    )
    doc = doctor_dict({}, snap, diagnose(snap, 0.0), now=0.0)
    vs = doc["snapshot"]["vs_last"]
    assert vs["verdict"] == "slower" and vs["rate"]["change_pct"] < -5
    assert vs["changes"] == ["--bs 32 → 64"]

    def keys(x: object) -> set[str]:
        if isinstance(x, dict):
            return set(x) | {k for v in x.values() for k in keys(v)}
        if isinstance(x, list):
            return {k for v in x for k in keys(v)}
        return set()

    text = (Path(__file__).parent.parent / "src/gputui/doctor/doctor-json.md").read_text()
    assert sorted(k for k in keys(vs) if f"`{k}`" not in text) == []
    report = render_text({}, snap, diagnose(snap, 0.0), now=0.0)
    assert "vs last run  run 2 against its last run 1: slower — 38." in report
    assert "the deploy made it slower" in report


def test_live_points_count_only_when_they_are_this_runs() -> None:
    """Right after a relaunch the monitor's counter may still be the last
    run's: its points are never taken for the new run's (a bench rerun read
    'same, +0.0 %' for a run 10 % slower: the last run against itself)."""
    from gputui.diagnose.compare import live_of_run

    old_live = noisy_run(200, 1000, 1)  # the ring: the previous run's lines
    mine = noisy_run(200, 900, 2)
    # no step of this run stored yet: the counter restarted 12 s before the
    # recorder took the new log as a run — the previous run's restart
    assert live_of_run([], old_live, 988.0, 1000.0) == []
    assert live_of_run([], mine, 998.0, 1000.0) == mine  # its own, 2 s before
    assert live_of_run([], mine, 1030.0, 1000.0) == []  # a newer run's, 30 s after
    # stored points: the live line at the last stored step must be the same line
    assert live_of_run(mine[:50], mine, 998.0, 1000.0) == mine
    assert live_of_run(mine[:50], old_live, 998.0, 1000.0) == []
    assert live_of_run(mine[:50], mine[100:], 998.0, 1000.0) == mine[100:]  # the ring moved on


def test_a_live_verdict_is_said_once_it_holds_for_a_few_checks() -> None:
    """On a lent H100 a rerun of the same code was printed 'faster', 'same',
    'faster', 'same', 'slower', 'same' check by check; a word now changes
    only after HOLD_CHECKS checks agree, the figures stay the latest."""
    from gputui.diagnose.compare import HOLD_CHECKS, SteadyVerdict
    from gputui.model import VsLast

    steady = SteadyVerdict()
    raw = ["same", "same", "faster", "same", "same", "same", "slower", "same", "slower"]
    raw += ["slower"] * HOLD_CHECKS
    said = [
        steady.settle(VsLast(this_run=2, last_run=1, verdict=v, step=i)) for i, v in enumerate(raw)
    ]
    assert [v.verdict for v in said] == [""] * 5 + ["same"] * 5 + ["slower"] * 2
    assert [v.step for v in said] == list(range(len(raw)))  # the figures are each check's own
    # another run starts anew: nothing said until it holds
    assert steady.settle(VsLast(this_run=3, last_run=2, verdict="slower")).verdict == ""


def test_steps_unread_when_neither_the_history_nor_the_rings_hold_them() -> None:
    """The log is read before comparing only when the steps both runs
    reached are missing: the rings at or past the last run's end, the
    history short of it (once for a pair: after the read it holds them)."""
    from gputui.diagnose.compare import steps_unread

    def pts(a: int, b: int) -> list[RunPoint]:
        return [RunPoint(s, float(s)) for s in range(a, b + 1)]

    last = pts(1, 1047)
    assert steps_unread([], pts(1161, 1760), last)  # the H100's doctor: nothing shared
    assert steps_unread(pts(1, 200), pts(1047, 1646), last)  # 201-1046 in neither
    assert not steps_unread(pts(1, 200), pts(300, 899), last)  # a hole; both have shared steps
    assert not steps_unread([], pts(1, 600), last)  # the rings hold the run from its start
    assert not steps_unread([], pts(400, 999), last)
    assert not steps_unread(pts(1, 1047), pts(1161, 1760), last)  # all shared steps stored
    assert not steps_unread([], [], last) and not steps_unread([], pts(900, 1000), [])


# ------------------------------------------------------------------ reruns' spread


def h100_reruns(
    rates: list[float], seed: int, losses: list[float] | None = None
) -> list[tuple[int, list[RunPoint]]]:
    """Runs of one unchanged command as the history holds them, oldest first
    (ids 1, 2, …), each `plateau_run` at its own rate and loss (10.38)."""
    losses = losses or [10.38] * len(rates)
    return [
        (i + 1, plateau_run(400, r, loss, 0.006, seed + i))
        for i, (r, loss) in enumerate(zip(rates, losses, strict=True))
    ]


def test_a_rerun_within_the_reruns_spread_is_same_and_a_real_drop_is_told() -> None:
    """This morning on an H100 two reruns of the same code (batch 4) read
    154.7k vs 149.4k tok/s, +3.5 %: a run's own spread (3 % a step here)
    calls that "faster" at t = +16. With three earlier reruns in the history
    that moved ±2–4 % from one to the next, +3.5 % is within their spread —
    "same", said so — and a deploy 20 % slower is still "slower"."""
    from gputui.diagnose.reruns import spread_of

    reruns = h100_reruns([151_000, 146_900, 152_300, 149_400], 10)
    spread = spread_of(reruns)
    assert spread is not None and spread.runs == (1, 2, 3, 4) and spread.n_rate == 3
    assert spread.rate is not None and 0.015 < spread.rate < 0.05
    last = reruns[-1][1]
    rerun = plateau_run(400, 154_700, 10.38, 0.006, 99)
    assert compare(last, rerun).verdict == "faster"  # the run's own noise alone
    vs = compare(last, rerun, this_run=5, last_run=4, reruns=spread, unit="tok/s")
    assert vs.verdict == "same", vs.test
    assert "within the 3 reruns' spread ±10.0 %" in vs.test
    from gputui.diagnose.compare import summary

    assert summary(vs).endswith(", within the 3 reruns' spread ±10 %")
    from pathlib import Path

    from gputui.diagnose.compare import vs_last_dict

    facts = vs_last_dict(vs)
    assert facts is not None and facts["reruns"]["runs"] == [1, 2, 3, 4]
    assert facts["reruns"]["rate_band_pct"] == 10.0
    doc = (Path(__file__).parent.parent / "src/gputui/doctor/doctor-json.md").read_text()
    assert [k for k in facts["reruns"] if f"`{k}`" not in doc] == []
    for factor in (0.8, 1.2):  # ±20 %: beyond any rerun band (RERUN_BAND_MAX)
        real = compare(last, plateau_run(400, 149_400 * factor, 10.38, 0.006, 98), reruns=spread)
        assert real.verdict == ("slower" if factor < 1 else "faster"), real.test
        assert "beyond the 3 reruns' spread" in real.test


def test_reruns_of_the_same_code_with_the_machines_spread_are_same() -> None:
    """Twenty trials: four runs of one program whose rate the machine moves
    by ±2.5 % from run to run (each run's own noise 3 % a step), then a
    rerun. The run's own spread calls most reruns slower or faster; with
    the reruns' spread none is slower."""
    from gputui.diagnose.reruns import spread_of

    rnd = random.Random(7)
    before, after = [], []
    for i in range(RERUNS):
        rates = [149_400 * (1 + rnd.gauss(0, 0.025)) for _ in range(5)]
        runs = h100_reruns(rates[:4], 100 * i)
        new = plateau_run(400, rates[4], 10.38, 0.006, 100 * i + 50)
        before.append(compare(runs[-1][1], new).verdict)
        after.append(compare(runs[-1][1], new, reruns=spread_of(runs)).verdict)
    assert before.count("same") < RERUNS // 2, before
    assert after.count("slower") == 0, after


def test_fewer_than_two_reruns_keep_the_verdict_as_it_was() -> None:
    """One earlier rerun (two runs of the same code) measures one change:
    no spread — the verdict, its words and the loss band are as without."""
    from gputui.diagnose.reruns import spread_of

    runs = h100_reruns([151_000, 149_400], 10)
    spread = spread_of(runs)
    assert spread is not None and spread.rate is None and spread.n_rate == 1
    assert spread_of(runs[:1]) is None
    new = plateau_run(400, 154_700, 10.38, 0.006, 99)
    a, b = compare(runs[-1][1], new), compare(runs[-1][1], new, reruns=spread)
    assert (a.verdict, a.test, a.loss_band, a.loss_out) == (
        b.verdict,
        b.test,
        b.loss_band,
        b.loss_out,
    )
    assert a.verdict == "faster"


def test_the_loss_band_is_the_reruns_spread_when_known() -> None:
    """Without reruns the band is never narrower than ±1 % of the loss.
    Reruns whose loss moved ±1.5 % from one to the next widen it: a loss
    2 % higher is theirs. Reruns within ±0.05 % of each other narrow it
    (to ±0.5 % at least): a loss 0.8 % higher is the deploy's."""
    from gputui.diagnose.reruns import spread_of

    wide = h100_reruns([150_000] * 4, 20, [10.38, 10.54, 10.38, 10.53])
    up2 = plateau_run(400, 150_000, 10.53 * 1.02, 0.006, 77)
    assert compare(wide[-1][1], up2).loss_out  # without reruns: past ±1 %
    vs = compare(wide[-1][1], up2, reruns=spread_of(wide))
    assert not vs.loss_out, vs.loss_band
    calm = h100_reruns([150_000] * 4, 30)
    up08 = plateau_run(400, 150_000, 10.38 * 1.008, 0.006, 78)
    assert not compare(calm[-1][1], up08).loss_out  # without reruns: within ±1 %
    vs = compare(calm[-1][1], up08, reruns=spread_of(calm))
    assert vs.loss_out, vs.loss_band
