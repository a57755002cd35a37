"""Where the run lives: a container on the host, or the host itself.

One module per kind of container, each one class: `proxmox` (Proxmox LXC,
`pct`, --ct N), `docker` (Docker and Podman, --docker NAME, --podman NAME),
`kubernetes` (a pod's container, `kubectl exec`, --pod [NS/]POD[/C]);
`base` holds what they share (`Container`, `Host`, `CtStatus`). A new kind
is a new module with its class, plus its line in `KINDS` below.

`parse_container` reads the one spec text of each ("200", "docker:NAME",
"podman:NAME", "pod:NS/POD/C"); `cgroup_owner` reads which container a host
PID's cgroup v2 path belongs to.

Pure: argv building and text reading only; remote/target.py runs them.
"""

from __future__ import annotations

from gputui.containers.base import (
    RESTART_GRACE_S,
    CgroupOwner,
    Container,
    ContainerListing,
    CtStatus,
    Host,
    listing_names,
)
from gputui.containers.docker import Docker, Podman
from gputui.containers.kubernetes import KubePod, parse_pod
from gputui.containers.proxmox import ProxmoxLXC

# Every kind, in the order a person reads them in the spec grammar.
KINDS: tuple[type[Container], ...] = (ProxmoxLXC, Docker, Podman, KubePod)

# The kinds with a flag, config key and Settings field of their own (SETTING:
# --ct N, --docker NAME); a kind without one is named by its spec alone.
FLAG_KINDS: tuple[type[Container], ...] = tuple(k for k in KINDS if k.SETTING)

CONTAINER_GRAMMAR = ", ".join(k.GRAMMAR for k in KINDS[:-1]) + " or " + KINDS[-1].GRAMMAR

__all__ = [
    "CONTAINER_GRAMMAR",
    "FLAG_KINDS",
    "KINDS",
    "RESTART_GRACE_S",
    "CgroupOwner",
    "Container",
    "ContainerListing",
    "CtStatus",
    "Docker",
    "Host",
    "KubePod",
    "Podman",
    "ProxmoxLXC",
    "cgroup_owner",
    "container_for",
    "in_cgroups",
    "listing_kinds",
    "listing_names",
    "log_tools",
    "parse_container",
    "parse_pod",
]


def parse_container(text: str, context: str = "") -> Container:
    """One container spec -> its Container: "200", "docker:NAME",
    "podman:NAME", "pod:[NAMESPACE/]POD[/CONTAINER]". ValueError: one line."""
    t = text.strip()
    for kind in KINDS:
        found = kind.from_spec(t, context)
        if found is not None:
            return found
    prefix, colon, rest = t.partition(":")
    if not colon or not rest:
        raise ValueError(f"{text!r} is not {CONTAINER_GRAMMAR}")
    raise ValueError(f"{text!r}: {prefix!r} is not a container kind ({CONTAINER_GRAMMAR})")


def cgroup_owner(path: str) -> CgroupOwner | None:
    """A cgroup v2 path (`/proc/PID/cgroup`'s `0::` line) -> the container it
    lies in; None for the host's own processes. Pure.

    Proxmox `/lxc/200/ns/...`; Docker `/system.slice/docker-<id>.scope` or
    `/docker/<id>`; Podman `.../libpod-<id>.scope`; Kubernetes
    `.../kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope` (or
    `/kubepods/<qos>/pod<uid>/<id>`). The kinds answer by CGROUP_ORDER."""
    for kind in sorted(KINDS, key=lambda k: k.CGROUP_ORDER):
        owner = kind.read_cgroup(path)
        if owner is not None or (kind.CGROUP_TREE and kind.CGROUP_TREE in path):
            return owner
    return None


def in_cgroups(paths: list[str], container: Container) -> bool:
    """Whether a process whose cgroup paths (each line of `/proc/PID/cgroup`,
    after its second ':') are `paths` runs in `container` (`Container.owns`).
    Pure."""
    return any(container.owns(o) for o in map(cgroup_owner, paths) if o is not None)


def listing_kinds() -> list[type[Container]]:
    """The kinds a host lists its containers with, in the order the host
    view asks them (LIST_ORDER)."""
    listed = [k for k in KINDS if k.LIST_ORDER is not None and k.list_argv() is not None]
    return sorted(listed, key=lambda k: k.LIST_ORDER or 0)


def log_tools() -> frozenset[str]:
    """The host tools whose `TOOL logs ...` names a main process's output."""
    return frozenset(k.TOOL for k in KINDS if k.KEEPS_LOGS)


def container_for(place: Container | int | str | None) -> Container:
    """The container a place names (a --ct value, the config's `ct`, a host
    view's key): a number is a Proxmox CT, a spec text (`docker:NAME`, ...)
    its kind, None the host."""
    if isinstance(place, Container):
        return place
    if place is None:
        return Host()
    if isinstance(place, str) and ProxmoxLXC.number(place) is None:
        return parse_container(place)  # `²00`, like any other text: one line ValueError
    return ProxmoxLXC(int(place))
