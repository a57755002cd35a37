"""Incidents: one per cause, that escalate, de-escalate and resolve.

Diagnosis names findings one snapshot at a time; a cause shows as several
findings in turn. A block-buffered run is `buffered_output`, then
`busy_but_silent` while its buffer fills, then `buffered_output` again when
the 8 KiB arrive — forever, until it is relaunched unbuffered, flushed or
ends. A hang is `progress_stalled` or a WARNING "stalled", then an ERROR
"probably hung". `CAUSES` groups the finding kinds by cause, mildest stage
first, read from what each rule declares (`@rule(Kind(..., cause=...))` in
gputui.diagnose); `IncidentBook` turns the findings of each tick
into what is worth saying, the same for alerts, toasts, the bell and the
history:

- "firing" when an incident opens (after its hold; a cause told less than
  the quiet period ago waits for it to pass);
- "escalated" when it reaches a stage worse than any told before — a
  finding superseded by a stronger one of the same cause is this, never a
  "resolved";
- "resolved" when its cause is gone: none of its findings for `resolve_after`
  seconds, and none of the causes that stand its rules down (`masked_by`:
  a hang silences the buffering rules, a lost connection every rule) open.
  Only an incident that was told is resolved aloud;
- "quiet" (for this screen only): the finding a toast shows is no longer
  shown — de-escalated, gone, masked — so the toast goes.

The user's own actions (relaunch, kill) mark an expected window: inside it
no incident opens aloud, none resolves (the old run's state holds until the
new run is up), and incidents that open inside it stay silent until they
close — the SIGINT's KeyboardInterrupt, the log going quiet. Except what
the caller names as news (`news`: the finding kinds whose evidence belongs
to the run the action started — its new pane dead, its new PID
block-buffered — judged by the recorder from the snapshot and the audit
line): those are told at once, in the window or not, and an incident of
theirs opened silent in the window is told then.

Pure: no I/O, no clock reads.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from gputui.config import DEFAULTS
from gputui.diagnose import KINDS, Kind
from gputui.model import Finding

RESOLVE_AFTER_S = 5.0  # a cause's findings absent this long: resolved (not a one-tick blip)
SETTLE_S = 10.0  # after the user's action finished: the new run is up by then


@dataclass(frozen=True)
class Cause:
    """One cause and the finding kinds it shows as, mildest stage first.
    `alert_from`: the first stage worth waking someone for (earlier stages
    are recorded, never sent). `masked_by`: causes whose open incident
    stands this cause's rules down (its findings vanish without it being
    gone)."""

    name: str
    kinds: tuple[str, ...]
    alert_from: int | None = 0  # None: never alerted
    masked_by: tuple[str, ...] = ()


# Causes that, while open, stand every other rule down (diagnose reads
# nothing else while the connection is down; a stopped CT has no run; a run
# not read since the agent was lost is not judged).
EVERYTHING_MASKED_BY = ("connection", "container", "run_unread")
# Causes whose open incident stands another cause's rules down.
MASKED_BY: dict[str, tuple[str, ...]] = {
    "hang": ("disk",),
    "buffering": ("disk", "hang"),
}


def causes_of(kinds: Iterable[Kind]) -> tuple[Cause, ...]:
    """The causes the rules declare (`@rule(Kind(..., cause=, stage=,
    alerts=))` in gputui.diagnose): each cause's kinds by stage, mildest
    first, alerted from its first alerting stage on."""
    by: dict[str, list[Kind]] = {}
    for k in kinds:
        by.setdefault(k.cause, []).append(k)
    out = []
    for name, ks in by.items():
        ks.sort(key=lambda k: k.stage)
        alerting = [i for i, k in enumerate(ks) if k.alerts]
        alert_from = alerting[0] if alerting else None
        out.append(Cause(name, tuple(k.name for k in ks), alert_from, MASKED_BY.get(name, ())))
    return tuple(out)


CAUSES: tuple[Cause, ...] = causes_of(KINDS.values())
_CAUSE_OF: dict[str, Cause] = {k: c for c in CAUSES for k in c.kinds}


def cause_of(kind: str) -> Cause:
    """The cause a finding kind belongs to; a kind in no row is its own."""
    return _CAUSE_OF.get(kind) or Cause(kind, (kind,), alert_from=None)


def alerting_kinds() -> tuple[str, ...]:
    """The finding kinds that alert: every stage from a cause's `alert_from` on."""
    return tuple(k for c in CAUSES if c.alert_from is not None for k in c.kinds[c.alert_from :])


def level(f: Finding) -> tuple[int, int]:
    """How bad a finding is within its cause: severity first, then stage."""
    c = cause_of(f.kind)
    return (-f.severity.rank, c.kinds.index(f.kind) if f.kind in c.kinds else 0)


@dataclass(frozen=True)
class Notice:
    """One thing said about an incident. `state`: firing | escalated |
    resolved | quiet; `finding`: the finding it is about (for resolved, the
    worst one told); `aloud`: an alert (sent, rung) — else history/screen only."""

    cause: str
    state: str
    finding: Finding
    time: float
    aloud: bool


@dataclass
class Incident:
    cause: Cause
    opened: float
    finding: Finding  # the current (or last seen) finding
    expected: bool = False  # opened inside the user's action window: silent till it closes
    news: bool = False  # about the run the user's action started: told, resolves in the window
    told: Finding | None = None  # the worst finding alerted (None: nothing sent)
    recorded: Finding | None = None  # the worst finding recorded in the history
    toast: bool = False  # the screen shows a toast for it
    absent_since: float | None = None


