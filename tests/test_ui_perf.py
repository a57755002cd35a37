"""The dashboard's light-on-CPU habits: live data repaints, it does not reflow
the screen; lines still arrive in order, none lost."""

from __future__ import annotations

import asyncio
import itertools
import random
from dataclasses import replace
from typing import Any

import pytest
from rich.style import Style
from textual.geometry import Offset, Region
from textual.widget import Widget
from textual.widgets import Log

from gputui.demo.scenes import SCENES, T0
from gputui.monitor import GpusRead, LogChanged
from gputui.ui.app import GputuiApp
from gputui.ui.pacing import WRITES_PER_S
from gputui.ui.widgets.banner import Banner
from gputui.ui.widgets.logview import TailLog
from scene_fakes import SceneMonitor

SIZE = (120, 36)
_NOMETA = Style()


def make_app(scene: str = "healthy") -> tuple[GputuiApp, SceneMonitor]:
    snap, lines, findings = SCENES[scene](T0)
    mon = SceneMonitor(snap, lines)
    app = GputuiApp(mon, diagnose=lambda s, now: list(findings), clock=lambda: T0, live=False)
    return app, mon


def count_layouts(app: GputuiApp) -> list[int]:
    """Counts full layout passes of the dashboard screen, and the compositor's
    re-arrangements of the whole screen (a refresh of a widget that is not
    on screen, such as a 0-wide scrollbar, costs one without a layout)."""
    screen: Any = app.screen
    n = [0]
    orig = screen._refresh_layout
    compositor = screen._compositor
    orig_arrange = compositor._arrange_root

    def counted(*a: Any, **kw: Any) -> None:
        n[0] += 1
        orig(*a, **kw)

    def arranged(*a: Any, **kw: Any) -> Any:
        n[0] += 1
        return orig_arrange(*a, **kw)

    screen._refresh_layout = counted
    compositor._arrange_root = arranged
    return n


def count_renders(app: GputuiApp) -> list[str]:
    """From now on, the class name of each widget the screen renders, once a render."""
    rendered: list[str] = []
    for w in app.screen.walk_children():
        orig = w.render_lines

        def counted(crop: Any, w: Any = w, orig: Any = orig) -> Any:
            rendered.append(type(w).__name__)
            return orig(crop)

        w.render_lines = counted  # type: ignore[method-assign]
    return rendered


def assert_rows_as_textual_renders(log: TailLog) -> None:
    """Every row of the log on screen equals a fresh render by Textual's own styles cache."""
    from textual._styles_cache import StylesCache

    crop = Region(0, 0, log.size.width, log.size.height)
    got = [list(s) for s in log.render_lines(crop)]
    want = [list(s) for s in StylesCache().render_widget(log, crop)]
    assert [[x.text for x in r] for r in got] == [[x.text for x in r] for r in want]
    # the drawn rows go without the per-cell offsets (meta a selection reads,
    # never sent to the terminal): the same cells, the same colours
    assert [[(x.text, _drawn(x.style)) for x in r] for r in got] == [
        [(x.text, _drawn(x.style)) for x in r] for r in want
    ]


def _drawn(style: Any) -> Any:
    return None if style is None else style.clear_meta_and_links()


def count_rows(widget: Any) -> list[int]:
    """From now on, each row `widget` draws (its `render_line` calls, and the
    log's one-step rows, `TailLog._row_segments`)."""
    rows: list[int] = []
    orig = widget.render_line

    def counted(y: int) -> Any:
        rows.append(y)
        return orig(y)

    widget.render_line = counted
    one_step = getattr(widget, "_row_segments", None)
    if one_step is not None:

        def counted_line(n: int, *a: Any) -> Any:
            got = one_step(n, *a)
            if got is not None:
                rows.append(n)
            return got

        widget._row_segments = counted_line
    return rows


