"""Where the run lives: a container on the host, or the host itself.

One class per kind of container. Each says how to run argv inside it
(`wrap`), how to run it with a terminal (`attach`), how to ask the host
whether it runs (`status_argv`, `read_status`), and how to phrase, for a
person, a command to run in it (`phrase`). The kinds: Proxmox LXC (`pct`,
--ct N), Docker and Podman (`docker exec`/`podman exec`, --docker NAME,
--podman NAME), a Kubernetes pod (`kubectl exec`, --pod [NS/]POD[/CONTAINER])
and none (`Host`: a plain GPU server, or this machine with --local).
`parse_container` reads the one spec text of each ("200", "docker:NAME",
"podman:NAME", "pod:NS/POD/C"); `cgroup_owner` reads which container a host
PID's cgroup v2 path belongs to.

Pure: argv building and text reading only; remote/target.py runs them.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from enum import Enum

from gputui.errors import ContainerError
from gputui.text.numbers import ascii_int


class CtStatus(str, Enum):
    """State of the container the run lives in, or NONE when gputui watches
    a plain host."""

    RUNNING = "running"
    STOPPED = "stopped"
    MISSING = "missing"
    NONE = "none"
    UNKNOWN = "unknown"


@dataclass
class ContainerListing:
    """One container as the host lists it: number (a Docker/Podman ID), state, name, lock."""

    id: int | str
    status: str  # "running", "stopped", ... as the host tool prints it
    name: str = ""
    lock: str = ""


class Container(abc.ABC):
    """A place on the host that commands enter through a host tool."""

    id: int | None = None  # a Proxmox CT's number; None for the host and other kinds
    kind: str = ""  # "lxc", "docker", "podman", "pod"; "" for the host itself

    @property
    def spec(self) -> str:
        """The text `parse_container` reads back ("200", "docker:NAME"); '' for the host."""
        return ""

    def owns(self, owner: CgroupOwner) -> bool:
        """Whether a host process in cgroup `owner` runs in this container.
        Kinds known by name, not id, cannot tell from the path alone (False):
        their PID namespace says (the agent's hello)."""
        return False

    @property
    @abc.abstractmethod
    def words(self) -> str:
        """How a person names it: 'CT 200', 'the host'."""

    @property
    def label(self) -> str:
        """What follows the host in a target label ('ct 200'), '' for none."""
        return ""

    @abc.abstractmethod
    def wrap(self, argv: list[str]) -> list[str]:
        """argv as the host must run it to reach the container."""

    def attach(self, argv: list[str]) -> list[str]:
        """argv as the host must run it with a terminal (tmux attach)."""
        return self.wrap(argv)

    def phrase(self, command: str) -> str:
        """A command line, as a person would type it on the host to run it here."""
        return command

    def status_argv(self) -> list[str] | None:
        """The host command that says whether the container runs; None: nothing to ask."""
        return None

    def read_status(self, text: str) -> CtStatus | None:
        """The state in a status reply or an error text; None when it does not say."""
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        """The error when the host lacks the container tool (not this kind of host)."""
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        """The one-line error, with the fix, when the container cannot run commands."""
        return None

    def missing_evidence(self) -> tuple[str, str]:
        """(what the host says, the fix) for a container that does not exist."""
        return ("", "")

    def stopped_evidence(self) -> tuple[str, str]:
        """(what the host says, the fix) for a stopped container."""
        return ("", "")

    def grow_disk_hint(self) -> str:
        """How to give the container a larger disk, from the host ('' for none)."""
        return ""

    def neighbours_argv(self) -> list[str] | None:
        """The host command listing the host's containers of this kind (to
        name a GPU holder in another one); None: nothing to ask."""
        return None

    def read_neighbours(self, text: str) -> dict[str, str]:
        """`neighbours_argv` output -> {"lxc:201": "eval-box", ...}."""
        return {}


class Host(Container):
    """No container: commands run on the host itself."""

    @property
    def words(self) -> str:
        return "the host"

    def wrap(self, argv: list[str]) -> list[str]:
        return list(argv)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Host)

    def __hash__(self) -> int:
        return hash(Host)

    def __repr__(self) -> str:
        return "Host()"


