"""Each diagnosis rule declares, next to its code (`@rule(Kind(...))`),
the finding kinds it names with their specificity, cause and alerting;
RULES, SPECIFICITY and the incident causes are built from those
declarations. These tests hold the declarations to what the rules do."""

from __future__ import annotations

from collections.abc import Iterator

from gputui.diagnose import RULES, SPECIFICITY, Thresholds, diagnose, stale_threshold
from gputui.diagnose.context import Context
from gputui.diagnose.registry import ENTRIES, KINDS
from gputui.diagnose.thresholds import DEFAULT_THRESHOLDS
from gputui.model import Snapshot
from gputui.record.incidents import CAUSES
from test_diagnose import CASES, EDGES, NOW, run


def table_snapshots() -> Iterator[tuple[str, Snapshot, float | None]]:
    for case in CASES:
        yield case.name, run(**case.snap), case.stale_after
    for edge in EDGES:
        yield edge.name, run(**edge.snap), edge.stale_after


def test_every_rule_declares_kinds_with_specificity_and_cause() -> None:
    assert len(RULES) == len(ENTRIES) >= 20
    assert len(set(RULES)) == len(RULES)
    for e in ENTRIES:
        name = e.func.__name__
        assert name.startswith("rule_") and e.kinds, name
        for k in e.kinds:
            assert k.name and k.cause, (name, k)
            assert isinstance(k.specificity, int) and k.specificity > 0, (name, k)
        assert set(e.names) <= set(KINDS), (name, e.names)  # named kinds are declared somewhere
    specs = [k.specificity for k in KINDS.values()]
    assert len(specs) == len(set(specs)), "two kinds share a specificity: their order is a tie"
    assert list(SPECIFICITY) == sorted(KINDS, key=lambda n: KINDS[n].specificity)


def test_a_cause_escalates_through_distinct_stages_and_alerts_from_one_on() -> None:
    for c in CAUSES:
        stages = [KINDS[k].stage for k in c.kinds]
        assert len(stages) == len(set(stages)), (c.name, stages)
        alerts = [KINDS[k].alerts for k in c.kinds]
        first = alerts.index(True) if True in alerts else len(alerts)
        assert alerts == [False] * first + [True] * (len(alerts) - first), (c.name, alerts)
        assert c.alert_from == (first if first < len(alerts) else None)


def test_every_kind_the_table_cases_produce_is_registered_by_its_rule() -> None:
    """Run each rule alone on every table case: what it names, it declares
    (or names as declared by another rule), and diagnose names only declared kinds."""
    seen: set[str] = set()
    for name, snap, stale_after in table_snapshots():
        threshold = stale_threshold(snap, Thresholds(stale_after=stale_after))
        ctx = Context(snap, NOW, threshold, DEFAULT_THRESHOLDS)
        for e in ENTRIES:
            f = e.func(ctx)
            if f is None:
                continue
            assert f.kind in {k.name for k in e.kinds} | set(e.names), (name, e.func.__name__)
            seen.add(f.kind)
        kinds = {f.kind for f in diagnose(snap, NOW, Thresholds(stale_after=stale_after))}
        assert kinds <= set(KINDS), (name, kinds - set(KINDS))
    assert seen <= set(KINDS)
