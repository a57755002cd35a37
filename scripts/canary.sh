#!/usr/bin/env bash
# The canary: what a user's fresh `pipx install` gets today, tested. Installs
# the newest releases pyproject.toml's ranges allow (not the lock's) into a
# scratch venv, lists every version that differs from requirements/dev.lock,
# then runs the suite on them. Green: scripts/lock.sh --upgrade takes them on
# purpose. Red: the break is in plain sight before any user meets it — fix
# gputui, or bound the range in pyproject.toml with the reason beside it.
#   scripts/canary.sh                 the whole suite
#   scripts/canary.sh tests/test_x.py pytest's arguments, as given
# The scratch venv is left in /tmp/gputui-canary.*/ to look into; nothing in
# .venv changes.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d /tmp/gputui-canary.XXXXXX)
py="$scratch/venv/bin/python"
python3 -m venv "$scratch/venv"
echo "canary: newest allowed releases into $scratch/venv" >&2
"$py" -m pip install -q --upgrade setuptools  # the build backend: locked too (requirements/build.in)
"$py" -m pip install -q --upgrade --upgrade-strategy eager -e ".[dev]"
"$py" - <<'PY'
import re
from importlib.metadata import distributions
from pathlib import Path

locked = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", Path("requirements/dev.lock").read_text(), re.M))
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
locked = {norm(k): v for k, v in locked.items()}
newer = []
for d in distributions():
    name = norm(d.metadata["Name"])
    if name in locked and locked[name] != d.version:
        newer.append(f"  {name} {locked[name]} -> {d.version}")
    elif name not in locked and name not in ("gputui", "pip"):
        newer.append(f"  {name} (not in the lock) {d.version}")
print("canary: versions that differ from requirements/dev.lock:" if newer else
      "canary: every version is the lock's")
print("\n".join(sorted(newer)))
PY
GPUTUI_CANARY=1 "$py" -m pytest "$@"  # tests/test_lock.py: not the lock's versions, on purpose