async def settled(app: GputuiApp, pilot: Any) -> list[int]:
    """Wait until start-up has laid the screen out (mounts, the sessions
    table's first idle, scrollbars), however slow the machine; then count."""
    layouts = count_layouts(app)
    for _ in range(50):
        before = layouts[0]
        await pilot.pause(0.1)
        if layouts[0] == before:
            break
    layouts[0] = 0
    return layouts


async def test_log_writes_and_unchanged_ticks_do_not_reflow_the_screen() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", TailLog)
        layouts = await settled(app, pilot)
        lines_before = log.line_count
        for i in range(30):
            mon.push_lines([f"step {1000 + i} | loss 0.5 | tok/s 100 " + "x" * i])
            app._drain_log()
            app._tick()
            await pilot.pause()
        assert log.line_count == lines_before + 30
        assert log.lines[-1].startswith("step 1029")
        assert log.virtual_size.height == log.line_count
        assert log.virtual_size.width >= len(log.lines[-1])
        assert log.is_vertical_scroll_end  # still pinned to the end
        assert layouts[0] == 0


async def test_log_view_stays_where_the_user_scrolled() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", Log)
        mon.push_lines([f"line {i}" for i in range(200)])
        app._drain_log()
        await pilot.pause()
        assert log.is_vertical_scroll_end
        log.scroll_to(y=10, animate=False, immediate=True)
        mon.push_lines(["line 200"])
        app._drain_log()
        await pilot.pause()
        assert log.scroll_y == 10
        assert log.lines[-1] == "line 200"


async def test_news_of_the_log_state_alone_arms_no_drain() -> None:
    """A stat of the log right after a write (its size, its time: each
    poll) carries no lines: nothing to write, so no drain is put off for the
    pacer (a wake of the event loop ~0.2 s later, for nothing); the next
    lines still go as the pacer allows."""
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", Log)
        await pilot.pause(1.0)  # a quiet spell
        for i in range(2):  # the pacer's burst, spent
            mon.push_lines([f"line {i}"])
            mon.publish({LogChanged})
        assert log.lines[-1] == "line 1"
        mon.publish({LogChanged})  # the log's state alone
        assert not app._log_flush_pending
        mon.push_lines(["line 2"])  # held for the pacer, then written
        assert app._log_flush_pending
        await pilot.pause(1 / WRITES_PER_S + 0.15)
        assert log.lines[-1] == "line 2"


async def test_log_lines_show_on_arrival_then_in_paced_batches() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", Log)
        writes: list[list[str]] = []
        orig = log.write_lines

        def counted(lines: Any, scroll_end: bool | None = None) -> Any:
            writes.append(list(lines))
            return orig(writes[-1], scroll_end)

        log.write_lines = counted  # type: ignore[method-assign]
        await pilot.pause(1.0)  # a quiet spell
        mon.push_lines(["first"])
        mon.publish({LogChanged})
        assert log.lines[-1] == "first"  # at once: no timer in the way
        for i in range(8):  # a flood right after: one more at once, then held
            mon.push_lines([f"more {i}"])
            mon.publish({LogChanged})
        assert writes == [["first"], ["more 0"]]
        await pilot.pause(1 / WRITES_PER_S + 0.15)
        assert log.lines[-8:] == [f"more {i}" for i in range(8)]
        assert writes[2:] == [[f"more {i}" for i in range(1, 8)]]  # one batch


async def test_a_burst_shows_its_last_lines_and_says_how_many_were_skipped() -> None:
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", Log)
        burst = [f"burst {i}" for i in range(3000)]
        mon.push_lines(burst, dropped=7)  # the monitor let 7 go
        app._drain_log()
        app._tick()
        await pilot.pause()
        assert log.lines[-201] == "⋯ 2,800 lines skipped (burst; still in the log file) ⋯"
        assert log.lines[-200:] == burst[-200:]  # in order, the newest last
        state = str(app.query_one("#log-state").render())
        assert "2,807 lines skipped during burst" in state
        mon.push_lines(["after 1", "after 2"])  # a normal batch: every line
        app._drain_log()
        assert log.lines[-2:] == ["after 1", "after 2"]
        await pilot.press("p", "p")  # pause + resume redraws every kept line
        assert log.lines[-3002:] == [*burst, "after 1", "after 2"]


