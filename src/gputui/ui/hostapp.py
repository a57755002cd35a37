"""The host view: every host, every GPU and who holds it, every container.

One row per host at the top (its link and worst health); below, for the
host under the cursor, a GPU table (memory, util, power, and the container,
process, tmux session and log holding each GPU; memory no live process
holds is flagged) and a container table (status, name, sessions, one word of
health and why). Enter on a container or a GPU ends this app with a
`RunChoice`; the caller opens the run view for it and, on Esc there, comes
back here (`run_host_view`).

Every string from the remote side reaches the screen through
`gputui.text.untrusted.remote_text`: control characters shown as stand-ins,
never markup.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.markup import escape
from textual.widgets import DataTable, Footer, Static

from gputui.actions.backend import ActionBackend
from gputui.config import DEFAULTS, Settings
from gputui.errors import GputuiError
from gputui.host.view import ContainerRow, GpuRow, Holder, HostView
from gputui.model import Snapshot
from gputui.monitor import Listener, LogChanged, News, WatchedRun, news_of
from gputui.text.untrusted import remote_text, visible
from gputui.text.words import gib
from gputui.ui.app import (
    BACK,
    QUIT_SIGNALS,
    WEB_EXIT_S,
    GputuiApp,
    exit_at_the_latest,
    terminal_gone,
)
from gputui.ui.commands import highlighted
from gputui.ui.hostkeys import HOST_HELP, where, why_no_run_in, why_no_run_on
from gputui.ui.quietinput import quiet_driver
from gputui.ui.scrollbars import use_whole_cell_scroll_bars

if TYPE_CHECKING:
    from gputui.host.hostwatch import HostWatch

HEALTH_STYLE = {
    "ok": "green",
    "idle": "dim",
    "stopped": "dim",
    "starting": "dim italic",
    "buffered": "yellow",
    "stalled": "yellow",
    "hung": "bold red",
    "full": "bold red",
    "dead": "bold red",
    "down": "bold red",
}


class HostWatchLike(Protocol):
    @property
    def view(self) -> HostView: ...

    def subscribe(self, listener: Callable[[HostView], None]) -> None: ...

    def unsubscribe(self, listener: Callable[[HostView], None]) -> None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class RunChoice:
    """Open the run view for this container (None: the host itself) of host
    number `host`, watching `session` when given."""

    host: int
    place: int | str | None  # a CT number, "docker:NAME", None: the host
    session: str | None = None


def cell(value: object, style: str = "") -> Text:
    """One table cell: remote text made visible (gputui.text.untrusted), never markup."""
    text = remote_text(value, style=style)
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def where_words(place: int | str | None, host_is_plain: bool) -> str:
    if place is None:
        return "host" if host_is_plain else "host (no CT)"
    if isinstance(place, str):  # docker:NAME -> "docker NAME"
        return place.replace(":", " ", 1)
    return f"CT {place}"


def _size(mib: float | None, short: bool) -> str:
    return gib(mib).replace(" GiB", "G") if short else gib(mib)


def shared_parts(
    row: GpuRow, plain_host: bool, names: Mapping[Any, str], short: bool = False
) -> list[tuple[str, str]]:
    """Who holds a GPU that several runs or containers hold, with how much
    each (the dashboard's shared-GPU line, host-wide): 'CT 200 (train-box)
    10.6 GiB', 'CT 201 (eval-box) 5.1 GiB'; two runs in one CT by session,
    'CT 200 train 10.6 GiB', 'CT 200 eval 5.1 GiB'; short: 'CT 200 10.6G'.
    Each with its style; [] for a GPU one run (or nobody) holds."""
    groups: dict[tuple[Any, str | None], float] = {}
    gone: list[tuple[str, str]] = []
    for h in row.holders:
        if not h.alive:
            gone.append((f"gone pid {h.host_pid} {_size(h.used_mib, short)}", "bold red"))
            continue
        key = (h.place, h.session)
        groups[key] = groups.get(key, 0.0) + (h.used_mib or 0.0)
    if len(groups) + len(gone) < 2:
        return []
    places = [place for place, _ in groups]
    parts = []
    for (place, session), mib in groups.items():
        label = where_words(place, plain_host)
        if places.count(place) > 1:
            label += f" {session or 'no session'}"
        elif names.get(place) and not short:
            label += f" ({names[place]})"
        parts.append((f"{label} {_size(mib, short)}", ""))
    return parts + gone


def holder_text(
    row: GpuRow, plain_host: bool, names: Mapping[Any, str] | None = None, short: bool = False
) -> Text:
    """Who holds a GPU, in one line: 'CT 203 · train · pid 8 (host 4242) · /w/train.log'.
    A GPU several runs or containers hold starts with who holds how much
    (`shared_parts`: 'CT 200 (train-box) 10.6 GiB · CT 201 (eval-box) 5.1 GiB  |  …'):
    at 80 columns that is what the cell has room for."""
    parts: list[Text] = []
    shared = shared_parts(row, plain_host, names or {}, short)
    if shared:
        line = Text(no_wrap=True, overflow="ellipsis")
        for k, (words, style) in enumerate(shared):
            if k:
                line.append(" · ", style="dim")
            line.append_text(cell(words, style))
        parts.append(line)
    for h in row.holders:
        if not h.alive:
            if not shared:  # the shared line names it
                parts.append(cell(f"gone pid {h.host_pid} ({gib(h.used_mib)})", "bold red"))
            continue
        parts.append(cell(" · ".join(_holder_bits(h, plain_host))))
    if row.orphaned:
        parts.append(cell(f"⚠ {gib(row.unowned_mib)} held by no live process", "bold red"))
    if not parts:
        return cell("—", "dim")
    return Text("  |  ").join(parts)


def _holder_bits(h: Holder, plain_host: bool) -> list[str]:
    """'CT 203', 'train', 'pid 8 (host 4242)', 'python3', '/w/train.log'."""
    bits = [where_words(h.place, plain_host)]
    if h.session:
        bits.append(h.session)
    pid = f"pid {h.ct_pid}" if h.ct_pid is not None else "pid ?"
    if h.ct_pid != h.host_pid:
        pid += f" (host {h.host_pid})"
    bits.append(pid)
    if h.process:
        bits.append(h.process)
    if h.log:
        bits.append(h.log)
    return bits


HOSTS_MAX_HEIGHT = 8
GPU_MAX_HEIGHT = 12  # 8 GPUs, their header and border
CONTAINER_ROWS = 5  # container rows kept on screen however short the terminal
SHORT_BELOW = 120  # columns: below, a shared GPU's holders read 'CT 200 10.6G · CT 201 5.1G'


class HostCommands(Provider):
    """The host view's palette: open each running container of the host
    under the cursor by name, help, next table, quit."""

    def _entries(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app = self.app
        assert isinstance(app, HostApp)
        out: list[tuple[str, str, Callable[[], Any]]] = []
        if app.hosts:
            view = app.hosts[app.selected].view
            for i, c in enumerate(view.containers):
                why = why_no_run_in(c)
                out.append(
                    (
                        f"[enter] open {visible(where(c))}",
                        f"its run view ({visible(c.health)})" if why is None else visible(why),
                        partial(app.open_container, i),
                    )
                )
        out.append(("[?] help", "the host view's keys and words", app.action_help))
        out.append(("[tab] next table", "hosts, GPUs, containers", app.action_focus_next))
        out.append(("[q] quit", "stop every stream gputui opened", app.exit))
        return out

    async def discover(self) -> Hits:
        for text, help_, run in self._entries():
            yield DiscoveryHit(Content(text), run, text=text, help=escape(help_))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_, run in self._entries():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, highlighted(matcher, text), run, text=text, help=escape(help_))


class HostApp(App[Any]):
    """See the module docstring."""

    CSS = """
    #hosts { height: auto; max-height: 8; border: round $primary 50%; }
    #gpu-table { height: auto; max-height: 12; border: round $primary 50%; }
    #container-table { height: 1fr; border: round $primary 50%; }
    #host-error { height: auto; color: $error; padding: 0 1; display: none; }
    #host-error.-shown { display: block; }
    DataTable:focus { border: round $accent; }
    HelpScreen { align: center middle; }
    #help-box {
        width: 90; max-width: 95%; height: 90%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    """
    TITLE = "gputui — hosts"
    _width = 0  # the terminal's columns at the last resize (0: none yet)

    async def _on_exit_app(self) -> None:
        """Under `gputui serve` the process ends at the latest WEB_EXIT_S
        after the app's end (see GputuiApp._on_exit_app: a page's quit during
        its first resize left two screens resizing each other); the host
        watches end with their connection."""
        if self.is_web and not isinstance(self.return_value, RunChoice):  # a run view follows
            exit_at_the_latest(self.return_code or 0, after=WEB_EXIT_S)
        await super()._on_exit_app()

    BINDINGS = [  # noqa: RUF012
        Binding("q", "quit", "quit", id="quit"),
        Binding("question_mark", "help", "help", key_display="?", id="help"),
        Binding("enter", "open", "open run view", id="open", show=True),
        Binding("tab", "focus_next", "next table", key_display="tab"),
    ]
    COMMANDS = App.COMMANDS | {HostCommands}

    def get_driver_class(self) -> type[Driver]:
        # its input thread sleeps until a key comes (ui/quietinput.py)
        return quiet_driver(super().get_driver_class())

    def __init__(
        self,
        hosts: Sequence[HostWatchLike],
        *,
        live: bool = True,
        selected: int = 0,
        note: str = "",
    ) -> None:
        super().__init__()
        self.note = note  # said once on mount: why a run view just opened nothing
        use_whole_cell_scroll_bars()  # as the run view's (ui/scrollbars.py)
        self.hosts = list(hosts)
        self.live = live
        self.selected = selected
        self._pending = False

    def compose(self) -> ComposeResult:
        hosts: DataTable[Text] = DataTable(id="hosts", cursor_type="row", zebra_stripes=False)
        hosts.border_title = "hosts"
        yield hosts
        yield Static(id="host-error")
        gpus: DataTable[Text] = OpenTable(id="gpu-table", cursor_type="row")
        gpus.border_title = "GPUs"
        gpus.border_subtitle = "enter: the run holding it"
        yield gpus
        containers: DataTable[Text] = OpenTable(id="container-table", cursor_type="row")
        containers.border_title = "containers"
        containers.border_subtitle = "enter: its run view · esc there: back here"
        yield containers
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#hosts", DataTable).add_columns(
            "host", "link", "health", "GPUs busy", "containers"
        )
        self.query_one("#gpu-table", DataTable).add_columns(
            "GPU", "util", "memory", "power", "held by"
        )
        self.query_one("#container-table", DataTable).add_columns(
            "CT", "name", "status", "health", "sessions", "GPUs", "why"
        )
        for h in self.hosts:
            h.subscribe(self._on_view)
        self._apply()
        hosts = self.query_one("#hosts", DataTable)
        if self.selected < hosts.row_count:
            hosts.move_cursor(row=self.selected)
        self.query_one("#container-table", DataTable).focus()
        if self.note:
            self.notify(self.note, title="nothing to open", severity="warning", timeout=8)
        if self.live:
            self.set_interval(1.0, self._apply)

    def on_unmount(self) -> None:
        for h in self.hosts:
            h.unsubscribe(self._on_view)

    def on_resize(self, event: events.Resize) -> None:
        """The GPU table gives way on a short terminal: the containers keep
        CONTAINER_ROWS rows (at 60×20 they had none)."""
        hosts = min(HOSTS_MAX_HEIGHT, len(self.hosts) + 3)
        room = event.size.height - 1 - hosts - (CONTAINER_ROWS + 3)  # footer; border + header
        self.query_one("#gpu-table").styles.max_height = max(4, min(GPU_MAX_HEIGHT, room))
        self._width = event.size.width
        if self.query_one("#gpu-table", DataTable).columns:  # mounted: drawn before
            self._apply()  # a shared GPU's holders are shorter below SHORT_BELOW columns

    def _on_view(self, view: HostView) -> None:
        """A host watch's news (its tasks run outside the app): handled as a
        message to the app, at most one redraw per 0.2 s."""
        if self._thread_id != threading.get_ident():
            self.call_from_thread(self._on_view, view)
            return
        self.call_later(self._view_arrived)

    def _view_arrived(self) -> None:
        if not self._pending:
            self._pending = True
            self.set_timer(0.2, self._apply_pending)

    def _apply_pending(self) -> None:
        self._pending = False
        self._apply()

    # ------------------------------------------------------------ drawing

    def _apply(self) -> None:
        try:
            self._show_hosts()
            if self.hosts:
                self._show_host(self.hosts[self.selected].view)
        except NoMatches:  # a late update while the app exits: its tables are gone
            return

    def _show_hosts(self) -> None:
        table = self.query_one("#hosts", DataTable)
        rows = []
        for i, h in enumerate(self.hosts):
            v = h.view
            busy = sum(1 for g in v.gpus if (g.util_pct or 0) >= 50)
            running = sum(1 for c in v.containers if c.status in ("running", "host"))
            counts = f"{running} running / {len(v.containers)}" if v.containers else ""
            if v.containers_known is False:
                counts = "plain GPU server"
            health = v.health if v.containers or v.health == "down" else "…"
            rows.append(
                (
                    str(i),
                    [
                        cell(v.label, "bold"),
                        cell(v.connection.value),
                        cell(health, HEALTH_STYLE.get(health, "")),
                        cell(f"{busy}/{len(v.gpus)}" if v.gpus else "–"),
                        cell(counts),
                    ],
                )
            )
        _replace_rows(table, rows)

    def _show_host(self, view: HostView) -> None:
        err = self.query_one("#host-error", Static)
        problem = view.error if view.health == "down" else view.gpu_error
        err.update(cell(f"{view.label}: {problem}" if problem else ""))
        err.set_class(bool(problem), "-shown")
        plain_host = view.containers_known is False
        names = {c.id: c.name for c in view.containers if isinstance(c.id, int) and c.name}
        short = (self._width or self.size.width) < SHORT_BELOW  # a shared GPU's holders fit
        _replace_rows(
            self.query_one("#gpu-table", DataTable),
            [(str(g.index), self._gpu_cells(g, plain_host, names, short)) for g in view.gpus],
        )
        _replace_rows(
            self.query_one("#container-table", DataTable),
            [(_ct_key(c), self._ct_cells(c)) for c in view.containers],
        )

    @staticmethod
    def _gpu_cells(
        g: GpuRow, plain_host: bool, names: Mapping[Any, str], short: bool
    ) -> list[Text]:
        util = f"{g.util_pct:.0f} %" if g.util_pct is not None else "?"
        mem = f"{gib(g.mem_used_mib)} / {gib(g.mem_total_mib)}"
        power = f"{g.power_w:.0f} W" if g.power_w is not None else "?"
        return [
            cell(g.index, "bold"),
            cell(util),
            cell(mem, "bold red" if g.orphaned else ""),
            _power_cell(power, g),
            holder_text(g, plain_host, names, short),
        ]

    @staticmethod
    def _ct_cells(c: ContainerRow) -> list[Text]:
        return [
            cell("host" if c.id is None else c.id, "bold"),
            cell(c.name),
            cell(c.status),
            cell(c.health, HEALTH_STYLE.get(c.health, "")),
            cell(", ".join(c.sessions) or "–"),
            cell(" ".join(str(i) for i in c.gpus) or "–"),
            cell(c.why),
        ]

    # ------------------------------------------------------------ keys

    @on(DataTable.RowHighlighted, "#hosts")
    def _host_moved(self, event: DataTable.RowHighlighted) -> None:
        index = int(str(event.row_key.value))
        if index != self.selected:
            self.selected = index
            self._show_host(self.hosts[index].view)

    def choice(self) -> RunChoice | None:
        """What Enter opens from the table that has focus, or None."""
        return self._choice()[0]

    def _choice(self) -> tuple[RunChoice | None, str]:
        """What Enter opens from the table that has focus, or why nothing."""
        if not self.hosts:
            return None, "no host to show"
        view = self.hosts[self.selected].view
        focused = self.focused
        if isinstance(focused, DataTable) and focused.id == "gpu-table" and view.gpus:
            row = view.gpus[min(focused.cursor_row, len(view.gpus) - 1)]
            why = why_no_run_on(row)
            live = [h for h in row.holders if h.alive]
            if why is not None or not live:
                return None, why or f"GPU {row.index}: no run to open"
            return RunChoice(self.selected, live[0].place, live[0].session), ""
        if isinstance(focused, DataTable) and focused.id == "container-table" and view.containers:
            c = view.containers[min(focused.cursor_row, len(view.containers) - 1)]
            why = why_no_run_in(c)
            if why is not None:
                return None, why
            return RunChoice(self.selected, c.id, c.watched_session), ""
        if view.health == "down":
            return None, f"{view.label} is down: {view.error or 'no connection'}"
        return None, "pick a container or a GPU first (tab moves to their tables)"

    def action_open(self) -> None:
        choice, why = self._choice()
        if choice is None:
            self.notify(why, title="nothing to open", severity="warning", timeout=6)
            return
        self.exit(choice)

    def open_container(self, index: int) -> None:
        """The palette's 'open CT N': that container of the selected host."""
        table = self.query_one("#container-table", DataTable)
        table.focus()
        table.move_cursor(row=index)
        self.call_after_refresh(self.action_open)

    def action_help(self) -> None:
        from gputui.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(HOST_HELP))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: Any = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Toasts quote container names and remote errors: plain text, never markup."""
        super().notify(
            visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False
        )

    @on(DataTable.RowSelected, "#gpu-table")
    @on(DataTable.RowSelected, "#container-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()


class OpenTable(DataTable[Text]):
    """A table whose rows open a run view: the footer says what Enter does
    (DataTable's own Enter binding is hidden, and it shadowed the app's)."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "select_cursor", "open run view", key_display="enter"),
    ]