class ProxmoxLXC(Container):
    """A Proxmox VE LXC container, entered with `pct exec CT -- argv`.

    pct hands argv to lxc-attach with no shell, so the host shell is the only
    one that parses the command string, and the transport quotes it once.
    `pct` is a Perl program: each call costs a few hundred ms on a real host.
    """

    TOOL = "pct"
    # Where a user finds the number (for errors about --ct).
    HOW_TO_LIST = "`pct list` on the host"
    kind = "lxc"

    def __init__(self, ct: int) -> None:
        self.id = int(ct)

    @property
    def spec(self) -> str:
        return str(self.id)

    def owns(self, owner: CgroupOwner) -> bool:
        return owner.kind == "lxc" and owner.ident == str(self.id)

    @property
    def words(self) -> str:
        return f"CT {self.id}"

    @property
    def label(self) -> str:
        return f"ct {self.id}"

    def wrap(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", str(self.id), "--", *argv]

    def phrase(self, command: str) -> str:
        return f"{self.TOOL} exec {self.id} -- {command}"

    def neighbours_argv(self) -> list[str]:
        return self.list_argv()

    def read_neighbours(self, text: str) -> dict[str, str]:
        return listing_names("lxc", self.read_list(text))

    def status_argv(self) -> list[str]:
        return [self.TOOL, "status", str(self.id)]

    @classmethod
    def list_argv(cls) -> list[str]:
        """The host command that lists every container on the host."""
        return [cls.TOOL, "list"]

    @staticmethod
    def read_list(text: str) -> list[ContainerListing]:
        """`pct list` output -> containers. Columns `VMID Status Lock Name`,
        the Lock column usually empty (then a row has three words)."""
        out: list[ContainerListing] = []
        for line in text.splitlines():
            words = line.split()
            vmid = ascii_int(words[0], 9) if len(words) >= 2 else None
            if vmid is None:
                continue  # the header, or noise (`²00` is no VMID)
            lock, name = "", ""
            if len(words) >= 4:
                lock, name = words[2], " ".join(words[3:])
            elif len(words) == 3:
                name = words[2]
            out.append(ContainerListing(vmid, words[1], name, lock))
        return out

    @classmethod
    def tool_absent(cls, exit_status: int | None, err: str) -> bool:
        """Whether a failed host command says the host has no container tool."""
        return exit_status == 127 or (cls.TOOL in err and "not found" in err)

    def read_status(self, text: str) -> CtStatus | None:
        """`pct status` output or a pct error (`CT 200 not running`,
        `Configuration file ... does not exist`) -> the state."""
        low = text.lower()
        if "status: running" in low:
            return CtStatus.RUNNING
        if "status: stopped" in low or "not running" in low:
            return CtStatus.STOPPED
        if "does not exist" in low:
            return CtStatus.MISSING
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        if self.tool_absent(exit_status, err):
            return ContainerError(
                f"`{self.TOOL}` not found on {where}: it is not a Proxmox host",
                "use without --ct on a plain GPU server",
            )
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        if status == CtStatus.MISSING:
            return ContainerError(
                f"container {self.id} does not exist on {where}",
                f"check the number with {self.HOW_TO_LIST}",
            )
        if status == CtStatus.STOPPED:
            return ContainerError(
                f"container {self.id} on {where} is stopped",
                f"start it with `{self.TOOL} start {self.id}` on the host",
            )
        return None

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f"{self.TOOL}: Configuration file 'nodes/<node>/lxc/{self.id}.conf' does not exist",
            f"check the CT number: {self.HOW_TO_LIST}, then --ct N",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (f"{self.TOOL} status {self.id}: stopped", f"{self.TOOL} start {self.id}")

    def grow_disk_hint(self) -> str:
        return (
            f"grow its disk on the host: {self.TOOL} resize {self.id} rootfs +50G "
            "(mpN instead of rootfs for a mount point)"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProxmoxLXC) and other.id == self.id

    def __hash__(self) -> int:
        return hash((ProxmoxLXC, self.id))

    def __repr__(self) -> str:
        return f"ProxmoxLXC({self.id})"


# ------------------------------------------------------------ Docker, Podman

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
# `docker exec` and `kubectl exec` start from the image's environment, often
# with no LANG: tmux then takes its client for a non-UTF-8 terminal and
# prints the control characters of gputui's -F formats as '_'. pct passes
# the caller's locale; these kinds get one that says UTF-8.
UTF8 = "LC_CTYPE=C.UTF-8"


class Docker(Container):
    """A Docker container, entered with `docker exec -i NAME argv` (no shell:
    the docker CLI stops reading its own flags at NAME). The container runs
    when `docker container inspect` says `running`; `docker exec` into a
    missing one says `Error response from daemon: No such container: NAME`,
    into a stopped one `... container ID is not running` (exit 1)."""

    TOOL = "docker"
    kind = "docker"
    WHAT = "Docker"

    def __init__(self, name: str, container_id: str = "") -> None:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"{name!r} is not a {self.WHAT} container name or ID")
        self.name = name
        self.container_id = container_id  # the full ID, when known (cgroup paths name it)

    @property
    def how_to_list(self) -> str:
        return f"`{self.TOOL} ps -a` on the host"

    @property
    def words(self) -> str:
        return f"{self.kind} container {self.name}"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.name}"

    def neighbours_argv(self) -> list[str]:
        return self.list_argv()

    def read_neighbours(self, text: str) -> dict[str, str]:
        return listing_names(self.kind, self.read_list(text))

    def owns(self, owner: CgroupOwner) -> bool:
        ident = self.container_id or self.name
        return (
            owner.kind == self.kind and len(ident) >= 12 and owner.ident.startswith(ident.lower())
        )

    def wrap(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", "-i", "-e", UTF8, self.name, *argv]

    def attach(self, argv: list[str]) -> list[str]:
        return [self.TOOL, "exec", "-it", "-e", UTF8, self.name, *argv]

    def phrase(self, command: str) -> str:
        return f"{self.TOOL} exec {self.name} {command}"

    def status_argv(self) -> list[str]:
        return [self.TOOL, "container", "inspect", "-f", "{{.State.Status}}", self.name]

    @classmethod
    def list_argv(cls) -> list[str]:
        """Every container on the host, one `ID<TAB>NAMES<TAB>STATE` line each."""
        return [cls.TOOL, "ps", "-a", "--no-trunc", "--format", "{{.ID}}\t{{.Names}}\t{{.State}}"]

    @staticmethod
    def read_list(text: str) -> list[ContainerListing]:
        """`list_argv` output -> containers (id: the full container ID)."""
        out: list[ContainerListing] = []
        for line in text.splitlines():
            cid, _, rest = line.partition("\t")
            names, _, state = rest.partition("\t")
            if re.fullmatch(r"[0-9a-f]{12,64}", cid.strip()) and names.strip():
                out.append(ContainerListing(cid.strip(), state.strip(), names.strip()))
        return out

    @classmethod
    def tool_absent(cls, exit_status: int | None, err: str) -> bool:
        return exit_status == 127 or (cls.TOOL in err and "not found" in err)

    def read_status(self, text: str) -> CtStatus | None:
        """`inspect -f {{.State.Status}}` output or an exec error -> the state."""
        low = text.lower()
        if "no such container" in low or "no such object" in low or "no container with" in low:
            return CtStatus.MISSING
        if "is not running" in low or "state improper" in low or "is paused" in low:
            return CtStatus.STOPPED
        words = low.split()
        if words[:1] == ["running"]:
            return CtStatus.RUNNING
        stopped = ("exited", "created", "paused", "dead", "stopped", "configured", "restarting")
        if words[:1] and words[0] in stopped:
            return CtStatus.STOPPED
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        if self.tool_absent(exit_status, err):
            return ContainerError(
                f"`{self.TOOL}` not found on {where}: it has no {self.WHAT}",
                f"check the host, or use without --{self.kind} on a plain GPU server",
            )
        if "permission denied" in err.lower() and "socket" in err.lower():
            return ContainerError(
                f"`{self.TOOL}` on {where} may not talk to its daemon: {err.strip()[:160]}",
                f"log in as a user in the {self.TOOL} group, or as root (--user root)",
            )
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        if status == CtStatus.MISSING:
            return ContainerError(
                f"{self.words} does not exist on {where}",
                f"check the name with {self.how_to_list}",
            )
        if status == CtStatus.STOPPED:
            return ContainerError(
                f"{self.words} on {where} is not running",
                f"start it with `{self.TOOL} start {self.name}` on the host",
            )
        return None

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f"Error response from daemon: No such container: {self.name}",
            f"check the name: {self.how_to_list}, then --{self.kind} NAME",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (
            f"Error response from daemon: container {self.name} is not running",
            f"{self.TOOL} start {self.name}",
        )

    def grow_disk_hint(self) -> str:
        return (
            f"the container's disk is the host's {self.TOOL} storage: free space there "
            f"(`{self.TOOL} system df`), or write the log to a mounted volume"
        )

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.name == self.name  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.name))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Podman(Docker):
    """A Podman container: the docker CLI's verbs, its own error texts —
    `Error: no container with name or ID "NAME" found: no such container`,
    `Error: can only create exec sessions on running containers: container
    state improper` (exit 125)."""

    TOOL = "podman"
    kind = "podman"
    WHAT = "Podman"

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f'Error: no container with name or ID "{self.name}" found: no such container',
            f"check the name: {self.how_to_list}, then --podman NAME",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (
            "Error: can only create exec sessions on running containers: container state improper",
            f"{self.TOOL} start {self.name}",
        )


