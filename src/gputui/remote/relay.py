# ruff: noqa: UP031, SIM105
"""gputui's relay: one process on the host that runs commands for gputui and
carries their stdin, stdout and stderr over its own, so that many long-lived
commands (an agent in each container, a log stream in each) share ONE ssh
channel instead of one each (OpenSSH allows 10 per connection; gputui keeps
to 6).

JSON lines, binary data in base64:

    client -> relay   {"op": "open", "id": 3, "argv": ["pct", "exec", ...]}
                      {"op": "in", "id": 3, "data": "..."}     to its stdin
                      {"op": "eof", "id": 3}                    close its stdin
                      {"op": "ack", "id": 3, "n": 65536}        gputui has used n more bytes
    relay -> client   {"id": 3, "started": true} | {"id": 3, "error": "one line"}
                      {"id": 3, "out": "..."} / {"id": 3, "err": "..."}
                      {"id": 3, "exit": 0, "signal": null}      after its last output

Flow control: the relay sends at most WINDOW bytes of a command's output
(stdout and stderr together) that gputui has not acknowledged; then it stops
reading that command's pipes, so the command blocks on its next write, as it
would on a slow pipe. One command's flood never delays another's output and
never grows gputui's memory past WINDOW per command.

Each command runs as the host would run it (no shell; argv as given). The
relay exits when its stdin reaches EOF (the channel closed, the link died):
it closes every command's stdin — gputui's agents and watchdog-wrapped
streams end on that — waits up to STOP_GRACE_S, then kills the process
group of any still running. Nothing is left behind.

Like the agent, this file is sent to the remote python3 as source: stdlib
only, self-contained, Python 3.6.
"""

import base64
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

STOP_GRACE_S = 3.0
CHUNK = 65536
WINDOW = 1024 * 1024  # bytes of one command's output in flight, unacknowledged


class Credit:
    """How many more bytes of one command's output may be sent now."""

    def __init__(self, window: int) -> None:
        self.left = window
        self.cond = threading.Condition()
        self.closed = False

    def take(self, most: int) -> int:
        """Wait until some credit is left; take up to `most` of it (0: closed)."""
        with self.cond:
            while self.left <= 0 and not self.closed:
                self.cond.wait()
            if self.closed:
                return 0
            n = min(most, self.left)
            self.left -= n
            return n

    def give_back(self, n: int) -> None:
        with self.cond:
            self.left += n
            self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


def write_all(out, data: bytes) -> None:
    """Write the whole line: a non-blocking stdout (its open file shared
    with a process that set O_NONBLOCK) took part of a line and raised
    BlockingIOError, and the rest was lost — the reader got a cut line."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):  # not a file (a test's buffer)
        out.write(data)
        out.flush()
        return
    out.flush()
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [], 1.0)


class Relay:
    def __init__(self, out, window: int = WINDOW) -> None:
        self.out = out
        self.window = window
        self.lock = threading.Lock()
        self.children = {}  # id -> Popen
        self.credits = {}  # id -> Credit

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            try:
                write_all(self.out, data)
            except (OSError, ValueError):
                pass

    def pump(self, cid: int, stream, key: str, credit: Credit) -> None:
        fd = stream.fileno()
        while True:
            n = credit.take(CHUNK)
            if n == 0:  # the relay is stopping: stop reading, the reaper waits
                return
            try:
                chunk = os.read(fd, n)
            except OSError:
                chunk = b""
            if len(chunk) < n:
                credit.give_back(n - len(chunk))
            if not chunk:
                return
            self.send({"id": cid, key: base64.b64encode(chunk).decode("ascii")})

    def reap(self, cid: int, proc, pumps: list) -> None:
        for t in pumps:
            t.join()
        rc = proc.wait()
        self.children.pop(cid, None)
        self.credits.pop(cid, None)
        self.send({"id": cid, "exit": rc if rc >= 0 else None, "signal": -rc if rc < 0 else None})

    def open(self, cid: int, argv: list) -> None:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            self.send({"id": cid, "error": "%s: %s" % (argv[0] if argv else "?", e.strerror)})
            self.send({"id": cid, "exit": 127, "signal": None})
            return
        self.children[cid] = proc
        credit = self.credits[cid] = Credit(self.window)
        self.send({"id": cid, "started": True})
        pumps = [
            threading.Thread(target=self.pump, args=(cid, proc.stdout, "out", credit), daemon=True),
            threading.Thread(target=self.pump, args=(cid, proc.stderr, "err", credit), daemon=True),
        ]
        for t in pumps:
            t.start()
        threading.Thread(target=self.reap, args=(cid, proc, pumps), daemon=True).start()

    def to_stdin(self, cid: int, data: "bytes | None") -> None:
        proc = self.children.get(cid)
        if proc is None or proc.stdin is None or proc.stdin.closed:
            return
        try:
            if data is None:
                proc.stdin.close()
            else:
                proc.stdin.write(data)
                proc.stdin.flush()
        except (OSError, ValueError):
            pass

    def handle(self, line: bytes) -> None:
        try:
            msg = json.loads(line.decode("utf-8", "replace"))
            op, cid = msg["op"], int(msg["id"])
        except (ValueError, KeyError, TypeError):
            return
        if op == "open":
            argv = [str(a) for a in msg.get("argv") or []]
            self.open(cid, argv)
        elif op == "in":
            self.to_stdin(cid, base64.b64decode(msg.get("data") or ""))
        elif op == "eof":
            self.to_stdin(cid, None)
        elif op == "ack":
            credit = self.credits.get(cid)
            if credit is not None:
                try:
                    credit.give_back(max(0, int(msg.get("n") or 0)))
                except (TypeError, ValueError):
                    pass

    def stop_all(self) -> None:
        procs = list(self.children.values())
        for credit in list(self.credits.values()):
            credit.close()
        for p in procs:
            try:
                p.stdin.close()
            except (OSError, ValueError, AttributeError):
                pass
        deadline = time.time() + STOP_GRACE_S
        while time.time() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass


def serve(stdin, stdout) -> None:
    relay = Relay(stdout)
    relay.send({"id": 0, "started": True, "pid": os.getpid()})
    while True:
        line = stdin.readline()
        if not line:
            break
        relay.handle(line)
    relay.stop_all()


def main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ in ("__main__", "gputui-relay"):
    main()
