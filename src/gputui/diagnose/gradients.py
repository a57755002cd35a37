"""A run that learns nothing though no "loss nan" is printed: the gradient
norm NaN on every step (`grad_nan`: Megatron's "grad norm: nan |", the HF
Trainer's 'grad_norm': nan), and an fp16 loss scale that collapsed
(`loss_scale_collapsed`: apex's "Gradient overflow. Skipping step, loss
scaler 0 reducing loss scale to 8.16e-202", DeepSpeed's "OVERFLOW! Rank 0
Skipping step. Attempted loss scale: 1, reducing to 1" and "Current loss
scale already at minimum"). Pure.

An occasional NaN gradient norm or an overflow in the first steps is how
dynamic loss scaling finds its scale (the step is skipped, the scale
halves, training goes on): quiet. Only a NaN norm on several steps in a
row with no finite one between, or a scale at 1 or below (16 halvings of
fp16's 65536 without one step taken), is a dead run."""

from __future__ import annotations

import math
import re

from gputui.diagnose.context import Context
from gputui.diagnose.evidence import short
from gputui.diagnose.registry import Kind, rule
from gputui.model import Finding, Severity
from gputui.text.numbers import bounded_float
from gputui.text.untrusted import one_line

RECENT = 80  # the lines read
NAN_IN_A_ROW = 3  # this many NaN norms, the newest last, none finite between
SCALE_DEAD = 1.0  # a loss scale at or below this is a collapsed one
OVERFLOWS_DEAD = 2  # ... said at least this often among the lines read

# "grad norm: nan |" (Megatron), "'grad_norm': nan" (HF Trainer), "grad_norm:
# 0.3922 (nan)" (the step's own norm, then a running mean: its own is read)
_NORM = re.compile(
    r"grad[ _]norm['\"]?\s*[:=]\s*(nan|-?nan|inf|-?inf|-?\d{1,30}(?:\.\d{1,30})?(?:[eE][-+]?\d{1,4})?)",
    re.I,
)
_NORM_WORDS = ("grad norm", "grad_norm", "Grad norm", "Grad_norm")
_ITERATION = re.compile(r"\b(?:iteration|iter|step|global_step)\b[\s:#=]*(\d+)", re.I)

# the scale after an overflow: apex "reducing loss scale to X", DeepSpeed
# "Attempted loss scale: A, reducing to B", its fused optimizer "Reducing
# dynamic loss scale from A to B", torch.cuda.amp has no line of its own
_SCALE = re.compile(
    r"reducing loss scale to ([-+\d.eE]{1,40})"
    r"|Attempted loss scale: [-+\d.eE]{1,40}, reducing to ([-+\d.eE]{1,40})"
    r"|Reducing dynamic loss scale from [-+\d.eE]{1,40} to ([-+\d.eE]{1,40})"
)
_SCALE_WORDS = ("loss scale to", "reducing to", "loss scale from")
_AT_MINIMUM = "Current loss scale already at minimum"


_NOT_FINITE_WORDS = ("nan", "NaN", "inf", "Inf")  # one of them in every non-finite norm


def _bad_norms(ctx: Context) -> list[tuple[str, float]]:
    """(line, norm) of the newest lines that report a non-finite gradient
    norm, newest first, back to the first finite one (read from the newest
    line back: a healthy run's newest norm ends it at once)."""
    if not ctx.recent_hold(RECENT, _NORM_WORDS) or not ctx.recent_hold(RECENT, _NOT_FINITE_WORDS):
        return []
    out: list[tuple[str, float]] = []
    for ln in reversed(ctx.recent_lines(RECENT)):
        if "norm" not in ln:
            continue
        m = _NORM.search(ln)
        v = bounded_float(m.group(1), finite=False) if m is not None else None
        if v is None:
            continue
        if math.isfinite(v):
            break
        out.append((ln, v))
    return out


@rule(
    Kind(
        "grad_nan",
        specificity=62,
        cause="loss",
        stage=2,
        alerts=True,
        # a NaN loss, or the collapsed scale that skips every step, says it first
        defers_to=("loss_nan", "loss_scale_collapsed"),
    )
)
def rule_grad_nan(ctx: Context) -> Finding | None:
    """The gradient norm is NaN (or inf) on the last NAN_IN_A_ROW steps
    that report one, none finite between: the optimizer steps on garbage
    (or skips every step), whatever the loss column says."""
    norms = _bad_norms(ctx)
    bad = len(norms)
    if bad < NAN_IN_A_ROW:
        return None
    first = norms[-1][0]
    it = _ITERATION.search(first)
    since = f" since iteration {it.group(1)}" if it is not None else ""
    what = "NaN" if math.isnan(norms[0][1]) else "inf"
    return Finding(
        kind="grad_nan",
        severity=Severity.ERROR,
        title=(
            f"gradient norm is {what} on every step{since} ({bad} in a row): the run learns nothing"
        ),
        evidence=[
            f"the first: {short(one_line(first, 400), 240)}",
            f"the last: {short(one_line(norms[0][0], 400), 240)}",
        ],
        fix=(
            "stop it and resume from a checkpoint before that iteration with a lower learning "
            "rate or gradient clipping; in bf16/fp16 look for an overflow (the loss scale), "
            "in the data for a bad batch"
        ),
    )


def _scales(ctx: Context) -> list[tuple[str, float]]:
    if not ctx.recent_hold(RECENT, _SCALE_WORDS):
        return []
    out = []
    for ln in ctx.recent_lines(RECENT):
        if "reducing" not in ln.lower():
            continue
        m = _SCALE.search(ln)
        if m is None:
            continue
        v = bounded_float(next(g for g in m.groups() if g is not None), finite=False)
        if v is not None:
            out.append((ln, v))
    return out


@rule(Kind("loss_scale_collapsed", specificity=63, cause="loss", stage=3, alerts=True))
def rule_loss_scale_collapsed(ctx: Context) -> Finding | None:
    """fp16's dynamic loss scale fell to SCALE_DEAD or below after overflow
    upon overflow (apex, DeepSpeed), or DeepSpeed gave up ("already at
    minimum"): every step is skipped, the weights no longer change."""
    scales = _scales(ctx)
    gave_up = ctx.recent_hold(RECENT, (_AT_MINIMUM,))
    low = [s for s in scales if s[1] <= SCALE_DEAD]
    if not gave_up and (len(low) < OVERFLOWS_DEAD or scales[-1][1] > SCALE_DEAD):
        return None
    ev = []
    if scales:
        ev.append(
            f"{len(scales)} overflows in its last lines, the scale down to {scales[-1][1]:.3g}: "
            f"{short(one_line(scales[-1][0], 400), 200)}"
        )
    if gave_up:
        ev.append(f"the log: {_AT_MINIMUM} - cannot decrease scale anymore")
    scale = f" to {scales[-1][1]:.3g}" if scales else ""
    return Finding(
        kind="loss_scale_collapsed",
        severity=Severity.ERROR,
        title=(
            f"fp16 loss scale collapsed{scale}: a gradient overflow on every step, each "
            "step skipped — the run learns nothing"
        ),
        evidence=ev,
        fix=(
            "the gradients are inf/NaN (not a too-large scale): resume from a checkpoint "
            "before the overflows began with a lower learning rate or gradient clipping, or "
            "train in bf16 (no loss scale); check the data and the model's fp16 layers"
        ),
    )
