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
  (`host_word_error` when the finding is an ERROR): host/view.py;
- `supersedes` / `defers_to`: precedence, the one place where it is said
  which finding wins. `Kind("b", defers_to=("a",))` and
  `Kind("a", supersedes=("b",))` say the same: when the rules name both
  `a` and `b` about one snapshot, `b` is not shown (`apply_precedence`).
  A rule never checks another rule's condition to stay quiet, and the
  order rules run in means nothing. Safety: a finding below WARNING never
  hides one at WARNING or above, so precedence cannot make the banner go
  dark. `precedence_problems()` names a cycle or an unknown kind
  (tests/test_precedence.py prints the table and fails on either).
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
    supersedes: tuple[str, ...] = ()  # kinds this one hides when both are named
    defers_to: tuple[str, ...] = ()  # kinds that hide this one when both are named

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


def declare(*kinds: Kind) -> None:
    """Declare kinds no `@rule` names (diagnose's own `rule_failed`)."""
    for k in kinds:
        if k.name in KINDS:
            raise ValueError(f"kind {k.name!r} is declared twice")
        KINDS[k.name] = k


_HIDDEN: tuple[dict[str, Kind], int, dict[str, frozenset[str]]] | None = None


def hidden_by() -> dict[str, frozenset[str]]:
    """kind -> the kinds that hide it (its `defers_to`, and every kind that
    `supersedes` it). Kept while no kind is declared (each diagnosis asks)."""
    global _HIDDEN
    if _HIDDEN is None or _HIDDEN[0] is not KINDS or _HIDDEN[1] != len(KINDS):
        _HIDDEN = (KINDS, len(KINDS), _hidden_by())
    return _HIDDEN[2]


def _hidden_by() -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {n: set(k.defers_to) for n, k in KINDS.items()}
    for n, k in KINDS.items():
        for low in k.supersedes:
            out.setdefault(low, set()).add(n)
    return {n: frozenset(v) for n, v in out.items()}


def precedence_problems() -> list[str]:
    """What is wrong with the declared precedence: a kind named that is not
    declared, a kind that hides itself, a cycle (a hides b ... hides a)."""
    table = hidden_by()
    problems = [
        f"{low!r} is hidden by {high!r}, which is no declared kind"
        for low, highs in sorted(table.items())
        for high in sorted(highs)
        if high not in KINDS
    ]
    problems += [
        f"{low!r}: no such kind (named in a precedence)" for low in table if low not in KINDS
    ]
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in sorted(table.get(n, ())):
            if state.get(m) == 1:
                cycle = [*path[path.index(m) :], m] if m in path else [n, m]
                problems.append("a cycle: " + " is hidden by ".join(cycle))
            elif state.get(m) is None:
                visit(m, [*path, m])
        state[n] = 2

    for n in sorted(table):
        if state.get(n) is None:
            visit(n, [n])
    return problems


def precedence_table() -> list[str]:
    """One line per kind that some kind hides: `low  <  high, high` (for
    the test that prints it, and for contributors)."""
    return [
        f"{low:<22} is hidden by {', '.join(sorted(highs))}"
        for low, highs in sorted(hidden_by().items())
        if highs
    ]


def apply_precedence(findings: Iterable[Finding]) -> list[Finding]:
    """`findings` less those a declared precedence hides: a finding of kind
    b is dropped when a finding of a kind that hides b is there too —
    unless that one is below WARNING and b is not (a note never hides a
    warning: the banner never goes dark for precedence's sake)."""
    fs = list(findings)
    table = hidden_by()
    worst: dict[str, int] = {}
    for f in fs:
        worst[f.kind] = min(worst.get(f.kind, 9), f.severity.rank)
    warn = Severity.WARNING.rank

    def hidden(f: Finding) -> bool:
        for high in table.get(f.kind, ()):
            r = worst.get(high)
            if r is not None and (r <= warn or f.severity.rank > warn):
                return True
        return False

    return [f for f in fs if not hidden(f)]


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
