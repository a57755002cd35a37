"""The soak: gputui watching a run for a long time while the world misbehaves.

On the real-sshd test bed (tests/testbed.py), a run in tmux inside a stand-in
CT writes `step N loss X` at RATE lines/s to a log on a small tmpfs of the
CT's own (so the disk can fill). Watching it over SSH, for --minutes:

- `gputui watch` (a child of this script), and
- the dashboard, read-only, in a tmux server of this script's own;

both record into one history file. Faults come one at a time on a schedule
(round robin, one every --every seconds): sshd restarted (sessions kept), the
connection cut (sshd and every session killed, back 3 s later), the CT
stopped and started (the run restarted afterwards), the log rotated,
truncated and deleted, the disk filled and freed, the run's tmux server
killed (the run restarted), a history reader (`gputui history --json` and
the sqlite3 CLI in a loop) beside it, a `gputui serve --demo` tab opened and
gone after 1 s, and the dashboard's terminal resized. All the while a
reader opens the history read-only every 0.5 s.

Measured, every --sample seconds: RSS, open FDs, threads and CPU time of
every gputui process (watch, dashboard, serve and its tabs, and gputui's
helpers on the test bed's host). Per fault: how long until the history holds
a line written after it, and the CPU watch and the dashboard spent meanwhile.
At the end (and every 5 minutes, for a soak stopped early): every line the
run wrote (its ledger: seq, time, written or refused by a full disk) against
the history's metric points — each once, none twice, and each missing range
named by the fault that destroyed it before gputui's next read (truncated,
deleted, CT stopped, disk full), or counted as lost. The dashboard's screen
is captured each sample: the steps on it in order, none twice.

    python bench/soak.py --minutes 120 --out bench/results/soak-long.json
    python bench/soak.py --short          # ~1.5 min, every fault once (CI)

Everything talks to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from testbed import Testbed  # noqa: E402

PY = sys.executable
SRC = str(ROOT / "src")
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SESSION = "soak"
DISK_MB = 32
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
STEP = re.compile(r"\bstep (\d+) loss")

# the run: appends a line at RATE/s to LOG by path (a rotated or deleted log
# is followed to the new file, as a logging handler that reopens does), and
# a ledger line per step (seq, time, bytes written; 0: refused, disk full)
WRITER = r"""
import os, sys, time
log, ledger, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
seq = 0
if os.path.exists(ledger):
    with open(ledger) as f:
        for line in f:
            if line.strip():
                seq = max(seq, int(line.split()[0]))
led = open(ledger, "a", buffering=1)
fd, ino = -1, None
period, nxt = 1.0 / rate, time.time()
while True:
    try:
        now_ino = os.stat(log).st_ino
    except OSError:
        now_ino = None
    if fd < 0 or now_ino != ino:
        if fd >= 0:
            os.close(fd)
        try:
            fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            ino = os.fstat(fd).st_ino
        except OSError:
            fd = -1
    seq += 1
    t = time.time()
    data = ("step %d loss %.6f t=%.3f\n" % (seq, 1.0 / seq, t)).encode()
    try:
        n = os.write(fd, data) if fd >= 0 else 0
    except OSError:
        n = 0
    led.write("%d %.3f %d %d\n" % (seq, t, n, len(data)))
    nxt += period
    time.sleep(max(0.0, nxt - time.time()))
