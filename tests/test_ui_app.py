"""Pilot tests of the real dashboard app, fed by fixed scenes (no network)."""

from __future__ import annotations

import pytest
from textual.widgets import Log

from gputui.actions import ActionResult
from gputui.demo.scenes import SCENES, T0
from gputui.model import Finding
from gputui.monitor import GpusRead, LogChanged, SessionsChanged
from gputui.ui.app import GputuiApp
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.help import HelpScreen
from gputui.ui.screens.result import ResultScreen
from gputui.ui.widgets.banner import Banner
from helpers import yes_once_shown
from scene_fakes import RecordingActions, SceneMonitor
from ui_scenarios import screen_text

SIZE = (120, 36)


def make_app(
    scene: str = "buffered", **kw: object
) -> tuple[GputuiApp, SceneMonitor, RecordingActions, list[Finding]]:
    snap, lines, findings = SCENES[scene](T0)
    mon = SceneMonitor(snap, lines)
    actions = kw.pop("actions", None) or RecordingActions()
    current = list(findings)
    app = GputuiApp(
        mon,
        actions=actions,  # type: ignore[arg-type]
        diagnose=lambda s, now: list(current),
        clock=lambda: T0,
        live=False,
        **kw,  # type: ignore[arg-type]
    )
    return app, mon, actions, current  # type: ignore[return-value]


def log_text(app: GputuiApp) -> str:
    return "\n".join(app.query_one("#log", Log).lines)


async def test_banner_shows_top_finding_and_clears_when_cause_goes() -> None:
    app, _mon, _act, findings = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        banner = app.query_one(Banner)
        assert banner.display and banner.has_class("-shown")
        text = str(banner.render())
        assert "block-buffered" in text and "[r] relaunch unbuffered" in text
        findings.clear()
        app._tick()
        await pilot.pause()
        assert not banner.has_class("-shown")
        assert not banner.display


async def test_healthy_has_no_banner_and_shows_rows_and_log() -> None:
    app, _mon, _act, _ = make_app("healthy")
    async with app.run_test(size=SIZE):
        assert not app.query_one(Banner).display
        assert "step 599 | loss" in log_text(app)
        gpus = app.query_one("#gpus")
        rendered = screen_text(app)
        assert "H200" in rendered and "655/700 W" in rendered
        assert gpus.region.height >= 10  # 8 GPU rows + header + border


