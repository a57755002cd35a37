"""A function fits on a screen: no function or method in src/gputui is over
80 lines (issue 23). Each long one is split into named steps instead."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gputui"
LIMIT = 80


def long_functions(root: Path, limit: int = LIMIT) -> list[str]:
    """Every function or method under `root` longer than `limit` lines,
    counted from its `def` (decorators not counted) to its last line, as
    'path:line name (N lines)'."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            end = node.end_lineno or node.lineno
            lines = end - node.lineno + 1
            if lines > limit:
                where = path.relative_to(root)
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_long_functions_finds_one(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "long.py").write_text(f"def long_one() -> None:\n{body}\n")
    (tmp_path / "short.py").write_text("def short() -> None:\n    pass\n")
    assert long_functions(tmp_path) == [f"long.py:1 long_one ({LIMIT + 1} lines)"]


def test_no_function_over_80_lines() -> None:
    too_long = long_functions(SRC)
    assert not too_long, (
        f"{len(too_long)} functions over {LIMIT} lines; split each into "
        "named steps:\n" + "\n".join(too_long)
    )
