"""Every record format gputui reads from a tool is unforgeable by what it
carries (issue 34, item 5): tmux's list-panes (3.3a raw, 3.4 escaped), ps,
nvidia-smi (query-gpu, compute-apps), the pct and docker/podman listings and
the agent's JSON frames. Each value a process owner, an image author or a
log can choose is fed with every separator, NUL, newline, `#{}`, a `-`
prefix and 64 KiB values; the tool is modelled as it prints (tmux replaces
control characters in our text fields — LIST_PANES_FORMAT —, procps prints
them as '?', nvidia-smi and the listings print one line per record). The
properties: what was listed comes back, exactly, and nothing else — no
record more, no record less, no field moved; and any text at all parses
without an exception. Examples hypothesis found are kept in
tests/fixtures/fuzz_corpus.json and replayed first.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputui.actions.inspect import parse_ps
from gputui.collect import tmux as tmux_parse
from gputui.collect.nvidiasmi import parse_compute_apps, parse_gpu_output
from gputui.containers import Docker, ProxmoxLXC
from test_tmux_parse import tmux34_escaped

CORPUS = json.loads((Path(__file__).parent / "fixtures" / "fuzz_corpus.json").read_text())
US, RS = tmux_parse.FIELD_SEP, tmux_parse.RECORD_END
PIECES = ["\x1e", "\x1f", "\x00", "\n", "\r", "\t", ",", " ", "#{", "}", "#{pane_pid}", "-", "--",
          "\\", "\\037", "\\n", "'", '"', "é", "\u2028", "\x85", "\x7f", "x"]  # fmt: skip
BIG = 64 * 1024
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def hostile(draw: Any, big: bool = True) -> str:
    """A value an owner chooses: pieces of every separator and syntax, a
    `-` first now and then, sometimes 64 KiB of it."""
    parts = draw(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=12))
    text = ("-" if draw(st.booleans()) else "") + "".join(parts)
    if big and draw(st.integers(0, 30)) == 0:
        text = (text or "x") * (BIG // max(1, len(text or "x")) + 1)
    return text


def noise(extra: list[str], size: int) -> st.SearchStrategy[str]:
    """Any text made of the pieces (and `extra`): what a broken or hostile tool prints."""
    return st.lists(st.sampled_from([*PIECES, *extra]), max_size=size).map("".join)


def tmux_text(value: str, field: str = "pane_current_command") -> str:
    """What tmux prints for `field` of LIST_PANES_FORMAT: a C string (it ends
    at NUL), every control character replaced by '?' where the format asks
    so (its `s/[…]/?/:` modifier), else raw — the model follows the format."""
    value = value.split("\x00", 1)[0]
    modifier = getattr(tmux_parse, "CONTROL_TO_QUESTION", None)
    own_escape = field not in ("pane_current_command", "pane_current_path")  # tmux escapes these
    if own_escape or (modifier and "#{" + modifier + field + "}" in tmux_parse.LIST_PANES_FORMAT):
        return re.sub(r"[\x01-\x1f\x7f]", "?", value)
    return value


# ------------------------------------------------------------------ tmux


@st.composite
def pane_rows(draw: Any) -> list[dict[str, Any]]:
    rows = []
    for i in range(draw(st.integers(1, 4))):
        name = re.sub(r"[\x00-\x1f\x7f]", "?", draw(hostile(big=False))) or f"s{i}"
        rows.append(
            {
                "session": f"{name}{i}",  # distinct sessions, in listing order
                "pid": draw(st.integers(1, 2**22)),
                "dead": draw(st.booleans()),
                "start": tmux_text(draw(hostile()), "pane_start_command"),
                "command": tmux_text(draw(hostile())),
                "path": tmux_text(draw(hostile()), "pane_current_path"),
            }
        )
    return rows


def list_panes_output(rows: list[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        fields = [r["session"], "1", "1700000000", "0", "0", "0", str(r["pid"]),
                  "1" if r["dead"] else "0", "", "", r["start"], r["command"], r["path"], r["path"]]  # fmt: skip
        out.append(US.join(fields) + RS + "\n")
    return "".join(out)


def listed(text: str) -> list[tuple[str, int | None, bool, str, str, str]]:
    return [
        (p.session, p.pid, p.dead, p.start_command_raw, p.current_command, p.current_path)
        for s in tmux_parse.parse_panes(text)
        for p in s.panes
    ]


def expected(rows: list[dict[str, Any]]) -> list[tuple[str, int | None, bool, str, str, str]]:
    return [(r["session"], r["pid"], r["dead"], r["start"], r["command"], r["path"]) for r in rows]


@SETTINGS
@given(pane_rows())
def test_tmux_panes_come_back_exactly_raw_and_escaped(rows: list[dict[str, Any]]) -> None:
    text = list_panes_output(rows)
    assert listed(text) == expected(rows)
    assert listed(tmux34_escaped(text)) == expected(rows)


@SETTINGS
@given(pane_rows(), st.integers(0, 3), hostile())
@example(*CORPUS["tmux_forged_command"])
def test_a_forged_current_command_is_one_field_never_a_record(
    rows: list[dict[str, Any]], which: int, forged: str
) -> None:
    """The owner's argv[0] (a raw field before issue 34) holds a whole record
    of its own: through tmux's modifier it stays one field of its pane."""
    r = rows[which % len(rows)]
    r["command"] = tmux_text(forged)
    assert listed(list_panes_output(rows)) == expected(rows)


