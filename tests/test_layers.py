"""Architecture rules the code must keep. The import rules are contracts in
pyproject.toml's [tool.importlinter], checked here by `lint-imports`: the
floors (cli down to errors), Textual only in ui/, no I/O in the pure
parsing and diagnosis modules, no transport in collect/. The rules below
them are about words, which no import contract can say."""

from __future__ import annotations

import re
import subprocess
import sys
import tokenize
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "gputui"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_the_import_contracts_hold() -> None:
    res = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


def test_every_package_is_on_a_floor() -> None:
    """A new package or top-level module gets its place in the layers
    contract (else the floors say nothing about it)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    present = {
        f"gputui.{p.stem}"
        for p in SRC.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert present - named == set()
    assert named - present == set()


def code_words(path: Path) -> set[str]:
    """The words in a module's code and strings (docstrings included), not its comments."""
    words: set[str] = set()
    with path.open() as f:
        for tok in tokenize.generate_tokens(f.readline):
            if tok.type in (tokenize.NAME, tokenize.STRING):
                words.update(re.findall(r"\w+", tok.string))
    return words


def test_only_remote_names_the_container_tool() -> None:
    """How a container is entered (`pct exec`, `pct status`, `pct start`) is
    containers/' business (remote/ runs it): everything else asks the Container."""
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).parts[0] not in ("remote", "containers") and "pct" in code_words(p)
    ]
    assert offenders == []


def test_the_floors_declare_no_exceptions() -> None:
    """The layers and the pure and collect contracts hold with no import let
    through by hand: a module that must sit on a lower floor moves there."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    excepted = {
        c["id"]: c["ignore_imports"]
        for c in config["contracts"]
        if c["id"] != "textual" and c.get("ignore_imports")
    }
    assert excepted == {}


def string_literals(path: Path) -> list[str]:
    with path.open() as f:
        return [t.string for t in tokenize.generate_tokens(f.readline) if t.type == tokenize.STRING]


def test_only_the_ui_names_keys() -> None:
    """Findings and reports name verbs by id; which key runs a verb is the
    user's ([keys]) and only the UI (through verbs.keyed) writes it."""
    key_label = re.compile(r"\[[A-Za-z]\] [a-z]")
    offenders = {
        str(p.relative_to(SRC)): hits
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).parts[0] != "ui" and p.name != "verbs.py"
        for hits in [[s for s in string_literals(p) if key_label.search(s)]]
        if hits
    }
    assert offenders == {}


def test_news_is_picked_by_its_type_outside_monitor() -> None:
    """The monitor's news reaches the UI, the recorder and the host view as
    typed updates (`GpusRead`, `SessionsChanged`, ...): nothing outside
    monitor/ names a part of the snapshot by a string (`.part`,
    `parts_of`, a set of part words), and a pane says the kinds of update
    it is drawn on."""
    import ast

    from gputui import monitor
    from gputui.ui.widgets.pane import PANE_UPDATES, Pane

    offenders = []
    for p in SRC.rglob("*.py"):
        if p.relative_to(SRC).parts[0] == "monitor":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("part", "PARTS"):
                offenders.append(f"{p.relative_to(SRC)}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.Name | ast.alias) and "parts_of" in ast.unparse(node):
                offenders.append(f"{p.relative_to(SRC)}:{node.lineno} parts_of")
    assert offenders == []
    assert not hasattr(monitor, "parts_of")
    assert all(not hasattr(kind, "part") for kind in monitor.UPDATES)
    panes = [cls for cls in _subclasses(Pane) if "DRAWN_ON" in vars(cls)]
    assert panes, "no pane found"
    for cls in panes:
        assert cls.DRAWN_ON and cls.DRAWN_ON <= PANE_UPDATES, cls


def _subclasses(cls: type) -> list[type]:
    import gputui.ui.app  # noqa: F401  (every pane of the dashboard's LAYOUT)

    out, todo = [], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out
