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
    # its run has a [run] command: "l launch again" is offered (the README's shot)
    assert snap_compare(scene_app("dead", can_launch=True), terminal_size=SIZE)


async def plan_shown(pilot) -> None:  # type: ignore[no-untyped-def]
    """Until the confirm box has painted its plan: y runs only a plan shown
    (ui/screens/confirm.py); a y sent before is refused, and said so."""
    from gputui.ui.screens.confirm import ConfirmScreen

    for _ in range(500):
        box = pilot.app.screen
        if isinstance(box, ConfirmScreen) and box.state == "shown":
            await pilot.pause()
            return
        await pilot.pause(0.01)
    raise AssertionError("the plan never showed in the box")


def test_confirm_relaunch(snap_compare) -> None:
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("r")
        await plan_shown(pilot)

    assert snap_compare(scene_app("buffered"), run_before=run_before, terminal_size=SIZE)


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


def test_shared_gpus(snap_compare) -> None:
    """GPU 0 shared with session eval, GPU 7 with CT 201 (eval-box): a line
    under the GPU rows says who holds what; the run panel says it is shared."""
    assert snap_compare(scene_app("shared"), terminal_size=SIZE)


def test_shared_gpus_80x24(snap_compare) -> None:
    """Two GPUs a line: who holds the shared ones in one line, cut with an ellipsis."""
    assert snap_compare(scene_app("shared"), terminal_size=(80, 24))


def test_layout_120x40(snap_compare) -> None:
    assert snap_compare(scene_app("healthy"), terminal_size=(120, 40))


def test_layout_200x60(snap_compare) -> None:
    assert snap_compare(scene_app("healthy"), terminal_size=(200, 60))


def test_gpu_graphs(snap_compare) -> None:
    """`g`: a heatmap row per GPU for utilization, memory and power, one scale."""
    assert snap_compare(scene_app("healthy"), press=["g"], terminal_size=SIZE)


def test_relaunched_80x24(snap_compare) -> None:
    """80×24 right after `r`, `y`: banner, GPU rows and 8+ log rows in view;
    what the relaunch said sits at the header's right end, over nothing."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("r")
        await plan_shown(pilot)
        await pilot.press("y")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(scene_app("buffered"), run_before=run_before, terminal_size=(80, 24))


def zoom_app(points: int) -> GputuiApp:
    """The healthy scene with `points` seconds of GPU history (8 GPUs)."""
    from gputui.demo.scenes import gpus

    snap, lines, findings = SCENES["healthy"](T0)
    snap.gpus = gpus(T0, busy=True, points=points)
    return GputuiApp(
        SceneMonitor(snap, lines),
        actions=RecordingActions(),  # type: ignore[arg-type]
        diagnose=lambda s, now: list(findings),
        clock=lambda: T0,
        live=False,
    )


def test_gpu_graphs_one_minute_80x24(snap_compare) -> None:
    """`g` a minute into a run: the axis covers that minute, 8 labelled rows."""
    assert snap_compare(zoom_app(60), press=["g"], terminal_size=(80, 24))


def test_gpu_graphs_full_history_80x24(snap_compare) -> None:
    assert snap_compare(zoom_app(600), press=["g"], terminal_size=(80, 24))


def whole_run_app(tmp_path, hours: float):  # type: ignore[no-untyped-def]
    from textual.app import App

    from gputui.demo.history import fill
    from gputui.record.history import HistoryWriter
    from gputui.ui.screens.wholerun import WholeRunScreen

    db = tmp_path / "history.sqlite"
    w = HistoryWriter(db, clock=lambda: T0)
    fill(w, "root@10.1.2.6 ct 200", T0, hours=hours, gpus=8)
    w.close()

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(
                WholeRunScreen(db, "root@10.1.2.6 ct 200", live=False, clock=lambda: T0)
            )

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        for _ in range(300):
            if getattr(pilot.app.screen, "loads", 0) >= 1:
                break
            await pilot.pause(0.1)
        await pilot.pause()

    return Host(), run_before


def test_whole_run_one_minute(snap_compare, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`h` on a 1-minute run: a 1-minute axis, loss and throughput drawn."""
    app, run_before = whole_run_app(tmp_path, 1 / 60)
    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_whole_run_ten_hours(snap_compare, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app, run_before = whole_run_app(tmp_path, 10.0)
    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_whole_run_ten_hours_80x24(snap_compare, tmp_path) -> None:  # type: ignore[no-untyped-def]
    app, run_before = whole_run_app(tmp_path, 10.0)
    assert snap_compare(app, run_before=run_before, terminal_size=(80, 24))


def test_help_box(snap_compare) -> None:
    """The help box over the GPU rows: its scroll bar in whole cells, no
    `▂▂`/`▇▇` thumb ends that read as sparkline cells (issue 36)."""
    assert snap_compare(scene_app("healthy"), press=["question_mark"], terminal_size=SIZE)
