"""The lock decides what a fresh clone gets (requirements/dev.lock, which
install.sh and .ci/run install with hashes checked). It must cover every
dependency pyproject.toml names, satisfy every range there, name no path of
this clone, and be what this environment holds — otherwise a release of any
dependency can turn main red overnight, as cryptography 51 did."""

from __future__ import annotations

import os
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "dev.lock"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)", re.M)


def locked() -> dict[str, str]:
    return {canonicalize_name(n): v for n, v in PIN.findall(LOCK.read_text())}


def pyproject_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return [r for r in reqs if canonicalize_name(r.name) != "gputui"]


def test_every_dependency_is_locked_within_its_range() -> None:
    pins = locked()
    for req in pyproject_requirements():
        if req.marker is not None and not req.marker.evaluate():
            continue  # e.g. tomli, only below Python 3.11
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in the lock: run scripts/lock.sh"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"the lock's {req.name} {pins[name]} is outside pyproject's {req}: run scripts/lock.sh"
        )


def test_every_locked_version_has_hashes_and_no_path_of_this_clone() -> None:
    text = LOCK.read_text()
    assert "file://" not in text and "gputui @" not in text
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text)
    for block in blocks[1:]:
        assert "--hash=sha256:" in block, block.splitlines()[0]


def test_this_environment_is_the_lock() -> None:
    """install.sh installed the lock (CI's run does): a version that differs
    means the suite is not testing what a fresh clone gets. Not under
    scripts/canary.sh, whose point is versions newer than the lock's."""
    if os.environ.get("GPUTUI_CANARY"):
        pytest.skip("the canary runs the newest allowed versions, not the lock's")
    differ = []
    for name, want in locked().items():
        try:
            have = version(name)
        except PackageNotFoundError:
            differ.append(f"{name} {want} (not installed)")
            continue
        if have != want:
            differ.append(f"{name} {want} (installed {have})")
    assert not differ, "not the lock's versions — run ./install.sh: " + ", ".join(differ)


def test_upper_bounds_say_why() -> None:
    """An upper bound only where a known break exists, with the reason beside it."""
    for line in (ROOT / "pyproject.toml").read_text().splitlines():
        m = re.match(r'\s*"([^"]+)",?\s*(#.*)?$', line)
        if (
            m
            and re.search(r"[a-z0-9]\s*(<|~=|==)", m.group(1))
            and "python_version" not in m.group(1)
        ):
            assert m.group(2), f"an upper bound with no reason beside it: {line.strip()}"
