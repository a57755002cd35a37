"""Which tools the target has (tmux, python3, py-spy, gdb, nvidia-smi), in
the container and on the host, asked with one fixed script: the monitor asks
when no agent says (so a missing tmux is named), and `gputui doctor` reports
them.
"""

from __future__ import annotations

import asyncio

from gputui.model import Tools
from gputui.remote.target import Target

# One fixed script (no values spliced in) that reports every tool in one call:
# `name<TAB>version` per line, version empty when the tool is missing.
TOOLS_SCRIPT = r"""for t in tmux python3 py-spy gdb nvidia-smi; do
  if command -v "$t" >/dev/null 2>&1; then
    case "$t" in
      tmux) v=$(tmux -V 2>&1 | head -n 1) ;;
      python3) v=$(python3 --version 2>&1 | head -n 1) ;;
      py-spy) v=$(py-spy --version 2>&1 | head -n 1) ;;
      gdb) v=$(gdb --version 2>&1 | head -n 1) ;;
      *) v=$(command -v "$t") ;;
    esac
    printf '%s\t%s\n' "$t" "${v:-yes}"
  else
    printf '%s\t\n' "$t"
  fi
done
"""


def _parse_tools(text: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        name, _, version = line.partition("\t")
        if name:
            found[name.strip()] = version.strip() or None
    return found


async def probe_tools(target: Target) -> Tools:
    probe = ["sh", "-c", TOOLS_SCRIPT]
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
