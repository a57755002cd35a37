"""Training metrics (step, loss, throughput) from log lines. Pure, no I/O.

`MetricParser.parse(line, now)` tries the user's regexes first, then the
presets in PRESET_NAMES order (most specific first, "generic" last; no
"sticky" reordering, so a tqdm bar glued to an HF Trainer dict is still read
by the HF preset). Lines may still carry ANSI colour
codes; they are stripped here too.

Units: "tok/s", "it/s", "samples/s"; figures a framework documents as per
GPU are marked "tok/s/gpu" (Megatron `tokens/sec/gpu` and `tgs`, torchtitan
`tps`), so the number is never mistaken for the whole job's rate. A tqdm
`s/it` rate is inverted to it/s; tqdm's `?it/s` is unknown (None). nanoGPT
and Megatron without a token rate give it/s from their per-iteration time; a
tokens-per-second field written in the same line always wins over that.
A loss of `nan`/`inf` is kept as float nan/inf: a diverged run is news.
For tqdm/Lightning bars, `step` is the bar's counter (per epoch in Lightning).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from gputui.collect.logtail import strip_ansi
from gputui.errors import ConfigError
from gputui.model import MetricPoint
from gputui.text.numbers import bounded_int

# (step, loss, throughput, unit)
Found = tuple[int | None, float | None, float | None, str]

_F = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf|NaN|Inf"
_THOUSANDS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def _whole(s: str) -> int | None:
    """A step from a log line: None for 5,000 digits (int() would raise and
    the line's loss would be lost with it) or a digit that is not ASCII."""
    return bounded_int(s, max_digits=19)


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def _rate(value: float, unit: str) -> tuple[float | None, str]:
    """Normalise a `<value> <unit>` rate: `s/it` -> it/s, SI prefixes applied."""
    u = unit.strip()
    if u.startswith("s/"):
        base = u[2:]
        return (1.0 / value if value > 0 else None), _unit_name(base)
    base = u[:-2] if u.endswith("/s") else u
    return value, _unit_name(base)


_UNIT_NAMES = {
    "it": "it/s",
    "tok": "tok/s",
    "tokens": "tok/s",
    "token": "tok/s",
    "samples": "samples/s",
    "sample": "samples/s",
    "ex": "samples/s",
    "examples": "samples/s",
}


def _unit_name(base: str) -> str:
    return _UNIT_NAMES.get(base.lower(), base + "/s")


# ------------------------------------------------------------------ presets

_TITAN_RE = re.compile(r"\bstep:\s*(\d+)\s+loss:\s*(" + _F + r")")
_TITAN_TPS_RE = re.compile(r"\btps:\s*(" + _THOUSANDS + r")")


def _torchtitan(line: str) -> Found | None:
    if "step:" not in line or "loss:" not in line:
        return None
    m = _TITAN_RE.search(line)
    if not m:
        return None
    t = _TITAN_TPS_RE.search(line)
    return (
        _whole(m.group(1)),
        float(m.group(2)),
        _num(t.group(1)) if t else None,
        "tok/s/gpu" if t else "",
    )


_MEG_ITER_RE = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|")
_MEG_LOSS_RE = re.compile(r"\|\s*lm loss:\s*(" + _F + r")")
_MEG_TOKGPU_RE = re.compile(r"\|\s*tokens/sec/gpu:\s*(" + _THOUSANDS + r")")
_MEG_TGS_RE = re.compile(r"\(tgs\):\s*(" + _THOUSANDS + r")")
_MEG_SAMPLES_RE = re.compile(r"\|\s*samples per second:\s*(" + _THOUSANDS + r")")
_MEG_MS_RE = re.compile(r"elapsed time per iteration \(ms\):\s*(" + _THOUSANDS + r")")


def _megatron(line: str) -> Found | None:
    if "iteration" not in line or "|" not in line:
        return None
    m = _MEG_ITER_RE.search(line)
    if not m:
        return None
    loss_m = _MEG_LOSS_RE.search(line)
    thr: float | None = None
    unit = ""
    if (t := _MEG_TOKGPU_RE.search(line)) or (t := _MEG_TGS_RE.search(line)):
        thr, unit = _num(t.group(1)), "tok/s/gpu"
    elif t := _MEG_SAMPLES_RE.search(line):
        thr, unit = _num(t.group(1)), "samples/s"
    elif t := _MEG_MS_RE.search(line):
        ms = _num(t.group(1))
        if ms > 0:
            thr, unit = 1000.0 / ms, "it/s"
    return _whole(m.group(1)), float(loss_m.group(1)) if loss_m else None, thr, unit


_NANO_ITER_RE = re.compile(r"\biter (\d+): loss (" + _F + r"), time (" + _F + r")ms")
_NANO_EVAL_RE = re.compile(r"\bstep (\d+): train loss (" + _F + r")")
_MINGPT_RE = re.compile(r"\biter_dt (" + _F + r")ms; iter (\d+): train loss (" + _F + r")")


def _nanogpt(line: str) -> Found | None:
    if "iter" in line:
        m = _NANO_ITER_RE.search(line)
        if m:
            ms = float(m.group(3))
            return (
                _whole(m.group(1)),
                float(m.group(2)),
                1000.0 / ms if ms > 0 else None,
                "it/s" if ms > 0 else "",
            )
        m = _MINGPT_RE.search(line)
        if m:
            ms = float(m.group(1))
            return (
                _whole(m.group(2)),
                float(m.group(3)),
                1000.0 / ms if ms > 0 else None,
                "it/s" if ms > 0 else "",
            )
    if "train loss" in line:
        m = _NANO_EVAL_RE.search(line)
        if m:
            return _whole(m.group(1)), float(m.group(2)), None, ""
    return None


_DS_STEP_RE = re.compile(r"\bglobal_step=(\d+)")
_DS_CURR_RE = re.compile(r"\bCurrSamplesPerSec=(" + _F + r")")
_DS_PIPE_RE = re.compile(
    r"\bsteps: (\d+) loss: (" + _F + r") iter time \(s\): (" + _F + r") samples/sec: (" + _F + r")"
)


def _deepspeed(line: str) -> Found | None:
    if "SamplesPerSec" in line:
        m = _DS_STEP_RE.search(line)
        c = _DS_CURR_RE.search(line)
        if m or c:
            return (
                _whole(m.group(1)) if m else None,
                None,
                float(c.group(1)) if c else None,
                "samples/s" if c else "",
            )
    if "samples/sec:" in line and "steps:" in line:
        m = _DS_PIPE_RE.search(line)
        if m:
            return _whole(m.group(1)), float(m.group(2)), float(m.group(4)), "samples/s"
    return None


# `(?<!\d)\d{1,19}`: from where no digit stands before, so a run of digits is
# passed over in linear time (`\d+` from every position was quadratic: 1 s a
# line of 4 KiB of digits)
_TQDM_RE = re.compile(
    r"(?<!\d)(\d{1,19})/(\d{1,19}|\?)\s*\[[^\]\[<]*<[^\]\[,]*,\s*(?:(\?)|("
    + _F
    + r")\s*([kMG]?))\s*"
    r"((?:s/)?[A-Za-z]+(?:/s)?)"
)
_TQDM_LOSS_RE = re.compile(r"(?:^|[\s,])(?:train[_/])?loss(?:_step)?=(" + _F + r")")
_SI = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def _tqdm(line: str) -> Found | None:
    if "[" not in line or "/" not in line:
        return None
    matches = list(_TQDM_RE.finditer(line))
    if not matches:
        return None
    m = matches[-1]  # the newest bar when several were glued together
    base = m.group(6).removeprefix("s/").removesuffix("/s")
    if base.lower() not in _UNIT_NAMES:
        return None  # a download/copy bar (B/s, MB/s, file/s): not training progress
    step = _whole(m.group(1))
    thr: float | None = None
    unit = ""
    if m.group(3) is None and m.group(4) is not None:
        raw_unit = m.group(6)
        if "/" in raw_unit:
            thr, unit = _rate(float(m.group(4)) * _SI[m.group(5)], raw_unit)
    elif m.group(3) is not None:
        unit = _unit_name(m.group(6).replace("/s", "").replace("s/", ""))
    loss_m = _TQDM_LOSS_RE.search(line, m.end())
    return step, float(loss_m.group(1)) if loss_m else None, thr, unit if thr is not None else ""


_HF_KV_RE = re.compile(r"'(\w+)':\s*(" + _F + r")")
_HF_RATES = (
    ("train_tokens_per_second", "tok/s"),
    ("tokens_per_second", "tok/s"),
    ("train_samples_per_second", "samples/s"),
    ("train_steps_per_second", "it/s"),
)


def _hf_trainer(line: str) -> Found | None:
    brace = line.find("{'")
    if brace < 0:
        return None
    kv = dict(_HF_KV_RE.findall(line, brace))
    if not kv:
        return None
    if not any(k in kv for k in ("loss", "train_loss", "epoch", "train_runtime")):
        return None  # an eval dict ({'eval_loss': ...}) or something else
    loss: float | None = float(kv["loss"]) if "loss" in kv else None
    thr: float | None = None
    unit = ""
    for key, u in _HF_RATES:
        if key in kv:
            thr, unit = float(kv[key]), u
            break
    step: int | None = int(float(kv["step"])) if "step" in kv else None
    if brace > 0:  # a tqdm bar glued in front: its counter is the step
        bar = _tqdm(line[:brace])
        if bar is not None:
            step = bar[0] if step is None else step
            if thr is None and bar[2] is not None:
                thr, unit = bar[2], bar[3]
    if step is None and loss is None and thr is None:
        return None
    return step, loss, thr, unit


_GEN_STEP_RE = re.compile(r"\b(?:global[_ ]?)?(?:step|iter(?:ation)?)\b\s*[:=#]?\s*(\d+)", re.I)
_GEN_LOSS_RE = re.compile(r"\b(?:train[_ /]?)?loss\b\s*[:=]?\s*(" + _F + r")(?![\w/])", re.I)
_GEN_UNIT_RE = re.compile(
    r"(?<![\w/])(tok/s|tok/sec|tokens/s|tokens/sec|tokens per second|tps)\b", re.I
)
_GEN_NUM_BEFORE_RE = re.compile(r"(?<![\w.,])(" + _THOUSANDS + r")\s*$")
_GEN_THR_BEFORE_RE = re.compile(
    r"\b(tokens_per_second|tokens_per_sec|tok_per_sec|tok/s|tok/sec|tokens/s|tokens/sec|tps|"
    r"throughput)(?![\w/])\s*[:=]?\s*(" + _THOUSANDS + r")(?![\w.])",
    re.I,
)
# "loss=2.3 tok/s ..." — a number that is another key's value is not a rate.
_GEN_KEYED_VALUE_RE = re.compile(r"[:=]\s*$")


def explicit_token_rate(line: str) -> float | None:
    """A tokens-per-second figure written out in the line (`tok/s 45427`,
    `tokens_per_second=1234`, `48,538 tok/s`), else None."""
    if not (("tok" in line) or ("tps" in line) or ("TPS" in line) or ("hroughput" in line)):
        return None
    # "tok/s 48,538" / "tokens_per_second=1234": the unit names the value after it.
    m2 = _GEN_THR_BEFORE_RE.search(line)
    if m2:
        return _num(m2.group(2))
    for u in _GEN_UNIT_RE.finditer(line):  # "48,538 tok/s": the number right before the unit
        lo = max(0, u.start() - 40)
        nb = _GEN_NUM_BEFORE_RE.search(line, lo, u.start())
        if nb and not _GEN_KEYED_VALUE_RE.search(line, lo, nb.start()):
            return _num(nb.group(1))
    return None


def _generic(line: str) -> Found | None:
    thr = explicit_token_rate(line)
    loss: float | None = None
    if "oss" in line:
        lm = _GEN_LOSS_RE.search(line)
        if lm:
            loss = float(lm.group(1))
    if thr is None and loss is None:
        return None
    sm = _GEN_STEP_RE.search(line)
    return _whole(sm.group(1)) if sm else None, loss, thr, "tok/s" if thr is not None else ""


# Presets whose "it/s" is derived from a per-iteration time (`time 500.00ms`,
# `elapsed time per iteration (ms)`), not written out as a rate.
DERIVED_RATE_PRESETS = frozenset({"nanogpt", "megatron"})


def _prefer_written_tokens(name: str, found: Found, line: str) -> Found:
    """An explicit tokens-per-second field always wins over a rate derived
    from the iteration time (a nanoGPT fork printing `time 500.00ms` and
    `tok/s 45427` means 45427 tok/s, not 2 it/s)."""
    step, loss, _derived, unit = found
    if name not in DERIVED_RATE_PRESETS or unit not in ("it/s", ""):
        return found
    try:
        tokens = explicit_token_rate(line)
    except (ValueError, OverflowError):
        tokens = None
    if tokens is None:
        return found
    return step, loss, tokens, "tok/s"


PRESETS: dict[str, Callable[[str], Found | None]] = {
    "torchtitan": _torchtitan,
    "megatron": _megatron,
    "nanogpt": _nanogpt,
    "deepspeed": _deepspeed,
    "hf_trainer": _hf_trainer,
    "tqdm": _tqdm,
    "generic": _generic,
}
PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)