@SETTINGS
@given(noise(["1", "0", "a"], 100))
@example(CORPUS["tmux_noise"])
def test_any_tmux_text_parses_without_error_into_clean_fields(text: str) -> None:
    for s in tmux_parse.parse_panes(text):
        for p in s.panes:
            assert p.pid is None or p.pid >= 0
            for v in (p.session, p.current_command, p.current_path, p.start_command_raw):
                assert not re.search(r"[\x00-\x1f\x7f]", v), v


# ------------------------------------------------------------------ ps


def procps_args(value: str) -> str:
    """`ps -o args` as procps prints it: a non-printable byte as '?'; the
    arguments joined by spaces (NUL-separated in /proc)."""
    text = value.replace("\x00", " ")
    return "".join(c if c.isprintable() or c == " " else "?" for c in text)


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 2**22), hostile()), min_size=1, max_size=5))
@example(CORPUS["ps_forged_args"])
def test_ps_rows_come_back_exactly_and_no_other(rows: list[tuple[int, str]]) -> None:
    lines, want = [], []
    for pid, argv in rows:
        args = procps_args("python3 " + argv)
        lines.append(f"{pid:>7} {1:>7} {pid:>7} S    {args}")
        want.append((pid, 1, pid, "S", args))
    got = [(r.pid, r.ppid, r.pgid, r.stat, r.args) for r in parse_ps("\n".join(lines) + "\n")]
    assert got == want


# ------------------------------------------------------------------ nvidia-smi


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 2**22), hostile(big=False)), max_size=5))
@example(CORPUS["compute_apps_forged_name"])
def test_compute_apps_rows_keep_their_pid_memory_and_gpu(rows: list[tuple[int, str]]) -> None:
    """The process name (the owner's) may hold commas: pid first, memory and
    uuid last. nvidia-smi prints one line per process (a name's control
    characters modelled as '?', as the driver reads them from /proc)."""
    uuid = "GPU-d15c0000-0000-4000-8000-000000000000"
    lines = [f"{pid}, {procps_args(name)}, 1024, {uuid}" for pid, name in rows]
    got = parse_compute_apps("\n".join(lines) + "\n")
    assert [(p.host_pid, p.used_mib, p.gpu_uuid) for p in got] == [
        (pid, 1024.0, uuid) for pid, _ in rows
    ]


