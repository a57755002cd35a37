"""`gputui serve`: the dashboard as a web page, through textual-serve.

textual-serve runs one dashboard per browser connection with Textual's web
driver, and relays the page's keys and the app's screen over a websocket.
Here the command is `python -m gputui` with the arguments `serve` was given
(less its own), plus `--read-only` unless `--allow-actions`, run without a
shell; each tab's dashboard ends when its tab goes or serve ends, by any
signal (cli/serve_child.py says how).

Who can open the page:
- the server binds 127.0.0.1:8000 by default; an address that is not
  loopback needs `--public`, and the start-up lines say who can reach it;
- every request needs the random token of the URL printed at start-up
  (`?token=…`); the page, its static files and its websocket carry it on as
  an HttpOnly, SameSite=Strict cookie set by the page. Anything else: 403.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import re
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.text.numbers import ascii_int

DEFAULT_BIND = "127.0.0.1:8000"
COOKIE = "gputui_token"
SERVE_FLAGS = {"--bind": True, "--public": False, "--allow-actions": False}  # flag: takes a value
EXTERNAL_FONT = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>", re.S)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGKILL: PR_SET_PDEATHSIG
FORBIDDEN = "gputui serve: this page needs the token of the URL that `gputui serve` printed\n"


def add_parser(sub: Any, add_target_flags: Callable[..., None]) -> None:
    p = sub.add_parser(
        "serve",
        help="the dashboard as a web page (needs gputui[web])",
        description="Serve the dashboard as a web page: each browser tab runs its own "
        "dashboard of TARGET. Loopback only and read-only unless told otherwise; "
        "the printed URL carries a token, requests without it are refused.",
        allow_abbrev=False,
    )
    add_target_flags(p, suppress=True)
    p.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        default=argparse.SUPPRESS,
        help="what the dashboard watches, as for gputui itself: [user@]host[:port][/ct]",
    )
    p.add_argument(
        "--bind",
        default=DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"address to listen on ({DEFAULT_BIND}; not loopback: needs --public)",
    )
    p.add_argument(
        "--public",
        action="store_true",
        help="allow an address that is not loopback (anyone who reaches it and has the URL)",
    )
    p.add_argument(
        "--allow-actions",
        action="store_true",
        help="let the page relaunch, kill, flush (default: read-only)",
    )


# ------------------------------------------------------------------ pure parts


def parse_bind(text: str, public: bool) -> tuple[str, int, bool]:
    """(host, port, is_loopback) of --bind; a wildcard or other address
    without --public is refused with one line."""
    host, sep, port_text = text.rpartition(":")
    port = ascii_int(port_text, 5)  # `²` passes isdigit() and then fails int()
    if not sep or port is None or not 1 <= port <= 65535:
        raise GputuiError(f"--bind {text!r} is not HOST:PORT", "e.g. --bind 127.0.0.1:8000")
    host = host.strip("[]") or "127.0.0.1"
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        raise GputuiError(
            f"--bind {text!r}: {host!r} is not an IP address",
            "bind an address of this machine, e.g. --bind 127.0.0.1:8000 or --bind 0.0.0.0:8000",
        ) from None
    if not loopback and not public:
        raise GputuiError(
            f"--bind {text}: not a loopback address, so other machines could open the dashboard",
            f"add --public to mean it, or keep --bind 127.0.0.1:{port} and reach it with "
            f"ssh -L {port}:127.0.0.1:{port} THIS-MACHINE",
        )
    return host, port, loopback


def _serve_index(argv: Sequence[str], takes_value: set[str]) -> int:
    """Where the `serve` word is in argv: the first word that is not a flag
    or a flag's value."""
    skip = False
    for i, word in enumerate(argv):
        if skip:
            skip = False
        elif word.startswith("-") and word != "-":
            skip = word in takes_value  # --flag=value and -p22 carry their value
        elif word == "serve":
            return i
    raise GputuiError("serve: cannot find the word `serve` in the command line")


def dashboard_argv(argv: Sequence[str], takes_value: set[str], allow_actions: bool) -> list[str]:
    """The dashboard's arguments: argv without `serve` and serve's own flags,
    plus --read-only unless actions are allowed."""
    at = _serve_index(argv, takes_value)
    out = list(argv[:at])
    rest = iter(argv[at + 1 :])
    for word in rest:
        name = word.split("=", 1)[0]
        if name in SERVE_FLAGS:
            if SERVE_FLAGS[name] and "=" not in word:
                next(rest, None)
            continue
        out.append(word)
    if not allow_actions and "--read-only" not in out:
        out.append("--read-only")
    return out


def app_argv(args: Sequence[str]) -> list[str]:
    """What each tab runs (no shell between)."""
    return [sys.executable, "-m", "gputui", *args]


def app_command(args: Sequence[str]) -> str:
    """The same as one line, every word quoted (as said at start-up)."""
    return shlex.join(app_argv(args))


def who_can_reach(host: str, port: int, loopback: bool) -> str:
    if loopback:
        return f"only this machine can reach it ({host}:{port})"
    where = "every address of this machine" if host in ("0.0.0.0", "::") else host
    return (
        f"ANYONE who can reach port {port} on {where} and has this URL can open it "
        "(plain http: use it on a network you trust)"
    )


