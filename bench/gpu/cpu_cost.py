"""CPU seconds a process tree uses over a window: run each command in its
own tmux pane (a real terminal, as a user would), wait, sum utime+stime of
the pane's process tree from /proc (with its reaped children's, cutime+cstime), and print JSON.

    python3 bench/gpu/cpu_cost.py --seconds 30 gputui='gputui --local' nvitop='nvitop -m full'
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

TICK = os.sysconf("SC_CLK_TCK")


def tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            # utime+stime, and cutime+cstime: what its children used and it
            # reaped (the agent's tmux commands; counted once they end)
            total += sum(int(x) for x in fields[11:15])
        except OSError:
            pass
    return total / TICK


def _ticks(path: str) -> tuple[str, list[int]] | None:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    head, _, rest = raw.rpartition(b")")
    comm = head.split(b"(", 1)[1].decode(errors="replace")
    return comm, [int(x) for x in rest.split()[11:15]]


def parts(pids: list[int]) -> dict[str, list[int]]:
    """Clock ticks by part of a tree: each process (its comm and pid) with
    utime, stime, cutime, cstime, and each thread of a multi-threaded
    process apart (utime, stime): where the CPU goes that a Python sampler
    does not see (the kernel's share, other threads, reaped children)."""
    out: dict[str, list[int]] = {}
    for p in pids:
        got = _ticks(f"/proc/{p}/stat")
        if got is None:
            continue
        comm, t = got
        out[f"{comm}[{p}]"] = t
        try:
            tids = [int(x) for x in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        if len(tids) > 1:
            for tid in tids:
                th = _ticks(f"/proc/{p}/task/{tid}/stat")
                if th is not None:
                    out[f"  {comm}[{p}] thread {th[0]}[{tid}]"] = th[1][:2]
    return out


def parts_delta(
    before: dict[str, list[int]], after: dict[str, list[int]], wall: float
) -> dict[str, str]:
    """% of a core by part over the window: 'user+sys (children user+sys)'."""
    out = {}
    for k, t in after.items():
        b = before.get(k, [0] * len(t))
        d = [(x - y) * 100 / TICK / wall for x, y in zip(t, b, strict=True)]
        text = f"{d[0]:.2f}+{d[1]:.2f}"
        if len(d) == 4 and (d[2] or d[3]):
            text += f" (children {d[2]:.2f}+{d[3]:.2f})"
        out[k] = text
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("commands", nargs="+", help="name=command line")
    args = ap.parse_args()
    panes: dict[str, int] = {}
    for spec in args.commands:
        name, cmd = spec.split("=", 1)
        sess = f"cpu-{name}"
        subprocess.run(["tmux", "kill-session", "-t", sess], capture_output=True)
        subprocess.run(["tmux", "new", "-d", "-s", sess, "-x", "120", "-y", "36", cmd], check=True)
        pid = subprocess.run(
            ["tmux", "display", "-p", "-t", sess, "#{pane_pid}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        panes[name] = int(pid)
    time.sleep(args.warmup)
    start = {n: cpu_seconds(tree(p)) for n, p in panes.items()}
    t0 = time.time()
    time.sleep(args.seconds)
    wall = time.time() - t0
    result = {}
    for n, p in panes.items():
        used = cpu_seconds(tree(p)) - start[n]
        result[n] = {
            "cpu_s": round(used, 3),
            "wall_s": round(wall, 1),
            "pct_of_core": round(100 * used / wall, 2),
        }
        cap = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", f"cpu-{n}"], capture_output=True, text=True
        ).stdout
        result[n]["screen_head"] = cap.splitlines()[:6]
        subprocess.run(["tmux", "kill-session", "-t", f"cpu-{n}"], capture_output=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
