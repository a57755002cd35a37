"""A container kind is one class (issue 35): outside gputui/containers/ no
code asks which kind a container is — no `isinstance(x, <Kind>)`, no kind
name as a string ("docker", "pod", "lxc", its tool, its spec prefix) — it
asks the container, or the kinds in `containers.KINDS`. So a new kind is its
module and its KINDS line, and nothing else needs to know it.

The scan reads each module's syntax tree: docstrings and comments may name
kinds (they are words for people); code may not."""

from __future__ import annotations

import ast
from pathlib import Path

from gputui.containers import KINDS, Host

SRC = Path(__file__).resolve().parents[1] / "src" / "gputui"

KIND_CLASSES = {k.__name__ for k in KINDS} | {Host.__name__}
KIND_WORDS = (
    {k.kind for k in KINDS} | {k.TOOL for k in KINDS} | {p for k in KINDS for p in k.SPEC_PREFIXES}
) - {""}


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("containers/"):
            continue
        out.append((rel, ast.parse(path.read_text(), filename=rel)))
    return out


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the string nodes that are docstrings."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _names(node: ast.expr) -> set[str]:
    """The class names an isinstance's second argument gives."""
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    out = set()
    for p in parts:
        if isinstance(p, ast.Name):
            out.add(p.id)
        elif isinstance(p, ast.Attribute):
            out.add(p.attr)
    return out


def kind_checks() -> list[str]:
    """`isinstance(x, <a kind class>)` outside containers/, as 'file:line'."""
    found = []
    for rel, tree in _modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "isinstance"
                and len(node.args) == 2
                and _names(node.args[1]) & KIND_CLASSES
            ):
                found.append(f"{rel}:{node.lineno}")
    return found


def kind_strings() -> list[str]:
    """String constants in code that are a kind's name, tool or spec prefix
    (whole, or the words before ':' of an f-string), as 'file:line text'."""
    found = []
    for rel, tree in _modules():
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if id(node) in docs:
                continue
            text = node.value.strip()
            head = text.partition(":")[0] if ":" in text else text
            if text in KIND_WORDS or (head in KIND_WORDS and len(head) < len(text)):
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    return found


def test_no_isinstance_on_a_container_kind_outside_containers() -> None:
    assert kind_checks() == []


def test_no_kind_name_as_a_string_outside_containers() -> None:
    assert kind_strings() == []


def test_the_scan_finds_what_it_looks_for() -> None:
    """The scan itself can fail: it finds the checks it is written against."""
    tree = ast.parse(
        'isinstance(c, (Docker, KubePod))\nif kind in ("docker", "podman"): x = "pod:p"\n'
    )
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert _names(calls[0].args[1]) == {"Docker", "KubePod"} <= KIND_CLASSES
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert {"docker", "podman"} <= KIND_WORDS and "pod" in KIND_WORDS
    assert {s.partition(":")[0] for s in strings} <= KIND_WORDS