@dataclass
class IncidentBook:
    """See the module docstring. `quiet_s`: an incident of a cause told
    less than this ago opens muted; `holds`: seconds a cause must stay open
    before it is told (connection: a blip is no news)."""

    quiet_s: float = DEFAULTS.alert_quiet_period
    holds: dict[str, float] = field(default_factory=dict)
    resolve_after: float = RESOLVE_AFTER_S
    open: dict[str, Incident] = field(default_factory=dict)
    _fired: dict[str, float] = field(default_factory=dict)  # cause -> last "firing" time
    _windows: list[tuple[float, float]] = field(default_factory=list)

    # ------------------------------------------------------------ the user acted

    def expect(self, start: float, until: float) -> None:
        """The user's own action runs from `start`; its consequences are
        expected until `until` (extend it by calling again)."""
        self._windows = [w for w in self._windows if w[0] != start] + [(start, until)]

    def in_window(self, now: float) -> bool:
        self._windows = [w for w in self._windows if w[1] >= now - 3600]
        return any(a <= now <= b for a, b in self._windows)

    def seed(self, f: Finding, since: float, told: bool = True) -> None:
        """An incident open before a restart (from the history): not opened
        again, and resolved aloud when it clears if it was told."""
        c = cause_of(f.kind)
        told = told and self._alerting(f)  # a note (tools missing) was never sent
        self.open[c.name] = Incident(
            c, since, f, told=f if told else None, recorded=f, absent_since=None
        )
        if told:
            self._fired[c.name] = since

    def is_news(self, f: Finding, now: float, news: Collection[str] = ()) -> bool:
        """False for a finding that is the user's own doing (the banner
        leaves it out too): its cause's incident opened inside the user's
        action window, or would open now, inside one — unless its kind is
        in `news` (its evidence is the new run's)."""
        if f.kind in news:
            return True
        inc = self.open.get(cause_of(f.kind).name)
        if inc is not None:
            return not inc.expected
        return not self.in_window(now)

    # ------------------------------------------------------------ each tick

    def update(
        self, findings: Iterable[Finding], now: float, news: Collection[str] = ()
    ) -> list[Notice]:
        """The notices of one tick. `news`: finding kinds about the run the
        user's action started (see the module docstring)."""
        present: dict[str, Finding] = {}
        for f in findings:
            name = cause_of(f.kind).name
            if name not in present or level(f) > level(present[name]):
                present[name] = f
        window = self.in_window(now)
        out: list[Notice] = []
        for name, f in present.items():
            fresh = any(k in news for k in cause_of(f.kind).kinds)
            inc = self.open.get(name)
            if inc is None:
                inc = self.open[name] = Incident(
                    cause_of(f.kind), now, f, expected=window and not fresh
                )
            elif inc.expected and fresh:  # opened silent in the window: the new run's, told now
                inc.expected, inc.opened = False, now
            inc.news = inc.news or fresh
            inc.finding, inc.absent_since = f, None
            out += self._present(inc, f, now, window and not fresh)
        for name, inc in list(self.open.items()):
            if name not in present:
                out += self._absent(inc, present, now, window)
        return out

    def _present(self, inc: Incident, f: Finding, now: float, window: bool) -> list[Notice]:
        out: list[Notice] = []
        name = inc.cause.name
        if inc.expected or window:
            stale = inc.told is None or level(f) < level(inc.told)
            return self._quiet(inc, now) if inc.toast and stale else []
        if inc.recorded is None or level(f) > level(inc.recorded):
            state = "firing" if inc.recorded is None else "escalated"
            inc.recorded = f
            out.append(Notice(name, state, f, now, aloud=False))
        if not self._alerting(f) or now - inc.opened < self.holds.get(name, 0.0):
            return out
        if inc.told is None:
            if now - self._fired.get(name, -1e18) < self.quiet_s:
                return out  # told less than quiet_s ago (a flap): not again yet
            self._fired[name] = now
            inc.told, inc.toast = f, True
            return [*out, Notice(name, "firing", f, now, aloud=True)]
        if level(f) > level(inc.told):
            inc.told, inc.toast = f, True
            return [*out, Notice(name, "escalated", f, now, aloud=True)]
        if inc.toast and level(f) < level(inc.told):
            out += self._quiet(inc, now)  # de-escalated: the worse toast is stale
        return out

    def _absent(
        self, inc: Incident, present: dict[str, Finding], now: float, window: bool
    ) -> list[Notice]:
        out = self._quiet(inc, now) if inc.toast else []
        masks = (*inc.cause.masked_by, *EVERYTHING_MASKED_BY)
        if (window and not inc.news) or any(m in present and m != inc.cause.name for m in masks):
            inc.absent_since = None  # held: not gone, unseen (or the user's own doing)
            return out
        if inc.absent_since is None:
            inc.absent_since = now
        if now - inc.absent_since < self.resolve_after:
            return out
        del self.open[inc.cause.name]
        if inc.recorded is not None and not inc.expected:
            out.append(Notice(inc.cause.name, "resolved", inc.recorded, now, aloud=False))
        if inc.told is not None and not inc.expected:
            out.append(Notice(inc.cause.name, "resolved", inc.told, now, aloud=True))
        return out

    def _quiet(self, inc: Incident, now: float) -> list[Notice]:
        inc.toast = False
        return [Notice(inc.cause.name, "quiet", inc.told or inc.finding, now, aloud=False)]

    @staticmethod
    def _alerting(f: Finding) -> bool:
        c = cause_of(f.kind)
        return c.alert_from is not None and f.kind in c.kinds[c.alert_from :]
