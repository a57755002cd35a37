"""A container of a Kubernetes pod (--pod [NAMESPACE/]POD[/CONTAINER], spec
"pod:NS/POD/C"): entered with `kubectl exec`, its processes under a
`kubepods` cgroup. Pure."""

from __future__ import annotations

import re

from gputui.containers.base import IN_CONTAINER, UTF8, CgroupOwner, Container, CtStatus
from gputui.errors import ContainerError

# kubectl exec has no --workdir or --user: what follows `--` starts from `/`
# with the system directories first on PATH (IN_CONTAINER), as the pod's
# own user (its securityContext).
IN_POD = ["/usr/bin/env", UTF8, *IN_CONTAINER]

K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_KUBE_POD = re.compile(r"[-/]pod([0-9a-f][0-9a-f_-]{7,})(?:\.slice)?/")
_KUBE_CTR = re.compile(r"(?:cri-containerd-|crio-|docker-|/)([0-9a-f]{64})(?:\.scope)?(?:/|$)")


class KubePod(Container):
    """A container of a Kubernetes pod, entered with `kubectl exec -i [-n NS]
    POD [-c CONTAINER] -- argv`, with the host user's kubeconfig ($KUBECONFIG
    or ~/.kube/config) and its current context unless one is named. A missing
    pod: `Error from server (NotFound): pods "P" not found`; a container that
    does not run: `error: unable to upgrade connection: container not found
    ("C")` (exit 1)."""

    TOOL = "kubectl"
    kind = "pod"
    SPEC_PREFIXES = ("pod", "k8s", "kube")
    GRAMMAR = "pod:[NAMESPACE/]POD[/CONTAINER]"
    SETTING = "pod"  # with kube_context: kubectl's --context
    FLAG_HELP = "Kubernetes pod (and container) of the run, entered with the host's kubectl"
    FLAG_METAVAR = "[NS/]POD[/C]"
    CGROUP_ORDER = 0  # first: a kubepods path may name a docker-<id> scope too
    CGROUP_TREE = "kubepods"
    KEEPS_LOGS = True

    def __init__(
        self, pod: str, namespace: str = "", container: str = "", context: str = ""
    ) -> None:
        for what, value in (("pod", pod), ("namespace", namespace), ("container", container)):
            if (value or what == "pod") and not K8S_NAME_RE.fullmatch(value):
                raise ValueError(f"{value!r} is not a Kubernetes {what} name")
        if context.startswith("-") or any(c.isspace() for c in context):
            raise ValueError(f"{context!r} is not a kubectl context name")
        self.pod, self.namespace, self.container, self.context = pod, namespace, container, context

    @classmethod
    def from_name(cls, name: str, context: str = "") -> KubePod:
        return parse_pod(name, context)

    def settings_fields(self) -> dict[str, object]:
        context = {"kube_context": self.context} if self.context else {}
        return {self.FIELD: self.spec.partition(":")[2], **context}

    @classmethod
    def read_cgroup(cls, path: str) -> CgroupOwner | None:
        """`.../kubepods-<qos>-pod<uid>.slice/cri-containerd-<id>.scope` (or
        `/kubepods/<qos>/pod<uid>/<id>`) -> the pod's container."""
        if "kubepods" not in path:
            return None
        pod = _KUBE_POD.search(path, path.index("kubepods"))
        ctr = _KUBE_CTR.search(path, pod.end() - 1 if pod else 0)
        if pod is None or ctr is None:
            return None
        return CgroupOwner(cls.kind, ctr.group(1), pod.group(1).replace("_", "-"))

    def _kubectl(self) -> list[str]:
        return [self.TOOL, *(["--context", self.context] if self.context else [])]

    def _ns(self) -> list[str]:
        return ["-n", self.namespace] if self.namespace else []

    def more_shm_hint(self) -> str:
        return (
            "a pod's /dev/shm is 64 MB unless a volume says otherwise: mount an emptyDir "
            "with `medium: Memory` (and a sizeLimit) at /dev/shm in the pod spec"
        )

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
            *IN_POD,
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

    def logs_words(self) -> str:
        ns = f" -n {self.namespace}" if self.namespace else ""
        c = f" -c {self.container}" if self.container else ""
        return f"{self.TOOL} logs{ns} {self.pod}{c}"

    def logs_argv(self, since: str | None, tail: int) -> list[str]:
        start = [f"--since-time={since}"] if since else [f"--tail={int(tail)}"]
        c = ["-c", self.container] if self.container else []
        return [*self._kubectl(), "logs", "-f", "--timestamps", *self._ns(), *start, self.pod, *c]

    def main_env_words(self) -> str:
        return "the pod spec's env"

    def why_no_restart(self) -> str:
        return "a pod's main process restarts only in a new pod (kubectl delete pod)"

    def restart_refused(self) -> tuple[str, str]:
        ns = f" -n {self.namespace}" if self.namespace else ""
        return (
            f"{self.words} has no tmux session to relaunch, and a pod's main process starts "
            "over only in a new pod",
            f"`kubectl delete pod{ns} {self.pod}` on the host: its controller (Deployment, "
            "StatefulSet, Job) makes a new pod, and this one's log goes with it",
        )

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