async def test_log_width_counts_cells_for_tabs_and_wide_characters() -> None:
    app, _mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        log = app.query_one("#log", TailLog)
        log.clear()
        await pilot.pause()
        widest = 0
        for line, cells in (("abc", 3), ("a\tb", 9), ("日本語のログ", 12), ("x" * 150, 150)):
            log.write_lines([line])
            widest = max(widest, cells)
            assert log.virtual_size.width == widest, line


async def test_p_and_q_reach_the_filter_box_and_open_boxes_not_the_dashboard() -> None:
    app, _mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")  # on the dashboard: handled by the app at once
        assert app.query_one("LogPanel").paused  # type: ignore[attr-defined]
        await pilot.press("p")
        await pilot.press("slash", *"step q", "enter")
        await pilot.pause()
        assert app.query_one("#log-filter").value == "step q"  # type: ignore[attr-defined]
        assert not app.query_one("LogPanel").paused  # type: ignore[attr-defined]
        assert app.is_running
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("p", "q")  # the help box is on top: not the dashboard's keys
        await pilot.pause()
        assert app.is_running
        assert not app.query_one("LogPanel").paused  # type: ignore[attr-defined]


def test_gpu_rows_keep_unknown_readings_as_gaps_not_zero() -> None:
    """[N/A] utilization must not draw as an idle GPU (0 %)."""
    from gputui.model import GpuSample, GpuState
    from gputui.ui.widgets.gpus import gpu_row

    g = GpuState()
    for k, util in enumerate([90.0, None, None, 0.0]):
        g.add(GpuSample(index=0, time=T0 - 3 + k, util_pct=util, mem_total_mib=1000))
    row = gpu_row(
        0,
        g.latest[0],
        g.util_history[0],
        g.mem_history[0],
        now=T0,
        cells=6,
        span=1.0,
        held=False,
        lost_for=None,
    ).plain
    assert row.startswith("0  ")
    assert row[3:9] == "  █  ▁"  # before the history: blank; [N/A]: blank; 0 %: the lowest block


async def test_banner_evidence_that_moves_repaints_without_a_layout() -> None:
    """The banner's evidence quotes ages that move every second: the same
    number of rows is a repaint; more rows is a layout (the banner grows)."""
    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        banner = app.query_one(Banner)
        f = banner.finding
        assert f is not None and len(f.evidence) >= 2
        layouts = await settled(app, pilot)
        height = banner.size.height
        for age in range(30, 40):
            moved = replace(f, evidence=[f"log silent {age} s", *f.evidence[1:]])
            banner.show([moved])
            await pilot.pause()
        assert layouts[0] == 0
        assert "log silent 39 s" in str(banner.render())
        one_line = replace(f, evidence=f.evidence[:1])
        banner.show([one_line])
        await pilot.pause()
        assert layouts[0] > 0 and banner.size.height == height - (len(f.evidence[:3]) - 1)


async def test_a_moving_age_in_the_banner_restyles_only_its_row() -> None:
    """The evidence's ages move every second: only the row that changed is
    drawn again (a `Static` re-wrapped and re-rendered every row), and the
    rows on screen are what a fresh render gives."""
    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        banner = app.query_one(Banner)
        f = banner.finding
        assert f is not None and len(f.evidence) >= 2
        drawn = count_rows(banner)
        rows = banner.size.height
        banner.show([replace(f, evidence=[f"log silent {n} s" for n in (41, 7)])])
        await pilot.pause()
        drawn.clear()
        banner.show([replace(f, evidence=[f"log silent {n} s" for n in (42, 7)])])
        await pilot.pause()
        assert drawn == [2], drawn  # title, keys, then the first evidence line
        assert banner.size.height == rows  # the same rows: no layout
        text = [s.text for s in app.screen._compositor.render_strips()]
        top = banner.region.y
        assert "log silent 42 s" in text[top + 2] and "log silent 7 s" in text[top + 3]


