"""The rule table: each rule registers itself with `@rule(...)`, declaring
the finding kinds it names, next to its code. `RULES` (evaluation order),
`SPECIFICITY` (display order) and the incident causes
(gputui.record.incidents) are all read from here. Pure.

A kind declares:
- `specificity`: its place among findings of one severity — lower is more
  specific and shown first (numbers go by tens: room to slot one in);
- `cause`: the incident it belongs to. The findings of one cause are one
  incident that escalates (`stage`: mildest 0 first) rather than several
  alerts; a kind that is its own cause names itself;
- `alerts`: whether it wakes someone (webhook, bell); once one stage of a
  cause alerts, every later stage does too;
- `silence`: it says the run is silent (a relaunched run's first quiet
  stretch is no news: record/recorder.py);
- `gone`: it says the run is not there (news once a relaunch had time to
  start one: record/recorder.py);
- `host_level`: it is about the host, the link or the GPUs, not the run;
- `host_word`: the host view's one word for a container whose run has it
  (`host_word_error` when the finding is an ERROR): host/view.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputui.model import Finding, Severity

if TYPE_CHECKING:
    from gputui.diagnose.context import Context


@dataclass(frozen=True)
class Kind:
    """One kind of finding (`Finding.kind`) and how it ranks, groups and alerts."""

    name: str
    specificity: int
    cause: str
    stage: int = 0
    alerts: bool = False
    silence: bool = False
    gone: bool = False
    host_level: bool = False
    host_word: str = ""
    host_word_error: str = ""

    def word(self, f: Finding) -> str:
        """The host view's word for finding `f` of this kind ("" none)."""
        if f.severity == Severity.ERROR and self.host_word_error:
            return self.host_word_error
        return self.host_word


Rule = Callable[["Context"], "Finding | None"]


@dataclass(frozen=True)
class RuleEntry:
    """A registered rule: its function, the kinds it declares, the kinds it
    may also name that another rule declares (`names`), and whether it runs
    while the connection is down (`offline`: it reads nothing from the target)."""

    func: Rule
    kinds: tuple[Kind, ...]
    names: tuple[str, ...] = ()
    offline: bool = False


ENTRIES: list[RuleEntry] = []  # in registration (= evaluation) order
KINDS: dict[str, Kind] = {}


def rule(*kinds: Kind, names: Iterable[str] = (), offline: bool = False) -> Callable[[Rule], Rule]:
    """Register a rule `rule_x(ctx) -> Finding | None` with the kinds it declares."""

    def register(func: Rule) -> Rule:
        if not kinds:
            raise ValueError(f"{func.__name__}: a rule declares at least one kind")
        for k in kinds:
            if k.name in KINDS:
                raise ValueError(f"{func.__name__}: kind {k.name!r} is declared twice")
            KINDS[k.name] = k
        ENTRIES.append(RuleEntry(func, tuple(kinds), tuple(names), offline))
        return func

    return register


def kinds_that(flag: str) -> frozenset[str]:
    """The kinds declaring `flag` ("silence", "gone", "host_level", "alerts")."""
    return frozenset(n for n, k in KINDS.items() if getattr(k, flag))


def specificity() -> tuple[str, ...]:
    """Every kind, the more specific first."""
    return tuple(sorted(KINDS, key=lambda n: KINDS[n].specificity))


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; within one severity, the more specific kind first."""

    def key(f: Finding) -> tuple[int, int]:
        k = KINDS.get(f.kind)
        return (f.severity.rank, k.specificity if k is not None else 1_000_000)

    return sorted(findings, key=key)
