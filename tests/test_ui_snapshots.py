"""Layout snapshots of the dashboard with fixed scenes and a frozen clock.

Regenerate after an intended change: pytest tests/test_ui_snapshots.py --snapshot-update
"""

from __future__ import annotations

from gputui.actions import ActionResult
from gputui.demo.scenes import PY_SPY_OUTPUT, SCENES, T0
from gputui.ui.app import GputuiApp
from scene_fakes import RecordingActions, SceneMonitor

SIZE = (120, 36)


def scene_app(scene: str, **kw: object) -> GputuiApp:
    snap, lines, findings = SCENES[scene](T0)
    return GputuiApp(
        SceneMonitor(snap, lines),
        actions=kw.pop("actions", None) or RecordingActions(),  # type: ignore[arg-type]
        diagnose=lambda s, now: list(findings),
        clock=lambda: T0,
        live=False,  # no timers: nothing moves between runs
        **kw,  # type: ignore[arg-type]
    )


def test_healthy(snap_compare) -> None:
    assert snap_compare(scene_app("healthy"), terminal_size=SIZE)


def test_buffered_banner(snap_compare) -> None:
    assert snap_compare(scene_app("buffered"), terminal_size=SIZE)


def test_dead_session(snap_compare) -> None:
    assert snap_compare(scene_app("dead"), terminal_size=SIZE)


def test_confirm_relaunch(snap_compare) -> None:
    assert snap_compare(scene_app("buffered"), press=["r"], terminal_size=SIZE)


def test_py_spy_output(snap_compare) -> None:
    outcome = ActionResult(
        True,
        "py-spy dump of pid 4242: 2 threads",
        output=PY_SPY_OUTPUT,
        saved_path="~/.local/state/gputui/dumps/dflash-4242-20270115-080000.txt",
    )
    app = scene_app("healthy", actions=RecordingActions(outcome))

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("d")  # one key: no confirm box for a dump
        await pilot.app.workers.wait_for_complete()
        pilot.app.clear_notifications()  # toasts time out: keep them out of the picture
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_read_only_small(snap_compare) -> None:
    assert snap_compare(scene_app("buffered", read_only=True), terminal_size=(100, 30))


def test_layout_80x24(snap_compare) -> None:
    """The default terminal: banner, GPUs two a line, the run in one line, 8+ log rows."""
    assert snap_compare(scene_app("buffered"), terminal_size=(80, 24))


def test_layout_120x40(snap_compare) -> None:
    assert snap_compare(scene_app("healthy"), terminal_size=(120, 40))


def test_layout_200x60(snap_compare) -> None:
    assert snap_compare(scene_app("healthy"), terminal_size=(200, 60))


def test_gpu_graphs(snap_compare) -> None:
    """`g`: one chart per metric, a line and a legend entry per GPU."""
    assert snap_compare(scene_app("healthy"), press=["g"], terminal_size=SIZE)
