"""Every package gputui imports is one it declares (issue 36: `rich` and
`typing_extensions` were imported but came only through textual): a
dependency, or an optional extra's. Read from the source's import
statements and pyproject.toml; import names mapped to distributions by
importlib.metadata."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "gputui"


def imported_top_names() -> dict[str, str]:
    """{top-level module: a file importing it} over src/gputui, stdlib left out."""
    found: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "gputui" and top not in sys.stdlib_module_names:
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra, more in project["optional-dependencies"].items():
        if extra != "dev":
            reqs += more
    return {normal(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in reqs}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_imported_package_is_declared() -> None:
    dists = packages_distributions()
    declared_names = declared()
    missing = {}
    for top, where in imported_top_names().items():
        names = {normal(d) for d in dists.get(top, [top])}
        if not names & declared_names:
            missing[top] = (where, sorted(names))
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"


def test_the_check_sees_rich_and_typing_extensions() -> None:
    tops = imported_top_names()
    assert "rich" in tops and "typing_extensions" in tops and "textual" in tops
