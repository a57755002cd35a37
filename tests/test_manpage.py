"""The man page (issue 36): docs/gputui.1 is what scripts/manpage.py writes
from the parser `gputui` uses, so a new flag, command or example that is not
in the committed page fails here: run `python scripts/manpage.py`."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from gputui.cli.examples import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent


def manpage():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("manpage", ROOT / "scripts" / "manpage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_man_page_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "gputui.1").read_text()
    assert committed == manpage().page(), "docs/gputui.1 is stale: run python scripts/manpage.py"


def test_it_documents_every_command_flag_and_example() -> None:
    text = manpage().page()
    for name in EXAMPLES:
        if name != "gputui":
            roff_name = name.replace("-", "\\-")
            assert f".SS gputui {roff_name}\n" in text, name
    for flag in ("\\-\\-verbose", "\\-\\-prometheus", "\\-\\-example", "\\-\\-allow\\-actions"):
        assert flag in text, flag
    assert "/work/" not in text and str(ROOT) not in text  # no path of this machine


@pytest.mark.skipif(shutil.which("groff") is None, reason="needs groff")
def test_it_renders_without_warnings() -> None:
    r = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-z", str(ROOT / "docs" / "gputui.1")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
