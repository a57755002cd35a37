"""The `--demo` environment: real local parts, simulated GPUs.

- a private tmux server (TMUX_TMPDIR points at a directory of our own, so
  the user's tmux is never touched; every tmux that gputui starts — the
  agent's, the actions', `attach` — inherits it);
- the shipped `train.py` copied into the demo directory and launched as
  `python3 train.py 2>&1 | tee -a <dir>/train.log` in tmux session
  `demo-train` (block-buffered stdout: the failure the banner explains);
- `SimulatedGpus` (8 × H200) whose load follows the script's `phase.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gputui.config import DEFAULTS, RunConfig, Settings
from gputui.errors import GputuiError

SESSION = "demo-train"
GPUS = 8
STALE_AFTER_S = 20.0  # the demo says "silent" sooner than a real run would
METRIC_REGEX = r"step (?P<step>\d+) \| loss (?P<loss>[\d.]+) \| tok/s (?P<throughput>[\d.,]+)"
LOAD = {"loading": 0.12, "training": 0.97}
SOCKET_PATH_MAX = 100  # bytes: sun_path is 108 with its NUL, less on some systems


def default_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "gputui" / "demo"


@dataclass
class DemoEnvironment:
    root: Path = field(default_factory=default_dir)

    @property
    def tmux_dir(self) -> Path:
        """TMUX_TMPDIR of the demo's own server. A socket path is at most
        ~107 bytes (sun_path): under a long state directory (a deep
        $XDG_STATE_HOME, a test's tmp path) tmux said "File name too long" and
        the demo did not start, so the server then lives in a short private
        directory under /tmp instead (checked: ours, 0700, not a link)."""
        own = self.root / "tmux"
        if len(os.fsencode(own / f"tmux-{os.getuid()}" / "default")) <= SOCKET_PATH_MAX:
            return own
        tag = hashlib.sha256(os.fsencode(self.root)).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"gputui-demo-{os.getuid()}-{tag}"

    def _make_tmux_dir(self) -> None:
        d = self.tmux_dir
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise GputuiError(
                f"the demo's tmux directory {d} is not a private directory of this user "
                f"(someone else made it, or it is a link) — remove it, or set XDG_STATE_HOME "
                "to a shorter path"
            )

    @property
    def log(self) -> Path:
        return self.root / "train.log"

    @property
    def script(self) -> Path:
        return self.root / "train.py"

    @property
    def command(self) -> str:
        return f"python3 train.py 2>&1 | tee -a {shlex.quote(str(self.log))}"

    def env(self) -> dict[str, str]:
        # no TMUX (we are not inside the user's tmux), and no PYTHONUNBUFFERED:
        # the demo run must start block-buffered like a real one behind `| tee`
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "PYTHONUNBUFFERED")}
        env["TMUX_TMPDIR"] = str(self.tmux_dir)
        return env

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        if shutil.which("tmux") is None:
            raise GputuiError("the demo needs tmux, and tmux is not installed", "apt install tmux")
        done = subprocess.run(
            ["tmux", *args], env=self.env(), capture_output=True, text=True, timeout=10
        )
        if check and done.returncode != 0:  # tmux's own words, not a traceback
            said = " ".join(done.stderr.split()) or f"exit {done.returncode}"
            raise GputuiError(
                f"the demo's tmux {args[0]} failed: {said}",
                f"check that tmux works: TMUX_TMPDIR={self.tmux_dir} tmux ls",
            )
        return done

    def prepare(self) -> None:
        """Fresh demo: stop an old demo server, keep old logs (moved aside), copy the script."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._make_tmux_dir()
        self.tmux("kill-server", check=False)
        if self.log.exists():
            self.log.rename(self.root / f"train.log.{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copyfile(Path(__file__).with_name("train.py"), self.script)
        (self.root / "phase.json").unlink(missing_ok=True)

    def launch(self) -> None:
        """Start the buffered run the way people do: tmux + `| tee`."""
        self.tmux(
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            "160",
            "-y",
            "40",
            "-c",
            str(self.root),
            "bash",
            "-c",
            self.command,
            ";",
            "set-option",
            "-p",
            "-t",
            f"={SESSION}:",
            "remain-on-exit",
            "on",
        )

    def apply_env(self) -> None:
        """Point every tmux this process starts at the private server."""
        os.environ["TMUX_TMPDIR"] = str(self.tmux_dir)
        os.environ.pop("TMUX", None)
        # py-spy installed next to gputui (same venv) should be found by `d`
        bindir = str(Path(sys.executable).parent)
        if bindir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")

    def load(self) -> float:
        """0..1 for SimulatedGpus: what the demo run is doing right now."""
        try:
            state = json.loads((self.root / "phase.json").read_text())
            pid = int(state["pid"])
            os.kill(pid, 0)
        except (OSError, ValueError, KeyError):
            return 0.0
        return LOAD.get(str(state.get("phase")), 0.0)

    def settings(self, base: Settings | None = None) -> Settings:
        """Settings for the monitor and the actions: this machine, our session and log."""
        b = base if base is not None else Settings()
        return dataclasses.replace(
            b,
            host=None,
            ct_id=None,
            local=True,
            demo=True,
            session=SESSION,
            log=str(self.log),
            interval=b.interval or DEFAULTS.interval,
            # --stale-after still wins
            diagnosis=dataclasses.replace(
                b.diagnosis, stale_after=b.diagnosis.stale_after or STALE_AFTER_S
            ),
            metric_regexes=[METRIC_REGEX],
            run=RunConfig(
                command="python3 train.py",
                cwd=str(self.root),
                session=SESSION,
                log=str(self.log),
                env={},
            ),
        )

    def teardown(self) -> None:
        """Quit: stop the demo run and its private tmux server."""
        self.tmux("kill-server", check=False)