def _ct_key(c: ContainerRow) -> str:
    return "host" if c.id is None else str(c.id)


def _replace_rows(table: DataTable[Any], rows: list[tuple[str, list[Text]]]) -> None:
    """Update a table in place (no flicker, the cursor stays): cells of rows
    that stay, rows that came, rows that went."""
    keys = [k for k, _ in rows]
    existing = [str(k.value) for k in table.rows]
    if existing != keys:
        cursor = table.cursor_row
        table.clear()
        for key, cells in rows:
            table.add_row(*cells, key=key)
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))
        return
    columns = list(table.columns)
    for key, cells in rows:
        for col, value in zip(columns, cells, strict=False):
            if table.get_cell(key, col) != value:
                table.update_cell(key, col, value, update_width=True)  # a longer "why"


# ------------------------------------------------------------ the loop


class BorrowedMonitor:
    """A host watch's monitor lent to a run view, through its door: the view
    may not start or stop it (the host view goes on with it when the user
    comes back), and hears of it only while it shows (`close`)."""

    def __init__(self, monitor: WatchedRun, earlier: list[str] | None = None) -> None:
        self._monitor = monitor
        self._earlier = list(earlier or [])  # the log's last lines the host view kept
        self.app: App[Any] | None = None
        self._delivering: dict[Listener, Listener] = {}  # the view's listener -> the monitor's

    @property
    def snapshot(self) -> Snapshot:
        return self._monitor.snapshot

    def subscribe(self, cb: Listener) -> None:
        """The monitor's tasks run outside the app (the host watch started
        them): its news reaches the view as a message to the app. The first
        news is the lines the host view kept of this log (the run view shows
        the log's end at once, not after the run writes again)."""

        def deliver(snap: Snapshot, news: News) -> None:
            if self.app is not None:
                self.app.call_later(cb, snap, news)

        self._delivering[cb] = deliver
        self._monitor.subscribe(deliver)
        earlier, self._earlier = self._earlier, []
        if earlier:
            deliver(self._monitor.snapshot, news_of({LogChanged}, earlier))

    def unsubscribe(self, cb: Listener) -> None:
        deliver = self._delivering.pop(cb, None)
        if deliver is not None:
            self._monitor.unsubscribe(deliver)

    def close(self) -> None:
        """The view closed: no more news to it."""
        for cb in list(self._delivering):
            self.unsubscribe(cb)

    async def refresh(self) -> None:
        await self._monitor.refresh()

    def watch_session(self, name: str | None) -> None:
        self._monitor.watch_session(name)

    def watch_log(self, path: str) -> None:
        self._monitor.watch_log(path)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def borrow(watch: HostWatch, monitor: WatchedRun, choice: RunChoice) -> BorrowedMonitor:
    """The run view's door to the host watch's monitor of `choice`, with the
    log's last lines the watch kept — those of the log the monitor follows,
    when the view watches the session the monitor watched."""
    same = not choice.session or choice.session == monitor.snapshot.session_name
    earlier = watch.lines_of(choice.place, monitor.snapshot.log.path) if same else []
    if choice.session:
        monitor.watch_session(choice.session)
    return BorrowedMonitor(monitor, earlier)