# ------------------------------------------------------------ Kubernetes

K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


class KubePod(Container):
    """A container of a Kubernetes pod, entered with `kubectl exec -i [-n NS]
    POD [-c CONTAINER] -- argv`, with the host user's kubeconfig ($KUBECONFIG
    or ~/.kube/config) and its current context unless one is named. A missing
    pod: `Error from server (NotFound): pods "P" not found`; a container that
    does not run: `error: unable to upgrade connection: container not found
    ("C")` (exit 1)."""

    TOOL = "kubectl"
    kind = "pod"

    def __init__(
        self, pod: str, namespace: str = "", container: str = "", context: str = ""
    ) -> None:
        for what, value in (("pod", pod), ("namespace", namespace), ("container", container)):
            if (value or what == "pod") and not K8S_NAME_RE.fullmatch(value):
                raise ValueError(f"{value!r} is not a Kubernetes {what} name")
        if context.startswith("-") or any(c.isspace() for c in context):
            raise ValueError(f"{context!r} is not a kubectl context name")
        self.pod, self.namespace, self.container, self.context = pod, namespace, container, context

    def _kubectl(self) -> list[str]:
        return [self.TOOL, *(["--context", self.context] if self.context else [])]

    def _ns(self) -> list[str]:
        return ["-n", self.namespace] if self.namespace else []

    @property
    def words(self) -> str:
        where = f"{self.namespace}/{self.pod}" if self.namespace else self.pod
        return f"pod {where}" + (f" container {self.container}" if self.container else "")

    @property
    def label(self) -> str:
        return "pod " + self.spec[4:]

    @property
    def spec(self) -> str:
        parts = [p for p in (self.namespace, self.pod) if p]
        if self.container:
            parts = [self.namespace or "default", self.pod, self.container]
        return "pod:" + "/".join(parts)

    def owns(self, owner: CgroupOwner) -> bool:
        return False  # by name only: the PID namespace (agent hello) says

    def _exec(self, flags: str, argv: list[str]) -> list[str]:
        c = ["-c", self.container] if self.container else []
        return [
            *self._kubectl(),
            "exec",
            flags,
            *self._ns(),
            self.pod,
            *c,
            "--",
            "env",
            UTF8,
            *argv,
        ]

    def wrap(self, argv: list[str]) -> list[str]:
        return self._exec("-i", argv)

    def attach(self, argv: list[str]) -> list[str]:
        return self._exec("-it", argv)

    def phrase(self, command: str) -> str:
        c = f" -c {self.container}" if self.container else ""
        ns = f" -n {self.namespace}" if self.namespace else ""
        ctx = f" --context {self.context}" if self.context else ""
        return f"{self.TOOL}{ctx} exec{ns} {self.pod}{c} -- {command}"

    def status_argv(self) -> list[str]:
        return [
            *self._kubectl(),
            "get",
            "pod",
            *self._ns(),
            self.pod,
            "-o",
            "jsonpath={.status.phase}",
        ]

    def read_status(self, text: str) -> CtStatus | None:
        low = text.lower()
        if "(notfound)" in low or "is not valid for pod" in low:
            return CtStatus.MISSING
        if "container not found" in low or "does not have a host assigned" in low:
            return CtStatus.STOPPED
        words = low.split()
        if words[:1] == ["running"]:
            return CtStatus.RUNNING
        if words[:1] and words[0] in ("pending", "succeeded", "failed"):
            return CtStatus.STOPPED
        return None

    def tool_missing(self, exit_status: int | None, err: str, where: str) -> ContainerError | None:
        if exit_status == 127 or (self.TOOL in err and "not found" in err and "(" not in err):
            return ContainerError(
                f"`{self.TOOL}` not found on {where}",
                "ssh to a machine whose kubectl reaches the cluster (its kubeconfig), "
                "or install kubectl there",
            )
        return None

    def not_running(self, status: CtStatus, where: str) -> ContainerError | None:
        ns = f" -n {self.namespace}" if self.namespace else ""
        if status == CtStatus.MISSING:
            return ContainerError(
                f"{self.words} does not exist (kubectl on {where})",
                f"check the name with `kubectl get pods{ns}` (and the context/namespace)",
            )
        if status == CtStatus.STOPPED:
            return ContainerError(
                f"{self.words} is not running (kubectl on {where})",
                f"see why: `kubectl describe pod{ns} {self.pod}`",
            )
        return None

    def missing_evidence(self) -> tuple[str, str]:
        return (
            f'Error from server (NotFound): pods "{self.pod}" not found',
            "check the pod: kubectl get pods -A, then --pod NAMESPACE/POD",
        )

    def stopped_evidence(self) -> tuple[str, str]:
        return (
            f'error: unable to upgrade connection: container not found ("{self.container}")',
            f"kubectl describe pod {self.pod}",
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, KubePod)
            and other.spec == self.spec
            and (other.context == self.context)
        )

    def __hash__(self) -> int:
        return hash((KubePod, self.spec, self.context))

    def __repr__(self) -> str:
        return f"KubePod({self.spec!r})"