async def test_relaunch_needs_confirmation_n_and_escape_run_nothing() -> None:
    app, _mon, actions, _ = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        for cancel in ("n", "escape"):
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            shown = app.screen.query_one("#confirm-text").render()
            assert "session 'dflash'" in str(shown) and "PYTHONUNBUFFERED=1" in str(shown)
            await pilot.press(cancel)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
        assert len(actions.planned) == 2
        assert actions.executed == []
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")  # focus is on Cancel: enter must not run it
        await pilot.pause()
        assert actions.executed == []
        await pilot.press("r")
        await pilot.pause()
        await yes_once_shown(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert [p.action for p in actions.executed] == ["relaunch"]


async def test_confirmed_plan_is_the_one_shown_when_box_opened() -> None:
    app, mon, actions, _ = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("k")
        await pilot.pause()
        shown = app.screen.plan  # type: ignore[attr-defined]
        mon.snapshot.session_name = "other"  # the world changes while the box is open
        mon.publish({SessionsChanged})
        await yes_once_shown(pilot)
        await app.workers.wait_for_complete()
        assert actions.executed == [shown]
        assert "dflash" in actions.executed[0].target


async def test_read_only_greys_out_every_verb_and_runs_nothing() -> None:
    app, _mon, actions, _ = make_app("buffered", read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "READ-ONLY" in screen_text(app)
        for key, verb in (
            ("r", "relaunch"),
            ("k", "kill"),
            ("K", "force_kill"),
            ("d", "dump"),
            ("f", "flush"),
        ):
            assert app.check_action("verb", (verb,)) is None  # greyed, still listed
            assert app.why_not(verb) == "read-only mode (--read-only)"
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
        assert actions.planned == [] and actions.executed == []
        # each key says why it ran nothing (the header's notices cover READ-ONLY a while)
        assert "read-only mode (--read-only)" in screen_text(app)


async def test_read_only_attaches_read_only_and_says_so() -> None:
    """--read-only keeps attach on (tmux's read-only client): the footer, the
    help and the palette say `attach -r`; the key opens the confirm box."""
    app, _mon, actions, _ = make_app("buffered", read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("verb", ("attach",)) is True
        await pilot.pause()
        assert "a attach -r" in screen_text(app)  # the footer
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "tmux attach -r" in app.screen.markdown
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert [p.action for p in actions.planned] == ["attach"]
        await pilot.press("n")
    app, _mon, _actions, _ = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "a attach " in screen_text(app) and "attach -r" not in screen_text(app)


async def test_verbs_that_do_not_apply_are_greyed_with_reason() -> None:
    app, _mon, _actions, _ = make_app("dead")
    async with app.run_test(size=SIZE):
        assert app.check_action("verb", ("kill",)) is None
        assert app.why_not("kill") == "session dflash is not running"
        assert app.why_not("dump") == "no Python process in the session"
        assert app.check_action("verb", ("attach",)) is True


async def test_dump_result_screen_shows_output_and_saved_file() -> None:
    outcome = ActionResult(
        True,
        "py-spy: 2 threads",
        output="Thread 4242 (active)\n  main (train.py:77)",
        saved_path="/root/.local/state/gputui/dumps/x.txt",
    )
    actions = RecordingActions(outcome)
    app, _mon, _actions, _ = make_app("healthy", actions=actions)
    seen: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d")  # one key: a dump only reads, so no confirm box
        for _ in range(20):
            seen.append(type(app.screen).__name__)
            if isinstance(app.screen, ResultScreen):
                break
            await pilot.pause(0.05)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "ConfirmScreen" not in seen
        assert [a.action for a in actions.executed] == ["dump"]
        assert isinstance(app.screen, ResultScreen)
        shot = screen_text(app)
        assert "main (train.py:77)" in shot and "x.txt" in shot
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ResultScreen)


async def test_action_that_raises_shows_a_failure_box_not_a_crash() -> None:
    actions = RecordingActions()
    actions.raise_on_execute = RuntimeError("ssh channel closed")
    app, _mon, _, _ = make_app("healthy", actions=actions)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("k")
        await pilot.pause()
        await yes_once_shown(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, ResultScreen)
        assert "ssh channel closed" in screen_text(app)


async def test_plan_error_is_one_line_and_opens_no_box() -> None:
    app, _mon, actions, _ = make_app(
        "healthy", actions=RecordingActions(fail_plan="py-spy not found in CT 200")
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert actions.executed == []
        assert any("py-spy not found" in str(n.message) for n in app._notifications)


async def test_log_lines_batched_filter_and_pause() -> None:
    app, mon, _act, _ = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        mon.push_lines(
            [
                "step 200 | loss 1.0 | tok/s 5",
                "Traceback (most recent call last):",
                "ValueError: boom",
            ]
        )
        app._drain_log()
        assert "ValueError: boom" in log_text(app)
        await pilot.press("slash")
        await pilot.press(*"error")
        await pilot.press("enter")
        await pilot.pause()
        assert log_text(app).splitlines() == ["ValueError: boom"]
        await pilot.press("p")  # pause: new lines are held
        mon.push_lines(["RuntimeError: later"])
        app._drain_log()
        assert "later" not in log_text(app)
        await pilot.press("p")
        assert "RuntimeError: later" in log_text(app)


async def test_selecting_a_session_watches_it() -> None:
    app, mon, _act, _ = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#sessions").focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert mon.watched == ["notebook"]


async def test_watch_log_confirms_then_follows_the_real_file() -> None:
    app, mon, _act, _ = make_app("buffered")
    mon.snapshot.log.path = "/workspace/old.log"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert mon.followed == []
        await yes_once_shown(pilot)
        await app.workers.wait_for_complete()
        assert mon.followed == ["/workspace/train.log"]


async def test_help_and_quit_stops_the_monitor() -> None:
    app, mon, _act, _ = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.press("q")
        await pilot.pause()
    assert mon.stopped
    assert app.return_code == 0


@pytest.mark.parametrize("scene", ["healthy", "buffered", "dead"])
async def test_usable_at_100x30(scene: str) -> None:
    app, _mon, _act, _ = make_app(scene)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        for _ in range(30):  # the footer is recomposed once the keys' availability is known
            shot = screen_text(app)
            if "quit" in shot:
                break
            await pilot.pause(0.1)
        for must in ("GPUs", "sessions", "training process", "log", "quit"):
            assert must in shot
        assert app.query_one("#log").region.height >= 3


async def test_user_keymap_rebinds_a_verb_and_the_banner_shows_its_key() -> None:
    """[keys] relaunch = "R": the banner, the help and the footer name R, R
    opens the confirm box and r no longer does (Textual's keymap, by binding id)."""
    app, _mon, actions, _ = make_app("buffered", keys={"relaunch": "R"})
    async with app.run_test(size=SIZE) as pilot:
        assert "[R] relaunch unbuffered" in str(app.query_one(Banner).render())
        await pilot.press("r")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and actions.planned == []
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "| `R` |" in app.screen.markdown


async def test_lines_and_a_tick_during_textuals_teardown_are_let_go() -> None:
    """Textual's teardown removes the screens before the unmount that stops
    the monitor: a batch of lines (drawn at once, or by its pacer's timer)
    or a 1 Hz tick in between found no log panel, and the app ended on
    NoMatches (a loaded CI run, at the end of a relaunch test)."""
    app, mon, _act, _f = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        close_all = app._close_all

        async def lines_while_closing() -> None:
            await close_all()
            mon.push_lines(["a line that arrives while the dashboard goes"])
            mon.publish({LogChanged, GpusRead})
            app._drain_log()
            app._tick()

        app._close_all = lines_while_closing  # type: ignore[method-assign]
    # run_test re-raises whatever the app died of; nothing here
    assert list(app._new_lines) == ["a line that arrives while the dashboard goes"]  # not drawn
