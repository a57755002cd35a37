"""Set up runs from the field in the test bed's stand-in CTs, and run
`gputui doctor` against them as a user would (a subprocess, through the real
sshd, with HOME's ~/.ssh/config naming `gpuhost`).

The runs are real: tmux inside the CT starts the fixture scripts from
tests/fixtures/runs/ (copied to the test bed's workspace, which the CT
sees), real python3 processes write real logs. The stand-in nvidia-smi's
state lists the training processes by their HOST pid, as nvidia-smi on a
Proxmox host does.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helpers

RUNS = Path(__file__).resolve().parent / "fixtures" / "runs"
CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
H200_MIB = 143771

# `gputui doctor ARGS…` in a fresh interpreter, through the CLI's own parser
# and config loading. Until cli.py dispatches `doctor` to doctor_run (its
# `doctor` still prints the connection facts only), the runner parses with
# the CLI and hands the Settings to doctor_run.main itself.
RUNNER = """\
import inspect, sys
from gputui.cli import main as cli
if "doctor_run" in inspect.getsource(cli):
    sys.exit(cli.main(sys.argv[1:]))
from gputui.doctor import run as doctor_run
args, settings = cli.parse(sys.argv[1:])
sys.exit(doctor_run.main(settings, bool(args.json)))
"""


def have_smi_standin(testbed: Any) -> bool:
    return (Path(testbed.bin_dir) / "nvidia-smi").exists()


# ------------------------------------------------------------------ runs


@dataclass
class Run:
    """One run in one CT: its directory (seen at the same path in the CT),
    its tmux session and the log the user thinks it writes."""

    name: str
    ct: int
    dir: Path
    session: str
    log: Path
    launched: float = 0.0  # time.monotonic() at launch
    host_pid: int | None = None  # of the training python process, as the host sees it

    def path(self, name: str) -> str:
        return str(self.dir / name)


def prepare(testbed: Any, ct: int, name: str, session: str, log: str = "train.log") -> Run:
    """A fresh run directory in the workspace with the fixture scripts in it."""
    d = Path(testbed.workspace) / f"e2e-{name}-{ct}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    d.chmod(0o777)
    for src in RUNS.iterdir():
        if src.is_file():
            dst = d / src.name
            shutil.copyfile(src, dst)
            dst.chmod(0o755 if src.suffix == ".sh" else 0o644)
    return Run(name=name, ct=ct, dir=d, session=session, log=d / log)


def tmux_in_ct(testbed: Any, ct: int, *args: str) -> None:
    """tmux inside the CT with a clean environment (no PYTHONUNBUFFERED from ours)."""
    r = testbed.ct_exec(
        ct, ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "TERM=xterm", "tmux", *args]
    )
    assert r.returncode == 0, f"tmux {args}: {r.stderr}"


def launch(testbed: Any, run: Run, command: str, *, remain_on_exit: bool = False) -> None:
    """`tmux new -d -s SESSION COMMAND` in the run's CT, in its directory;
    with remain-on-exit set in the same tmux call (as it must be)."""
    args = ["new", "-d", "-s", run.session, "-c", str(run.dir), command]
    run.launched = time.monotonic()
    if not remain_on_exit:
        tmux_in_ct(testbed, run.ct, *args)
        return
    args += [";", "set", "-p", "-t", run.session, "remain-on-exit", "on"]

    def tmux(a: list[str]) -> Any:
        env = ["env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "TERM=xterm"]
        return testbed.ct_exec(run.ct, [*env, "tmux", *a])

    # a run that dies at once: retry until tmux records its exit status
    helpers.dead_pane_with_status(tmux, run.session, lambda: tmux_in_ct(testbed, run.ct, *args))


def without_commands(testbed: Any, ct: int, *names: str) -> None:
    """Make the CT lack `names` (e.g. tmux, python3*), as a minimal template
    does: in the CT's own mount namespace /usr/bin becomes a tmpfs of links
    to every other program of the real one."""
    real = Path(testbed.root) / f"usr-bin-of-{ct}"
    real.mkdir(exist_ok=True)
    skip = "|".join(names)
    script = (
        f"set -e; mount --bind /usr/bin {real}; mount -t tmpfs none /usr/bin; "
        f'for f in {real}/*; do b=${{f##*/}}; case "$b" in {skip}) ;; '
        f'*) {real}/ln -s "$f" "/usr/bin/$b";; esac; done'
    )
    r = testbed.ct_exec(ct, ["/bin/sh", "-c", script])
    assert r.returncode == 0, r.stderr
    r = testbed.ct_exec(ct, ["/bin/sh", "-c", "command -v tmux python3 || true"])
    assert not any(n in r.stdout for n in names), r.stdout


def tee_command(script: str, log: str) -> str:
    """The field's launch line: `bash start.sh 2>&1 | tee log`."""
    return f"bash {shlex.quote(script)} 2>&1 | tee {shlex.quote(log)}"