async def test_a_log_write_paints_only_the_log() -> None:
    """LeanCompositor: a log write renders the log and what lies under it
    (the screen, the log panel), not the header, banner, GPU rows or footer;
    and what reaches the terminal is what Textual's own compositor sends."""
    app, mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        rendered = count_renders(app)
        mon.push_lines(["one more line"])
        app._drain_log()
        await pilot.pause()
        assert "TailLog" in rendered
        assert not {"GpuTable", "Banner", "StatusLine", "Footer"} & set(rendered), rendered


async def test_a_frame_of_gpu_rows_and_run_panel_leaves_the_sessions_table_alone() -> None:
    """The once-a-second frame changes the GPU rows and the run panel; their
    bounding box spans the sessions table beside the run panel, but none of
    its cells change, so it is not rendered (it was, every second)."""
    from gputui.ui.widgets.gpus import GpuTable
    from gputui.ui.widgets.runinfo import RunPanel
    from gputui.ui.widgets.sessions import SessionList

    app, _mon = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        sessions, run = app.query_one(SessionList), app.query_one(RunPanel)
        assert sessions.region.y == run.region.y  # side by side: one bounding box
        rendered = count_renders(app)
        app.query_one(GpuTable).refresh()
        run.refresh()
        await pilot.pause()
        assert {"GpuTable", "RunPanel"} <= set(rendered), rendered
        assert "SessionList" not in rendered, rendered


def _terminal_cells(compositor: Any, regions: list[Region]) -> list[tuple[int, int, str]]:
    """The (row, column, text) runs a partial update would send for `regions`."""
    from textual._compositor import ChopsUpdate

    compositor._dirty_regions.clear()
    compositor._dirty_regions.update(regions)
    update = compositor.render_partial_update()
    assert isinstance(update, ChopsUpdate)
    out = []
    for y, x1, x2 in update.spans:
        for end, (x, strip) in zip(update.chop_ends[y], update.chops[y].items(), strict=True):
            if strip is None or x >= x2 or end <= x1:
                continue
            text = strip.text
            lo, hi = max(x, x1) - x, min(end, x2) - x
            out.append((y, max(x, x1), text[lo:hi]))
    return out


async def test_lean_compositor_sends_what_textual_sends() -> None:
    """Every widget's region, and rectangles across several widgets: the
    cells sent by LeanCompositor equal those of Textual's compositor."""
    from textual._compositor import Compositor

    from gputui.ui.compositor import LeanCompositor

    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        screen: Any = app.screen
        lean = screen._compositor
        assert isinstance(lean, LeanCompositor)
        plain = Compositor()
        plain.reflow(screen, lean.size)
        cases = [region for region, _clip in lean.visible_widgets.values()]
        cases += [Region(0, 30, 40, 3), Region(50, 0, 10, 36), Region(3, 5, 100, 1)]
        rnd = random.Random(16)
        w, h = SIZE
        boxes = []
        for _ in range(40):
            x, y = rnd.randrange(w), rnd.randrange(h)
            boxes.append(Region(x, y, rnd.randint(1, w - x), rnd.randint(1, h - y)))
        updates = [[c] for c in cases] + [[cases[1], cases[-1]], [Region(0, 0, 1, 1)]]
        updates += [boxes[i : i + 1 + i % 3] for i in range(0, 40, 2)]
        for regions in updates:
            want = _terminal_cells(plain, regions)
            assert want, regions
            assert _terminal_cells(lean, regions) == want, regions