# ------------------------------------------------------------ specs, cgroups

CONTAINER_GRAMMAR = "N (a Proxmox CT), docker:NAME, podman:NAME or pod:[NAMESPACE/]POD[/CONTAINER]"


def parse_container(text: str, context: str = "") -> Container:
    """One container spec -> its Container: "200", "docker:NAME",
    "podman:NAME", "pod:[NAMESPACE/]POD[/CONTAINER]". ValueError: one line."""
    t = text.strip()
    if t.isascii() and t.isdigit():
        if int(t) < 1:
            raise ValueError(f"CT number {t} is invalid")
        return ProxmoxLXC(int(t))
    kind, colon, rest = t.partition(":")
    if not colon or not rest:
        raise ValueError(f"{text!r} is not {CONTAINER_GRAMMAR}")
    if kind == "docker":
        return Docker(rest)
    if kind == "podman":
        return Podman(rest)
    if kind in ("pod", "k8s", "kube"):
        return parse_pod(rest, context)
    raise ValueError(f"{text!r}: {kind!r} is not a container kind ({CONTAINER_GRAMMAR})")


def parse_pod(text: str, context: str = "") -> KubePod:
    """`[NAMESPACE/]POD[/CONTAINER]` -> KubePod. ValueError: one line."""
    parts = text.split("/")
    if len(parts) == 1:
        return KubePod(parts[0], context=context)
    if len(parts) == 2:
        return KubePod(parts[1], parts[0], context=context)
    if len(parts) == 3:
        return KubePod(parts[1], parts[0], parts[2], context=context)
    raise ValueError(f"{text!r} is not [NAMESPACE/]POD[/CONTAINER]")


