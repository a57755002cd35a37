"""Bad values that crashed or went quiet: config numbers that are nan, inf
or out of range; digits other than 0-9 in `pct list`, nvidia-smi and
--prometheus; a CT-side nvidia-smi that grows the GPU table; a /metrics
address other than loopback. Each is one line and exit 2, or a reading
marked unreadable — never a traceback. Property tests (hypothesis) over odd
digits, NaN and inf; the CLI in a subprocess for the exit status."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.collect.nvidiasmi import MAX_GPUS, parse_compute_apps, parse_gpu_line, parse_number
from gputui.config import _NUM, KEYS, parse_config
from gputui.containers import ProxmoxLXC, container_for
from gputui.errors import ConfigError, GputuiError
from gputui.host.view import container_of_cgroup
from gputui.model import GpuEvent, GpuSample, GpuState
from gputui.record.prometheus import parse_address
from gputui.text.numbers import ascii_int

NUMBER_KEYS = sorted((s, k) for (s, k), (_, (types, _)) in KEYS.items() if types == _NUM[0])
# digits that are not 0-9: superscripts (No), other scripts' decimals (Nd),
# fullwidth, circled
ODD_DIGITS = "²³¹⁰٠١٢٣٤٥٦٧٨٩०१२३০১২৩０１２３①②"
odd_digit_text = st.text(alphabet=ODD_DIGITS + "0123456789", min_size=1, max_size=12).filter(
    lambda t: any(c in ODD_DIGITS for c in t)
)
NUMBER_WORDS = ["nan", "inf", "-inf", "NaN", "+inf", "1e999", "-1e999", "1" * 400, "-0"]
number_text = st.one_of(
    odd_digit_text,
    st.sampled_from(NUMBER_WORDS),
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
CLI = [sys.executable, "-m", "gputui"]


def toml_value(x: float | int) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def config_text(section: str, key: str, value: str) -> str:
    return f"{key} = {value}\n" if not section else f"[{section}]\n{key} = {value}\n"


# ------------------------------------------------------------------ config


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(NUMBER_KEYS),
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(10**400), 10**400),
    ),
)
def test_a_number_key_is_taken_or_refused_in_one_line(key: tuple[str, str], x: float) -> None:
    section, name = key
    text = config_text(section, name, toml_value(x))
    try:
        s = parse_config(text, Path("/c.toml"))
    except ConfigError as err:
        assert "\n" not in str(err) and str(err).startswith("/c.toml"), str(err)
        return
    # taken: a finite number, within what the code after it can use
    attr = KEYS[key][0]
    v = getattr(s.diagnosis, attr[10:]) if attr.startswith("diagnosis.") else getattr(s, attr)
    assert isinstance(v, float) and math.isfinite(v), (key, x, v)
    assert not (isinstance(x, float) and not math.isfinite(x))


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("alerts", "quiet_period", "nan"),
        ("alerts", "quiet_period", "inf"),
        ("alerts", "quiet_period", "1e12"),
        ("alerts", "connection_down_after", "nan"),
        ("history", "max_mb", "inf"),
        ("history", "max_mb", "1e300"),
        ("history", "max_mb", "9" * 400),
        ("history", "log_every", "-inf"),
        ("diagnosis", "hang_after_s", "nan"),
        ("diagnosis", "idle_util_pct", "inf"),
        ("ssh", "keepalive", "nan"),
        ("", "ct", "1" * 30),
    ],
)
def test_a_bad_number_in_the_config_is_one_line_and_exit_2(
    section: str, key: str, value: str, tmp_path: Path
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(config_text(section, key, value))
    r = subprocess.run(
        [*CLI, "--config", str(cfg), "history"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert f"{cfg}:" in r.stderr and key in r.stderr


# ------------------------------------------------------------------ pct list


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(number_text, st.sampled_from(["running", "stopped", "²"]))))
def test_pct_list_reads_only_vmids_in_ascii_digits(rows: list[tuple[str, str]]) -> None:
    text = "VMID       Status     Lock         Name\n" + "".join(
        f"{vmid:<10} {status:<10} {'':<12} ct-{i}\n" for i, (vmid, status) in enumerate(rows)
    )
    got = ProxmoxLXC.read_list(text)
    want = [int(v) for v, _ in rows if v.isascii() and v.isdigit() and len(v) <= 9]
    assert [c.id for c in got] == want


def test_a_vmid_in_other_digits_is_skipped_not_a_crash() -> None:
    listing = ProxmoxLXC.read_list("VMID Status Lock Name\n²00 running x\n200 running y\n")
    assert [(c.id, c.name) for c in listing] == [(200, "y")]
    assert container_of_cgroup("/lxc/²00/ns") is None and container_of_cgroup("/lxc/203") == 203
    with pytest.raises(ValueError, match="is not N"):
        container_for("²00")


# ------------------------------------------------------------------ nvidia-smi


def gpu_row(idx: str, value: str) -> str:
    return (
        f"{idx}, NVIDIA H200, GPU-x, {value}, {value}, {value}, {value}, {value}, {value}, {value}"
    )


@settings(max_examples=400, deadline=None)
@given(st.one_of(number_text, st.integers(0, 10**6).map(str)), number_text)
def test_a_gpu_row_is_a_sample_with_finite_numbers_or_an_event(idx: str, value: str) -> None:
    item = parse_gpu_line(gpu_row(idx, value), 1.0)
    if isinstance(item, GpuSample):
        assert idx.isascii() and idx.isdigit() and int(idx) < MAX_GPUS
        assert item.index == int(idx)
        for x in (item.mem_used_mib, item.util_pct, item.temp_c, item.power_w):
            assert x is None or math.isfinite(x)
    else:
        assert isinstance(item, GpuEvent) and not item.lost
    for v in (value, f"{value} MiB", f"{value} %"):
        x = parse_number(v, mem=v.endswith("MiB"))
        assert x is None or (math.isfinite(x) and v.isascii())


@settings(max_examples=200, deadline=None)
@given(number_text)
def test_a_compute_apps_pid_in_other_digits_is_not_a_process(pid: str) -> None:
    procs = parse_compute_apps(f"{pid}, python, 1024 MiB, GPU-x\n")
    assert [p.host_pid for p in procs] == ([int(pid)] if ascii_int(pid, 10) is not None else [])


def test_the_gpu_table_is_capped_rows_past_it_are_marked_unreadable() -> None:
    state = GpuState()
    events: list[GpuEvent] = []
    for i in range(10_000):  # a CT-side nvidia-smi printing ten thousand GPUs
        item = parse_gpu_line(gpu_row(str(i), "1"), 1.0)
        if isinstance(item, GpuSample):
            state.add(item)
        else:
            assert isinstance(item, GpuEvent)
            events.append(item)
    assert sorted(state.latest) == list(range(MAX_GPUS))
    assert len(events) == 10_000 - MAX_GPUS
    assert "unreadable" in events[0].text and f"GPU {MAX_GPUS}" in events[0].text


# ------------------------------------------------------------------ --prometheus


@settings(max_examples=200, deadline=None)
@given(st.one_of(number_text, st.text(max_size=8)))
def test_a_prometheus_port_is_ascii_digits_or_one_line(port: str) -> None:
    try:
        _host, got = parse_address(f"127.0.0.1:{port}")
    except GputuiError as err:
        assert "\n" not in str(err) and "HOST:PORT" in str(err)
        return
    assert port.strip().isascii() and got == int(port) and 0 <= got <= 65535


def test_prometheus_on_other_than_loopback_needs_the_public_flag() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:9464") == ("::1", 9464)
    assert parse_address("localhost:9464") == ("localhost", 9464)
    for addr in ("0.0.0.0:9464", "[::]:9464", "10.1.2.6:9464", "metrics.example:9464"):
        with pytest.raises(GputuiError) as err:
            parse_address(addr)
        assert "not a loopback address" in str(err.value)
        assert "--prometheus-public" in str(err.value) and "names and figures" in str(err.value)
        assert parse_address(addr, public=True)[1] == 9464


@pytest.mark.parametrize("bind", ["h:²", "127.0.0.1:٨٠٠٠", "127.0.0.1:" + "9" * 5000])
def test_a_serve_bind_port_in_other_digits_is_one_line(bind: str) -> None:
    from gputui.cli.serve import parse_bind

    with pytest.raises(GputuiError, match="is not HOST:PORT"):
        parse_bind(bind, public=False)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--prometheus", "h:²"], ["is not HOST:PORT"]),
        (["--prometheus", "0.0.0.0:9464"], ["not a loopback address", "--prometheus-public"]),
    ],
)
def test_watch_with_a_bad_prometheus_address_is_one_line_and_exit_2(
    flags: list[str], words: list[str], tmp_path: Path
) -> None:
    pytest.importorskip("prometheus_client")
    r = subprocess.run(
        [*CLI, "watch", "local", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")},
    )
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_a_port_with_a_control_character_is_refused_in_one_line() -> None:
    """Found by the test above's random examples: str.strip() took '\\x1f'
    as a blank and '0\\x1f' was port 0."""
    for text in ("0\x1f", "9464\x1c", "\x1e80", ":0"):  # '127.0.0.1::0': a typo, not public
        with pytest.raises(GputuiError) as err:
            parse_address(f"127.0.0.1:{text}")
        assert "HOST:PORT" in str(err.value) and "\n" not in str(err.value)
    assert parse_address("127.0.0.1: 9464 ") == ("127.0.0.1", 9464)
