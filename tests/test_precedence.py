"""Which finding wins is declared on the kinds (`supersedes` / `defers_to`,
diagnose/registry.py), never written as a guard inside another rule or as
the order rules are imported in. These tests print the table, fail on a
cycle, and hold `apply_precedence` to what it promises: a note never hides
a warning, so precedence cannot make the banner go dark."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import gputui.diagnose as diagnose_pkg
from gputui.diagnose import registry
from gputui.diagnose.registry import (
    KINDS,
    Kind,
    apply_precedence,
    hidden_by,
    precedence_problems,
    precedence_table,
)
from gputui.model import Finding, Severity

DIAGNOSE = Path(diagnose_pkg.__file__).parent


def test_the_precedence_table_prints_and_has_no_cycle(capsys: pytest.CaptureFixture[str]) -> None:
    table = precedence_table()
    print("\n".join(["finding precedence (diagnose/registry.py):", *table]))
    out = capsys.readouterr().out
    assert "held_but_idle" in out and "waiting_for_input" in out, out
    assert precedence_problems() == [], precedence_problems()


def test_the_declared_precedences_of_today() -> None:
    table = hidden_by()
    for low in ("loading", "held_but_idle", "progress_stalled", "busy_but_silent"):
        assert "waiting_for_input" in table[low], low
    assert "busy_but_silent" in table["buffered_output"]
    for low in ("session_dead", "run_finished", "run_ended", "run_exited"):
        assert "oom_killed" in table[low], low
    for low in ("oom_killed", "run_killed", "run_ended", "session_dead"):  # the kernel's line
        assert "kernel_oom_kill" in table[low], low


def _with_kinds(monkeypatch: pytest.MonkeyPatch, *kinds: Kind) -> None:
    fresh = dict(KINDS)
    for k in kinds:
        fresh[k.name] = k
    monkeypatch.setattr(registry, "KINDS", fresh)


def test_a_cycle_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_kinds(
        monkeypatch,
        Kind("zz_a", specificity=10_001, cause="zz_a", supersedes=("zz_b",)),
        Kind("zz_b", specificity=10_002, cause="zz_b", supersedes=("zz_c",)),
        Kind("zz_c", specificity=10_003, cause="zz_c", defers_to=("zz_b",), supersedes=("zz_a",)),
    )
    problems = precedence_problems()
    assert any("cycle" in p and "zz_a" in p for p in problems), problems


def test_a_kind_hiding_itself_or_an_unknown_kind_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_kinds(
        monkeypatch,
        Kind("zz_self", specificity=10_004, cause="zz_self", defers_to=("zz_self",)),
        Kind("zz_typo", specificity=10_005, cause="zz_typo", supersedes=("no_such_kind",)),
    )
    problems = "\n".join(precedence_problems())
    assert "zz_self" in problems and "cycle" in problems
    assert "no_such_kind" in problems


def f(kind: str, sev: Severity) -> Finding:
    return Finding(kind=kind, severity=sev, title=kind)


def test_apply_precedence_hides_the_deferring_kind_only_when_the_other_is_named() -> None:
    both = [f("held_but_idle", Severity.ERROR), f("waiting_for_input", Severity.WARNING)]
    assert [x.kind for x in apply_precedence(both)] == ["waiting_for_input"]
    alone = [f("held_but_idle", Severity.ERROR)]
    assert [x.kind for x in apply_precedence(alone)] == ["held_but_idle"]


def test_a_note_never_hides_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_kinds(
        monkeypatch,
        Kind("zz_note", specificity=10_006, cause="zz_note", supersedes=("zz_warn",)),
        Kind("zz_warn", specificity=10_007, cause="zz_warn"),
    )
    shown = apply_precedence([f("zz_note", Severity.INFO), f("zz_warn", Severity.WARNING)])
    assert {x.kind for x in shown} == {"zz_note", "zz_warn"}
    shown = apply_precedence([f("zz_note", Severity.INFO), f("zz_warn", Severity.INFO)])
    assert [x.kind for x in shown] == ["zz_note"]


def _names_in_guards(tree: ast.AST) -> set[str]:
    """Attributes read off `ctx` in the `if …: return None` guards of rules."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("rule_"):
            continue
        for stmt in ast.walk(node):
            if (
                isinstance(stmt, ast.Call)
                and isinstance(stmt.func, ast.Name)
                and stmt.func.id.startswith("rule_")
            ):
                out.add(stmt.func.id + "()")
            if not isinstance(stmt, ast.If):
                continue
            body = stmt.body
            if not (len(body) == 1 and isinstance(body[0], ast.Return)):
                continue
            for sub in ast.walk(stmt.test):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "ctx"
                ):
                    out.add(sub.attr)
    return out


def test_no_rule_stays_quiet_for_another_rules_sake() -> None:
    """`ctx.waiting_input` is waiting_for_input's condition: another rule
    that checks it to stay quiet is a precedence written as a guard. So is
    one rule calling another."""
    for path in sorted(DIAGNOSE.glob("*.py")):
        if path.name in ("waiting.py", "context.py", "__init__.py"):
            continue
        names = _names_in_guards(ast.parse(path.read_text()))
        assert "waiting_input" not in names, path.name
        assert not any(n.endswith("()") for n in names), (path.name, names)


def test_the_families_are_imported_in_no_order_that_matters() -> None:
    src = inspect.getsource(diagnose_pkg)
    assert "isort: skip" not in src


def test_the_table_is_kept_and_follows_a_kind_declared_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """hidden_by is asked by every diagnosis (issue 48: it was rebuilt each
    time): kept, it still sees a kind declared after it was read."""
    monkeypatch.setattr(registry, "KINDS", dict(KINDS))
    assert hidden_by() is hidden_by()
    assert "zz_late" not in hidden_by()
    registry.declare(Kind("zz_late", specificity=10_010, cause="zz_late", defers_to=("loading",)))
    assert hidden_by()["zz_late"] == frozenset({"loading"})