async def run_view(
    watch: HostWatch, choice: RunChoice, read_only: bool, showing: list[App[Any]] | None = None
) -> int:
    """Today's run view for one container of a host watch; BACK on Esc.
    `showing` gets the app while it runs (run_host_view's signal handler)."""
    monitor = watch.monitor_for(choice.place)
    if monitor is None:  # it stopped since the host view drew it (run_host_view says so)
        return BACK
    borrowed = borrow(watch, monitor, choice)
    settings = monitor.settings
    background = monitor.interval
    monitor.poll_every(float(settings.interval or DEFAULTS.interval))
    # --read-only: Verb.changes greys; plans read the run through the monitor's agent
    actions = ActionBackend(monitor.target, settings, monitor, monitor.run_facts)
    app = GputuiApp(
        borrowed,
        actions=actions,
        read_only=read_only,
        thresholds=settings.diagnosis,
        back=True,
    )
    actions.progress = lambda text: app.notify(text, timeout=4)
    borrowed.app = app
    if showing is not None:
        showing[:] = [app]
    watch.lent.add(choice.place)
    try:
        rc = await app.run_async()
    finally:
        borrowed.close()
        watch.lent.discard(choice.place)
        monitor.poll_every(background)  # back to the host view's pace
    if app.crashed_with is not None:
        raise app.crashed_with
    return int(rc if rc is not None else 0)


