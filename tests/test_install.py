"""The user's install (issue 25): the wheel `python -m build` makes, installed
into a fresh virtual environment without the dev extras, as `pipx install
gputui` or `pip install gputui` would.

It must run (`gputui --version`, `python -m gputui -V`), check the demo with
`doctor --demo --json` (the demo, not this machine), and every optional part
that is not installed must say in one line which extra brings it. The wheel
is built from a copy of the sources (the build leaves build/ and
*.egg-info behind), with the package index pip is configured with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputui import __version__
from gputui.doctor.run import DEMO_LABEL

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = ("apprise", "prometheus-client", "prometheus_client", "textual-serve", "textual_serve")
DEV = ("pytest", "mypy", "hypothesis", "ruff")
# the build and the install take ~20 s here; a loaded CI machine gets room
pytestmark = pytest.mark.timeout(600)


@dataclass
class Installed:
    venv: Path
    env: dict[str, str]

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        exe = str(self.venv / "bin" / argv[0])
        return subprocess.run(
            [exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, env=self.env
        )


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src-copy"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "src" / "gputui",
        src / "src" / "gputui",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    out = tmp / "dist"
    r = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (wheel,) = out.glob("gputui-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    tmp = tmp_path_factory.mktemp("install")
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (tmp / "config" / "gputui").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "TMUX")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_CONFIG_HOME"] = str(tmp / "config")  # never the tester's config
    env["XDG_STATE_HOME"] = str(tmp / "state")
    yield Installed(venv, env)


def test_core_install_has_no_optional_or_dev_parts(installed: Installed) -> None:
    r = installed.run("python", "-m", "pip", "list", "--format=json")
    names = {p["name"].lower() for p in json.loads(r.stdout)}
    assert "gputui" in names and "textual" in names and "asyncssh" in names
    assert not names & {*OPTIONAL, *DEV}, names & {*OPTIONAL, *DEV}
    # the package is the installed one, not the checkout's
    where = installed.run("python", "-c", "import gputui; print(gputui.__file__)")
    assert str(installed.venv) in where.stdout, where.stdout


def test_version(installed: Installed) -> None:
    for argv in (("gputui", "--version"), ("gputui", "-V"), ("python", "-m", "gputui", "-V")):
        r = installed.run(*argv)
        assert r.returncode == 0 and r.stdout.strip() == f"gputui {__version__}", (argv, r)


def test_doctor_demo_checks_the_demo(installed: Installed) -> None:
    r = installed.run("gputui", "doctor", "--demo", "--json", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    assert report["target"] == DEMO_LABEL
    gpus = report["snapshot"]["gpus"]
    assert gpus["source"] == "simulated", gpus["source"]
    assert len(gpus["devices"]) == 8
    assert "buffered_output" in {f["kind"] for f in report["findings"]}, report["findings"]


def test_missing_extras_name_the_extra(installed: Installed) -> None:
    cases = {
        "prometheus": installed.run("gputui", "watch", "--local", "--prometheus", "127.0.0.1:0"),
        "web": installed.run("gputui", "serve", "--demo"),
    }
    config = Path(installed.env["XDG_CONFIG_HOME"]) / "gputui" / "config.toml"
    config.write_text('[alerts]\nurls = ["json://127.0.0.1:9/gputui-test"]\n')
    config.chmod(0o600)  # alert URLs are secrets: a config others can read gets a warning line
    try:  # the config under $XDG_CONFIG_HOME is read, and its alerts need apprise
        cases["alerts"] = installed.run("gputui", "alert-test")
    finally:
        config.unlink()
    for extra, r in cases.items():
        assert r.returncode == 2, (extra, r)
        assert r.stderr.count("\n") == 1, (extra, r.stderr)
        assert f"pip install 'gputui[{extra}]'" in r.stderr, (extra, r.stderr)
        assert "Traceback" not in r.stderr


def test_config_example_ships_in_the_wheel(installed: Installed, tmp_path: Path) -> None:
    """Issue 36: no clone at hand, the example config and the doctor JSON
    description come with the package. Run from an empty directory, with the
    config under a fresh $XDG_CONFIG_HOME written from the command."""
    env = dict(installed.env, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    exe = str(installed.venv / "bin" / "gputui")
    r = subprocess.run(
        [exe, "config", "--example"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ROOT / "src" / "gputui" / "config.example.toml").read_text()
    path = tmp_path / "xdg" / "gputui" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(r.stdout)
    r = subprocess.run([exe, "config"], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and f"config file: {path}" in r.stdout, r
    assert "exists and parses" in r.stdout, r.stdout
    r = subprocess.run([exe, "doctor", "--help"], capture_output=True, text=True, env=env)
    doc = r.stdout.split("described in ", 1)[1].split()[0]
    assert doc.startswith(str(installed.venv)) and Path(doc).is_file(), doc
    assert "schema_version" in Path(doc).read_text()
