"""Architecture rules the code must keep: Textual stays in ui/, and the pure
parsing and diagnosis modules do no I/O of their own."""

from __future__ import annotations

import ast
import re
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "gputui"


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_nothing_outside_ui_imports_textual() -> None:
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "ui" not in p.relative_to(SRC).parts
        and any(
            m == "textual" or m.startswith(("textual.", "textual_plotext"))
            for m in imported_modules(p)
        )
    ]
    assert offenders == []


PURE = [
    "diagnose.py",
    "model.py",
    "collect/gpu.py",
    "collect/tmux.py",
    "collect/logtail.py",
    "collect/metrics.py",
    "collect/procs.py",
    "actions/runspec.py",
    "actions/follow.py",
    "verbs.py",
    "remote/container.py",
    "host/view.py",
    "record/incidents.py",
    "text/numbers.py",
]
IO_MODULES = {
    "asyncio",
    "asyncssh",
    "subprocess",
    "socket",
    "gputui.remote.base",
    "gputui.remote.target",
}


def test_parsing_and_diagnosis_do_no_io() -> None:
    for rel in PURE:
        mods = imported_modules(SRC / rel)
        assert not (mods & IO_MODULES), (rel, sorted(mods & IO_MODULES))


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
    remote/'s business: everything else asks the Container."""
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if p.relative_to(SRC).parts[0] != "remote" and "pct" in code_words(p)
    ]
    assert offenders == []


def test_collect_knows_no_transport() -> None:
    """Parsers turn text into model objects; they do not know how it came."""
    offenders = {
        str(p.relative_to(SRC)): sorted(m for m in imported_modules(p) if "gputui.remote" in m)
        for p in (SRC / "collect").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


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