"""


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = Path(tempfile.mkdtemp(prefix="gputui-soak-", dir="/var/tmp"))
        self.state = self.dir / "state"
        self.home = self.dir / "home"
        self.db = self.dir / "history.sqlite"
        self.out_path = Path(args.out)
        self.t0 = time.time()
        self.samples: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []
        self.crashes: list[dict[str, Any]] = []
        self.screen: dict[str, Any] = {"captures": 0, "out_of_order": [], "doubled": []}
        self.reader = {"opens": 0, "errors": []}
        self.stop_reader = threading.Event()
        self.watch: subprocess.Popen[bytes] | None = None
        self.serve: subprocess.Popen[bytes] | None = None
        self.serve_url = ""
        self.restarts = {"watch": 0, "dashboard": 0}
        self.soak_errors: list[str] = []
        self.tmux_sock = self.dir / "tmux.sock"

    # ------------------------------------------------------------ set-up

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "GPUTUI"))}
        env.update(PYTHONPATH=SRC, HOME=str(self.home), XDG_STATE_HOME=str(self.state))
        env["SOAK_MARK"] = str(self.dir)
        env.pop("SSH_AUTH_SOCK", None)
        env.pop("TMUX", None)
        return env

    def start(self) -> None:
        self.home.mkdir(parents=True)
        self.bed = Testbed().start()
        self.ct = self.bed.ct_create(self.args.ct)
        self.run_dir = Path(self.bed.workspace) / "soak"
        self.run_dir.mkdir(mode=0o777)
        (self.run_dir / "writer.py").write_text(WRITER)
        self.ledger = self.run_dir / "ledger.txt"
        self.disk = self.run_dir / "disk"
        self.log = self.disk / "train.log"
        self.config = self.dir / "gputui.toml"
        self.config.write_text(
            f"[ssh]\nconfig = {json.dumps(str(self.bed.ssh_config_path))}\n"
            f"[history]\npath = {json.dumps(str(self.db))}\n"
            f"log_every = {self.args.log_every}\n"
        )
        self.mount_disk()
        self.start_run()
        self.start_watch()
        self.start_dashboard()
        if CHROMIUM and "serve_tab" in self.args.faults:
            self.start_serve()
        threading.Thread(target=self.read_history_loop, daemon=True).start()

    def in_ct(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.bed.ct_exec(self.ct, list(argv), timeout=timeout)

    def mount_disk(self) -> None:
        d = shlex.quote(str(self.disk))
        r = self.in_ct(
            "/bin/sh",
            "-c",
            f"mkdir -p {d} && (mountpoint -q {d} || mount -t tmpfs -o size={DISK_MB}m,mode=0777 tmpfs {d})",
        )
        if r.returncode != 0:
            raise RuntimeError(f"tmpfs in the CT: {r.stderr.strip()}")

    def tmux_ct(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.in_ct(
            "env", "-i", f"PATH={CLEAN_PATH}", "HOME=/root", "TERM=xterm", "tmux", *args
        )

    def start_run(self) -> None:
        writer = [str(self.run_dir / "writer.py"), str(self.log), str(self.ledger)]
        cmd = shlex.join(["python3", "-u", *writer, str(self.args.rate)])
        r = self.tmux_ct("new", "-d", "-s", SESSION, "-c", str(self.run_dir), cmd)
        if r.returncode != 0 and "duplicate session" not in r.stderr:
            raise RuntimeError(f"tmux new in the CT: {r.stderr.strip()}")

    def target_flags(self) -> list[str]:
        return [
            *("--config", str(self.config), "--host", self.bed.alias, "--ct", str(self.ct)),
            *("--session", SESSION, "--log", str(self.log)),
        ]

    def start_watch(self) -> None:
        out = (self.dir / "watch.out").open("ab")
        self.watch = subprocess.Popen(
            [PY, "-m", "gputui", "watch", *self.target_flags()],
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()

    def tmux_local(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", str(self.tmux_sock), *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=30,
        )

    def start_dashboard(self) -> None:
        rc = self.dir / "dashboard.rc"
        rc.unlink(missing_ok=True)
        cmd = shlex.join([PY, "-m", "gputui", *self.target_flags(), "--read-only"])
        cmd += f"; echo $? > {shlex.quote(str(rc))}; sleep 100000"  # Textual draws on stderr
        self.tmux_local("kill-server")
        r = self.tmux_local("new-session", "-d", "-s", "dash", "-x", "160", "-y", "48", cmd)
        if r.returncode != 0:
            raise RuntimeError(f"local tmux: {r.stderr.strip()}")

    def start_serve(self) -> None:
        port = _free_port()
        out = self.dir / "serve.out"
        with out.open("ab") as f:
            self.serve = subprocess.Popen(
                [PY, "-m", "gputui", "serve", "--demo", "--bind", f"127.0.0.1:{port}"],
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not self.serve_url and time.monotonic() < deadline:
            m = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", out.read_text())
            self.serve_url = m.group(1) if m else ""
            time.sleep(0.2)

    # ------------------------------------------------------------ the world misbehaves

    def fault(self, name: str) -> dict[str, Any]:
        """Do one fault; returns what happened (its time, what it destroyed)."""
        rec: dict[str, Any] = {"fault": name, "t": round(time.time() - self.t0, 1)}
        rec["t0"] = time.time()
        seq_before = self.ledger_last()
        cpu0 = self.cpu_of_roles()
        getattr(self, f"do_{name}")(rec)
        rec["seq_at_fault"] = seq_before
        rec["seq_after"] = self.ledger_last()
        rec["recovery_s"] = self.wait_recovered(rec["seq_after"], self.args.recover_timeout)
        cpu1 = self.cpu_of_roles()
        rec["cpu_s"] = {k: round(cpu1.get(k, 0) - cpu0.get(k, 0), 2) for k in cpu1}
        rec["wall_s"] = round(time.time() - self.t0 - rec["t"], 1)
        return rec

    def do_sshd_restart(self, rec: dict[str, Any]) -> None:
        self.bed._kill_sshd()
        time.sleep(1)
        self.bed._launch()

    def do_connection_cut(self, rec: dict[str, Any]) -> None:
        self.bed.host_down()
        time.sleep(3)
        self.bed.host_up()

    def do_ct_restart(self, rec: dict[str, Any]) -> None:
        rec["destroys"] = True  # the tmpfs and the run go with the CT
        self.bed.ct_stop(self.ct)
        time.sleep(3)
        self.bed.ct_start(self.ct)
        self.mount_disk()
        self.start_run()

    def do_rotate(self, rec: dict[str, Any]) -> None:
        log = shlex.quote(str(self.log))
        r = self.in_ct("/bin/sh", "-c", f"rm -f {log}.1; mv {log} {log}.1")
        rec["ok"] = r.returncode == 0

    def do_truncate(self, rec: dict[str, Any]) -> None:
        rec["destroys"] = True
        rec["ok"] = self.in_ct("truncate", "-s", "0", str(self.log)).returncode == 0

    def do_delete(self, rec: dict[str, Any]) -> None:
        rec["destroys"] = True
        rec["ok"] = self.in_ct("rm", "-f", str(self.log)).returncode == 0

    def do_disk_full(self, rec: dict[str, Any]) -> None:
        rec["destroys"] = True  # a line cut short by the full disk tears the next one
        fill = shlex.quote(str(self.disk / "fill"))
        self.in_ct("/bin/sh", "-c", f"head -c {DISK_MB}M /dev/zero > {fill} 2>/dev/null; true")
        time.sleep(self.args.full_for)
        self.in_ct("rm", "-f", str(self.disk / "fill"))
        self.in_ct("/bin/sh", "-c", f"rm -f {shlex.quote(str(self.log))}.1")

    def do_tmux_kill(self, rec: dict[str, Any]) -> None:
        rec["ok"] = self.tmux_ct("kill-server").returncode == 0
        time.sleep(2)
        self.start_run()

    def do_history_reader(self, rec: dict[str, Any]) -> None:
        r = subprocess.run(
            [PY, "-m", "gputui", "history", self.bed.alias, "--json", "--config", str(self.config)],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        rec["history_rc"] = r.returncode
        if r.returncode != 0:
            rec["history_err"] = (r.stderr or r.stdout)[-300:]
        cli = shutil.which("sqlite3")
        for _ in range(50 if cli else 0):
            subprocess.run(
                [
                    cli or "sqlite3",
                    "-readonly",
                    str(self.db),
                    "SELECT count(*) FROM metric_points;",
                ],
                capture_output=True,
                timeout=60,
            )

    def do_serve_tab(self, rec: dict[str, Any]) -> None:
        if not (CHROMIUM and self.serve_url):
            rec["skipped"] = "no chromium or serve"
            return
        browser = subprocess.Popen(
            [
                *(CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"),
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                *(f"--user-data-dir={self.dir / 'chromium'}", "--window-size=1280,800"),
                *(f"--screenshot={self.dir / 'shot.png'}", self.serve_url),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        browser.kill()
        browser.wait()
        time.sleep(10)
        left = [p for p in self.processes() if p["role"] == "serve-tab"]
        rec["serve_children_after_10s"] = len(left)

    def do_resize(self, rec: dict[str, Any]) -> None:
        for x, y in ((80, 24), (200, 60), (120, 40), (60, 20), (160, 48)):
            self.tmux_local("resize-window", "-t", "dash", "-x", str(x), "-y", str(y))
            time.sleep(0.3)

    # ------------------------------------------------------------ measuring

    def ledger_last(self) -> int:
        try:
            with self.ledger.open("rb") as f:
                f.seek(max(0, self.ledger.stat().st_size - 200))
                tail = f.read().decode().strip().splitlines()
            return int(tail[-1].split()[0]) if tail else 0
        except (OSError, ValueError, IndexError):
            return 0

    def history_max_step(self) -> int:
        try:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
            try:
                row = conn.execute("SELECT max(step) FROM metric_points").fetchone()
            finally:
                conn.close()
            return int(row[0] or 0)
        except sqlite3.Error:
            return 0

    def wait_recovered(self, seq: int, timeout: float) -> float | None:
        """Seconds until the history holds a step written after the fault."""
        t = time.time()
        while time.time() - t < timeout:
            if self.history_max_step() > seq:
                return round(time.time() - t, 1)
            self.check_alive()
            time.sleep(1)
        return None

    def read_history_loop(self) -> None:
        while not self.stop_reader.is_set():
            try:
                conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
                conn.execute("SELECT count(*) FROM metric_points").fetchone()
                conn.close()
                self.reader["opens"] += 1
            except sqlite3.Error as err:
                if len(self.reader["errors"]) < 20:
                    self.reader["errors"].append(f"{time.time() - self.t0:.0f}s {err}")
            time.sleep(0.5)

    def processes(self) -> list[dict[str, Any]]:
        """Every gputui process here: this soak's (its marker) and gputui's
        helpers on the test bed's host (agent, follower, streams)."""
        mark = f"SOAK_MARK={self.dir}".encode()
        bed = f"GPUTUI_STANDIN_STATE={self.bed.state_dir}".encode()
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                raw = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                cmd = raw.decode(errors="replace")  # anyone's argv: any bytes
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                status = Path(f"/proc/{pid}/status").read_text()
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except (OSError, IndexError):
                continue
            role = _role(cmd, mark in env, bed in env)
            if role is None:
                continue
            rss = re.search(r"VmRSS:\s+(\d+)", status)
            thr = re.search(r"Threads:\s+(\d+)", status)
            found.append(
                {
                    "pid": int(pid),
                    "role": role,
                    "rss_kb": int(rss.group(1)) if rss else 0,
                    "fds": fds,
                    "threads": int(thr.group(1)) if thr else 0,
                    "cpu_s": (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"),
                }
            )
        return found

    def cpu_of_roles(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self.processes():
            out[p["role"]] = out.get(p["role"], 0.0) + p["cpu_s"]
        return out

    def sample(self) -> None:
        procs = self.processes()
        by: dict[str, dict[str, float]] = {}
        for p in procs:
            r = by.setdefault(p["role"], {"n": 0, "rss_kb": 0, "fds": 0, "threads": 0, "cpu_s": 0})
            for k in ("rss_kb", "fds", "threads", "cpu_s"):
                r[k] += p[k]
            r["n"] += 1
        self.samples.append({"t": round(time.time() - self.t0, 1), "roles": by})
        self.capture_screen()

    def capture_screen(self) -> None:
        r = self.tmux_local("capture-pane", "-p", "-t", "dash")
        steps = [int(m.group(1)) for m in STEP.finditer(r.stdout)]
        if not steps:
            return
        self.screen["captures"] += 1
        self.screen["last_step"] = steps[-1]
        if len(set(steps)) != len(steps) and len(self.screen["doubled"]) < 20:
            self.screen["doubled"].append(steps)
        if steps != sorted(steps) and len(self.screen["out_of_order"]) < 20:
            self.screen["out_of_order"].append(steps)

    def check_alive(self) -> None:
        t = round(time.time() - self.t0, 1)
        if self.watch is not None and self.watch.poll() is not None:
            tail = (self.dir / "watch.out").read_text(errors="replace")[-800:]
            self.crashes.append({"t": t, "who": "watch", "rc": self.watch.returncode, "tail": tail})
            self.restarts["watch"] += 1
            self.start_watch()
        rc = self.dir / "dashboard.rc"
        if rc.exists():
            screen = self.tmux_local("capture-pane", "-p", "-t", "dash").stdout[-1500:]
            self.crashes.append(
                {"t": t, "who": "dashboard", "rc": rc.read_text().strip(), "tail": screen}
            )
            self.restarts["dashboard"] += 1
            self.start_dashboard()

    # ------------------------------------------------------------ the count

    def account(self, upto: int) -> dict[str, Any]:
        """Steps 1..upto: written (ledger) against recorded (history)."""
        written: dict[int, tuple[float, bool]] = {}
        for line in self.ledger.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4 and int(parts[0]) <= upto:
                written[int(parts[0])] = (float(parts[1]), parts[2] == parts[3])
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=60)
        try:
            rows = conn.execute(
                "SELECT step, count(*) FROM metric_points WHERE step <= ? GROUP BY step", (upto,)
            ).fetchall()
            runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        finally:
            conn.close()
        seen = {int(s): int(n) for s, n in rows if s is not None}
        doubled = sorted(s for s, n in seen.items() if n > 1)
        refused = sorted(s for s, (_, ok) in written.items() if not ok)
        missing = sorted(s for s, (_, ok) in written.items() if ok and s not in seen)
        ranges = _ranges(missing)
        named, lost = self.name_gaps(ranges, written)
        return {
            "upto_step": upto,
            "written": sum(1 for _, ok in written.values() if ok),
            "refused_by_full_disk": len(refused),
            "recorded": len(seen),
            "doubled": len(doubled),
            "doubled_examples": doubled[:20],
            "missing": len(missing),
            "missing_named": named,
            "missing_unexplained": lost,
            "runs_in_history": runs,
        }

    def name_gaps(
        self, ranges: list[tuple[int, int]], written: dict[int, tuple[float, bool]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A missing range is named by a fault that destroyed the log's
        unread end (truncate, delete, CT stopped): its lines written within
        log_every (+5 s) before that fault and until the fault ended. Any
        other missing range is lost; the fault nearest it is said beside it."""
        named, lost = [], []
        slack = self.args.log_every + 5
        for lo, hi in ranges:
            t_lo, t_hi = written[lo][0], written[hi][0]
            gap: dict[str, Any] = {"from": lo, "to": hi, "lines": hi - lo + 1}
            gap["t"] = round(t_lo - self.t0, 1)
            near = [
                f
                for f in self.faults
                if f["t0"] - slack <= t_lo and t_hi <= f["t0"] + f["wall_s"] + 5
            ]
            near.sort(key=lambda f: abs(f["t0"] - t_hi))
            if near and near[0].get("destroys"):
                named.append({**gap, "by": near[0]["fault"]})
            else:
                lost.append({**gap, "near": near[0]["fault"] if near else None})
        return named, lost

    # ------------------------------------------------------------ the whole soak

    def write(self, final: bool) -> None:
        upto = self.ledger_last() - int(self.args.rate * (self.args.log_every + 20))
        result = {
            "final": final,
            "dir": str(self.dir),
            "minutes_run": round((time.time() - self.t0) / 60, 1),
            "args": vars(self.args),
            "crashes": self.crashes,
            "soak_errors": self.soak_errors,
            "restarts": self.restarts,
            "faults": self.faults,
            "fault_counts": _counts(f["fault"] for f in self.faults),
            "screen": self.screen,
            "history_reader": self.reader,
            "samples": self.samples,
            "slopes_after_15_min": _slopes(self.samples, 15 * 60 if not self.args.short else 0),
            "lines": self.account(self.ledger_last() if final else upto) if upto > 0 else {},
        }
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(self.out_path)

    @contextlib.contextmanager
    def own_errors(self) -> Any:
        """A failure of the soak's own (not gputui's): kept, and it goes on."""
        try:
            yield
        except Exception as err:  # hours of soak must not end on it
            if len(self.soak_errors) < 50:
                self.soak_errors.append(f"{time.time() - self.t0:.0f}s {err!r}")

    def run(self) -> None:
        end = self.t0 + self.args.minutes * 60
        next_fault = time.time() + self.args.first_fault
        next_write = time.time() + 300
        i = 0
        while time.time() < end:
            with self.own_errors():
                self.sample()
                self.check_alive()
            if time.time() >= next_fault:
                name = self.args.faults[i % len(self.args.faults)]
                i += 1
                with self.own_errors():
                    self.faults.append(self.fault(name))
                    print(json.dumps(self.faults[-1]), flush=True)
                next_fault = time.time() + self.args.every
            if time.time() >= next_write:
                with self.own_errors():
                    self.write(final=False)
                next_write = time.time() + 300
            time.sleep(min(self.args.sample, max(0.0, next_fault - time.time())))
        self.finish()

    def run_each_once(self) -> None:
        """--short: every fault once, back to back, then the count."""
        time.sleep(self.args.first_fault)
        for name in self.args.faults:
            self.sample()
            self.check_alive()
            self.faults.append(self.fault(name))
            print(json.dumps(self.faults[-1]), flush=True)
        self.finish()

    def finish(self) -> None:
        self.tmux_ct("kill-session", "-t", SESSION)  # the run stops; its last lines are read
        last = self.ledger_last()
        self.wait_recovered(last - 1, self.args.log_every + 60)
        self.stop_reader.set()
        self.sample()
        self.write(final=True)

    def cleanup(self) -> None:
        self.stop_reader.set()
        with contextlib.suppress(OSError):  # kept beside the history, to count again
            shutil.copyfile(self.ledger, self.dir / "ledger.txt")
        for p in (self.watch, self.serve):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.tmux_local("kill-server")
        with contextlib.suppress(Exception):
            self.bed.stop()
        for p in self.processes():
            with contextlib.suppress(OSError):
                os.kill(p["pid"], signal.SIGKILL)
        if self.args.short:  # the JSON says it all; a long soak keeps its history
            shutil.rmtree(self.dir, ignore_errors=True)


def _role(cmd: str, ours: bool, bed: bool) -> str | None:
    if ours and "gputui" in cmd:
        if " watch " in cmd:
            return "watch"
        if " serve " in cmd:
            return "serve"
        if "--demo" in cmd:
            return "serve-tab"
        if " history " in cmd:
            return None  # the reader fault's own, short-lived
        if cmd.startswith((PY, "python")):
            return "dashboard"
    if bed and ("gputui" in cmd or "tail -F" in cmd or "nvidia-smi" in cmd):
        return "host-helpers"
    return None


def _ranges(nums: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in nums:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _counts(names: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def _slopes(samples: list[dict[str, Any]], after_s: float) -> dict[str, dict[str, float]]:
    """Least-squares slope per hour of each role's RSS (KiB), FDs, threads,
    and its CPU share (% of a core), over the samples after `after_s`."""
    out: dict[str, dict[str, float]] = {}
    late = [s for s in samples if s["t"] >= after_s]
    roles = {r for s in late for r in s["roles"]}
    for role in sorted(roles):
        pts = [(s["t"], s["roles"][role]) for s in late if role in s["roles"]]
        if len(pts) < 3:
            continue
        ts = [t for t, _ in pts]
        res: dict[str, float] = {"samples": len(pts)}
        for k in ("rss_kb", "fds", "threads"):
            res[f"{k}_per_h"] = round(_slope(ts, [v[k] for _, v in pts]) * 3600, 2)
            res[f"{k}_last"] = pts[-1][1][k]
        span = ts[-1] - ts[0]
        if span > 0:
            res["cpu_pct"] = round(100 * (pts[-1][1]["cpu_s"] - pts[0][1]["cpu_s"]) / span, 2)
        out[role] = res
    return out


def _slope(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


FAULTS = [
    "sshd_restart",
    "rotate",
    "resize",
    "connection_cut",
    "truncate",
    "history_reader",
    "ct_restart",
    "delete",
    "serve_tab",
    "disk_full",
    "tmux_kill",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--minutes", type=float, default=120.0)
    p.add_argument("--every", type=float, default=120.0, help="seconds between faults")
    p.add_argument("--first-fault", type=float, default=60.0)
    p.add_argument("--rate", type=float, default=40.0, help="the run's lines per second")
    p.add_argument("--log-every", type=float, default=10.0, help="[history] log_every")
    p.add_argument("--sample", type=float, default=15.0)
    p.add_argument("--full-for", type=float, default=5.0, help="seconds the disk stays full")
    p.add_argument("--recover-timeout", type=float, default=120.0)
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--ct", type=int, default=977)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak.json"))
    p.add_argument("--short", action="store_true", help="every fault once, ~2 min (CI)")
    args = p.parse_args(argv)
    args.faults = [f for f in args.faults.split(",") if f]
    if args.short:
        args.every, args.first_fault, args.sample, args.full_for = 1.0, 10.0, 5.0, 3.0
        args.log_every, args.recover_timeout = 3.0, 45.0
        args.minutes = min(args.minutes, 0.1)  # the faults run until each has come once
    return args


def summary(res: dict[str, Any]) -> str:
    """A soak's result JSON as the Markdown of bench/RESULTS.md."""
    out = [
        f"- ran {res['minutes_run']} min ({'finished' if res['final'] else 'still running'}); "
        f"faults: {res['fault_counts']}"
    ]
    out.append(
        f"- crashes: {len(res['crashes'])} {[(c['who'], c['rc']) for c in res['crashes']]}; "
        f"restarts {res['restarts']}; soak's own errors: {len(res.get('soak_errors', []))}"
    )
    ln = res.get("lines") or {}
    if ln:
        named = sum(g["lines"] for g in ln["missing_named"])
        lost = sum(g["lines"] for g in ln["missing_unexplained"])
        out.append(
            f"- lines 1..{ln['upto_step']}: written {ln['written']} (+{ln['refused_by_full_disk']}"
            f" refused by the full disk), recorded {ln['recorded']}, doubled {ln['doubled']},"
            f" missing {ln['missing']} = {named} named ("
            + ", ".join(f"{g['lines']} by {g['by']}" for g in ln["missing_named"][:12])
            + f") + {lost} lost ("
            + ", ".join(f"{g['lines']} near {g['near']}" for g in ln["missing_unexplained"][:12])
            + f"); runs in the history {ln['runs_in_history']}"
        )
    sc, rd = res["screen"], res["history_reader"]
    out.append(
        f"- screen: {sc['captures']} captures, {len(sc['doubled'])} with a step twice,"
        f" {len(sc['out_of_order'])} out of order; history reader: {rd['opens']} read-only"
        f" opens beside the writers, {len(rd['errors'])} errors"
    )
    out.append("")
    out.append(
        "| process | samples | RSS MiB (last) | RSS KiB/h | FDs (last) | FDs/h |"
        " threads (last) | threads/h | CPU % |"
    )
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for role, v in res["slopes_after_15_min"].items():
        out.append(
            f"| {role} | {v['samples']} | {v['rss_kb_last'] / 1024:.1f} | {v['rss_kb_per_h']:+.0f}"
            f" | {v['fds_last']} | {v['fds_per_h']:+.1f} | {v['threads_last']}"
            f" | {v['threads_per_h']:+.1f} | {v.get('cpu_pct', 0):.2f} |"
        )
    out.append("")
    out.append(
        "| fault | n | recovered | recovery s (median, max) | CPU s watch (median) |"
        " CPU s dashboard (median) |"
    )
    out.append("| --- | --- | --- | --- | --- | --- |")
    by: dict[str, list[dict[str, Any]]] = {}
    for f in res["faults"]:
        by.setdefault(f["fault"], []).append(f)
    for name, fs in by.items():
        rec = [f["recovery_s"] for f in fs if f["recovery_s"] is not None]
        out.append(
            f"| {name} | {len(fs)} | {len(rec)} | "
            + (f"{_median(rec):.1f}, {max(rec):.1f}" if rec else "-")
            + f" | {_median([f['cpu_s'].get('watch', 0) for f in fs]):.2f}"
            + f" | {_median([f['cpu_s'].get('dashboard', 0) for f in fs]):.2f} |"
        )
    return "\n".join(out)


def _median(xs: list[float]) -> float:
    ys = sorted(xs)
    if not ys:
        return 0.0
    mid = len(ys) // 2
    return ys[mid] if len(ys) % 2 else (ys[mid - 1] + ys[mid]) / 2


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--summary"]:  # soak.py --summary RESULT.json
        print(summary(json.loads(Path(argv[1]).read_text())))
        return 0
    args = parse_args(argv)
    soak = Soak(args)
    try:
        soak.start()
        if args.short:
            soak.run_each_once()
        else:
            soak.run()
    finally:
        soak.cleanup()
    print(f"soak: results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
