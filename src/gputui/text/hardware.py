"""The words for a GPU's health (issue 32), shared by the parsers
(collect/gpuhealth.py) and the rules (diagnose/hardware.py): what each bit
of the clocks' event reasons means, what each common Xid means, and one
spelling of a PCI address. Pure."""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------ reasons


@dataclass(frozen=True)
class Reason:
    bit: int
    name: str  # nvidia-smi's field: clocks_event_reasons.<name>
    words: str  # in the user's words
    throttle: bool  # a slowdown worth a word (idle, a user's clocks, sync boost are not)


REASONS: tuple[Reason, ...] = (
    Reason(0x1, "gpu_idle", "idle", False),
    Reason(0x2, "applications_clocks_setting", "applications clocks setting", False),
    Reason(0x4, "sw_power_cap", "SW power cap", False),  # judged apart: see diagnose/hardware
    Reason(0x8, "hw_slowdown", "HW slowdown", True),
    Reason(0x10, "sync_boost", "sync boost", False),
    Reason(0x20, "sw_thermal_slowdown", "SW thermal slowdown", True),
    Reason(0x40, "hw_thermal_slowdown", "HW thermal slowdown", True),
    Reason(0x80, "hw_power_brake_slowdown", "HW power brake", True),
    Reason(0x100, "display_clock_setting", "display clock setting", False),
)
SW_POWER_CAP = 0x4
THROTTLE_MASK = sum(r.bit for r in REASONS if r.throttle)


def reason_names(mask: int) -> list[str]:
    """The reasons a bitmask holds, in words ("HW thermal slowdown")."""
    return [r.words for r in REASONS if mask & r.bit]


def throttle_reasons(mask: int) -> list[Reason]:
    return [r for r in REASONS if r.throttle and mask & r.bit]


def bus_key(text: str) -> str:
    """A PCI address in any of the driver's spellings -> "dddd:bb:dd"
    (`00000000:18:00.0`, `0000:18:00.0`, `PCI:0000:18:00`, `18:00.0`), lower
    case, function dropped; "" when it is not one."""
    t = text.strip().lower()
    if t.startswith("pci:"):
        t = t[4:]
    t = t.split(".", 1)[0]
    parts = t.split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) != 3:
        return ""
    try:
        dom, bus, dev = (int(p, 16) for p in parts)
    except ValueError:
        return ""
    return f"{dom:04x}:{bus:02x}:{dev:02x}"


# Xid -> (meaning, whose: "hardware" | "program" | "driver", broken: red)
XID_MEANING: dict[int, tuple[str, str, bool]] = {
    13: ("graphics engine exception (often the program: an out-of-range access)", "program", False),
    31: ("GPU memory page fault (often the program: an illegal address)", "program", False),
    43: ("GPU stopped processing (the program's kernel faulted or was killed)", "program", False),
    48: ("double-bit ECC error: memory the GPU cannot correct", "hardware", True),
    63: ("ECC page retirement / row remap recorded: a reset applies it", "hardware", False),
    64: ("ECC page retirement / row remap failed to record", "hardware", True),
    74: ("NVLink error", "hardware", True),
    79: ("GPU has fallen off the bus", "hardware", True),
    92: ("high single-bit ECC error rate", "hardware", False),
    94: ("contained ECC error: the program was stopped, the GPU is usable", "hardware", False),
    95: ("uncontained ECC error: the GPU needs a reset", "hardware", True),
    119: ("GSP firmware timed out (RPC): the GPU needs a reset", "driver", True),
}


def xid_words(xid: int) -> str:
    meaning = XID_MEANING.get(xid)
    return meaning[0] if meaning else "see NVIDIA's Xid catalog"
