"""One default per setting: every reader takes it from one place.

- The log pane's "stale" word and diagnosis' silence judge by one threshold
  (`diagnose.stale_threshold`): with --stale-after unset it adapts to the
  run (at least [diagnosis] stale_floor_s); the pane said "stale" after a
  flat 30 s while the findings stayed quiet for 120 s.
- config.example.toml shows each default as the code has it (Settings,
  Thresholds, the verbs' keys).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from gputui.config import DEFAULTS, KEYS, Settings, parse_config
from gputui.demo.scenes import SCENES, T0
from gputui.diagnose import Thresholds, diagnose, diagnose_with, stale_threshold
from gputui.remote.ssh import SshTransport
from gputui.remote.target import make_transport
from gputui.ui.app import GputuiApp
from gputui.verbs import SCREEN_KEYS, VERBS
from scene_fakes import RecordingActions, SceneMonitor
from ui_scenarios import screen_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

EXAMPLE = Path(__file__).resolve().parent.parent / "src" / "gputui" / "config.example.toml"
SIZE = (120, 36)


async def pane_says_stale(thresholds: Thresholds | None, silences: list[float]) -> list[bool]:
    """The dashboard on the healthy scene, its clock at each silence of the
    log in turn (stale_after unset): whether the log pane says "stale"."""
    snap, lines, _ = SCENES["healthy"](T0)
    last_line = snap.log.last_line_time
    assert last_line is not None
    now = [T0]
    app = GputuiApp(
        SceneMonitor(snap, lines),
        actions=RecordingActions(),  # type: ignore[arg-type]
        thresholds=thresholds,
        clock=lambda: now[0],
        live=False,
    )
    said = []
    async with app.run_test(size=SIZE) as pilot:
        for silent in silences:
            now[0] = last_line + silent
            app._show_log_state()
            await pilot.pause()
            said.append("◼ stale" in screen_text(app))
    return said


async def test_unset_stale_after_the_log_pane_and_diagnosis_share_one_threshold() -> None:
    snap, _lines, _ = SCENES["healthy"](T0)
    last_line = snap.log.last_line_time
    assert last_line is not None
    threshold = stale_threshold(snap)  # what the rules judge by, stale_after unset
    before, after = threshold - 5, threshold + 5
    assert diagnose(snap, last_line + before) == []  # diagnosis: quiet before
    assert [f.kind for f in diagnose(snap, last_line + after)] == ["progress_stalled"]
    assert await pane_says_stale(None, [before, after]) == [False, True]


async def test_a_set_stale_after_is_stale_to_the_pane_and_the_rules_at_once() -> None:
    """--stale-after 5 on a run stepping every second: a log silent past 5 s
    is stale to the rules too, whatever the step interval. The pane said
    "◼ stale" at 6 s while the rules waited for a step overdue at 10 ×
    the median (10 s), the banner empty between (issue 44's leftover)."""
    snap, _lines, _ = SCENES["healthy"](T0)
    last_line = snap.log.last_line_time
    assert last_line is not None and snap.metrics.median_step_interval == 1.0
    th = Thresholds(stale_after=5.0)
    before, after = 4.0, 6.0
    assert diagnose(snap, last_line + before, th) == []
    assert [f.kind for f in diagnose(snap, last_line + after, th)] == ["progress_stalled"]
    assert await pane_says_stale(th, [before, after]) == [False, True]


def test_the_configs_stale_after_is_the_one_the_rules_read() -> None:
    """`[ui] stale_after` lands in Settings.diagnosis, the one object every
    reader (dashboard, recorder, doctor, host view) hands to the rules."""
    s = parse_config("[ui]\nstale_after = 5\n", Path("gputui.toml"))
    assert s.diagnosis == Thresholds(stale_after=5.0)
    snap, _lines, _ = SCENES["healthy"](T0)
    assert snap.log.last_line_time is not None
    found = diagnose_with(s.diagnosis)(snap, snap.log.last_line_time + 6.0)
    assert [f.kind for f in found] == ["progress_stalled"]


async def test_the_pane_takes_the_configs_diagnosis_thresholds() -> None:
    """[diagnosis] stale_floor_s = 300: the pane keeps quiet past the default 120 s too."""
    th = Thresholds(stale_floor_s=300.0)
    snap, _lines, _ = SCENES["healthy"](T0)
    assert stale_threshold(snap, th) == 300.0
    assert await pane_says_stale(th, [200.0, 305.0]) == [False, True]


# ------------------------------------------------------------ config.example.toml

# Keys the example sets to an example value, not the default: the target and
# the run are the user's own.
EXAMPLE_VALUES = {
    ("", "host"),
    ("", "user"),
    ("", "ct"),
    ("", "session"),
    ("", "log"),
    ("metrics", "regexes"),
    *((s, k) for s, k in KEYS if s == "run"),
}


def default_of(attr: str) -> Any:
    defaults = Settings()
    if attr.startswith("diagnosis."):
        return getattr(defaults.diagnosis, attr.removeprefix("diagnosis."))
    return getattr(defaults, attr)


def example_mismatches(text: str) -> list[str]:
    """Each key the example sets (not as an example of the user's own) whose
    value is not the code's default."""
    data = tomllib.loads(text)
    wrong = []
    for (section, key), (attr, _types) in KEYS.items():
        table = data.get(section, {}) if section else data
        if (section, key) in EXAMPLE_VALUES or section == "keys" or key not in table:
            continue
        if table[key] != default_of(attr):
            name = f"{section}.{key}" if section else key
            wrong.append(f"{name} = {table[key]!r}, default {default_of(attr)!r}")
    return wrong


def commented_key_defaults(text: str) -> dict[str, str]:
    """`# verb = "key"` lines of [keys], where the example lists the defaults."""
    section = text[text.index("\n[keys]") :]
    section = section[: section.index("\n[", 1)]
    return dict(re.findall(r'^# (\w+) = "([^"]*)"$', section, re.M))


def test_the_example_shows_the_defaults() -> None:
    text = EXAMPLE.read_text()
    assert example_mismatches(text) == []
    assert commented_key_defaults(text) == {**{v.id: v.key for v in VERBS}, **SCREEN_KEYS}


@pytest.mark.parametrize(
    ("line", "changed"),
    [("hang_after_s = 60", "hang_after_s = 90"), ("keepalive = 15", "keepalive = 30")],
)
def test_a_default_the_example_gets_wrong_is_named(line: str, changed: str) -> None:
    text = EXAMPLE.read_text()
    assert f"\n{line}" in text
    wrong = example_mismatches(text.replace(f"\n{line}", f"\n{changed}"))
    assert len(wrong) == 1 and changed.split()[0] in wrong[0]


def test_keepalive_0_in_the_config_turns_keepalives_off() -> None:
    """config.example.toml: "0 to turn keepalives off". The transport took
    `keepalive or 15.0`, a second default that made 0 into 15."""
    settings = parse_config("[ssh]\nkeepalive = 0\n", Path("config.toml"))
    settings.host = "127.0.0.1"
    transport = make_transport(settings)
    assert isinstance(transport, SshTransport)
    assert transport.keepalive == 0
    assert transport.connect_timeout == DEFAULTS.connect_timeout
