"""The host view's screen: what it shows, Enter on a container or a GPU,
Esc in the run view it opens, remote text shown as text."""

from __future__ import annotations

from textual.widgets import DataTable

from gputui.demo.hosts import FixedHostWatch, down_view, proxmox_view
from gputui.demo.scenes import SCENES, T0
from gputui.ui.app import BACK, GputuiApp
from gputui.ui.hostapp import BorrowedMonitor, HostApp, RunChoice, cell
from scene_fakes import RecordingActions, SceneMonitor

SIZE = (150, 36)


def host_app() -> HostApp:
    return HostApp([FixedHostWatch(proxmox_view()), FixedHostWatch(down_view())], live=False)


def table_text(app: HostApp, table_id: str) -> list[str]:
    table = app.query_one(table_id, DataTable)
    return [" | ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count)]


async def test_every_gpu_and_container_of_the_host_under_the_cursor() -> None:
    app = host_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        hosts = table_text(app, "#hosts")
        assert hosts[0].startswith("root@gpu1 | connected | dead | 4/8")
        assert hosts[1].startswith("root@gpu2 | reconnecting | down")
        gpus = table_text(app, "#gpu-table")
        assert len(gpus) == 8
        assert "CT 201 · train · pid 812 (host 48213) · python3 · /workspace/train.log" in gpus[0]
        assert "gone pid 39911" in gpus[4] and "held by no live process" in gpus[4]
        cts = table_text(app, "#container-table")
        assert [row.split(" | ")[3] for row in cts] == ["ok", "buffered", "dead", "stopped"]
        # the second host: down, with why
        await pilot.press("shift+tab", "shift+tab", "down")
        await pilot.pause()
        assert app.selected == 1
        assert table_text(app, "#gpu-table") == []


async def test_enter_on_a_container_or_a_gpu_opens_its_run() -> None:
    app = host_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down")  # CT 202
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_value == RunChoice(0, 202, "sft")

    app = host_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("shift+tab")  # the GPU table
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_value == RunChoice(0, 201, "train")


async def test_nothing_to_open_on_a_stopped_container_or_an_orphaned_gpu() -> None:
    app = host_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("down", "down", "down", "enter")  # CT 204, stopped
        await pilot.pause()
        assert app.is_running and app.return_value is None
        await pilot.press("shift+tab", *["down"] * 4, "enter")  # GPU 4: its process is gone
        await pilot.pause()
        assert app.is_running and app.return_value is None


async def test_esc_in_the_run_view_goes_back_without_stopping_the_shared_monitor() -> None:
    snap, lines, findings = SCENES["healthy"](T0)
    mon = SceneMonitor(snap, lines)
    borrowed = BorrowedMonitor(mon)
    app = GputuiApp(
        borrowed,
        actions=RecordingActions(),
        diagnose=lambda s, now: list(findings),
        clock=lambda: T0,
        live=False,
        back=True,
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("escape")
        await pilot.pause()
    assert app.return_value == BACK
    assert not mon.stopped  # the host view goes on with it
    assert mon._listeners  # the view heard of it while it showed
    borrowed.close()  # run_view's end: the view hears no more of it
    assert mon._listeners == []
    assert not hasattr(BorrowedMonitor, "__getattr__")  # its door, not the whole monitor


def test_remote_text_cannot_reach_the_terminal_or_the_markup_parser() -> None:
    assert cell("sft\x1b]52;c;aGk=\x07").plain == "sft␛]52;c;aGk=␇"
    assert cell("[bold]x[/]").plain == "[bold]x[/]"


def test_snapshot_host_view(snap_compare) -> None:
    assert snap_compare(host_app(), terminal_size=SIZE)


async def test_a_short_terminal_keeps_the_containers_and_their_why() -> None:
    """At 60×20 the containers had no row left under the GPUs; a "why" that
    arrived after the first draw stayed cut to the width of an empty one."""
    view = proxmox_view()
    whys = {c.id: c.why for c in view.containers}
    for c in view.containers:
        c.why = ""
    app = HostApp([FixedHostWatch(view)], live=False)
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause()
        for c in view.containers:
            c.why = whys[c.id]
        app._apply()
        await pilot.pause()
        table = app.query_one("#container-table", DataTable)
        assert table.size.height >= 6  # its header and 5 rows
        assert table.columns[list(table.columns)[-1]].content_width >= max(
            len(w) for w in whys.values()
        )


# ---------------------------------------------------------------- issue 46: a place to act


async def test_enter_on_a_container_with_no_run_says_why() -> None:
    """Enter on the stopped CT 204, and on GPU 4 whose holder is gone: a
    notification says why nothing opens (it said 'nothing running to open
    here', or nothing at all)."""
    from terminal import attach

    app = host_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        term = attach(app)

        async def shows(words: str) -> str:
            for _ in range(100):  # a loaded machine draws late: wait for it, up to 5 s
                if words in term.text():
                    break
                await pilot.pause(0.05)
            return term.text()

        await pilot.press("down", "down", "down", "enter")  # CT 204, stopped
        text = await shows("CT 204 (scratch) is stopped: no run in it to open")
        assert app.is_running and app.return_value is None
        assert "CT 204 (scratch) is stopped: no run in it to open" in text, text
        app.clear_notifications()
        await pilot.press("shift+tab", *["down"] * 4, "enter")  # GPU 4: its process is gone
        text = await shows("GPU 4: its memory is held by no live process (pid 39911")
        assert "GPU 4: its memory is held by no live process (pid 39911" in text, text


async def test_question_mark_shows_the_host_views_help_and_the_footer_its_keys() -> None:
    from gputui.ui.screens.help import HelpScreen
    from terminal import attach

    app = host_app()
    async with app.run_test(size=(80, 24)) as pilot:
        term = attach(app)

        async def shows(*words: str) -> str:
            for _ in range(100):  # a loaded machine draws late: wait for it, up to 5 s
                if all(w in term.text() for w in words):
                    break
                await pilot.pause(0.05)
            return term.text()

        footer = (await shows("enter open run view", "? help")).splitlines()[-1]
        assert "enter open run view" in footer and "? help" in footer and "q quit" in footer
        await pilot.press("question_mark")
        text = await shows("the host view", "open the run view")
        assert isinstance(app.screen, HelpScreen)
        assert "the host view" in text and "open the run view" in text, text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen) and app.is_running


async def test_the_palette_opens_a_container_by_name() -> None:
    """ctrl+p offers the host view's own commands: each container by name
    (Textual's own entries were all it had), help and quit."""
    from textual.command import CommandPalette

    app = host_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"open CT 202")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.5)
    assert app.return_value == RunChoice(0, 202, "sft")