async def test_log_rows_after_writes_and_prunes_are_what_textual_renders() -> None:
    """After writes, prunes past max_lines (the lines move up, the scroll
    position stays), a width change and a clear, every row of the log on
    screen equals a fresh render by Textual's own styles cache."""

    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        log = app.query_one("#log", TailLog)
        log.max_lines = 60

        async def check() -> None:
            await pilot.pause()
            assert_rows_as_textual_renders(log)

        n = 0
        for batch in (1, 3, 1, 7, 2, 30, 1, 25, 2, 1):
            log.write_lines([f"step {n + i} loss {i / 7:.3f} Error {i}" for i in range(batch)])
            n += batch
            await check()
        assert log.line_count == 60 and log.lines[0].startswith("step 13 ")
        width = log.size.width
        log.write_lines(  # what the one-step rows (TailLog._row_segments) meet
            [
                "tab\tseparated\tloss 0.5",
                "wide 训练 步骤 loss 1.25 🚀 tokens/s 1234",
                "x" * width,
                "y" * (width - 1) + "训",
                "z" * (width + 7),
                "",
                "\x1b[31mred\x1b[0m raw escape \x07 bell NaN loss",
                "{'loss': 2.5, 'grad_norm': 1.1, 'learning_rate': 1e-05, 'epoch': 0.1}",
            ]
        )
        await check()
        await pilot.resize_terminal(100, 30)
        await check()
        log.clear()
        log.write_lines(["after clear"])
        await check()


async def test_log_rows_after_a_theme_change_are_in_its_colours() -> None:
    """The log keeps its rows' colours (and whether its styles add to a
    row) until its styles change: a new theme (every colour, the
    background behind the log) or the dashboard's size classes (a
    shorter terminal) draws its rows in the new colours — every cell on
    the background Textual computes afresh — and as Textual would."""

    def backgrounds(log: TailLog) -> set[Any]:
        rows = log._screen_rows(Region(0, 0, log.size.width, log.size.height))
        return {seg.style.bgcolor.triplet for row in rows for seg in row if seg.style}

    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        log = app.query_one("#log", TailLog)
        # an empty line and one wider than the view: Textual's own steps
        wide = "w" * (log.size.width + 5)
        lines = ["step 1 loss 0.5", "RuntimeError: boom", "", "WARNING: slow", wide, "plain"]
        seen = []
        for theme in ("textual-dark", "textual-light", "nord"):
            app.theme = theme
            await pilot.pause()
            log.write_lines(lines)
            await pilot.pause()
            assert_rows_as_textual_renders(log)
            fresh = Widget.background_colors.fget(log)[1]  # type: ignore[attr-defined]
            assert backgrounds(log) == {fresh.rich_color.triplet}
            seen.append(fresh)
        assert len(set(seen)) == 3
        await pilot.resize_terminal(80, 20)  # the dashboard's size classes
        await pilot.pause()
        log.write_lines(lines)
        await pilot.pause()
        assert_rows_as_textual_renders(log)


async def test_a_selection_still_finds_its_place_in_the_log() -> None:
    """The drawn rows go without per-cell offsets; a mouse over the log still
    gets its line and column (what a text selection starts from), and a
    selection drawn through Textual's own path holds the selected text."""
    from textual.selection import Selection

    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        log = app.query_one("#log", TailLog)
        log.clear()
        log.write_lines([f"step {i} loss {i / 7:.3f} tokens/s 1{i:03d}" for i in range(80)])
        await pilot.pause()
        region = log.content_region
        top = int(log.scroll_y)
        widget, offset = app.screen.get_widget_and_offset_at(region.x + 5, region.y + 2)
        assert widget is log
        assert offset is not None and (offset.x, offset.y) == (5, top + 2)
        assert (
            "offset"
            not in (
                log.render_lines(Region(0, 2, region.width, 1))[0]._segments[0].style or _NOMETA
            ).meta
        )
        log.selection_updated(Selection.from_offsets(Offset(0, top + 2), Offset(4, top + 2)))
        assert log.get_selection(
            Selection.from_offsets(Offset(0, top + 2), Offset(4, top + 2))
        ) == (
            "step",
            "\n",
        )


