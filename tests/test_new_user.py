"""What a new user meets on a Proxmox host, through the real CLI and the
test bed (real sshd, real tmux, stand-in pct and nvidia-smi): each case is
one clear line or one clear finding, never "nothing wrong" by mistake."""

from __future__ import annotations

from typing import Any

import scenarios as sc


def test_a_ct_without_tmux_and_python3_is_not_nothing_wrong(testbed: Any, ct: int) -> None:
    """No python3, so no agent to say which tools the CT has: doctor asked
    none and said "nothing wrong", exit 0. Now a plain command asks once."""
    sc.without_commands(testbed, ct, "tmux", "python3*")
    r = sc.finish_doctor(sc.start_doctor(testbed, ct, "--json"))
    assert r.rc == 1, r.stdout + r.stderr
    missing = r.finding("tools_missing")
    assert missing["severity"] == "warning"
    assert "tmux" in missing["title"] and "python3" in missing["title"]
    assert f"pct exec {ct} -- apt-get install -y tmux" in missing["fix"]
