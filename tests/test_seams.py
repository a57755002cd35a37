"""The seams between the house's parts (issue 35), which no import contract
can say: the screens read history through `record/`'s reader methods (no
sqlite3, no SQL text under ui/); a monitor is used through its door
(monitor/door.py): no attribute of a monitor is written outside monitor/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gputui"

# a statement: its verb first, one of its clauses after (a help text saying
# "Select a GPU" is no SQL)
SQL = re.compile(
    r"^\s*(?:(?:SELECT|INSERT|UPDATE|DELETE|CREATE)\b[\s\S]*\b(?:FROM|INTO|SET|TABLE)\b|PRAGMA\s)"
)


def _trees(folder: str) -> list[tuple[str, ast.Module]]:
    return [
        (p.relative_to(SRC).as_posix(), ast.parse(p.read_text()))
        for p in sorted((SRC / folder).rglob("*.py"))
    ]


def sql_in(trees: list[tuple[str, ast.Module]]) -> list[str]:
    """sqlite3 imports and SQL statements in strings, as 'file:line'."""
    found = []
    for rel, tree in trees:
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.split(".")[0] == "sqlite3" for n in names):
                found.append(f"{rel}:{node.lineno} import sqlite3")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.search(node.value)
            ):
                found.append(f"{rel}:{node.lineno} {node.value[:40]!r}")
    return found


def test_no_sqlite_and_no_sql_under_ui() -> None:
    assert sql_in(_trees("ui")) == []


def test_the_sql_scan_finds_sql() -> None:
    tree = ast.parse('import sqlite3\nr.conn.execute("SELECT first_seen FROM runs WHERE id=?")\n')
    assert len(sql_in([("x.py", tree)])) == 2
    texts = ast.parse('"Select a GPU"\n"SELECT the run"\n"PRAGMA user_version"\n"DELETE FROM t"')
    assert sql_in([("r.py", texts)]) == ["r.py:3 'PRAGMA user_version'", "r.py:4 'DELETE FROM t'"]


MONITOR_NAMES = re.compile(r"^_?(mon|monitor|\w+_monitor)$")


def _written(target: ast.expr) -> list[ast.Attribute]:
    """The attributes an assignment target writes (a tuple's each)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return [a for t in target.elts for a in _written(t)]
    return [target] if isinstance(target, ast.Attribute) else []


def _chain(node: ast.expr) -> list[str]:
    """The names of an object expression: `w.monitor.snapshot` -> [snapshot, monitor, w]."""
    names = []
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names


def monitor_writes(trees: list[tuple[str, ast.Module]]) -> list[str]:
    """`monitor.X = ...`, `mon.snapshot.X = ...` (an attribute of an object
    named as a monitor is), as 'file:line'."""
    found = []
    for rel, tree in trees:
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for attr in (a for t in targets for a in _written(t)):
                if any(MONITOR_NAMES.match(n) for n in _chain(attr.value)):
                    found.append(f"{rel}:{node.lineno} {ast.unparse(attr)}")
    return found


def test_no_attribute_of_a_monitor_is_written_outside_monitor() -> None:
    trees = [(rel, tree) for rel, tree in _trees(".") if not rel.startswith("monitor/")]
    assert monitor_writes(trees) == []


def test_the_monitor_scan_finds_writes() -> None:
    tree = ast.parse(
        "mon.interval = 2\nbackground, monitor.interval = 1, 2\n"
        "mon.snapshot.container_names = names\nself.monitor = monitor\nw.monitor.x += 1\n"
    )
    assert [w.split()[1] for w in monitor_writes([("x.py", tree)])] == [
        "mon.interval",
        "monitor.interval",
        "mon.snapshot.container_names",
        "w.monitor.x",
    ]
