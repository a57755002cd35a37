"""The deploy made it worse: the new run against the last run of the same
program (issue 49), once enough matched steps tell. Pure: reads
`Snapshot.vs_last`, which the recorder or doctor set from the history
(diagnose/compare.py made it)."""

from __future__ import annotations

from gputui.diagnose.compare import figures, headline, short_number
from gputui.diagnose.context import Context
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity, VsLast
from gputui.text.untrusted import one_line


def _evidence(vs: VsLast) -> list[str]:
    ev = [f"at step {vs.step:,}: " + ", ".join(figures(vs))] if vs.step is not None else []
    if vs.window is not None:
        ev.append(
            f"over steps {vs.window[0]:,}–{vs.window[1]:,} of both runs"
            f" ({vs.n_new} and {vs.n_old} readings): {vs.test}"
        )
    which = "the run you picked" if vs.picked else "the last run of the same program"
    ev.append(f"against run {vs.last_run} in the history ({which})")
    if vs.changes:
        ev.append("what changed: " + one_line("; ".join(vs.changes), 200))
    return ev


@rule(Kind("slower_than_last", specificity=208, cause="slower_than_last", alerts=True))
def rule_slower_than_last(ctx: Context) -> Finding | None:
    """Slower than the last run beyond both runs' noise, at the same steps."""
    vs = ctx.snap.vs_last
    if vs is None or not vs.enough or vs.verdict != "slower":
        return None
    return Finding(
        kind="slower_than_last",
        severity=Severity.WARNING,
        title=f"the deploy made it slower: {headline(vs)}",
        evidence=_evidence(vs),
        fix="compare the two with `gputui history --compare "
        f"{vs.last_run} {vs.this_run}`; relaunch the last one's command to go back",
    )


@rule(Kind("loss_above_last", specificity=209, cause="loss_above_last", alerts=True))
def rule_loss_above_last(ctx: Context) -> Finding | None:
    """The loss above the last run's band at the same steps."""
    vs = ctx.snap.vs_last
    if vs is None or not vs.enough or not vs.loss_out or vs.loss is None or vs.loss_band is None:
        return None
    return Finding(
        kind="loss_above_last",
        severity=Severity.WARNING,
        title=f"the deploy made the loss worse: {short_number(vs.loss.new)} at step"
        f" {vs.step or 0:,}, above the last run's band"
        f" {short_number(vs.loss_band[0])}–{short_number(vs.loss_band[1])}",
        evidence=_evidence(vs),
        fix="compare the two with `gputui history --compare "
        f"{vs.last_run} {vs.this_run}`; relaunch the last one's command to go back",
    )
