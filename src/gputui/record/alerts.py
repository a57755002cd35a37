"""Telling someone: alerts when an incident opens, gets worse or resolves.

`AlertGate` is pure: given the findings open now, it says which alerts to
send, one incident per cause (gputui.record.incidents): "firing" when an incident
has been open for its hold time (connection: `connection_down_after`
seconds; the rest at once), "escalated" when it reaches a worse stage than
any told (buffered → log silent, stalled → probably hung), one "resolved"
when its cause is gone — never when a finding is superseded by a stronger
one of the same cause — and no cause told twice inside the quiet period.
"quiet" alerts are for this screen only: a toast whose finding is no longer
shown goes.

Senders: `AppriseSender` (every notification URL apprise knows: ntfy, Slack,
Discord, Telegram, mailto, json:// for a generic JSON webhook …) and the
terminal's own (a bell and OSC 9 / OSC 777 desktop notifications, built by
`terminal_notification`). Every text that came from the target is made safe
first: no control characters reach a terminal or a chat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from gputui.config import DEFAULTS
from gputui.errors import ConfigError
from gputui.model import Finding
from gputui.record.incidents import IncidentBook, Notice, alerting_kinds
from gputui.text.untrusted import fit_line, no_mentions, one_line

# The findings worth waking someone for: dead, hung, stalled, buffered, the
# log's disk full, GPU lost, connection down, the container gone — from the
# one table of causes (gputui.record.incidents.CAUSES).
ALERT_KINDS: tuple[str, ...] = alerting_kinds()
DEFAULT_QUIET_S = DEFAULTS.alert_quiet_period
DEFAULT_CONNECTION_DOWN_S = DEFAULTS.alert_connection_down_after
TEXT_MAX = 300
SUBJECT_MAX = 200  # an alert's subject (a mail's, a push title's)


def safe_text(text: str, limit: int = TEXT_MAX) -> str:
    """One line with no control characters (ESC, BEL, C1, bidi overrides):
    the rule of untrusted.py, for notification texts and OSC payloads."""
    return one_line(text, limit)


@dataclass(frozen=True)
class Alert:
    target: str
    kind: str
    state: str  # "firing" | "escalated" | "resolved" | "quiet" (this screen only) | "test"
    severity: str
    title: str
    time: float
    evidence: tuple[str, ...] = ()
    cause: str = ""  # the incident (gputui.record.incidents.CAUSES): one toast per cause

    @property
    def subject(self) -> str:
        word = {"escalated": "worse: ", "resolved": "resolved: ", "test": "test: "}.get(
            self.state, ""
        )
        return no_mentions(fit_line(f"gputui {self.target}: {word}{self.title}", SUBJECT_MAX))

    @property
    def body(self) -> str:
        lines = [fit_line(self.title, TEXT_MAX)]
        if self.state in ("resolved", "escalated"):
            word = "resolved" if self.state == "resolved" else "worse"
            lines = [f"{word}: {fit_line(self.title, TEXT_MAX)}"]
        lines += [f"- {safe_text(e)}" for e in self.evidence[:5]]
        incident = f" · incident: {self.cause}" if self.cause and self.cause != self.kind else ""
        lines.append(f"target: {safe_text(self.target)} · finding: {self.kind}{incident}")
        return no_mentions("\n".join(lines))  # it quotes session names and log lines


@dataclass
class AlertGate:
    """Which alerts to send, from the findings open at each tick; pure. The
    history's transitions of the same incidents are in `recorded` after
    each `update` (opened, worse, resolved — aloud or not)."""

    target: str
    quiet_s: float = DEFAULT_QUIET_S
    holds: dict[str, float] = field(
        default_factory=lambda: {"connection": DEFAULT_CONNECTION_DOWN_S}
    )
    book: IncidentBook = field(default_factory=IncidentBook)
    recorded: list[Notice] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.book.quiet_s, self.book.holds = self.quiet_s, self.holds

    def knows(self, cause: str) -> bool:
        return cause in self.book.open

    def seed(self, f: Finding, since: float, told: bool = True) -> None:
        """An incident already open before a restart (in the history): not
        told again, and resolved when its cause is gone."""
        self.book.seed(f, since, told)

    def expect(self, start: float, until: float) -> None:
        """The user's own relaunch or kill runs from `start`: what it causes
        until `until` is no news (gputui.record.incidents)."""
        self.book.expect(start, until)

    def update(
        self, findings: Sequence[Finding], now: float, news: Collection[str] = ()
    ) -> list[Alert]:
        self.book.quiet_s, self.book.holds = self.quiet_s, self.holds
        notices = self.book.update(findings, now, news)
        self.recorded = [n for n in notices if not n.aloud and n.state != "quiet"]
        return [self._alert(n) for n in notices if n.aloud or n.state == "quiet"]

    def _alert(self, n: Notice) -> Alert:
        f = n.finding
        told = n.state in ("firing", "escalated")
        return Alert(
            target=self.target,
            kind=f.kind,
            state=n.state,
            severity=f.severity.value if told else "info",
            title=f.title,
            time=n.time,
            evidence=tuple(f.evidence) if told else (),
            cause=n.cause,
        )


@dataclass(frozen=True)
class Toast:
    """What a screen shows for an alert: one toast per incident (`key`),
    replaced when it gets worse or resolves, removed ("" message) when the
    finding it shows is no longer shown; `ring`: the bell and the desktop
    notification too."""

    key: str
    message: str
    severity: str  # "error" | "warning" | "information"
    timeout: float
    ring: bool


TOAST_S = 30.0  # an open incident's toast; it goes sooner when its finding does
RESOLVED_TOAST_S = 5.0


def toast_for(alert: Alert) -> Toast:
    key = alert.cause or alert.kind
    if alert.state == "quiet":
        return Toast(key, "", "information", 0.0, ring=False)
    if alert.state == "resolved":
        return Toast(key, alert.subject, "information", RESOLVED_TOAST_S, ring=True)
    severity = "error" if alert.severity == "error" else "warning"
    return Toast(key, alert.subject, severity, TOAST_S, ring=True)


def trial_alert(target: str, now: float | None = None) -> Alert:
    return Alert(
        target=target,
        kind="test",
        state="test",
        severity="info",
        title="this is a test alert from `gputui alert-test`",
        time=time.time() if now is None else now,
    )


# ------------------------------------------------------------------ terminal


def terminal_notification(alert: Alert) -> str:
    """A bell plus OSC 9 (iTerm2, WezTerm, Windows Terminal, kitty) and
    OSC 777 (foot, Ghostty, rxvt, VTE) desktop notifications. The texts are
    stripped of every control character and of `;` (OSC 777's field
    separator), so nothing from the target can end the sequence early."""
    title = safe_text(alert.subject, 120).replace(";", ",")
    body = safe_text(alert.body.replace("\n", " · "), 240).replace(";", ",")
    return f"\a\x1b]9;{title}\x1b\\\x1b]777;notify;{title};{body}\x1b\\"


# ------------------------------------------------------------------ apprise


class AppriseSender:
    """Sends alerts to the notification URLs from the config, through apprise."""

    def __init__(self, urls: Sequence[str], where: str = "[alerts] urls") -> None:
        self.urls = list(urls)
        self.sent = 0
        self.failed = 0
        self._apprise = None
        if not self.urls:
            return
        from gputui.extras import require

        apprise = require("apprise", f"alerts to the notification URLs ({where})")
        ap = apprise.Apprise()
        for i, url in enumerate(self.urls):
            if not ap.add(url):
                raise ConfigError(
                    f"{where}[{i}]: apprise does not understand {safe_text(url, 80)!r}",
                    "use a URL apprise knows, e.g. ntfy://topic, json://host:port/path, "
                    "mailto://user:pass@example.com",
                )
        self._apprise = ap

    @property
    def enabled(self) -> bool:
        return self._apprise is not None

    def send_blocking(self, alert: Alert) -> bool:
        if self._apprise is None:
            return False
        import apprise

        kind = {
            "firing": apprise.NotifyType.FAILURE
            if alert.severity == "error"
            else apprise.NotifyType.WARNING,
            "escalated": apprise.NotifyType.FAILURE
            if alert.severity == "error"
            else apprise.NotifyType.WARNING,
            "resolved": apprise.NotifyType.SUCCESS,
        }.get(alert.state, apprise.NotifyType.INFO)
        ok = bool(self._apprise.notify(title=alert.subject, body=alert.body, notify_type=kind))
        if ok:
            self.sent += 1
        else:
            self.failed += 1
        return ok

    async def send(self, alert: Alert) -> bool:
        """Off the event loop (apprise blocks on the network)."""
        if self._apprise is None:
            return False
        return await asyncio.get_running_loop().run_in_executor(None, self.send_blocking, alert)


AlertSink = Callable[[Alert], None]
