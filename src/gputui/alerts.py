"""Telling someone: alerts when a finding appears or clears.

`AlertGate` is pure: given the findings open now, it says which alerts to
send — an alert when a watched finding has been open for its hold time
(connection: `connection_down_after` seconds; the rest at once), one
"resolved" when it clears, and never the same alert twice inside the quiet
period (a finding that flaps is told once per quiet period, not per flap).

Senders: `AppriseSender` (every notification URL apprise knows: ntfy, Slack,
Discord, Telegram, mailto, json:// for a generic JSON webhook …) and the
terminal's own (a bell and OSC 9 / OSC 777 desktop notifications, built by
`terminal_notification`). Every text that came from the target is made safe
first: no control characters reach a terminal or a chat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gputui.errors import ConfigError
from gputui.model import Finding
from gputui.untrusted import one_line

# The findings worth waking someone for: dead, hung, stalled, buffered, the
# log's disk full, GPU lost, connection down, the container gone.
ALERT_KINDS: tuple[str, ...] = (
    "connection",
    "ct_missing",
    "ct_stopped",
    "gpu_lost",
    "session_dead",
    "run_exited",
    "disk_full",
    "held_but_idle",
    "busy_but_silent",
    "buffered_output",
    "progress_stalled",
)
DEFAULT_QUIET_S = 600.0
DEFAULT_CONNECTION_DOWN_S = 60.0
TEXT_MAX = 300


def safe_text(text: str, limit: int = TEXT_MAX) -> str:
    """One line with no control characters (ESC, BEL, C1, bidi overrides):
    the rule of untrusted.py, for notification texts and OSC payloads."""
    return one_line(text, limit)


@dataclass(frozen=True)
class Alert:
    target: str
    kind: str
    state: str  # "firing" | "resolved" | "test"
    severity: str
    title: str
    time: float
    evidence: tuple[str, ...] = ()

    @property
    def subject(self) -> str:
        word = {"firing": "", "resolved": "resolved: ", "test": "test: "}.get(self.state, "")
        return safe_text(f"gputui {self.target}: {word}{self.title}", 200)

    @property
    def body(self) -> str:
        lines = [safe_text(self.title)]
        if self.state == "resolved":
            lines = [f"resolved: {safe_text(self.title)}"]
        lines += [f"- {safe_text(e)}" for e in self.evidence[:5]]
        lines.append(f"target: {safe_text(self.target)} · finding: {self.kind}")
        return "\n".join(lines)


@dataclass
class _KindState:
    first_open: float | None = None  # since when it has been open (for the hold)
    last_sent: str = ""  # "firing" | "resolved" | ""
    fired_at: float = -1e18
    finding: Finding | None = None


@dataclass
class AlertGate:
    """Which alerts to send, from the findings open at each tick; pure."""

    target: str
    kinds: Sequence[str] = ALERT_KINDS
    quiet_s: float = DEFAULT_QUIET_S
    holds: dict[str, float] = field(
        default_factory=lambda: {"connection": DEFAULT_CONNECTION_DOWN_S}
    )
    _state: dict[str, _KindState] = field(default_factory=dict)

    def knows(self, kind: str) -> bool:
        return kind in self._state

    def seed(self, f: Finding, since: float) -> None:
        """A finding already alerted before a restart (open in the history):
        not told again inside the quiet period, and resolved when it clears."""
        self._state[f.kind] = _KindState(
            first_open=since, last_sent="firing", fired_at=since, finding=f
        )

    def update(self, findings: Sequence[Finding], now: float) -> list[Alert]:
        out: list[Alert] = []
        open_now = {f.kind: f for f in findings if f.kind in self.kinds}
        for kind, f in open_now.items():
            st = self._state.setdefault(kind, _KindState())
            st.finding = f
            if st.first_open is None:
                st.first_open = now
            if now - st.first_open < self.holds.get(kind, 0.0):
                continue
            if st.last_sent != "firing" and now - st.fired_at >= self.quiet_s:
                st.last_sent, st.fired_at = "firing", now
                out.append(self._alert(f, "firing", now))
        for kind, st in self._state.items():
            if kind in open_now:
                continue
            st.first_open = None
            if st.last_sent == "firing" and st.finding is not None:
                st.last_sent = "resolved"
                out.append(self._alert(st.finding, "resolved", now))
        return out

    def _alert(self, f: Finding, state: str, now: float) -> Alert:
        return Alert(
            target=self.target,
            kind=f.kind,
            state=state,
            severity=f.severity.value if state == "firing" else "info",
            title=f.title,
            time=now,
            evidence=tuple(f.evidence) if state == "firing" else (),
        )


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
