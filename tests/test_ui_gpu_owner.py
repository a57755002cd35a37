"""The GPU pane says whose each GPU holder is (issue 45), where a user of
nvitop looks for it (its USER column): after the PID in the line under the
GPU rows, 'session eval (PID 5310 alice, 5.1 GiB)'; a process of another
user than the run's is marked apart (OTHER_USER_STYLE), one of the run's own
user is not. The owner is the container's uid and name, as the agent in the
container read it (Snapshot.gpu_owners). The real app under Textual's pilot,
fed the demo's shared-GPU scene: root's run on 8 GPUs, alice's eval run on
GPU 0 in another session, a CT 201 run on GPU 7 (no owner: not this CT's)."""

from __future__ import annotations

import pytest
from rich.text import Text

from gputui.demo.scenes import SCENES, T0
from gputui.model import GpuOwners, GpuProcess, Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.widgets.gpus import OTHER_USER_STYLE, GpuTable
from scene_fakes import SceneMonitor
from ui_scenarios import screen_text

EVAL_PID = 5310  # alice's eval run on GPU 0 (the scene's CT PID)
LEFT_PID = 6001  # a leftover: its parent gone, a zombie


def _styles_of(line: Text, word: str) -> set[str]:
    """The styles of the spans that cover `word` in `line`."""
    at = line.plain.index(word)
    return {
        str(s.style) for s in line.spans if s.start <= at and s.end >= at + len(word) and s.style
    }


def _held_line(app: GputuiApp, needle: str) -> Text:
    lines = [t for t in app.query_one(GpuTable).lines if needle in t.plain]
    assert lines, [t.plain for t in app.query_one(GpuTable).lines]
    return lines[0]


async def _shown(snap: Snapshot, size: tuple[int, int], needle: str) -> tuple[str, Text]:
    """The screen's text and the GPU pane's line holding `needle`."""
    app = GputuiApp(
        SceneMonitor(snap, []), diagnose=lambda s, now: [], clock=lambda: T0, live=False
    )
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        return screen_text(app), _held_line(app, needle)


@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
async def test_the_gpu_pane_names_another_users_holder_and_marks_it(size: tuple[int, int]) -> None:
    snap, _lines, _findings = SCENES["shared"](T0)
    text, line = await _shown(snap, size, f"PID {EVAL_PID}")
    if size[0] >= 100:
        assert f"session eval (PID {EVAL_PID} alice, 5.1 GiB)" in text, text
    else:  # two GPUs a line: the same words, shorter sizes, at 80 columns
        assert f"0 also session eval (PID {EVAL_PID} alice, 5.1G)" in text, text
    assert OTHER_USER_STYLE in _styles_of(line, "alice"), line.markup
    assert OTHER_USER_STYLE not in _styles_of(line, f"PID {EVAL_PID}"), line.markup


async def test_a_holder_of_the_runs_own_user_is_named_and_not_marked() -> None:
    snap, _lines, _findings = SCENES["shared"](T0)
    snap.gpu_owners = GpuOwners({4242: (0, "root"), EVAL_PID: (0, "root")}, me=0, at=T0)
    text, line = await _shown(snap, (120, 36), f"PID {EVAL_PID}")
    assert f"session eval (PID {EVAL_PID} root, 5.1 GiB)" in text, text
    assert OTHER_USER_STYLE not in _styles_of(line, "root"), line.markup
    assert OTHER_USER_STYLE not in line.markup


async def test_a_leftover_of_another_uid_with_no_name_reads_its_uid() -> None:
    """A zombie of uid 1001 (no passwd entry in the CT) beside root's run:
    'PID 6001 uid 1001 (30.0 GiB, zombie)', the uid marked."""
    snap, _lines, _findings = SCENES["shared"](T0)
    left = GpuProcess("GPU-00000003", 16001, 30_720, "python3", ct_pid=LEFT_PID, in_container=True)
    left.ancestors, left.state = [], "Z"
    snap.gpus.processes.append(left)
    snap.gpu_owners = GpuOwners({4242: (0, "root"), LEFT_PID: (1001, None)}, me=0, at=T0)
    text, line = await _shown(snap, (120, 36), f"PID {LEFT_PID}")
    assert f"PID {LEFT_PID} uid 1001 (30.0 GiB, zombie)" in text, text
    assert OTHER_USER_STYLE in _styles_of(line, "uid 1001"), line.markup
