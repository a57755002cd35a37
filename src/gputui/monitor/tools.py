"""Which tools the target has (tmux, python3, py-spy, gdb, nvidia-smi), in
the container and on the host, asked with one fixed script: the monitor asks
when no agent says (so a missing tmux is named), and `gputui doctor` reports
them.
"""

from __future__ import annotations

import asyncio

from gputui.model import Tools
from gputui.remote.identity import ROOT_OWNED_SCRIPT, parse_root_owned
from gputui.remote.target import Target

# One fixed script (no values spliced in) that reports every tool in one call:
# `name<TAB>version` per line, version empty when the tool is missing. $1:
# ROOT_OWNED_SCRIPT — as root, tmux, python3, py-spy and gdb are run for
# their version only when root owns them alone (a `tmux` or `python3` a user
# put early on PATH ran as root: issue 34).
TOOLS_SCRIPT = r"""chk=$1
for t in tmux python3 py-spy gdb nvidia-smi; do
  if p=$(command -v "$t" 2>/dev/null); then
    case "$t" in
      nvidia-smi) a=ok ;;
      *) a=ok; [ "$(id -u)" = 0 ] && a=$(sh -c "$chk" gputui-root-owned "$p") ;;
    esac
    case "$t:$a" in
      tmux:ok*) v=$("$p" -V 2>&1 | head -n 1) ;;
      *:ok*) v=$("$p" --version 2>&1 | head -n 1) ;;
      nvidia-smi:*) v=$p ;;
      *) v=$(printf 'gputui-not-root\t%s' "$a") ;;
    esac
    printf '%s\t%s\n' "$t" "${v:-yes}"
  else
    printf '%s\t\n' "$t"
  fi
done
"""
NOT_ROOT = "gputui-not-root\t"


def _parse_tools(text: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        name, _, version = line.partition("\t")
        if version.startswith(NOT_ROOT):  # named, not run: not root's alone
            version = "not run, not root's: " + parse_root_owned(version[len(NOT_ROOT) :])[1]
        if name:
            found[name.strip()] = version.strip() or None
    return found


async def probe_tools(target: Target) -> Tools:
    probe = ["sh", "-c", TOOLS_SCRIPT, "gputui-tools", ROOT_OWNED_SCRIPT]
    if target.in_container:
        inside, host = await asyncio.gather(
            target.run(probe, timeout=20), target.run_host(probe, timeout=20)
        )
        ct_tools, host_tools = _parse_tools(inside.out), _parse_tools(host.out)
    else:
        host = await target.run_host(probe, timeout=20)
        ct_tools = host_tools = _parse_tools(host.out)
    return Tools(
        tmux=ct_tools.get("tmux"),
        python3=ct_tools.get("python3"),
        py_spy=ct_tools.get("py-spy"),
        nvidia_smi_host=host_tools.get("nvidia-smi") is not None,
        nvidia_smi_ct=(ct_tools.get("nvidia-smi") is not None) if target.in_container else None,
        gdb=ct_tools.get("gdb"),
        probed=True,
    )
