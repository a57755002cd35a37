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

# seconds per file on one worker of a full run with --durations=0 (main
# 7358126, 4 workers on 2 cores shared with other work, load
# 10-15: 3752 worker-seconds in 998 s; files under 10 s not listed)
SECONDS = {
    "test_ui_snapshots.py": 175,
    "test_untrusted.py": 173,
    "test_relaunch_news.py": 154,
    "test_install.py": 153,
    "test_record_formats_property.py": 143,
    "test_run_owner.py": 142,
    "test_container_kinds_e2e.py": 138,
    "test_incidents_watch.py": 136,
    "test_container_mainproc_e2e.py": 131,
    "test_new_user.py": 108,
    "test_soak_smoke.py": 88,
    "test_vslast_e2e.py": 86,
    "test_hostview_live.py": 83,
    "test_serve.py": 81,
    "test_monitor.py": 81,
    "test_untrusted_live.py": 81,
    "test_buffering_e2e.py": 80,
    "test_confirm_early_y.py": 78,
    "test_ui_testbed.py": 69,
    "test_actions_live.py": 65,
    "test_bad_input.py": 65,
    "test_log_reading_bounds.py": 63,
    "test_vslast_redeploy.py": 60,  # estimated: 33 s alone at load 7
    "test_field_user.py": 60,  # added by hand: 35 s alone on a free core, 9 tests on the test bed
    "test_confirm_80x24.py": 51,
    "test_logfollow.py": 48,
    "test_shared_gpu_e2e.py": 48,
    "test_corpus.py": 47,
    "test_watch_testbed.py": 44,
    "test_disk_full_e2e.py": 41,
    "test_ui_app.py": 37,
    "test_agent.py": 37,
    "test_never_dark_e2e.py": 33,
    "test_doctor_knows.py": 33,
    "test_ui_perf.py": 33,
    "test_ui_ghosts.py": 30,
    "test_untrusted_everywhere.py": 30,
    "test_hardware.py": 30,
    "test_ui_demo.py": 27,
    "test_attach_foreign.py": 27,
    "test_relay.py": 27,
    "test_cli.py": 26,
    "test_tiny_terminal.py": 25,
    "test_argv_roundtrip.py": 24,
    "test_container_holder_e2e.py": 24,
    "test_oom_kernel_log.py": 23,
    "test_quiet_stderr.py": 22,
    "test_forged_records.py": 22,
    "test_never_dark_bench.py": 21,
    "test_run_paths.py": 20,
    "test_tail_stress.py": 18,
    "test_watch.py": 18,
    "test_gpu_owner_e2e.py": 17,
    "test_standins.py": 17,
    "test_vslast.py": 17,
    "test_ui_shared_gpu.py": 17,
    "test_bad_values.py": 16,
    "test_discovery.py": 15,
    "test_tail_watchdog.py": 15,
    "test_waiting_for_input.py": 14,
    "test_confirm_at_once.py": 14,
    "test_ui_hostapp.py": 13,
    "test_absurd_numbers.py": 13,
    "test_transport.py": 13,
    "test_rank_failed.py": 13,
    "test_history.py": 12,
    "test_config_exposed.py": 12,
    "test_diagnosis_e2e.py": 12,
    "test_layers.py": 11,
    "test_diagnose.py": 11,
    "test_host_keys.py": 11,
    "test_bench_smoke.py": 11,
    "test_kind_seams.py": 10,
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