def host_pids(needle: str) -> list[int]:
    """Host PIDs of processes whose argv contains `needle` (a unique path)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(needle.encode() == a or a.endswith(b"/" + needle.encode()) for a in argv):
            out.append(int(entry))
    return out


def wait_python(run: Run, script: str, timeout: float = 10.0) -> int:
    """Wait for the run's python3 process and return its HOST pid."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [
            p
            for p in host_pids(script)
            if Path(f"/proc/{p}/cwd").exists() and os.readlink(f"/proc/{p}/cwd") == str(run.dir)
        ]
        if pids:
            run.host_pid = min(pids)
            return run.host_pid
        time.sleep(0.05)
    raise AssertionError(f"{run.name}: python3 {script} did not start")


# ------------------------------------------------------------------ GPUs


def gpu(index: int, mem_mib: float, util: float) -> dict[str, Any]:
    """One stand-in GPU reading (an H200 at the given load)."""
    busy = util >= 50
    return {
        "index": index,
        "name": "NVIDIA H200",
        "uuid": f"GPU-e2e0000{index}",
        "memory.used": mem_mib,
        "memory.total": H200_MIB,
        "utilization.gpu": util,
        "temperature.gpu": 61 if busy else 34,
        "power.draw": 684.0 if busy else 118.0,
        "power.limit": 700,
        "clocks.sm": 1980 if busy else 345,
    }


def app(host_pid: int, index: int, mem_mib: float) -> dict[str, Any]:
    return {
        "pid": host_pid,
        "process_name": "python3",
        "used_memory": mem_mib,
        "gpu_uuid": f"GPU-e2e0000{index}",
    }


# ------------------------------------------------------------------ doctor


@dataclass
class DoctorResult:
    argv: list[str]
    rc: int
    stdout: str
    stderr: str
    elapsed: float
    finished: float  # time.monotonic() when it exited
    doc: dict[str, Any] | None = field(default=None)

    def kinds(self) -> list[str]:
        assert self.doc is not None, self.stdout + self.stderr
        return [f["kind"] for f in self.doc["findings"]]

    def finding(self, kind: str) -> dict[str, Any]:
        assert self.doc is not None, self.stdout + self.stderr
        for f in self.doc["findings"]:
            if f["kind"] == kind:
                return f
        raise AssertionError(f"no {kind} finding in {self.kinds()}:\n{self.stdout}\n{self.stderr}")

    def evidence(self, kind: str) -> str:
        f = self.finding(kind)
        return "\n".join([f["title"], *f["evidence"], f["fix"]])


def user_home(testbed: Any) -> Path:
    """An empty HOME: no ~/.ssh/config, no ~/.config/gputui; everything the
    doctor knows about `gpuhost` comes from the config file it is given."""
    home = Path(testbed.root) / "e2e-home"
    home.mkdir(parents=True, exist_ok=True)
    return home


def config_file(testbed: Any) -> Path:
    """A gputui config naming the test bed's ssh_config (Host gpuhost → 127.0.0.1)."""
    path = Path(testbed.root) / "e2e-gputui.toml"
    text = f"[ssh]\nconfig = {json.dumps(str(testbed.ssh_config_path))}\n"
    if not path.exists() or path.read_text() != text:
        # Written whole and renamed into place: doctors started a moment ago
        # read it while the next one is started (a write_text in place left
        # one reading an empty file: "unknown host 'gpuhost'", loaded CI run l).
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def doctor_env(testbed: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GPUTUI"))}
    # this checkout's gputui, not the one the venv's editable install names
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    env["HOME"] = str(user_home(testbed))
    env.pop("SSH_AUTH_SOCK", None)
    return env


def doctor_argv(testbed: Any, ct: int, *flags: str) -> list[str]:
    """`gputui doctor --host gpuhost --ct N --config CFG FLAGS…` as argv."""
    where = ["--host", "gpuhost", "--ct", str(ct), "--config", str(config_file(testbed))]
    return [sys.executable, "-c", RUNNER, "doctor", *where, *flags]


def start_doctor(testbed: Any, ct: int, *flags: str) -> tuple[subprocess.Popen[str], float]:
    argv = doctor_argv(testbed, ct, *flags)
    proc = subprocess.Popen(
        argv,
        env=doctor_env(testbed),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    return proc, time.monotonic()


def finish_doctor(
    started: tuple[subprocess.Popen[str], float], timeout: float = 30.0
) -> DoctorResult:
    proc, t0 = started
    out, err = proc.communicate(timeout=timeout)
    finished = time.monotonic()
    elapsed = finished - t0
    doc = None
    if "--json" in proc.args:  # type: ignore[operator]
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
    return DoctorResult(list(proc.args), proc.returncode, out, err, elapsed, finished, doc)  # type: ignore[arg-type]
