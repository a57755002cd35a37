"""Fixed host views for screenshots and UI tests: a Proxmox host with four
containers sharing 8 GPUs, and a second host that is down."""

from __future__ import annotations

from collections.abc import Callable

from gputui.host.view import ContainerRow, GpuRow, Holder, HostView
from gputui.model import ConnectionState

H200_MIB = 143771.0


def _gpu(index: int, mem: float, util: float, power: float, *holders: Holder) -> GpuRow:
    row = GpuRow(index, "NVIDIA H200", f"GPU-{index}", mem, H200_MIB, util, power, list(holders))
    live = sum(h.used_mib or 0.0 for h in holders if h.alive)
    row.unowned_mib = max(0.0, mem - live)
    return row


def _holder(place: int, pid: int, host_pid: int, session: str, log: str) -> Holder:
    return Holder(host_pid, place, pid, "python3", 60500.0, True, session, log)


def proxmox_view() -> HostView:
    train = [_holder(201, 812, 48213, "train", "/workspace/train.log")]
    sft = [_holder(202, 377, 51020, "sft", "/workspace/sft/train.log")]
    gone = Holder(39911, None, None, "python3", 20000.0, False)
    view = HostView(label="root@gpu1", connection=ConnectionState.CONNECTED, containers_known=True)
    view.holders_known = True
    view.gpus = [
        _gpu(0, 61000, 97, 684, *train),
        _gpu(1, 61000, 96, 679, *train),
        _gpu(2, 61000, 98, 690, *sft),
        _gpu(3, 61000, 97, 688, *sft),
        _gpu(4, 20480, 0, 121, gone),
        _gpu(5, 0, 0, 117),
        _gpu(6, 0, 0, 116),
        _gpu(7, 0, 0, 118),
    ]
    view.containers = [
        ContainerRow(201, "dflash", "running", ["train"], "ok", "", [0, 1], "train"),
        ContainerRow(
            202,
            "sft",
            "running",
            ["sft"],
            "buffered",
            "stdout of PID 377 is block-buffered: its lines reach the log late",
            [2, 3],
            "sft",
        ),
        ContainerRow(
            203,
            "eval",
            "running",
            ["eval"],
            "dead",
            "session eval exited 1: ModuleNotFoundError: No module named 'flash_attn'",
            [],
            "eval",
        ),
        ContainerRow(204, "scratch", "stopped", [], "stopped"),
    ]
    return view


def down_view() -> HostView:
    return HostView(
        label="root@gpu2",
        connection=ConnectionState.RECONNECTING,
        error="connection to gpu2 lost: no answer to keepalive for 45 s — gputui reconnects",
        containers_known=True,
    )


class FixedHostWatch:
    """A HostWatchLike with one fixed view (nothing runs)."""

    def __init__(self, view: HostView) -> None:
        self.view = view
        self.started = self.stopped = False

    def subscribe(self, listener: Callable[[HostView], None]) -> None:
        return None

    def unsubscribe(self, listener: Callable[[HostView], None]) -> None:
        return None

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True