@SETTINGS
@given(noise(["0", "1", "N/A", "[", "]", ", "], 75))
def test_any_nvidia_smi_text_parses_without_error(text: str) -> None:
    for item in parse_gpu_output(text, 0.0):
        assert getattr(item, "index", 0) >= 0
    parse_compute_apps(text)


# ------------------------------------------------------------------ listings


@SETTINGS
@given(st.lists(st.tuples(st.integers(100, 999_999), hostile(big=False)), max_size=5))
def test_pct_list_rows_keep_their_number_and_state(rows: list[tuple[int, str]]) -> None:
    """A CT's name is its admin's; pct prints one row per CT (its hostname
    has no whitespace or control character: modelled so)."""
    lines = ["VMID       Status     Lock         Name"]
    for vmid, name in rows:
        clean = re.sub(r"[\s\x00-\x1f\x7f]", "", procps_args(name)) or "ct"
        lines.append(f"{vmid:<10} running               {clean}")
    got = ProxmoxLXC.read_list("\n".join(lines) + "\n")
    assert [(c.id, c.status) for c in got] == [(vmid, "running") for vmid, _ in rows]


@SETTINGS
@given(st.lists(st.tuples(st.text("0123456789abcdef", min_size=64, max_size=64),
                          hostile(big=False)), max_size=5))  # fmt: skip
@example(CORPUS["docker_forged_name"])
def test_docker_ps_rows_keep_their_id_and_state(rows: list[tuple[str, str]]) -> None:
    """A container's name is chosen by whoever ran it: docker prints names
    of [a-zA-Z0-9_.-] only; anything else in the text is not a row."""
    lines = []
    for cid, name in rows:
        clean = re.sub(r"[^a-zA-Z0-9_.-]", "", name) or "c"
        lines.append(f"{cid}\t{clean}\trunning")
    got = Docker.read_list("\n".join(lines) + "\n")
    assert [(c.id, c.status) for c in got] == [(cid, "running") for cid, _ in rows]


@SETTINGS
@given(noise(["2", "0", "running", "a"], 75))
def test_any_listing_text_parses_without_error(text: str) -> None:
    for c in ProxmoxLXC.read_list(text):
        assert isinstance(c.id, int)
    for c in Docker.read_list(text):
        assert re.fullmatch(r"[0-9a-f]{12,64}", str(c.id))


# ------------------------------------------------------------------ agent frames


class _Out:
    def __init__(self) -> None:
        self.data = b""

    def write(self, b: bytes) -> None:
        self.data += b

    def flush(self) -> None:
        pass


class _In:
    def __init__(self, line: bytes) -> None:
        self.lines = [line]

    def readline(self, _limit: int = -1) -> bytes:
        return self.lines.pop(0) if self.lines else b""


@SETTINGS
@given(st.lists(hostile(big=False), min_size=1, max_size=4))
@example(CORPUS["agent_frame_paths"])
def test_an_agent_frame_is_one_line_that_says_what_was_asked(paths: list[str]) -> None:
    """The agent answers each request in one JSON line (remote.agent.serve):
    paths a request names come back in its answer, whatever they hold, and
    no value ends or splits the frame."""
    from gputui.remote.agent import serve

    out = _Out()
    request = json.dumps({"id": 1, "op": "stat", "args": {"paths": paths}}) + "\n"
    serve(_In(request.encode("ascii")), out)
    assert out.data.count(b"\n") == 1 and out.data.endswith(b"\n")
    frame = json.loads(out.data)
    assert frame["id"] == 1
    if frame["ok"]:
        assert [d["path"] for d in frame["result"]] == paths
    else:
        assert "\n" not in frame["error"]


def test_the_corpus_holds_what_the_properties_found() -> None:
    assert set(CORPUS) >= {"tmux_forged_command", "ps_forged_args", "agent_frame_paths"}


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
