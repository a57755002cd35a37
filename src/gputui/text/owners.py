"""Who holds a GPU process, in words, when its cgroup puts it in another
container: 'CT 201 (eval-box)', 'container trainer2'; whose hands an argv
runs with ('uid 65534'). Pure."""

from __future__ import annotations

from collections.abc import Mapping

from gputui.containers import container_for
from gputui.model import GpuProcess
from gputui.text.untrusted import visible

SHORT_ID = 12  # how `docker ps` shows a container ID


def _name(key: str, names: Mapping[str, str]) -> str:
    """The listed name of container `key` ("docker:<id>"); a listing's ID
    and a cgroup's may differ in length: a prefix of either matches."""
    if key in names:
        return names[key]
    kind, _, ident = key.partition(":")
    for k, name in names.items():
        k_kind, _, k_ident = k.partition(":")
        long_enough = len(k_ident) >= SHORT_ID and len(ident) >= SHORT_ID
        if (
            k_kind == kind
            and long_enough
            and (k_ident.startswith(ident) or ident.startswith(k_ident))
        ):
            return name
    return ""


def container_words(gp: GpuProcess, names: Mapping[str, str]) -> str:
    """'CT 201 (eval-box)' (the host's container list names it), 'CT 201' (no name listed),
    'container trainer2' (a Docker or Podman container by its name),
    'docker container 3f2a9c0d1e2b' (its short ID); '' when its cgroup names no
    container."""
    if gp.ct_id is not None:
        lxc = container_for(gp.ct_id)  # a numbered container: a Proxmox CT
        name = names.get(lxc.listing_key, "")
        return f"{lxc.words} ({visible(name)})" if name else lxc.words
    if not gp.container:
        return ""
    kind, _, ident = gp.container.partition(":")
    name = _name(gp.container, names)
    if name:
        return f"container {visible(name)}"
    return f"{visible(kind)} container {visible(ident[:SHORT_ID])}"


IDENTITY_DROPS = ("setpriv", "runuser")


def runs_as(argv: list[str] | None) -> str | None:
    """Whose hands `argv` runs with when it drops to another user first
    (`setpriv --reuid=U …`, `runuser -u NAME …`, as remote/agent.py
    `as_owner` builds a tmux argv for another user's server): 'uid U' or
    'NAME'; None when it runs with gputui's own."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in IDENTITY_DROPS:
        return None
    for i, arg in enumerate(argv):
        if arg.startswith("--reuid="):
            return f"uid {arg.split('=', 1)[1]}"
        if arg in ("-u", "--reuid") and i + 1 < len(argv):
            return argv[i + 1] if arg == "-u" else f"uid {argv[i + 1]}"
        if arg == "--":
            break
    return "another user"
