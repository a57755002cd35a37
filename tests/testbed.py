"""The test bed: a real OpenSSH sshd on 127.0.0.1 plus the stand-in `pct` and `nvidia-smi`.

Everything lives under one directory in /var/tmp (not /tmp: containers get a
private /tmp), so paths are visible both on the "host" and inside CTs:

    root/ssh/        host key, client key, authorized_keys, known_hosts, ssh_config, sshd_config, sshd.log
    root/bin/        copies of tests/standins/* (on the PATH of every ssh session via sshd SetEnv)
    root/state/      stand-in state (CT configs and runtime, pct delay, nvidia-smi gpus.json)
    root/workspace/  for tests' logs and scripts (visible on the host and inside CTs)

Fixtures (tests/conftest.py): `testbed` (session) is a started Testbed; `ct` (function) is a
fresh running CT number (200, 201, ...), destroyed afterwards with every process in it.

Behaviour worth knowing:
- every ssh session gets PATH=<bin_dir>:... and GPUTUI_STANDIN_STATE=<state_dir> (sshd SetEnv);
  root's ~/.bashrc may prepend more to PATH, so `pct`/`nvidia-smi` resolve to the stand-ins.
- `pct` sleeps 0.3 s per call (like the Perl original) unless set_pct_delay() says otherwise;
  ct_create/ct_start/ct_stop/ct_exec skip that delay.
- `pct exec` keeps the caller's environment and cwd (/root over ssh); killing the host-side
  `pct exec` does not stop the command inside the CT (lxc-attach does not forward signals).
- stop() ends sshd, its sessions and any process whose environment names our state dir.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

STANDINS = Path(__file__).resolve().parent / "standins"
DOCKER_TOOLS = ("docker", "podman", "kubectl")  # one stand-in, three names
SSHD = "/usr/sbin/sshd"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def closed_port() -> int:
    """A loopback port that refuses connections (for 'closed port' tests)."""
    return free_port()


class Testbed:
    """A private sshd on 127.0.0.1 and the stand-ins it serves. Use `start()`/`stop()`."""

    __test__ = False  # not a test class, despite the name
    host = "127.0.0.1"
    user = "root"
    alias = "gpuhost"

    def __init__(
        self,
        root: Path | None = None,
        *,
        extra_env: dict[str, str] | None = None,
        container_tool: bool = True,
        docker: bool | None = None,
    ) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="gputui-testbed-", dir="/var/tmp"))
        self.ssh_dir = self.root / "ssh"
        self.bin_dir = self.root / "bin"
        self.state_dir = self.root / "state"
        self.workspace = self.root / "workspace"
        self.home = self.root / "home"  # HOME of every ssh session: no tester's dotfiles
        self.key_path = self.ssh_dir / "id_ed25519"
        self.host_key_path = self.ssh_dir / "ssh_host_ed25519_key"
        self.authorized_keys_path = self.ssh_dir / "authorized_keys"
        self.known_hosts_path = self.ssh_dir / "known_hosts"
        self.ssh_config_path = self.ssh_dir / "ssh_config"
        self.sshd_config_path = self.ssh_dir / "sshd_config"
        self.sshd_log_path = self.ssh_dir / "sshd.log"
        self.port = 0
        self.host_key_line = ""
        self.startup_seconds = 0.0
        self._sshd: subprocess.Popen[bytes] | None = None
        # More environment for every ssh session (e.g. a private TMUX_TMPDIR),
        # and whether `pct` is installed (False: a plain GPU server).
        self.extra_env = dict(extra_env or {})
        self.container_tool = container_tool
        # `docker`, `podman` and `kubectl` stand-ins (default: with pct)
        self.docker_tools = container_tool if docker is None else docker
        self._cts: set[int] = set()
        self._containers: set[tuple[str, str]] = set()  # (tool, name); kubectl: NS/POD

    # ---------------------------------------------------------------- sshd

    def start(self) -> Testbed:
        t0 = time.monotonic()
        for d in (self.ssh_dir, self.bin_dir, self.state_dir, self.workspace, self.home):
            d.mkdir(parents=True, exist_ok=True)
        os.chmod(self.ssh_dir, 0o700)
        self.workspace.chmod(0o777)
        self._install_standins()
        self._keys()
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # privilege separation dir
        last_err = ""
        for _ in range(5):  # a port picked free may be taken by someone else before sshd binds it
            self.port = free_port()
            self._write_configs()
            try:
                self._launch()
                break
            except RuntimeError as e:
                last_err = str(e)
        else:
            raise RuntimeError(f"sshd did not start: {last_err}")
        self.startup_seconds = time.monotonic() - t0
        return self

    def _install_standins(self) -> None:
        for src in STANDINS.iterdir():
            if src.name == "pct" and not self.container_tool:
                continue
            if src.name in DOCKER_TOOLS and not self.docker_tools:
                continue
            if src.is_file() and not src.name.startswith("."):
                dst = self.bin_dir / src.name
                shutil.copyfile(src, dst)
                dst.chmod(0o755)
        (self.bin_dir / ".standin-state").write_text(str(self.state_dir) + "\n")

    def _keys(self) -> None:
        for path, comment in (
            (self.host_key_path, "gputui-testbed-host"),
            (self.key_path, "gputui-testbed-client"),
        ):
            if not path.exists():
                subprocess.run(
                    ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                    check=True,
                    stdin=subprocess.DEVNULL,
                )
        self.authorized_keys_path.write_text(Path(str(self.key_path) + ".pub").read_text())
        pub = Path(str(self.host_key_path) + ".pub").read_text().split()
        self.host_key_line = f"{pub[0]} {pub[1]}"

    def _write_configs(self) -> None:
        path_value = f"{self.bin_dir}:{BASE_PATH}"
        self.sshd_config_path.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {self.host_key_path}",
                    f"PidFile {self.ssh_dir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.authorized_keys_path}",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "StrictModes no",
                    "UsePAM no",
                    "MaxSessions 10",
                    "MaxStartups 100:30:200",
                    "PrintMotd no",
                    "PrintLastLog no",
                    "UseDNS no",
                    "LogLevel INFO",
                    f"SetEnv PATH={path_value} GPUTUI_STANDIN_STATE={self.state_dir}"
                    f" HOME={self.home}" + "".join(f" {k}={v}" for k, v in self.extra_env.items()),
                    "Subsystem sftp internal-sftp",
                    "",
                ]
            )
        )
        self.known_hosts_path.write_text(f"[{self.host}]:{self.port} {self.host_key_line}\n")
        self.ssh_config_path.write_text(
            "\n".join(
                [
                    f"Host {self.alias}",
                    f"    HostName {self.host}",
                    f"    Port {self.port}",
                    f"    User {self.user}",
                    f"    IdentityFile {self.key_path}",
                    "    IdentitiesOnly yes",
                    f"    UserKnownHostsFile {self.known_hosts_path}",
                    "    StrictHostKeyChecking yes",
                    "",
                ]
            )
        )

    def _launch(self) -> None:
        log = open(self.sshd_log_path, "ab")  # noqa: SIM115 - kept open by the child
        self._sshd = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.sshd_config_path)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._sshd.poll() is not None:
                tail = self.sshd_log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"sshd exited {self._sshd.returncode}: {tail}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-2.0-"):
                        return
            except OSError:
                pass
            time.sleep(0.01)
        self._kill_sshd()
        raise RuntimeError("sshd did not accept connections within 10 s")

    def _kill_sshd(self) -> None:
        proc, self._sshd = self._sshd, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)

    @property
    def sshd_pid(self) -> int | None:
        """PID of the running sshd (None when stopped)."""
        return self._sshd.pid if self._sshd is not None and self._sshd.poll() is None else None

    def stop(self) -> None:
        """Destroy every CT made here, stop sshd and its sessions, kill what still runs with our
        stand-in state in its environment (e.g. a stream a test never closed), delete the files."""
        for ct in sorted(self._cts):
            self.ct_destroy(ct)
        for tool, name in sorted(self._containers):
            self.container_stop(tool, name)
        sessions = self._children(self._sshd.pid) if self._sshd is not None else []
        self._kill_sshd()
        for pid in sessions:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        self._kill_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)

    def host_down(self) -> None:
        """The host goes off the network: sshd and every ssh session end (and
        what they ran: a `pct exec` agent sees its stdin close); CTs and what
        runs in them stay."""
        sessions = self._children(self._sshd.pid) if self._sshd is not None else []
        self._kill_sshd()
        for pid in sessions:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def host_up(self) -> None:
        """The host is back: sshd again on the same port, with the same keys."""
        self._launch()

    @staticmethod
    def _children(ppid: int) -> list[int]:
        kids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == ppid:
                kids.append(int(entry))
        return kids

    def _kill_leftovers(self) -> None:
        """SIGKILL processes started through this test bed (their environment names our state dir)."""
        marker = f"GPUTUI_STANDIN_STATE={self.state_dir}".encode()
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker in env.split(b"\0"):
                with contextlib.suppress(OSError):
                    os.kill(int(entry), signal.SIGKILL)

    # ---------------------------------------------------------------- clients

    def ssh_options(self, **overrides: Any) -> dict[str, Any]:
        """kwargs for `asyncssh.connect(**tb.ssh_options())`."""
        opts: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "username": self.user,
            "client_keys": [str(self.key_path)],
            "known_hosts": str(self.known_hosts_path),
            "config": [str(self.ssh_config_path)],
            "agent_path": None,
        }
        opts.update(overrides)
        return opts

    def ssh_argv(self, *remote: str) -> list[str]:
        """argv for the OpenSSH client to run `remote` (already one shell string per word) here."""
        return ["ssh", "-F", str(self.ssh_config_path), "-o", "BatchMode=yes", self.alias, *remote]

    def transport_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Settings-style fields naming this server (host, port, user, identity_file, known_hosts)."""
        kw: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "identity_file": str(self.key_path),
            "known_hosts": str(self.known_hosts_path),
        }
        kw.update(overrides)
        return kw

    def transport(self, **overrides: Any) -> Any:
        """An SshTransport (not yet connected) for this server."""
        from gputui.remote.ssh import SshTransport  # imported late: owned by the transport helper

        return SshTransport(**self.transport_kwargs(**overrides))

    def env(self) -> dict[str, str]:
        """Environment an ssh session here gets (PATH with the stand-ins, state dir)."""
        env = dict(os.environ)
        env.update(self.extra_env)
        env["PATH"] = f"{self.bin_dir}:{BASE_PATH}"
        env["GPUTUI_STANDIN_STATE"] = str(self.state_dir)
        return env

    # ---------------------------------------------------------------- containers

    def _pct(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = self.env()
        env["GPUTUI_PCT_DELAY"] = "0"  # set-up never waits for the simulated Perl start-up
        proc = subprocess.run(
            [str(self.bin_dir / "pct"), *args],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd="/",
        )
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"pct {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
            )
        return proc

    def ct_conf_path(self, ct: int) -> Path:
        node = os.uname().nodename.split(".")[0]
        return self.state_dir / "pve" / "nodes" / node / "lxc" / f"{ct}.conf"

    def ct_create(self, ct: int, running: bool = True, unprivileged: bool = False) -> int:
        """A CT; unprivileged: in a user namespace of its own, its uid 0 the
        host's 100000 (the stand-in pct's `unprivileged: 1`)."""
        conf = self.ct_conf_path(ct)
        conf.parent.mkdir(parents=True, exist_ok=True)
        unpriv = "unprivileged: 1\n" if unprivileged else ""
        conf.write_text(f"arch: amd64\nhostname: ct{ct}\nmemory: 2048\nostype: debian\n{unpriv}")
        self._cts.add(ct)
        if running:
            self.ct_start(ct)
        return ct

    def ct_start(self, ct: int) -> None:
        self._pct("start", str(ct))

    def ct_stop(self, ct: int) -> None:
        if self.ct_running(ct):
            self._pct("stop", str(ct))

    def ct_running(self, ct: int) -> bool:
        return self._pct("status", str(ct), check=False).stdout.strip() == "status: running"

    def ct_init_pid(self, ct: int) -> int | None:
        """Host PID of the CT's init (PID 1 inside it), or None when stopped."""
        try:
            info = json.loads((self.state_dir / "lxc" / f"{ct}.json").read_text())
        except (OSError, ValueError):
            return None
        return int(info["init_pid"]) if self.ct_running(ct) else None

    def ct_destroy(self, ct: int) -> None:
        """Stop the CT (killing every process in it) and delete its config."""
        if self.ct_conf_path(ct).exists():
            self.ct_stop(ct)
            self.ct_conf_path(ct).unlink(missing_ok=True)
        for suffix in (".json", ".log"):
            (self.state_dir / "lxc" / f"{ct}{suffix}").unlink(missing_ok=True)
        self._cts.discard(ct)

    def ct_exec(
        self, ct: int, argv: list[str], *, input: str | None = None, timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        """Run argv inside the CT directly (no ssh, no delay): for test set-up."""
        env = self.env()
        env["GPUTUI_PCT_DELAY"] = "0"
        return subprocess.run(
            [str(self.bin_dir / "pct"), "exec", str(ct), "--", *argv],
            env=env,
            capture_output=True,
            text=True,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            timeout=timeout,
            cwd="/root" if os.path.isdir("/root") else "/",
        )

    def use_cgroups(self, on: bool = True) -> None:
        """Put CTs started from now on in cgroups `/lxc/<CT>/ns` as Proxmox VE does
        (where this machine lets root make cgroup2 groups; else a no-op). Off by
        default: then only a CT's PID namespace tells its processes apart."""
        flag = self.state_dir / "cgroups"
        if on:
            flag.write_text("1\n")
        else:
            flag.unlink(missing_ok=True)

    def count_pct_calls(self) -> None:
        """From now on every `pct` call appends `COMMAND [VMID]` to a log (see
        pct_calls); calling it again starts the count afresh."""
        (self.state_dir / "pct-called.log").write_text("")

    def pct_calls(self) -> list[str]:
        """`COMMAND [VMID]` of each `pct` call since count_pct_calls()."""
        return [line.split("\t", 1)[0] for line in self.pct_call_details()]

    def pct_call_details(self) -> list[str]:
        """Each `pct` call since count_pct_calls(): `COMMAND [VMID]`, a tab,
        the rest of its arguments (what an exec ran; 300 characters)."""
        try:
            return (self.state_dir / "pct-called.log").read_text().splitlines()
        except OSError:
            return []

    def set_pct_delay(self, seconds: float) -> None:
        """Start-up delay of every `pct` call made through ssh (default 0.3 s)."""
        self._atomic_write(self.state_dir / "pct-delay", f"{seconds}\n")

    def hold_pct(self, seconds: float) -> None:
        """No `pct` call made through ssh ends before `seconds` from now (each
        sleeps until then, after its start-up delay): a host busy for a
        while, however many calls a reader makes meanwhile. 0 lifts it,
        and the calls held now end at once."""
        until = time.time() + seconds if seconds > 0 else 0.0
        self._atomic_write(self.state_dir / "pct-hold-until", f"{until}\n")

    # ---------------------------------------------------------------- docker, podman, kubectl

    def _tool(
        self, tool: str, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(self.bin_dir / tool), *args],
            env={**self.env(), "HOME": str(self.home)},
            capture_output=True,
            text=True,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            cwd="/",
            timeout=60,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc

    def container_create(self, tool: str, name: str, *cmd: str) -> str:
        """A running Docker/Podman container NAME (`docker run -d --name NAME
        IMAGE [CMD]`: PID 1 a reaper, or CMD); kubectl: NAME is NS/POD/C,..
        (written to a kubeconfig in the sessions' HOME first). The container ID."""
        self._containers.add((tool, name))
        if tool == "kubectl":
            self.kubeconfig()
            ns, pod, containers = name.split("/")
            self._tool(tool, "stand-in-pod", ns, pod, containers)
            return pod
        return self._tool(tool, "run", "-d", "--name", name, "img", *cmd).stdout.strip()

    def container_stop(self, tool: str, name: str) -> None:
        if tool == "kubectl":
            self._tool(tool, "stand-in-pod-stop", *name.split("/")[:2], check=False)
        else:
            self._tool(tool, "stop", name, check=False)

    def container_start(self, tool: str, name: str) -> None:
        self._tool(tool, "start", name)

    def container_exec(
        self, tool: str, name: str, argv: list[str], *, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run argv inside the container directly (no ssh): for test set-up."""
        if tool == "kubectl":
            ns, pod = name.split("/")[:2]
            return self._tool(
                tool, "exec", "-i", "-n", ns, pod, "--", *argv, check=False, input=input
            )
        return self._tool(tool, "exec", "-i", name, *argv, check=False, input=input)

    def kubeconfig(self, context: str = "testbed") -> Path:
        """~/.kube/config of the ssh sessions (kubectl's default): one context."""
        path = self.home / ".kube" / "config"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(
                "apiVersion: v1\nkind: Config\ncontexts:\n"
                f"- name: {context}\n  context:\n    cluster: testbed\n"
                f"current-context: {context}\n"
            )
        return path

    # ---------------------------------------------------------------- GPUs

    def set_gpus(self, state: dict[str, Any]) -> None:
        """Write the stand-in nvidia-smi's state (read afresh every call and every loop period).

        {"gpus": [{"index": 0, "name": "NVIDIA H200", "memory.used": 1395, ...}, ...],
         "apps": [{"pid": 1234, "process_name": "python", "used_memory": 1000, "gpu_uuid": "GPU-..."}],
         "events": ["Xid 79 ..."], "lost": false}
        See tests/standins/nvidia-smi for every key and default.
        """
        self._atomic_write(self.state_dir / "gpus.json", json.dumps(state, indent=1))

    def kernel_says(self, text: str) -> None:
        """Append a line to the stand-in kernel log (tests/standins/dmesg),
        stamped as the kernel stamps it (seconds since boot, /proc/uptime):
        `dmesg -w` / `journalctl -kf` on the test bed print it."""
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        with open(self.state_dir / "kmsg", "a") as f:
            f.write(f"[{up:12.6f}] {text}\n")

    def kernel_permits(
        self, dmesg: str = "ok", journalctl: str = "ok", dmesg_version: str = "new"
    ) -> None:
        """What the stand-in kernel-log tools allow: "ok", or "denied" (their
        real error texts: dmesg's `Operation not permitted`, journalctl's hint);
        `dmesg_version` "old": a dmesg without -W (before util-linux 2.37)."""
        state = {"dmesg": dmesg, "journalctl": journalctl, "dmesg_version": dmesg_version}
        self._atomic_write(self.state_dir / "kernel.json", json.dumps(state))

    def _atomic_write(self, path: Path, text: str) -> None:
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
