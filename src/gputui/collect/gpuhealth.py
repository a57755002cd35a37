"""The hardware's own words (issue 32): what to ask nvidia-smi and the
kernel log about a GPU's health, and parsing what they print. Pure.

Three readings, at three paces:

- with every sample (the 1 s stream, collect/nvidiasmi.py `STREAM_FIELDS`):
  `clocks_event_reasons.active` (a bitmask, text/hardware.py names its bits) and
  `clocks.max.sm` — a throttle must be seen, and timed, to the second;
- every health listing (`HEALTH_FIELDS` and `REMAP_FIELDS`, in the
  compute-apps loop: every few seconds, not every second): uncorrectable
  ECC errors, row remapping, the PCIe link, the power limit's default and
  maximum, and utilization in the same reading (a link is judged under load);
- the kernel log, followed as it is written (`KERNEL_LOG_SCRIPT`: `dmesg -W`,
  or an older dmesg's `-w` with its replay skipped; journalctl when dmesg is
  not permitted): the driver's
  `NVRM: Xid (PCI:0000:18:00): 79, pid=…, …` lines.

A value nvidia-smi cannot give (`[N/A]`, `[Not Supported]`, …) is None:
never a fault, never "all clear".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputui.collect.nvidiasmi import is_unknown, parse_number
from gputui.model import GpuEvent, GpuHealth
from gputui.text.hardware import bus_key
from gputui.text.numbers import ascii_int, bounded_int

# ------------------------------------------------------------------ the slow fields

HEALTH_FIELDS: tuple[str, ...] = (
    "index",
    "pci.bus_id",
    "utilization.gpu",
    "ecc.errors.uncorrected.volatile.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "power.default_limit",
    "power.max_limit",
)
REMAP_FIELDS: tuple[str, ...] = (
    "gpu_bus_id",
    "remapped_rows.pending",
    "remapped_rows.failure",
)
HEALTH_TAG = "@gputui health "
REMAP_TAG = "@gputui remap "


def health_argv() -> list[str]:
    return ["--query-gpu=" + ",".join(HEALTH_FIELDS), "--format=csv,noheader,nounits"]


def remap_argv() -> list[str]:
    return ["--query-remapped-rows=" + ",".join(REMAP_FIELDS), "--format=csv,noheader,nounits"]


# Shell lines for the compute-apps listing (monitor/gpufeed.py): "$1" is
# nvidia-smi. Each line of the two queries comes back tagged.
HEALTH_LISTING = (
    '  "$1" '
    + " ".join(health_argv())
    + " 2>&1 | sed 's/^/"
    + HEALTH_TAG
    + "/'\n"
    + '  "$1" '
    + " ".join(remap_argv())
    + " 2>&1 | sed 's/^/"
    + REMAP_TAG
    + "/'\n"
)


def _int(value: str) -> int | None:
    x = parse_number(value)
    return None if x is None else int(x)


def _flag(value: str) -> bool | None:
    v = value.strip().lower()
    if is_unknown(v):
        return None
    if v in ("yes", "true", "1", "pending"):
        return True
    if v in ("no", "false", "0", "none"):
        return False
    x = parse_number(v)
    return None if x is None else x > 0


def parse_health(lines: list[str], now: float) -> tuple[dict[int, GpuHealth], str]:
    """The tagged lines of one listing -> ({index: health}, the text of a
    query that failed — e.g. an old driver's `Field "…" is not a valid
    field to query.` — or "")."""
    out: dict[int, GpuHealth] = {}
    remap: dict[str, tuple[bool | None, bool | None]] = {}
    errors: list[str] = []
    for line in lines:
        if line.startswith(HEALTH_TAG):
            h = _health_row(line[len(HEALTH_TAG) :], now)
            if isinstance(h, GpuHealth):
                out[h.index] = h
            elif h:
                errors.append(h)
        elif line.startswith(REMAP_TAG):
            f = [x.strip() for x in line[len(REMAP_TAG) :].split(",")]
            key = bus_key(f[0]) if len(f) == len(REMAP_FIELDS) else ""
            if key:
                remap[key] = (_flag(f[1]), _flag(f[2]))
            elif line[len(REMAP_TAG) :].strip():
                errors.append(line[len(REMAP_TAG) :].strip())
    for h in out.values():
        h.remap_pending, h.remap_failure = remap.get(bus_key(h.bus_id), (None, None))
    return out, " ".join(errors)[:300]


def _health_row(text: str, now: float) -> GpuHealth | str:
    f = [x.strip() for x in text.split(",")]
    idx = ascii_int(f[0], 9) if len(f) == len(HEALTH_FIELDS) else None
    if idx is None:
        return text.strip()
    return GpuHealth(
        index=idx,
        time=now,
        bus_id="" if is_unknown(f[1]) else f[1],
        util_pct=parse_number(f[2]),
        ecc_uncorrected=_int(f[3]),
        pcie_gen=_int(f[4]),
        pcie_gen_max=_int(f[5]),
        pcie_width=_int(f[6]),
        pcie_width_max=_int(f[7]),
        power_default_w=parse_number(f[8]),
        power_max_w=parse_number(f[9]),
    )


# ------------------------------------------------------------------ the kernel log

# One channel, for as long as gputui watches: `dmesg -W` (util-linux 2.37+:
# new messages only); an older dmesg's `-w` replays the buffer first, so
# lines stamped before this start (/proc/uptime, read first) are dropped;
# `journalctl -k -f -n 0` (no history) where dmesg is not permitted
# (kernel.dmesg_restrict without root). Markers: `@gputui klog start
# UPTIME` (before `-w` only: the cut-off), `@gputui klog via dmesg -W|dmesg
# -w|journalctl`, `@gputui klog rc N` when a reader ended, `none` at the end.
KERNEL_LOG_SCRIPT = r"""if command -v dmesg >/dev/null 2>&1; then
  if dmesg --help 2>&1 | grep -q -e --follow-new; then
    echo "@gputui klog via dmesg -W"
    dmesg -W 2>&1
  else
    up=$(cut -d' ' -f1 /proc/uptime 2>/dev/null)
    echo "@gputui klog start ${up:-0}"
    echo "@gputui klog via dmesg -w"
    dmesg -w 2>&1
  fi
  echo "@gputui klog rc $?"
fi
if command -v journalctl >/dev/null 2>&1; then
  echo "@gputui klog via journalctl"
  journalctl -k -f -n 0 -o short-monotonic 2>&1
  echo "@gputui klog rc $?"
fi
echo "@gputui klog none"
"""


def kernel_log_argv() -> list[str]:
    return ["sh", "-c", KERNEL_LOG_SCRIPT, "gputui-kernel-log"]


_STAMP_RE = re.compile(r"^\s*\[\s*(\d+(?:\.\d+)?)\]")
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)(?:, pid=('?[^,]*'?))?(?:, name=([^,]*))?,?\s*(.*)$"
)


