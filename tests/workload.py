"""Which test files the pytest-xdist workers get first: the longest.

With `--dist loadfile` a file's tests run on one worker, one after another,
and a worker asks for the next file when it is nearly done with its own.
pytest-xdist's own order (`--loadscope-reorder`, its default) hands out the
files with the most tests first — so the files of one long end-to-end test
(a plan read through a slow `pct` nine times, a watch waiting out three
buffered cycles) went out last, and each ran alone at the end while the
other workers had nothing left (a full run on 2 loaded cores, main
2f84dbc: the last 3 % of the tests took about 6 of its 13.5 minutes).

So the suite runs with `--no-loadscope-reorder` and `order()` (conftest's
`pytest_collection_modifyitems`, in each worker, whose collection order is
the one the controller hands out) puts the files of SECONDS first, longest
first, then the rest by number of tests (xdist's own rule); the longest
file then ends well before the last short one. Last of all: the files of a
test marked `alone` (it waits for a moment when no other worker runs a
test, so it goes where the others' tests are short) and those whose set-up
runs early (tests/early.py: placed late, its wait overlaps the others).

SECONDS: each file's seconds on one worker, summed from
`pytest --durations=0` (a full run; the figures are relative, they only
order the files). Refresh them when a file's cost changes a lot:

    .venv/bin/python -m pytest --durations=0 | python3 tests/workload.py
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import early

# seconds per file on one worker of a full run (main 2f84dbc, 4 workers on
# 2 loaded cores; tests under 5 s not counted)
SECONDS = {
    "test_confirm_early_y.py": 188,
    "test_relaunch_news.py": 139,
    "test_incidents_watch.py": 117,
    "test_run_owner.py": 80,
    "test_vslast_e2e.py": 79,
    "test_buffering_e2e.py": 78,
    "test_soak_smoke.py": 71,
    "test_hostview_live.py": 70,
    "test_untrusted_live.py": 67,
    "test_new_user.py": 59,
    "test_log_reading_bounds.py": 56,
    "test_install.py": 54,
    "test_record_formats_property.py": 50,
    "test_container_mainproc_e2e.py": 47,
    "test_container_kinds_e2e.py": 41,
    "test_ui_testbed.py": 40,
    "test_shared_gpu_e2e.py": 39,
    "test_untrusted.py": 37,
    "test_doctor_knows.py": 37,
    "test_disk_full_e2e.py": 36,
    "test_ui_snapshots.py": 35,
    "test_confirm_80x24.py": 30,
    "test_corpus.py": 29,
    "test_watch_testbed.py": 28,
    "test_confirm_at_once.py": 28,
    "test_ui_demo.py": 26,
    "test_serve.py": 23,
    "test_hardware.py": 22,
    "test_container_holder_e2e.py": 22,
    "test_argv_roundtrip.py": 22,
    "test_tiny_terminal.py": 21,
    "test_never_dark_bench.py": 21,
    "test_run_paths.py": 19,
    "test_ui_ghosts.py": 18,
    "test_tail_watchdog.py": 16,
    "test_forged_records.py": 16,
    "test_ui_shared_gpu.py": 15,
    "test_monitor.py": 14,
}


def order(items: list[Any]) -> None:
    """Sort `items` in place: whole files, in the order above; a file's own
    tests keep their order (module fixtures, tests written to follow)."""
    count = Counter(Path(str(item.fspath)).name for item in items)
    late = {f"{module}.py" for module, _fn in early.SETUPS.values()}
    alone = {Path(str(i.fspath)).name for i in items if i.get_closest_marker("alone")}

    def key(item: Any) -> tuple[int, float, int, str]:
        name = Path(str(item.fspath)).name
        group = 2 if name in alone else 1 if name in late else 0
        return group, -SECONDS.get(name, 0), -count[name], name

    items.sort(key=key)


def table(durations: str) -> str:
    """The SECONDS table from `pytest --durations=0` output."""
    total: Counter[str] = Counter()
    for m in re.finditer(r"^([\d.]+)s (?:call|setup|teardown) +tests/([^:]+)::", durations, re.M):
        total[m.group(2)] += float(m.group(1))
    return "\n".join(f'    "{f}": {s:.0f},' for f, s in total.most_common() if s >= 10)


if __name__ == "__main__":
    print(table(sys.stdin.read()))
