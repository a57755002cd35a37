"""The host view's keys in words: its help (`?`), its palette entries
(ctrl+p) and why Enter has nothing to open on a row. Pure: no Textual."""

from __future__ import annotations

from gputui.host.view import ContainerRow, GpuRow

HOST_HELP = """\
# gputui — the host view

Every host, every GPU and who holds it, every container, with one word of
health and why. Pick a container or a GPU and press `enter` to open its run
view (the dashboard of that run: log, GPUs, banner, the keys that act on it);
`esc` there comes back here.

| key | what it does |
| --- | --- |
| `enter` | open the run view of the container (or of the run holding the GPU) under the cursor |
| `tab` / `shift+tab` | move between the hosts, GPUs and containers tables |
| `↑` `↓` | move the cursor; on the hosts table, show that host's GPUs and containers |
| `?` | this help |
| `ctrl+p` | command palette: open a container's run view by name, help, quit |
| `q` | quit (stops every stream gputui opened) |

Nothing here acts on a run: relaunch, kill, flush and py-spy dump are in
the run view, each behind a confirm box that names the exact target and
command.

## The words

- **ok** — the run writes its log and its GPUs work.
- **buffered** — stdout is block-buffered: lines reach the log late (open
  it: `r` relaunches unbuffered, `f` flushes live).
- **stalled / hung** — the log or the steps stopped while the GPUs stay busy or idle.
- **dead** — the session's run exited; `why` says with what.
- **full** — the disk the log is on is full.
- **idle** — no run: no session with a process, no GPU held.
- **stopped** — the container is not running.
- **down** — the host cannot be reached; the line under the hosts says why.
- A GPU whose memory no live process holds is marked ⚠ in red.
"""


def where(c: ContainerRow) -> str:
    """'CT 204 (scratch)', 'docker trainer', 'the host'."""
    if c.id is None:
        return "the host"
    place = c.id.replace(":", " ", 1) if isinstance(c.id, str) else f"CT {c.id}"
    return f"{place} ({c.name})" if c.name and isinstance(c.id, int) else place


def why_no_run_in(c: ContainerRow) -> str | None:
    """Why Enter on this container opens nothing; None when it opens its run view."""
    if c.status in ("running", "host"):
        return None
    return f"{where(c)} is {c.status or 'not running'}: no run in it to open"


def why_no_run_on(g: GpuRow) -> str | None:
    """Why Enter on this GPU opens nothing; None when a live process holds it."""
    if any(h.alive for h in g.holders):
        return None
    gone = [h.host_pid for h in g.holders if not h.alive]
    if gone:
        pids = ", ".join(str(p) for p in gone)
        return f"GPU {g.index}: its memory is held by no live process (pid {pids} is gone)"
    return f"GPU {g.index}: no process holds it — no run to open"