@dataclass
class KernelLine:
    """What one line of the kernel-log stream says: an Xid event, the
    reader's own status, or nothing of ours (None from `parse_kernel_line`)."""

    event: GpuEvent | None = None
    status: str = ""  # "start UPTIME", "via dmesg", "rc 1", "none", or an error text


def parse_kernel_line(line: str, now: float, since_uptime: float | None) -> KernelLine | None:
    """One line of `kernel_log_argv()`'s output. Lines stamped before
    `since_uptime` (dmesg -w replays the buffer first) are history: None."""
    text = line.strip()
    if text.startswith("@gputui klog "):
        return KernelLine(status=text[len("@gputui klog ") :])
    m = _XID_RE.search(text)
    if m is None:
        low = text.lower()
        if (
            "operation not permitted" in low
            or "not seeing messages" in low
            or ("insufficient permissions" in low)
        ):
            return KernelLine(status=text)
        return None
    st = _STAMP_RE.match(text)
    if st is not None and since_uptime is not None and float(st.group(1)) < since_uptime:
        return None  # dmesg's replay of the buffer: not from now on
    pid_text = (m.group(3) or "").strip("'")
    xid = bounded_int(m.group(2), 0, 1 << 16)
    if xid is None:
        return None  # no Xid NVIDIA numbers (5,000 digits): not a line of the driver's
    return KernelLine(
        event=GpuEvent(
            time=now,
            text=text[m.start() :],
            lost=False,
            xid=xid,
            bus_id=bus_key(m.group(1)),
            pid=ascii_int(pid_text, 10) if pid_text.isdigit() else None,
            source="kernel log",
        )
    )


def kernel_log_problem(status: str) -> str | None:
    """A reader status that means the kernel log cannot be followed -> one
    line with the fix; None for the reader's own progress markers."""
    low = status.lower()
    if "operation not permitted" in low or "insufficient permissions" in low:
        return (
            f"the kernel log is not readable ({status.strip()[:120]}) — connect as root, "
            "or add the user to the adm/systemd-journal group, to see Xid errors"
        )
    if "not seeing messages" in low:
        return (
            "journalctl shows this user only its own messages — connect as root, or "
            "add the user to the adm/systemd-journal group, to see Xid errors"
        )
    if low.strip() == "none":
        return (
            "neither dmesg nor journalctl can follow the kernel log here: Xid errors are not seen"
        )
    return None