async def test_log_rows_carried_across_scrolls_are_what_textual_renders() -> None:
    """A write that scrolls the view keeps the strips of rows still in view
    (`TailLog._scroll_rows`), and prunes come in steps: after one-line writes,
    bigger ones, the user scrolling up and down, a prune step and a width
    change, every row equals a fresh render by Textual's own styles cache;
    and a one-line write restyles one row, not the whole view."""
    from gputui.ui.widgets.logview import PRUNE_STEP

    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        log = app.query_one("#log", TailLog)
        log.max_lines = PRUNE_STEP * 4
        n = 0

        async def write(k: int) -> None:
            nonlocal n
            log.write_lines([f"step {n + i} loss {i / 7:.3f} Error {i}" for i in range(k)])
            n += k
            await check()

        async def check() -> None:
            await pilot.pause()
            assert_rows_as_textual_renders(log)

        for k in (60, 1, 1, 2, 5, 1):
            await write(k)
        orig = log.render_line
        styled = count_rows(log)
        log.write_lines([f"step {n} loss 0.000 Error 0"])
        n += 1
        await pilot.pause()
        assert len(styled) == 1, styled  # the new bottom row only
        log.render_line = orig  # type: ignore[method-assign]
        del log._row_segments
        await check()
        for y in (log.scroll_y - 3, log.scroll_y - 1, log.scroll_y + 2):
            log.scroll_to(y=y, animate=False, immediate=True)
            await check()
        log.scroll_end(animate=False, immediate=True)
        await check()
        await write(PRUNE_STEP * 5 - 1 - len(log.lines))  # one line short of a prune step
        assert log.line_count == PRUNE_STEP * 5 - 1
        await write(1)  # the step: back to max_lines
        assert (
            log.line_count == PRUNE_STEP * 4 and log.lines[-1] == f"step {n - 1} loss 0.000 Error 0"
        )
        for k in (1, 3, 1):
            await write(k)
        await pilot.resize_terminal(100, 30)
        await check()
        await write(1)


async def test_log_that_shrinks_at_its_end_keeps_following() -> None:
    """The banner grows (or the terminal gets shorter) while the log is at its
    end: new lines are still shown; a log the user scrolled up stays put."""
    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        log = app.query_one("#log", TailLog)
        log.write_lines([f"a {i}" for i in range(100)])
        await pilot.pause()
        assert log.is_vertical_scroll_end
        log.styles.height = log.size.height - 4
        await pilot.pause()
        log.write_lines(["b 1"])
        await pilot.pause()
        assert log.is_vertical_scroll_end and log.scroll_y == log.max_scroll_y
        log.scroll_to(y=10, animate=False, immediate=True)
        await pilot.pause()
        log.styles.height = log.size.height - 2
        log.write_lines(["b 2"])
        await pilot.pause()
        assert log.scroll_y == 10


def test_session_ages_change_at_most_once_a_minute() -> None:
    """Each change of a cell redraws the whole sessions table (~15 ms): the
    age column moves once a minute, not with every second of a new session."""
    from gputui.ui.widgets.sessions import session_age

    ages = [session_age(t) for t in range(3600)]
    assert sum(a != b for a, b in itertools.pairwise(ages)) <= 60
    assert (ages[5], ages[75], ages[150], ages[3599]) == ("<1 m", "1 m", "2 m", "60 m")


async def test_gpu_rows_that_read_the_same_are_not_drawn_again() -> None:
    """Issue 24: each second every GPU row (and each run-panel row) was
    restyled through Rich, though most read as before. A new set of rows
    draws only the rows whose text changed, and shows them."""
    from rich.text import Text

    from gputui.ui.widgets.gpus import GpuTable

    app, _mon = make_app("healthy")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        table = app.query_one(GpuTable)
        lines = [t.copy() for t in table.lines]
        assert len(lines) >= 2
        rows = count_rows(table)
        table.set_lines([t.copy() for t in lines])  # the same text: nothing to draw
        await pilot.pause()
        assert rows == []
        lines[1] = Text("GPU 1 changed", style=lines[1].style)
        table.set_lines(lines)
        await pilot.pause()
        assert rows == [1]
        assert "GPU 1 changed" in table.render_line(1).text


