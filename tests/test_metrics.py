"""MetricParser (gputui.collect.metrics) on real-world log lines.

Every fixture under tests/fixtures/logs goes through the real byte path:
LineSplitter (\\r and \\n, ANSI, invalid UTF-8) -> MetricParser. Expected
values are written from the frameworks' own formats, one row per line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gputui.collect.logtail import LineSplitter
from gputui.collect.metrics import PRESET_NAMES, MetricParser
from gputui.errors import ConfigError
from gputui.model import MetricPoint, Metrics

LOGS = Path(__file__).parent / "fixtures" / "logs"
NAN = float("nan")

# (preset, step, loss, throughput, unit) per line; None = no metric in that line
Row = tuple[str, int | None, float | None, float | None, str] | None

EXPECTED: dict[str, list[Row]] = {
    "log-samples.log": [
        ("nanogpt", 10, 4.2345, 1000 / 123.45, "it/s"),
        ("nanogpt", 0, 10.9876, None, ""),
        ("torchtitan", 10, 9.12345, 7123, "tok/s/gpu"),
        ("megatron", 10, 9.763827, 1000 / 4647.8, "it/s"),
        ("megatron", 300, 1.504590, 8000.5, "tok/s/gpu"),
        ("deepspeed", 10, None, 25.704280480541442, "samples/s"),
        ("tqdm", 350, None, 37.56, "it/s"),  # the \r-separated first bar ...
        ("tqdm", 400, 1.820, 38.01, "it/s"),  # ... and the second
        ("hf_trainer", 2500, 0.0026, 2.15, "it/s"),  # tqdm bar glued to the dict
        ("hf_trainer", None, 2.6031, 78016.894, "tok/s"),
        ("tqdm", 100, None, 1 / 2.27, "it/s"),  # 2.27s/it
        ("hf_trainer", None, None, 8.021, "samples/s"),
        ("tqdm", 0, None, None, ""),  # ?it/s
    ],
    "nanogpt.log": [
        None,
        None,
        None,
        None,
        ("nanogpt", 0, 10.9876, None, ""),
        ("nanogpt", 0, 10.9712, 1000 / 15234.56, "it/s"),
        ("nanogpt", 10, 9.1234, 1000 / 123.45, "it/s"),
        ("nanogpt", 20, 8.0021, 4.0, "it/s"),
        ("nanogpt", 2000, 3.2110, None, ""),
        None,
        ("nanogpt", 2, 2.60938, 1000 / 7797.46, "it/s"),  # minGPT
    ],
    "torchtitan.log": [
        ("torchtitan", 1, 8.1661, 3502, "tok/s/gpu"),
        None,
        ("torchtitan", 2, 6.1098, 177138, "tok/s/gpu"),
        ("torchtitan", 10, 9.12345, 7123, "tok/s/gpu"),  # ANSI, 24-bit colour
    ],
    "megatron.log": [
        ("megatron", 10, 9.763827, 1000 / 4647.8, "it/s"),
        ("megatron", 300, 1.504590, 8000.5, "tok/s/gpu"),
        ("megatron", 100, 7.123456, 1234.5, "tok/s/gpu"),  # Megatron-DeepSpeed tgs
        None,
        None,  # validation loss: not a training point
        None,
    ],
    "deepspeed.log": [
        ("deepspeed", 10, None, 25.704280480541442, "samples/s"),
        None,
        ("deepspeed", 20, 4.5231, 62.5, "samples/s"),
    ],
    "hf_trainer.log": [
        ("hf_trainer", 2500, 0.0026, 2.15, "it/s"),
        ("hf_trainer", None, 2.6031, 78016.894, "tok/s"),
        ("hf_trainer", None, None, 8.021, "samples/s"),
        None,  # eval dict
    ],
    "lightning_tqdm.log": [
        ("tqdm", 0, None, None, ""),
        ("tqdm", 350, None, 37.56, "it/s"),
        ("tqdm", 400, 1.820, 38.01, "it/s"),
        ("tqdm", 8000, 0.912, 38.00, "it/s"),
        ("tqdm", 0, None, None, ""),
        ("tqdm", 50, None, 1 / 2.27, "it/s"),
        ("tqdm", 100, None, 1 / 2.27, "it/s"),
        None,  # a download bar (MB/s) is not training progress
    ],
    "generic.log": [
        ("generic", 10, 9.123456, 12345.67, "tok/s"),  # build-nanogpt
        ("generic", 1, 7.577267, 126138, "tok/s"),  # llm.c
        ("generic", 5, 0.5, 1234.5, "tok/s"),
        ("generic", 7, NAN, 88000.5, "tok/s"),
        None,
    ],
    "binary.log": [
        None,
        ("generic", 5, 2.5, 100, "tok/s"),
        ("nanogpt", 30, 3.0, 2.0, "it/s"),
        ("tqdm", 10, None, 9.90, "it/s"),  # loss=\xff2.1: a broken number is no number
        ("tqdm", 20, 2.0, 9.95, "it/s"),
    ],
}


def lines_of(name: str, chunk: int | None = None) -> list[str]:
    data = (LOGS / name).read_bytes()
    s = LineSplitter()
    step = chunk or len(data) or 1
    out: list[str] = []
    for i in range(0, len(data), step):
        out += s.feed(data[i : i + step])
    return out + s.flush()


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(b):
        return math.isnan(a)
    return a == pytest.approx(b, rel=1e-9)


def test_every_fixture_has_a_table() -> None:
    assert {p.name for p in LOGS.glob("*.log")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("chunk", [None, 5])
def test_fixture(name: str, chunk: int | None) -> None:
    lines = lines_of(name, chunk)
    rows = EXPECTED[name]
    assert len(lines) == len(rows), lines
    p = MetricParser()
    for i, (line, row) in enumerate(zip(lines, rows, strict=True)):
        pt = p.parse(line, now=100.0 + i)
        if row is None:
            assert pt is None, (line, pt)
            continue
        assert pt is not None, line
        preset, step, loss, thr, unit = row
        assert p.preset_name == preset, line
        assert pt.time == 100.0 + i
        assert pt.step == step, line
        assert same(pt.loss, loss), (line, pt.loss)
        assert same(pt.throughput, thr), (line, pt.throughput)
        assert pt.throughput_unit == unit, line


def test_log_samples_file_is_covered() -> None:
    """Every non-comment line of the shared samples is in log-samples.log."""
    src = Path("/work/shared/log-samples.txt")
    if not src.exists():
        pytest.skip("shared samples not present")
    wanted = [ln for ln in src.read_text().splitlines() if ln and not ln.startswith("#")]
    got = (LOGS / "log-samples.log").read_bytes()
    for ln in wanted:
        assert ln.replace("\\x1b", "\x1b").replace("\\r", "\r").encode() in got


# ------------------------------------------------------------------ user regexes


def test_user_regex_first_and_named() -> None:
    p = MetricParser(
        [r"E(?P<step>\d+) L=(?P<loss>[\d.]+) R=(?P<throughput>[\d,]+) ?(?P<unit>\S+/s)?"]
    )
    pt = p.parse("E12 L=0.25 R=1,500 tok/s and also loss: 9", 1.0)
    assert pt is not None and p.preset_name == "user[0]"
    assert (pt.step, pt.loss, pt.throughput, pt.throughput_unit) == (12, 0.25, 1500.0, "tok/s")
    # lines the user regex does not match still go to presets
    assert p.parse("iter 3: loss 1.5, time 100.00ms, mfu 1.00%", 2.0) is not None
    assert p.preset_name == "nanogpt"


def test_user_regex_s_per_it_unit() -> None:
    p = MetricParser([r"rate (?P<throughput>[\d.]+)(?P<unit>s/it)"])
    pt = p.parse("rate 2.00s/it", 0)
    assert pt is not None and pt.throughput == 0.5 and pt.throughput_unit == "it/s"


@pytest.mark.parametrize(
    ("regex", "words"),
    [
        (r"loss=(?P<loss>[\d.]+", ["(?P<loss>[\\d.]+", "missing )"]),
        (r"loss=([\d.]+)", ["no named group"]),
        (r"(?P<loss>[", ["invalid"]),
    ],
)
def test_bad_user_regex_is_config_error(regex: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as ei:
        MetricParser([regex])
    msg = str(ei.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_preset_selection() -> None:
    p = MetricParser(presets=["nanogpt"])
    assert p.parse("step 10 | loss: 1.0 | tok/sec: 5", 0) is None  # generic is off
    assert p.parse("iter 1: loss 2.0, time 10.00ms, mfu 1.00%", 0) is not None
    with pytest.raises(ConfigError) as ei:
        MetricParser(presets=["nope"])
    assert "nope" in str(ei.value) and "generic" in str(ei.value)
    assert PRESET_NAMES[-1] == "generic"


@pytest.mark.parametrize(
    "line",
    [
        "",
        "Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.10it/s]x",
        "Saving model checkpoint to /out/checkpoint-500",
        "step 3 of the recipe",
        "the loss function is cross entropy",
        "tokens per iteration will be: 491,520",
    ],
)
def test_lines_without_metrics(line: str) -> None:
    pt = MetricParser(presets=[n for n in PRESET_NAMES if n != "tqdm"]).parse(line, 0)
    assert pt is None


def test_series_and_median_step_interval() -> None:
    """Points fed into model.Metrics give a step series and interval."""
    p = MetricParser()
    m = Metrics()
    for i, t in enumerate([0.0, 2.0, 4.0, 7.0]):
        pt = p.parse(f"iter {i * 10}: loss {5 - i}.0, time 100.00ms, mfu 1.00%", t)
        assert pt is not None
        m.add(pt)
    assert m.last_step == 30 and m.median_step_interval == 2.0
    assert m.throughput_unit == "it/s" and m.loss.last() == 2.0


@pytest.mark.parametrize(
    ("line", "step", "loss", "thr"),
    [
        ("step 12 | loss 3.2100 | tok/s 48538", 12, 3.21, 48538.0),
        ("step 12 | loss 3.21 | tok/s 48,538", 12, 3.21, 48538.0),
        ("step 5 loss=2.3 tokens/s=1234.5", 5, 2.3, 1234.5),
        ("step 3 loss 2.0 | 12,345 tok/s", 3, 2.0, 12345.0),
        ("loss=2.3 tok/s", None, 2.3, None),
    ],
)
def test_generic_rate_after_its_unit_and_not_another_keys_value(
    line: str, step: int | None, loss: float | None, thr: float | None
) -> None:
    p = MetricParser().parse(line, 0.0)
    assert p is not None
    assert (p.step, p.loss, p.throughput) == (step, loss, thr)


def test_step_counter_going_back_is_a_new_run_not_ignored() -> None:
    m = Metrics()
    for i, step in enumerate(range(100, 156)):
        m.add(MetricPoint(time=float(i), step=step))
    assert m.last_step == 155
    for i, step in enumerate(range(1, 11)):  # relaunched: counts from 1 again
        m.add(MetricPoint(time=100.0 + 2 * i, step=step))
    assert m.last_step == 10 and m.last_step_time == 118.0 and m.restarts == 1
    assert m.median_step_interval == 2.0


def test_buffered_bursts_give_the_average_step_time_not_zero() -> None:
    m = Metrics()
    t = 0.0
    for burst in range(3):  # 200 steps land at once every 27 s
        t = 27.0 * burst
        for k in range(200):
            m.add(MetricPoint(time=t, step=burst * 200 + k))
    med = m.median_step_interval
    assert med is not None and 0.05 < med < 0.2  # 54 s over 399 advances ≈ 0.135 s


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # nanoGPT forks that write the token rate out: it wins over 1000 / time
        ("iter 100: loss 3.2100, time 500.00ms, tok/s 45427", (100, 3.21, 45427.0, "tok/s")),
        ("iter 100: loss 3.21, time 500.00ms, 45,427 tok/s", (100, 3.21, 45427.0, "tok/s")),
        ("iter 7: loss 3.0, time 250.00ms, tokens_per_second=9000", (7, 3.0, 9000.0, "tok/s")),
        # no rate written: the derived it/s stays
        ("iter 100: loss 3.2100, time 500.00ms, mfu 12.30%", (100, 3.21, 2.0, "it/s")),
        # Megatron with only the per-iteration time, and with tokens/sec/gpu
        (
            " iteration       10/      10 | elapsed time per iteration (ms): 500.0 |"
            " lm loss: 9.76E+00 | tok/s 45427 |",
            (10, 9.76, 45427.0, "tok/s"),
        ),
        (
            " iteration       10/      10 | elapsed time per iteration (ms): 500.0 |"
            " tokens/sec/gpu: 8000.5 | lm loss: 9.76E+00 |",
            (10, 9.76, 8000.5, "tok/s/gpu"),
        ),
    ],
)
def test_written_token_rate_wins_over_a_derived_rate(
    line: str, expected: tuple[int, float, float, str]
) -> None:
    p = MetricParser().parse(line, 0.0)
    assert p is not None
    assert (p.step, p.loss, p.throughput, p.throughput_unit) == expected