@dataclass(frozen=True)
class CgroupOwner:
    """Which container a host process's cgroup v2 path puts it in."""

    kind: str  # "lxc", "docker", "podman", "pod"
    ident: str  # CT number, or the container ID (lower-case hex)
    pod_uid: str = ""  # kubepods: the pod's UID


_CG_PATTERNS = (
    ("lxc", re.compile(r"/lxc(?:\.payload)?[./]([0-9]+)(?:/|$)")),
    ("podman", re.compile(r"/libpod-(?!conmon-)([0-9a-f]{12,64})(?:\.scope)?(?:/|$)")),
    ("docker", re.compile(r"/docker[-/]([0-9a-f]{12,64})(?:\.scope)?(?:/|$)")),
)
_KUBE_POD = re.compile(r"[-/]pod([0-9a-f][0-9a-f_-]{7,})(?:\.slice)?/")
_KUBE_CTR = re.compile(r"(?:cri-containerd-|crio-|docker-|/)([0-9a-f]{64})(?:\.scope)?(?:/|$)")


def cgroup_owner(path: str) -> CgroupOwner | None:
    """A cgroup v2 path (`/proc/PID/cgroup`'s `0::` line) -> the container it
    lies in; None for the host's own processes. Pure.

    Proxmox `/lxc/200/ns/...`; Docker `/system.slice/docker-<id>.scope` or
    `/docker/<id>`; Podman `.../libpod-<id>.scope`; Kubernetes
    `.../kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope` (or
    `/kubepods/<qos>/pod<uid>/<id>`)."""
    if "kubepods" in path:
        pod = _KUBE_POD.search(path, path.index("kubepods"))
        ctr = _KUBE_CTR.search(path, pod.end() - 1 if pod else 0)
        if pod is None or ctr is None:
            return None
        return CgroupOwner("pod", ctr.group(1), pod.group(1).replace("_", "-"))
    for kind, pattern in _CG_PATTERNS:
        m = pattern.search(path)
        if m:
            return CgroupOwner(kind, m.group(1).lower())
    return None


def listing_names(kind: str, listing: list[ContainerListing]) -> dict[str, str]:
    """Listed containers -> {"<kind>:<id>": name} (the keys of
    `Snapshot.container_names`; a CT's id is its number)."""
    return {f"{kind}:{c.id}": c.name for c in listing if c.name}


def container_for(ct: Container | int | str | None) -> Container:
    """The container a --ct value (or config `ct`) names: a number is a
    Proxmox CT, a spec text (`docker:NAME`, ...) its kind."""
    if isinstance(ct, Container):
        return ct
    if ct is None:
        return Host()
    if isinstance(ct, str) and ascii_int(ct, 9) is None:
        return parse_container(ct)  # `²00`, like any other text: one line ValueError
    return ProxmoxLXC(int(ct))