async def test_a_followed_frame_asks_no_repaint_and_the_view_still_scrolls() -> None:
    """A frame of new lines drawn straight to the terminal (`TailLog._blit`)
    moves only the scroll state: no refresh of the view (each posted a
    Prompt and restyled rows the frame had drawn) — and the view still
    scrolls by the user's keys, stays where they leave it, and follows
    again from the end."""
    app, _mon = make_app("buffered")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, pilot)
        log = app.query_one("#log", TailLog)
        log.clear()
        refreshes = [0]
        original = log.refresh

        def counted(*a: Any, **k: Any) -> Any:
            refreshes[0] += 1
            return original(*a, **k)

        log.write_lines([f"a {i}" for i in range(log.size.height + 5)])  # overflows: settles
        await pilot.pause()
        log.refresh = counted  # type: ignore[method-assign]
        for i in range(20):
            log.write_lines([f"b {i}", f"c {i}"])
        assert refreshes[0] == 0
        assert log.is_vertical_scroll_end and log.scroll_y == log.max_scroll_y
        assert log.allow_vertical_scroll
        log.refresh = original  # type: ignore[method-assign]
        log.focus()
        await pilot.press("pageup")
        await pilot.pause()
        top = log.scroll_y
        assert top < log.max_scroll_y
        log.write_lines(["d 1"])
        await pilot.pause()
        assert log.scroll_y == top and log.lines[-1] == "d 1"
        await pilot.press("end")
        await pilot.pause()
        log.write_lines(["d 2"])
        await pilot.pause()
        assert log.is_vertical_scroll_end and log.lines[-1] == "d 2"


async def test_gpu_samples_that_bring_the_tick_keep_the_1hz_timer_from_waking() -> None:
    """While the GPU samples bring the tick, each pushes the 1 Hz timer back to
    1.3 s after it: the timer never wakes the event loop for a second
    already drawn. With no sample in time it ticks, then each whole second
    from then on."""
    app, mon = make_app()
    async with app.run_test(size=SIZE) as pilot:
        loop = asyncio.get_running_loop()
        ticks: list[float] = []
        orig = app._tick

        def counted() -> None:
            ticks.append(loop.time())
            orig()

        app._tick = counted  # type: ignore[method-assign]
        app._every_second()
        first = app._tick_timer
        assert first is not None and first.when() - loop.time() == pytest.approx(1.0, abs=0.2)
        mon.publish({GpusRead})  # a sample: its tick comes after a short hold
        await pilot.pause(0.3)
        assert len(ticks) == 1 and first.cancelled()
        pushed = app._tick_timer
        assert pushed is not None and not pushed.cancelled()
        assert pushed.when() - ticks[0] == pytest.approx(1.3, abs=0.05)
        mon.publish({GpusRead})  # the next sample pushes it again
        await pilot.pause(0.3)
        assert len(ticks) == 2 and pushed.cancelled()
        again = app._tick_timer
        assert again is not None and again.when() - ticks[1] == pytest.approx(1.3, abs=0.05)
        # no sample in time: the timer ticks, and from then on each second
        again.cancel()
        app._timer_fired()
        assert len(ticks) == 3 and app._timer_ticks
        nxt = app._tick_timer
        assert nxt is not None and nxt.when() - again.when() == pytest.approx(1.0)
        nxt.cancel()
        app._timer_fired()  # a timer tick drawn under 0.9 s ago is left out
        assert len(ticks) == 3
        last = app._tick_timer
        assert last is not None and last.when() - nxt.when() == pytest.approx(1.0)
        last.cancel()
