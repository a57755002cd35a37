"""The host view names who holds a GPU that several runs or containers share,
with how much each holds — the dashboard's shared-GPU line, host-wide
(issue 22): 'CT 200 (train-box) 10.6 GiB · CT 201 (eval-box) 5.1 GiB', and
at 80×24 'CT 200 10.6G · CT 201 5.1G', which the "held by" cell has room
for (before, its first holder's pid, process and log filled the cell and
the second holder was off screen).

End to end: a real sshd, two stand-in CTs in `/lxc/<n>` cgroups, a real run
in tmux in each, the stand-in nvidia-smi listing both runs' host PIDs on
GPU 0, the real HostWatch and the real host app at 80×24.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import scenarios
from gputui.config import Settings
from gputui.demo.hosts import FixedHostWatch, proxmox_view
from gputui.doctor.hostreport import _gpu_line
from gputui.host.hostwatch import HostWatch
from gputui.host.view import GpuRow, Holder, HostView
from gputui.ui.hostapp import HostApp, shared_parts
from testbed import Testbed
from ui_scenarios import screen_text, until

FIRST_CT = 370


def row(*holders: Holder) -> GpuRow:
    return GpuRow(0, "NVIDIA H200", "GPU-0", 16_500, 143_771, 98, 600, list(holders))


def holder(ct: Any, session: str | None, mib: float, pid: int = 10, alive: bool = True) -> Holder:
    return Holder(pid, ct, pid // 10, "python3", mib, alive, session, f"/w/{session}.log")


def words(parts: list[tuple[str, str]]) -> list[str]:
    return [w for w, _ in parts]


def test_two_containers_on_one_gpu_each_with_how_much() -> None:
    g = row(holder(200, "train", 10_854, 11), holder(201, "eval", 5_222, 12))
    names = {200: "train-box", 201: "eval-box"}
    assert words(shared_parts(g, False, names)) == [
        "CT 200 (train-box) 10.6 GiB",
        "CT 201 (eval-box) 5.1 GiB",
    ]
    assert words(shared_parts(g, False, names, short=True)) == ["CT 200 10.6G", "CT 201 5.1G"]


def test_two_runs_in_one_ct_by_session_and_a_run_of_many_processes_once() -> None:
    g = row(
        holder(200, "train", 5_000, 11),
        holder(200, "train", 5_854, 13),  # a second process of the same run
        holder(200, "eval", 5_222, 12),
        holder(None, None, 1_024, 14),  # a process on the host itself
    )
    assert words(shared_parts(g, False, {200: "box"})) == [
        "CT 200 train 10.6 GiB",
        "CT 200 eval 5.1 GiB",
        "host (no CT) 1.0 GiB",
    ]


def test_a_gpu_one_run_holds_has_no_shared_line_a_gone_holder_beside_a_run_has() -> None:
    assert (
        shared_parts(row(holder(200, "train", 5_000, 11), holder(200, "train", 50, 13)), False, {})
        == []
    )
    assert shared_parts(row(), False, {}) == []
    parts = shared_parts(
        row(holder(200, "train", 10_854, 11), holder(None, None, 2_048, 19, False)), False, {}
    )
    assert parts == [("CT 200 10.6 GiB", ""), ("gone pid 19 2.0 GiB", "bold red")]


def shared_view() -> HostView:
    view = proxmox_view()
    view.gpus[0].holders = [
        Holder(48213, 201, 812, "python3", 10_854, True, "train", "/workspace/train.log"),
        Holder(48999, 203, 14, "python3", 5_222, True, "eval", "/workspace/eval.log"),
    ]
    return view


def gpu_line(text: str, index: int) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"│ {index} "))


async def test_the_host_view_at_80x24_shows_who_holds_a_shared_gpu() -> None:
    app = HostApp([FixedHostWatch(shared_view())], live=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        line = gpu_line(screen_text(app), 0)
        assert "CT 201 10.6G · CT 203 5.1G" in line, line
        await pilot.resize_terminal(150, 36)
        await pilot.pause()
        line = gpu_line(screen_text(app), 0)
        assert "CT 201 (dflash) 10.6 GiB · CT 203 (eval) 5.1 GiB  |  CT 201 · train" in line, line
        assert "CT 201 · train · pid 812" in gpu_line(screen_text(app), 1)  # one run: as before


@pytest.fixture(scope="module")
def two_cts() -> Iterator[tuple[Testbed, list[scenarios.Run]]]:
    tb = Testbed().start()
    tb.use_cgroups()
    runs = []
    try:
        for ct, session in ((FIRST_CT, "train"), (FIRST_CT + 1, "eval")):
            tb.ct_create(ct, running=True)
            run = scenarios.prepare(tb, ct, f"shared-{session}", session)
            scenarios.launch(
                tb, run, scenarios.tee_command(run.path("start_healthy.sh"), str(run.log))
            )
            runs.append(run)
        pids = [scenarios.wait_python(r, "train.py") for r in runs]
        tb.set_gpus(
            {
                "gpus": [scenarios.gpu(0, 16_500, 98), scenarios.gpu(1, 0, 0)],
                "apps": [scenarios.app(pids[0], 0, 10_854), scenarios.app(pids[1], 0, 5_222)],
            }
        )
        yield tb, runs
    finally:
        for ct in (FIRST_CT, FIRST_CT + 1):
            tb.ct_destroy(ct)
        tb.stop()


@pytest.mark.timeout(120)
async def test_two_cts_on_one_gpu_live_at_80x24(
    two_cts: tuple[Testbed, list[scenarios.Run]],
) -> None:
    tb, _runs = two_cts
    watch = HostWatch(Settings(**tb.transport_kwargs()), list_period_s=1.0)
    app = HostApp([watch], live=True)
    want = f"CT {FIRST_CT} 10.6G · CT {FIRST_CT + 1} 5.1G"
    async with app.run_test(size=(80, 24)) as pilot:
        await watch.start()
        try:
            await until(
                lambda: want in screen_text(app),
                60,
                "the shared GPU's holders in the GPU table",
                lambda: screen_text(app),
            )
            await pilot.pause()
            assert want in gpu_line(screen_text(app), 0)
            assert "—" in gpu_line(screen_text(app), 1)  # an idle GPU: nobody
        finally:
            await watch.stop()


def test_doctor_host_text_says_how_much_each_holder_holds() -> None:
    """`gputui doctor --host` listed a shared GPU's holders without sizes:
    which run holds the 10.6 GiB was the host view's alone to say."""
    g = row(holder(200, "train", 10_854, 11), holder(201, "eval", 5_222, 12))
    line = _gpu_line(g)
    assert "pid 1 python3 10.6 GiB (session train)" in line, line
    assert "pid 1 python3 5.1 GiB (session eval)" in line, line
