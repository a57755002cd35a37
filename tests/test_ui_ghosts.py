"""No ghosts on the screen (issue 36, item 3), read off what a terminal shows.

Each test plays the app's real output (partial updates included) on a
character grid (tests/terminal.py) and looks where the user looked:
- a box over the dashboard (help, confirm) showed `▂▂`/`▇▇` in its right
  margin, read as GPU sparkline cells showing through: the box's scroll bar,
  its thumb ends drawn with the sparklines' own partial blocks;
- after `y`, the action's progress toasts piled up over its result box (and
  over the log while it ran: the dashboard's toast rack shows itself once
  given a notification, whatever app.tcss says);
- a stray `▋` in the sessions pane: the table's horizontal scroll bar, the
  command wider than the pane; and the command cut at the border, no `…`,
  the age column out of sight;
- and, for the compositor the dashboard paints with (ui/compositor.py), what
  the terminal shows after a run of partial updates under and over boxes is
  what a fresh render of the same screen shows.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from gputui.actions import ActionPlan, ActionResult
from gputui.model import GpuSample
from gputui.monitor import GpusRead, LogChanged
from gputui.ui.screens.result import ResultScreen
from helpers import yes_once_shown
from scene_fakes import RecordingActions
from terminal import attach, drawn_afresh, inside
from test_ui_snapshots import SIZE, scene_app

VERTICAL_ENDS = set("▁▂▃▄▅▆▇")
HORIZONTAL_ENDS = set("▏▎▍▌▋▊▉")


def glyphs(rows: list[str], kinds: set[str]) -> list[tuple[int, str]]:
    return [(y, row) for y, row in enumerate(rows) if kinds & set(row)]


async def test_a_box_over_the_gpu_rows_shows_no_block_glyphs() -> None:
    """The help box and the relaunch confirm box are taller than 36 rows
    allow: each scrolls, and nothing in it (the plan's body for the confirm
    box: its buttons have borders of ▁) looks like a sparkline cell."""
    for scene, key, box in (
        ("healthy", "question_mark", "#help-box"),
        ("buffered", "r", "#confirm-body"),
    ):
        app = scene_app(scene)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            term = attach(app)
            await pilot.press(key)
            await pilot.pause()
            await pilot.pause()
            region = app.screen.query_one(box).region
            if box == "#help-box":
                region = region.shrink((1, 1, 1, 1))  # in its border (half blocks)
            rows = inside(term, region)
            assert glyphs(rows, VERTICAL_ENDS | HORIZONTAL_ENDS) == [], (key, "\n".join(rows))


class SlowRelaunch(RecordingActions):
    """Says its steps through `progress` (as the real relaunch does), then
    returns a result with details: the result box opens."""

    STEPS = ("stopping the old run…", "SIGINT sent (0.0 s)", "starting session…", "verifying…")

    async def execute(self, plan: ActionPlan) -> ActionResult:
        self.executed.append(plan)
        for step in self.STEPS:
            assert self.progress is not None
            self.progress(step)
            await asyncio.sleep(0.15)
        return ActionResult(
            True, "relaunched: new log 117 bytes after 3 s", output="old run ended\n"
        )


async def test_an_actions_progress_stays_off_the_log_and_its_result_box() -> None:
    actions = SlowRelaunch()
    app = scene_app("buffered", actions=actions)
    actions.progress = lambda text: app.notify(text, timeout=4)
    async with app.run_test(size=SIZE, notifications=True) as pilot:  # Textual's toasts on
        await pilot.pause()
        term = attach(app)
        await pilot.press("r")
        await pilot.pause()
        await yes_once_shown(pilot)
        await pilot.pause(0.4)  # the action runs: the dashboard is on top
        log = inside(term, app._q("#logpanel").region)
        assert not [r for r in log if any(s in r for s in SlowRelaunch.STEPS)], "\n".join(log)
        await app.workers.wait_for_complete()
        for _ in range(3):
            await pilot.pause()
        assert isinstance(app.screen, ResultScreen)
        box = inside(term, app.screen.query_one("#result-box").region)
        said = [r for r in box if any(s in r for s in SlowRelaunch.STEPS) or "running…" in r]
        assert said == [], "\n".join(box)
        header = term.rows()[0]
        assert "n: all)" in header, header  # what it said is in the header, behind n


async def test_the_sessions_pane_fits_its_commands() -> None:
    """A command wider than its column ends in `…` inside the pane, the age
    beside it, and no scroll bar glyph shows in the pane."""
    app = scene_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        term = attach(app)
        await pilot.pause()
        rows = inside(term, app._q("#sessions").region)
        assert glyphs(rows, HORIZONTAL_ENDS | VERTICAL_ENDS) == [], "\n".join(rows)
        head = rows[1]
        assert head.split() == ["│", "session", "state", "exit", "command", "age", "│"], head
        dflash = next(r for r in rows if "dflash" in r)
        assert "bash /r" in dflash and "…" in dflash, dflash  # cut, and says so
        assert dflash.rstrip(" │").endswith(" m"), dflash  # the age, in view


async def mount_cover(screen: Any, text: str, y: int, width: int) -> Any:
    """A one-row widget at column 10, row `y`, over whatever is there (as a
    tooltip would be)."""
    from textual.widgets import Static

    cover = Static(text, id="cover")
    cover.styles.position = "absolute"
    cover.styles.offset = (10, y)
    cover.styles.width = width
    cover.styles.height = 1
    await screen.mount(cover)
    return cover


def count_frames(screen: Any) -> list[int]:
    """[the compositor's frames of `screen` from now on] (a list, counted into)."""
    frames = [0]
    original = screen._compositor_refresh

    def counted() -> None:
        frames[0] += 1
        original()

    screen._compositor_refresh = counted
    return frames


def busy_gpus(monitor: Any, now: float, rng: random.Random) -> None:
    """A second's samples of 8 busy H200s, utilization and memory at random."""
    for i in range(8):
        monitor.snapshot.gpus.add(
            GpuSample(
                index=i,
                time=now,
                name="NVIDIA H200",
                uuid=f"GPU-{i:08d}",
                mem_used_mib=80000 + rng.random() * 60000,
                mem_total_mib=143771.0,
                util_pct=rng.randint(0, 100),
                temp_c=60,
                power_w=600,
                power_limit_w=700,
                sm_clock_mhz=1980,
            )
        )


async def test_the_terminal_shows_what_a_fresh_render_shows() -> None:
    """GPU samples and log lines keep coming (the 1 Hz tick, log writes)
    while the dashboard, the help box, the confirm box and the GPU graphs
    take turns on top: every cell the terminal got adds up to the screen a
    full render draws — nothing left behind, nothing painted over a box."""
    now = [1_800_000_000.0]
    app = scene_app("healthy")
    app.clock = lambda: now[0]
    monitor = app.monitor
    rng = random.Random(36)
    step = [0]

    def second() -> None:
        now[0] += 1
        busy_gpus(monitor, now[0], rng)
        for _ in range(3):
            step[0] += 1
            monitor.push_lines([f"step {step[0]} | loss {rng.random():.4f}"])
        monitor.publish({GpusRead, LogChanged})
        app._tick()

    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        term = attach(app)
        turns = [[], ["question_mark"], ["escape"], ["r"], ["n"], ["g"], ["escape"]]
        for keys in turns:
            for key in keys:
                await pilot.press(key)
            for _ in range(4):
                second()
                await pilot.pause(0.1)
                assert term.text().splitlines() == drawn_afresh(app).splitlines(), (
                    keys,
                    type(app.screen).__name__,
                )


async def test_log_frames_drawn_straight_to_the_terminal_are_what_the_compositor_draws() -> None:
    """Under a stream the log's rows go to the terminal without the
    compositor (`TailLog._blit`); what the terminal shows is still a fresh
    render of the screen — after one-line and many-line writes, lines wider
    than the view, prunes — and a toast over the log stays on top (the log
    goes back to the compositor while anything covers it)."""

    from gputui.ui.widgets.logview import TailLog

    app = scene_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        term = attach(app)
        await pilot.pause()
        log = app.query_one("#log", TailLog)
        log.max_lines = 60
        screen = app.screen
        frames = count_frames(screen)
        rng = random.Random(7)
        n = 0
        for batch in (1, 1, 3, 12, 1, 40, 2, 1, 5):
            log.write_lines(
                [
                    f"step {n + i} loss {rng.random():.4f} " + "x" * rng.randint(0, 140)
                    for i in range(batch)
                ]
            )
            n += batch
            await pilot.pause()
            assert term.text().splitlines() == drawn_afresh(app).splitlines(), n
        assert frames[0] == 0  # every frame of lines was drawn straight

        # a widget over the log's rows (as a tooltip would be)
        cover = await mount_cover(screen, "something over the log", log.region.y + 2, 30)
        await pilot.pause()
        assert cover.region.overlaps(log.region)
        before = frames[0]
        for i in range(3):
            log.write_lines([f"under the cover {i}"])
            await pilot.pause()
        text = term.text()
        assert "something over the log" in text
        assert text.splitlines() == drawn_afresh(app).splitlines()
        assert frames[0] > before  # the compositor drew them, the cover on top


async def test_the_ticks_rows_are_painted_past_the_compositor_and_stay_under_a_cover() -> None:
    """Once a second the GPU rows, the run's rows, the log's state line and
    the header change a few rows: they are painted straight to the terminal
    at the tick's end (ui/directpaint.py), no compositor frame — and what
    the terminal shows is a fresh render. A widget over the GPU rows sends
    them back to the compositor, and stays on top."""

    now = [1_800_000_000.0]
    app = scene_app("healthy")
    app.clock = lambda: now[0]
    monitor = app.monitor
    rng = random.Random(37)

    def second() -> None:
        now[0] += 1
        busy_gpus(monitor, now[0], rng)
        monitor.publish({GpusRead})
        app._tick()

    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for _ in range(3):  # the first seconds settle the layout (the table's height)
            second()
            await pilot.pause()
        term = attach(app)
        await pilot.pause()
        screen = app.screen
        frames = count_frames(screen)
        gpus = app.query_one("#gpus")
        before = term.rows()
        for _ in range(4):
            second()
            await pilot.pause()
            assert term.text().splitlines() == drawn_afresh(app).splitlines()
        assert frames[0] == 0  # every tick's rows went straight to the terminal
        assert term.rows()[gpus.region.y + 1] != before[gpus.region.y + 1]  # and changed

        await mount_cover(screen, "something over the GPU rows", gpus.region.y + 1, 40)
        await pilot.pause()
        drawn = frames[0]
        for _ in range(3):
            second()
            await pilot.pause()
        text = term.text()
        assert "something over the GPU rows" in text
        assert text.splitlines() == drawn_afresh(app).splitlines()
        assert frames[0] > drawn  # the compositor drew them, the cover on top
