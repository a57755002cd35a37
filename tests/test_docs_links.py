"""Every relative link in the README, CONTRIBUTING.md and docs/ points to a
file that exists (issue 36 moved the developer material out of the README and
the example config into the package: no link may be left behind)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_resolve() -> None:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+://|#|mailto:", target):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_readme_starts_with_the_two_set_up_commands() -> None:
    """CI runs the README's test command (.ci/run): it stays first, unchanged."""
    head = (ROOT / "README.md").read_text().split("```sh\n", 1)[1].split("```", 1)[0]
    assert head.splitlines()[0].startswith("./install.sh && .venv/bin/gputui --demo")
    assert head.splitlines()[1].startswith(".venv/bin/python -m pytest ")