def _is_loopback_name(name: str) -> bool:
    """'localhost', 'localhost.localdomain', '127.0.1.1', '::1': a name that
    means the browser's own machine, not this one."""
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name == "localhost" or name.startswith(("localhost.", "localhost6"))


def url_host(
    host: str, names: Sequence[Callable[[], str]] = (socket.getfqdn, socket.gethostname)
) -> str:
    """The host part of the printed URL. A wildcard bind (0.0.0.0, ::) is
    reached at this machine's name: its FQDN, else its host name; when both
    are only `localhost` (no name set up), THIS-MACHINE — `localhost` would
    send another machine's browser to itself."""
    shown = host
    if host in ("0.0.0.0", "::"):
        found = (name() for name in names)
        shown = next((n for n in found if n and not _is_loopback_name(n)), "THIS-MACHINE")
    return f"[{shown}]" if ":" in shown else shown


def token_ok(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


# ------------------------------------------------------------------ the server


def make_server(
    argv: Sequence[str],
    host: str,
    port: int,
    token: str,
    title: str,
    after_kill: Callable[[], None] | None = None,
) -> Any:
    """A textual-serve Server that refuses every request without the token
    and runs each tab's dashboard as a TabDashboard (cli/serve_child.py).
    `after_kill`: what a dashboard ended by a signal could not clean up (the
    demo's run), done once no other tab's dashboard runs."""
    from gputui.extras import require

    require("textual_serve", "gputui serve")
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web
    from textual_serve.server import Server

    from gputui.cli.serve_child import TabDashboard, run_tab

    @web.middleware
    async def check_token(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        in_url = request.query.get("token", "")
        if not token_ok(in_url or request.cookies.get(COOKIE, ""), token):
            raise web.HTTPForbidden(text=FORBIDDEN)
        response = await handler(request)
        if in_url and request.path == "/" and not response.prepared:
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        return response

    class TokenServer(Server):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tabs: set[TabDashboard] = set()  # each tab's dashboard, while it runs

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(check_token)
            # the page asks nobody but this server: no web font from Google
            page = (Path(self.templates_path) / "app_index.html").read_text()
            page = EXTERNAL_FONT.sub("", page)
            aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": page}))
            return app

        async def on_startup(self, app: web.Application) -> None:
            """Quiet: `main` prints the URL with its token once it listens."""

        async def handle_index(self, request: web.Request) -> Any:
            # the page's static and websocket URLs are absolute: use the
            # address the browser used (the cookie is set for that host)
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            """textual-serve's, with a TabDashboard that is ended when the tab
            goes, whatever it was doing (starting included)."""
            return await run_tab(self, request, argv, after_kill)

    return TokenServer(shlex.join(argv), host=host, port=port, title=title)


async def _serve(
    server: Any, host: str, port: int, lines: list[str], after: Callable[[], None] | None
) -> None:
    from aiohttp import web

    from gputui.cli.serve_child import end_all

    runner = web.AppRunner(
        await server._make_app(), handle_signals=False, access_log=None, shutdown_timeout=5
    )
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, host, port).start()
        except OSError as err:
            raise GputuiError(
                f"cannot serve on {host}:{port}: {err.strerror or err}",
                f"pick a free port, e.g. --bind {host}:{port + 1 if port < 65535 else 8000}",
            ) from None
        for line in lines:
            print(line, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await end_all(server.tabs)  # every tab's dashboard, before the pages close
        if after is not None:
            await asyncio.to_thread(after)
        await runner.cleanup()


def takes_value(parser: argparse.ArgumentParser) -> set[str]:
    """The flags of the top-level parser that take a value (they come before `serve`)."""
    return {f for a in parser._actions if a.nargs != 0 for f in a.option_strings}


def main(
    args: argparse.Namespace,
    settings: Settings,
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
) -> int:
    if not (settings.host or settings.local or settings.demo or settings.targets):
        raise GputuiError(
            "serve: no target given",
            "e.g. gputui serve --demo, or gputui serve --host HOST --ct N",
        )
    host, port, loopback = parse_bind(args.bind, args.public)
    child = dashboard_argv(argv, takes_value(parser), args.allow_actions)
    token = secrets.token_urlsafe(24)
    after = _end_demo if settings.demo else None
    server = make_server(app_argv(child), host, port, token, title="gputui", after_kill=after)
    shown = url_host(host)
    mode = "actions allowed" if args.allow_actions else "read-only"
    lines = [
        f"gputui serve: http://{shown}:{port}/?token={token}",
        f"  {who_can_reach(host, port, loopback)}",
        f"  each browser tab runs: gputui {shlex.join(child)} ({mode}); Ctrl+C stops",
    ]
    asyncio.run(_serve(server, host, port, lines, after))
    return 0


def _end_demo() -> None:
    """The demo's run and its private tmux server (each tab's dashboard
    stops them when it quits; one ended by a signal cannot)."""
    from gputui.demo.environment import DemoEnvironment

    with contextlib.suppress(Exception):
        DemoEnvironment().teardown()
