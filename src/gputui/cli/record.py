"""The subcommands for history and alerts: `watch`, `history`, `alert-test`."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.remote.target import TARGET_GRAMMAR

# the flags each command takes (cli.add_target_flags parts)
WATCH_PARTS = frozenset({"config", "host", "ssh", "container", "run", "interval", "stale", "local"})
HISTORY_PARTS = frozenset({"config", "host", "container"})
ALERT_PARTS = frozenset({"config"})

COMMANDS = ("watch", "history", "alert-test")


def add_parsers(sub: Any, add_target_flags: Callable[..., None]) -> None:
    watch = sub.add_parser(
        "watch",
        help="headless: keep the connections, record the history, send alerts",
        description="Watch targets without a screen: record their history, send alerts, "
        "optionally serve /metrics. Stops cleanly on SIGTERM.",
    )
    add_target_flags(watch, suppress=True, parts=WATCH_PARTS)
    watch.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help=f"{TARGET_GRAMMAR} or `local` (default: --host, or the config's [[targets]] or host)",
    )
    # not in --help nor the completion (watch refuses it), but taken, so that
    # `watch --demo` says why in its own words (cli/watch.py)
    watch.add_argument(
        "--demo", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    watch.add_argument(
        "--prometheus", metavar="ADDR", help="serve /metrics on ADDR, e.g. 127.0.0.1:9464"
    )
    watch.add_argument(
        "--prometheus-public",
        action="store_true",
        help="allow --prometheus on an address other than loopback (no login: anyone who "
        "can reach it sees the runs' names and figures)",
    )
    hist = sub.add_parser("history", help="print the recorded history of a target")
    add_target_flags(hist, suppress=True, parts=HISTORY_PARTS)
    hist.add_argument(
        "target",
        nargs="?",
        metavar="TARGET",
        help=f"{TARGET_GRAMMAR} as given to watch or the dashboard, its address, or the "
        "target as recorded (a unique part is enough); default: all",
    )
    hist.add_argument("--since", default="6h", help="how far back: 90s, 30m, 6h, 2d (6h)")
    fmt = hist.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--csv", action="store_true", help="print CSV")
    which = hist.add_mutually_exclusive_group()
    which.add_argument(
        "--compare",
        nargs="+",
        type=int,
        metavar="ID",
        help="two runs side by side at the same step: LAST_ID THIS_ID (one ID: that run "
        "against its last run); the ids are in --runs",
    )
    which.add_argument("--runs", action="store_true", help="list the target's runs with their ids")
    which.add_argument(
        "--pick-last",
        nargs=2,
        type=int,
        metavar=("LAST_ID", "THIS_ID"),
        help="compare run THIS_ID with run LAST_ID from now on (the dashboard, watch, "
        "doctor), instead of the last run of the same program",
    )
    test = sub.add_parser("alert-test", help="send one test alert to the configured URLs")
    add_target_flags(test, suppress=True, parts=ALERT_PARTS)


def run(command: str, args: argparse.Namespace, settings: Settings) -> int:
    if command == "watch":
        from gputui.cli import watch

        return watch.main(
            list(args.targets or []),
            settings,
            args.prometheus,
            getattr(args, "hosts", None),
            prometheus_public=bool(getattr(args, "prometheus_public", False)),
        )
    if command == "history":
        return _history(args, settings)
    return _alert_test(settings)


def _history(args: argparse.Namespace, settings: Settings) -> int:
    from gputui.cli.targets import target_query
    from gputui.record.query import HistoryReader, parse_since, render

    since_s = parse_since(args.since)
    if getattr(args, "pick_last", None):
        return _pick_last(settings, *args.pick_last)
    reader = HistoryReader(settings.history_path)
    try:
        now = time.time()
        fmt = "json" if args.json else "csv" if args.csv else "text"
        if getattr(args, "compare", None):
            return _compare(reader, list(args.compare), fmt)
        query = target_query(args)
        names = reader.find(query) if query else reader.targets()
        if not names:
            print("no targets recorded yet", file=sys.stderr)
            return 0
        for name in names:
            if getattr(args, "runs", False):
                from gputui.record.vslast import runs_text

                sys.stdout.write(runs_text(reader, name, now - since_s))
                continue
            sys.stdout.write(render(reader, name, now - since_s, now, fmt))
            if fmt == "json":
                sys.stdout.write("\n")
    finally:
        reader.close()
    return 0


def _compare(reader: Any, ids: list[int], fmt: str) -> int:
    """`history --compare [LAST_ID] THIS_ID`: the two runs at the same step."""
    from gputui.record.vslast import pair_of, render_compare

    if len(ids) > 2:
        raise GputuiError(
            f"--compare takes one or two run ids, not {len(ids)}",
            "gputui history --compare LAST_ID THIS_ID (ids from `gputui history TARGET --runs`)",
        )
    pair = pair_of(reader, ids[0] if len(ids) == 2 else None, ids[-1])
    how = (
        ""
        if len(ids) == 2
        else "picked with --pick-last"
        if pair.picked
        else "its last run: the same program's, before it"
    )
    sys.stdout.write(render_compare(pair, fmt, how))
    return 0


def _pick_last(settings: Settings, last_id: int, this_id: int) -> int:
    """`history --pick-last LAST_ID THIS_ID`: kept in the history file."""
    from gputui.record.history import HistoryWriter
    from gputui.record.query import HistoryReader
    from gputui.record.vslast import pair_of

    reader = HistoryReader(settings.history_path)
    try:
        pair_of(reader, last_id, this_id)  # both exist: else one line saying which
    finally:
        reader.close()
    writer = HistoryWriter(settings.history_path)
    try:
        writer.pick_last(this_id, last_id, time.time()).result()
    finally:
        writer.close()
    print(f"run {this_id} is compared with run {last_id} from now on")
    return 0


def _alert_test(settings: Settings) -> int:
    from gputui.record.alerts import AppriseSender, trial_alert

    urls = list(settings.alert_urls)
    if not urls:
        raise GputuiError(
            "no notification URLs configured",
            "add urls = [...] under [alerts] in the config (see `gputui config --example`)",
        )
    sender = AppriseSender(urls)
    label = settings.host or "local"  # "gputui gputui: test: …" had no target in it
    ok = sender.send_blocking(trial_alert(label))
    if not ok:
        print(
            f"gputui: the test alert could not be delivered to {len(urls)} URL(s)",
            file=sys.stderr,
        )
        return 1
    print(f"sent a test alert to {len(urls)} URL(s)")
    return 0
