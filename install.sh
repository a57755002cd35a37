#!/usr/bin/env bash
# One-step set-up on a fresh Debian/Ubuntu machine: the system tools that
# gputui's demo and its test bed use (tmux, OpenSSH server and client, gdb,
# procps, util-linux's unshare/nsenter, Chromium for the web view's test),
# then a virtual environment in .venv holding gputui and its dev extras at the
# versions requirements/dev.lock names (scripts/lock.sh moves them forward).
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
have sshd || need+=(openssh-server)
have ssh || need+=(openssh-client)
have ssh-keygen || need+=(openssh-client)
have tmux || need+=(tmux)
have ps || need+=(procps)
{ have unshare && have nsenter; } || need+=(util-linux)
have gdb || need+=(gdb)
have chromium || need+=(chromium)  # the web view's test (tests/test_serve.py) loads the page in it
have python3 || need+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)

if [ "${#need[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "install.sh: installing ${need[*]} with apt-get" >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
# The exact versions the suite passed with (requirements/dev.lock, hashes
# checked), then gputui itself, editable, adding nothing: a release of any
# dependency changes nothing here until scripts/lock.sh takes it on purpose
# (scripts/canary.sh tries the newest ones first).
.venv/bin/python -m pip install -q --require-hashes -r requirements/dev.lock
.venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
.venv/bin/python -m pip check -q >/dev/null || {
    .venv/bin/python -m pip check >&2
    echo "install.sh: .venv does not match pyproject.toml — run scripts/lock.sh" >&2
    exit 1
}
echo "install.sh: ready — .venv/bin/gputui --demo to try it, .venv/bin/gputui --host H --ct N for a real run" >&2
