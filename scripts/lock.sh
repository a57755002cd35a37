#!/usr/bin/env bash
# Moves the lock forward: requirements/dev.lock, the exact versions (with
# hashes) that install.sh and .ci/run install for working on gputui and for CI.
# pyproject.toml keeps ranges for users; the lock decides what a fresh clone
# gets, so a new release of a dependency changes nothing until it is locked
# here on purpose. Run scripts/canary.sh first: it tries the newest releases
# the ranges allow and runs the suite; lock only what it passed with.
#   scripts/lock.sh            keep every locked version the ranges still allow
#   scripts/lock.sh --upgrade  take the newest versions the ranges allow
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
"$py" -m piptools --version >/dev/null 2>&1 || "$py" -m pip install -q pip-tools
"$py" -m piptools compile --quiet 2> >(grep -v "may be rejected by pip install" >&2) --generate-hashes --allow-unsafe --strip-extras \
    --extra dev --no-emit-index-url --no-emit-find-links "$@" \
    --output-file requirements/dev.lock pyproject.toml requirements/build.in
# pyproject's dev extra names gputui itself (gputui[alerts,prometheus,web]);
# the lock holds its dependencies, never a path to this clone
"$py" - <<'PY'
import re
from pathlib import Path

lock = Path("requirements/dev.lock")
text = lock.read_text()
text = re.sub(r"\n# The following packages are considered to be unsafe.*?\n(?=\S|\Z)", "\n", text, flags=re.S)
text = re.sub(r"^gputui @ file://.*\n(    #.*\n)*", "", text, flags=re.M)
lock.write_text(text.rstrip("\n") + "\n")
PY
echo "scripts/lock.sh: requirements/dev.lock written; ./install.sh installs it" >&2