def run_host_view(watches: Sequence[HostWatch], read_only: bool = False) -> int:
    """The host view over these host watches; Enter opens a run view, Esc
    there comes back. Every watch is stopped at the end (nothing left running)."""
    import asyncio

    signalled: list[int] = []  # SIGTERM / SIGHUP: quit as `q` does, exit 128+N
    showing: list[App[Any]] = []  # the host view or the run view on screen now

    def on_signal(signum: int) -> None:
        signalled.append(signum)
        exit_at_the_latest(128 + signum)
        for app in showing:
            if signum == signal.SIGHUP:
                terminal_gone(app)
            app.exit(128 + signum)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
        if len(watches) == 1:
            # One host that cannot be reached at all (unknown, refused, bad
            # key) ends in one line, exit 2, as the run view does; with several,
            # it is shown down and the others go on.
            try:
                await watches[0].transport.connect()
            except GputuiError as err:
                with contextlib.suppress(Exception):
                    await watches[0].stop()
                print(f"gputui: {visible(err)}", file=sys.stderr)
                return 2
        for w in watches:
            await w.start()
        selected, note = 0, ""
        try:
            while not signalled:
                app = HostApp(watches, selected=selected, note=note)
                showing[:] = [app]
                result = await app.run_async()
                if not isinstance(result, RunChoice):
                    return int(result or 0)
                selected, note = result.host, ""
                if watches[result.host].monitor_for(result.place) is None:
                    place = where_words(result.place, result.place is None)
                    note = f"{place} is no longer running: no run in it to open"
                    continue
                rc = await run_view(watches[result.host], result, read_only, showing)
                if rc != BACK:
                    return rc
            return 128 + signalled[0]
        finally:
            for w in watches:
                await w.stop()

    return asyncio.run(main())


def run_hosts(hosts: Sequence[Settings]) -> int:
    """`gputui --host H` (no --ct), `--host a --host b`, `[[targets]]`: the
    host view over one HostWatch per host's Settings; the exit code."""
    from gputui.host.hostwatch import HostWatch

    watches = [HostWatch(s) for s in hosts]
    read_only = any(s.read_only for s in hosts)
    return run_host_view(watches, read_only)


def _power_cell(power: str, g: GpuRow) -> Text:
    """The power cell, with the GPU's hardware mark (red only when broken)."""
    if not g.mark:
        return cell(power)
    return cell(
        f"{power} {'✖' if g.broken else '⚠'} {g.mark}", "bold red" if g.broken else "yellow"
    )