# The largest step kept: what SQLite's INTEGER (and the history) holds. A log
# line `step 99999999999999999999 loss nan` raised OverflowError in the
# history's insert on every tick, and that run's history stopped (issue 34).
MAX_STEP = 2**63 - 1


def plausible_step(step: int | None) -> int | None:
    """`step`, or None when it is negative or over MAX_STEP (not a step)."""
    return step if step is None or 0 <= step <= MAX_STEP else None


USER_GROUPS = ("step", "loss", "throughput")


def compile_user_regex(pattern: str) -> re.Pattern[str]:
    """Compile one user regex; a bad one -> ConfigError naming it and why."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ConfigError(
            f"invalid regex `{pattern}`: {e}",
            "fix the pattern (Python syntax; TOML literal strings '...' keep backslashes as typed)",
        ) from None
    if not any(g in rx.groupindex for g in USER_GROUPS):
        raise ConfigError(
            f"regex `{pattern}` has no named group step, loss or throughput",
            r"name what it captures, e.g. 'loss=(?P<loss>[\d.]+)'",
        )
    return rx


class MetricParser:
    """Turns log lines into MetricPoints; `preset_name` says what matched last."""

    def __init__(
        self, user_regexes: Sequence[str] = (), presets: Sequence[str] | None = None
    ) -> None:
        self.user = [compile_user_regex(p) for p in user_regexes]
        names = PRESET_NAMES if presets is None else tuple(presets)
        unknown = [n for n in names if n not in PRESETS]
        if unknown:
            raise ConfigError(
                f"unknown metric preset {unknown[0]!r}",
                "use one of: " + ", ".join(PRESET_NAMES),
            )
        self._presets: list[tuple[str, Callable[[str], Found | None]]] = [
            (n, PRESETS[n]) for n in names
        ]
        self.preset_name: str = ""
        self.matched = 0

    def _user(self, line: str) -> tuple[str, Found] | None:
        for i, rx in enumerate(self.user):
            m = rx.search(line)
            if not m:
                continue
            gd = m.groupdict()
            try:
                step = int(_num(gd["step"])) if gd.get("step") else None
                loss = float(gd["loss"]) if gd.get("loss") else None
                thr = _num(gd["throughput"]) if gd.get("throughput") else None
            except ValueError:
                continue
            unit = (gd.get("unit") or "").strip()
            if thr is not None and unit:
                thr2, unit = _rate(thr, unit)
                thr = thr2
            if step is None and loss is None and thr is None:
                continue
            return f"user[{i}]", (step, loss, thr, unit)
        return None

    def parse_found(self, line: str) -> tuple[str, Found] | None:
        """Like `parse` but returns (preset name, (step, loss, throughput, unit)).
        A step outside 0..MAX_STEP is dropped (the loss and throughput stay)."""
        hit = self._parse_found(line)
        if hit is None:
            return None
        name, (step, loss, thr, unit) = hit
        return name, (plausible_step(step), loss, thr, unit)

    def _parse_found(self, line: str) -> tuple[str, Found] | None:
        if "\x1b" in line:
            line = strip_ansi(line)
        if self.user:
            hit = self._user(line)
            if hit:
                return hit
        for name, fn in self._presets:
            try:
                found = fn(line)
            except (ValueError, OverflowError, ZeroDivisionError):
                found = None
            if found is not None:
                return name, _prefer_written_tokens(name, found, line)
        return None

    def parse(self, line: str, now: float) -> MetricPoint | None:
        hit = self.parse_found(line)
        if hit is None:
            return None
        name, (step, loss, thr, unit) = hit
        if thr is not None and not math.isfinite(thr):
            thr = None
        self.preset_name = name
        self.matched += 1
        return MetricPoint(
            time=now,
            step=step,
            loss=loss,
            throughput=thr,
            throughput_unit=unit if thr is not None else "",
        )
