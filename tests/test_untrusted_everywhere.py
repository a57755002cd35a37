"""Every string in a snapshot is remote text (issue #11): put hostile text
(and blank, whitespace-only and empty strings) in *every* string field of
every demo scene at once, then run the diagnosis, the doctor's report and
every pure text function the dashboard draws with. None may raise, and no
raw control character may come out.

The app-driving property tests in test_untrusted.py replace a chosen few
fields and cost seconds per example; this one is pure, so it can afford
hundreds of examples and every field. It exists because CI found a crash
(a reader command of '\\x85', NEL, which `str.split()` drops) in a field
the few chosen ones did not reach.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import deque
from enum import Enum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text

from gputui.demo.scenes import SCENES, T0
from gputui.diagnose import Thresholds, diagnose
from gputui.doctor.report import findings_to_json, render_text
from gputui.host.view import health_word
from gputui.model import Snapshot
from gputui.ui.format import buffering_verdict, stdout_route
from gputui.ui.widgets.banner import banner_text
from gputui.ui.widgets.gpus import gpu_rows, gpu_title
from gputui.ui.widgets.logview import log_state_text
from gputui.ui.widgets.runinfo import proc_text, run_line_text
from gputui.ui.widgets.sessions import session_row
from gputui.ui.widgets.status import status_text
from hostile import raw_controls

# Unicode whitespace that `str.split()` drops and `str.strip()` removes.
BLANKS = " \t\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2007\u200a\u2028\u2029\u202f\u205f\u3000"

REMOTE_TEXT = st.one_of(
    st.just(""),
    st.text(alphabet=BLANKS, min_size=1, max_size=4),
    st.text(min_size=1, max_size=12),  # any code point, surrogates included
    st.builds(
        lambda a, b: a + b,
        st.sampled_from(["python3 ", "tee ", "/w/", "[", "#(", "\x1b]0;"]),
        st.text(max_size=6),
    ),
)
# Where the scene's own strings are identifiers gputui made, not remote text.
NOT_REMOTE = {"target", "kind"}


def poison(obj: Any, pick: Any, depth: int = 0) -> Any:
    """`obj` with every str (in fields, lists, tuples, deques, dict values)
    replaced by `pick()`; enums, numbers and gputui's own labels kept."""
    if isinstance(obj, Enum) or depth > 8:
        return obj
    if isinstance(obj, str):
        return pick()
    if isinstance(obj, list):
        return [poison(x, pick, depth + 1) for x in obj]
    if isinstance(obj, tuple):
        return tuple(poison(x, pick, depth + 1) for x in obj)
    if isinstance(obj, deque):
        return deque((poison(x, pick, depth + 1) for x in obj), maxlen=obj.maxlen)
    if isinstance(obj, dict):
        return {k: poison(v, pick, depth + 1) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {
            f.name: poison(getattr(obj, f.name), pick, depth + 1)
            for f in dataclasses.fields(obj)
            if f.init and f.name not in NOT_REMOTE
        }
        return dataclasses.replace(obj, **changes)
    return obj


CONSOLE = Console(width=100, color_system=None, legacy_windows=False)


def printed(t: Text | str) -> str:
    """What the terminal would be sent for this text (no styles); a str is
    printed as the plain text it is, never as markup."""
    with CONSOLE.capture() as cap:
        CONSOLE.print(t, markup=False, highlight=False)
    return cap.get()


def drawn_texts(snap: Snapshot) -> list[Text | str]:
    findings = diagnose(snap, T0, Thresholds(stale_after=20.0))
    out: list[Text | str] = [
        status_text(snap),
        proc_text(snap),
        run_line_text(snap),
        log_state_text(snap.log, T0, 20.0),
        gpu_title(snap.gpus, "5 min"),
        *gpu_rows(snap.gpus, 100, T0),
        *gpu_rows(snap.gpus, 60, T0, compact=True),
        render_text({}, snap, findings, now=T0),
    ]
    json.dumps(findings_to_json({}, snap, findings, now=T0))
    for f in findings:
        out.append(banner_text(f, ["[?] help"], 1))
    out.append(health_word(findings, snap)[0])
    for s in snap.sessions:
        out.extend(c for c in session_row(s, T0, snap.session_name))
    for p in snap.procs:
        stdout_route(p)  # raw words for its callers, who make them visible: must not raise
        out.append(buffering_verdict(p)[1])
    return out


@pytest.mark.parametrize("scene", sorted(SCENES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=st.lists(REMOTE_TEXT, min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_hostile_text_in_every_field_of_every_scene(scene: str, pool: list[str], seed: int) -> None:
    snap, _lines, _findings = SCENES[scene](T0)
    rng = random.Random(seed)
    hostile_snap = poison(snap, lambda: rng.choice(pool))
    for t in drawn_texts(hostile_snap):
        text = t.plain if isinstance(t, Text) else t
        assert raw_controls(printed(t)) == [], (scene, text[:200])


@pytest.mark.parametrize("known", [True, False], ids=["statvfs", "enospc-line"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=st.lists(REMOTE_TEXT, min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_hostile_text_in_a_full_disk_finding(known: bool, pool: list[str], seed: int) -> None:
    """The disk_full finding quotes the log's path and the line that says
    "No space left on device" (both remote): the rule must fire and stay clean."""
    snap, _lines, _findings = SCENES["buffered"](T0)
    rng = random.Random(seed)
    hostile_snap = poison(snap, lambda: rng.choice(pool))
    if not hostile_snap.log.path.strip():
        hostile_snap.log.path = "/w/" + rng.choice(pool)
    if known:
        hostile_snap.log.fs_free, hostile_snap.log.fs_total = 0, 1 << 30
    hostile_snap.pane_tail.append(f"tee: {rng.choice(pool)}: No space left on device")
    assert "disk_full" in [f.kind for f in diagnose(hostile_snap, T0, Thresholds(stale_after=20.0))]
    for t in drawn_texts(hostile_snap):
        text = t.plain if isinstance(t, Text) else t
        assert raw_controls(printed(t)) == [], text[:200]


def test_poison_reaches_nested_remote_fields() -> None:
    """The walk must reach the field CI's crash was in: a pipe reader's command."""
    snap, _lines, _findings = SCENES["buffered"](T0)
    hostile_snap = poison(snap, lambda: "\x85")
    readers = [r for p in hostile_snap.procs for r in p.stdout.readers]
    assert readers and all(cmd == "\x85" for _pid, cmd in readers)
    assert hostile_snap.target == snap.target
