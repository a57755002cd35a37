"""Attach to a run whose tmux server is another user's never hands that
user the admin's terminal (issue 45, HIGH).

The attacker is uid 65534 with a hook on its own tmux server that replaces
any client attaching with its program (`detach-client -E`). That program
pushes keys into the terminal it was given (TIOCSTI: `id > ROOTED` typed
into root's shell once the client is gone), writes sequences a terminal
acts on or answers (OSC 52 clipboard, a title report, a cursor report) and
notes which terminal it holds. Root's terminal is a pseudo-terminal of the
test's: the attach runs in it as the dashboard runs it (`run_attach`), then
the same process reads its terminal as root's shell would. Real tmux, real
setpriv, real ssh to the test bed's sshd; no mocks."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from test_other_tmux_server import UID, as_user, other_server  # noqa: F401  (a fixture)

# The attacker's program: which terminal it got, keys pushed into it, then
# sequences a terminal acts on (clipboard) or answers (title, cursor report).
EVIL = """#!/bin/sh
readlink /proc/$$/fd/0 > "{d}/evil-tty"
python3 -c 'import fcntl, termios
for c in b"id > {d}/ROOTED\\n":
    fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))' 2> "{d}/evil-err"
printf '\\033]52;c;cm9vdGVk\\007\\033]2;;id\\007\\033[21t\\033[6n\\033P+q544e\\033\\\\'
echo evil-was-here
"""

# Root's side, in the test's terminal: the attach as the dashboard runs it,
# then what root's shell would read from the terminal afterwards.
ROOT_SIDE = """
import json, os, select, sys, termios, time, tty
from gputui.actions.attach import plan_attach, run_attach
from gputui.config import Settings
from gputui.remote.target import Target
{target}
plan = plan_attach(target, Settings(), "job", tmux={tmux!r})
result = run_attach(plan)
tty.setraw(0, termios.TCSANOW)  # a shell reads keys one by one; nothing is flushed
typed, end = b"", time.monotonic() + 1.5
while time.monotonic() < end:
    if select.select([0], [], [], 0.1)[0]:
        typed += os.read(0, 1024)
json.dump({{"tty": os.ttyname(0), "typed": typed.decode("latin-1"), "said": result.summary}},
          open({out!r}, "w"))
"""

LOCAL_TARGET = "from gputui.remote.local import LocalTransport\ntarget = Target(LocalTransport())"


@pytest.fixture
def evil_server(other_server: Path) -> Iterator[Path]:  # noqa: F811
    """uid 65534's server whose client-attached hook replaces the client."""
    evil = other_server / "evil.sh"
    evil.write_text(EVIL.format(d=other_server))
    evil.chmod(0o755)
    sock = str(other_server / f"tmux-{UID}" / "default")
    as_user(sock, "set-hook", "-g", "client-attached", f"detach-client -E {evil}")
    yield other_server


def root_terminal(
    code: str, env: dict[str, str] | None = None, answer: tuple[bytes, bytes] | None = None
) -> bytes:
    """Run `code` as root in a new pseudo-terminal (root's terminal here);
    what it wrote to that terminal, once it has ended. `answer`: (what on
    the screen, the keys then typed once)."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execve(sys.executable, [sys.executable, "-c", code], env or dict(os.environ))
    screen = b""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
            if answer is not None and answer[0] in screen:
                os.write(fd, answer[1])
                answer = None
        elif os.waitpid(pid, os.WNOHANG)[0] == pid:
            break
    os.close(fd)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return screen


def assert_root_terminal_kept(d: Path, screen: bytes, said: dict[str, Any]) -> None:
    """The owner's program ran (the hook fired) and got another terminal
    than root's; it typed nothing into root's shell; root's terminal got
    none of its report or clipboard sequences."""
    assert (d / "evil-tty").exists(), f"the hook did not run: {screen[-500:]!r}"
    held = (d / "evil-tty").read_text().strip()
    assert held != said["tty"], f"uid {UID}'s program held root's terminal {held}"
    assert said["typed"] == "", f"root's shell received keys from uid {UID}: {said['typed']!r}"
    assert not (d / "ROOTED").exists()
    for seq in (b"\x1b]52", b"\x1b]2;", b"\x1b[21t", b"\x1b[6n", b"\x1bP"):
        assert seq not in screen, f"{seq!r} from uid {UID}'s program reached root's terminal"
    assert b"evil-was-here" in screen  # its drawing is shown, through the filter
    assert "relayed" in said["said"], said


@pytest.mark.timeout(120)
def test_local_attach_to_another_users_session_keeps_roots_terminal(evil_server: Path) -> None:
    from gputui.remote.agent import tmux_server_argv

    tmux = tmux_server_argv(str(evil_server / f"tmux-{UID}" / "default"))
    assert tmux[0].endswith("setpriv")  # the owner's client, as the dashboard gets it
    out = evil_server / "root-side.json"
    code = ROOT_SIDE.format(target=LOCAL_TARGET, tmux=tmux, out=str(out))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    screen = root_terminal(code, env)
    assert out.exists(), screen[-2000:]
    assert_root_terminal_kept(evil_server, screen, json.loads(out.read_text()))


@pytest.mark.timeout(120)
def test_attach_over_ssh_to_another_users_session_keeps_roots_terminal(
    evil_server: Path, testbed: Any
) -> None:
    """The same attacker reached over real ssh (`ssh -t` to the test bed's
    sshd, the agent's argv as the owner's): sshd's pty is the one the
    owner's program holds, but what it writes still went raw to root's
    terminal, and its keys with it; relayed, neither."""
    from gputui.remote.agent import tmux_server_argv

    tmux = tmux_server_argv(str(evil_server / f"tmux-{UID}" / "default"))
    out = evil_server / "root-side.json"
    kwargs = testbed.transport_kwargs()
    target = (
        f"from gputui.remote.ssh import SshTransport\ntarget = Target(SshTransport(**{kwargs!r}))"
    )
    code = ROOT_SIDE.format(target=target, tmux=tmux, out=str(out))
    env = {**testbed.env(), "HOME": str(testbed.home), "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    screen = root_terminal(code, env)
    assert out.exists(), screen[-2000:]
    assert_root_terminal_kept(evil_server, screen, json.loads(out.read_text()))


def test_a_session_of_gputuis_own_user_is_attached_directly() -> None:
    """Root's own server: the argv runs in the terminal as before (no relay)."""
    from gputui.actions.attach import plan_attach
    from gputui.config import Settings
    from gputui.remote.local import LocalTransport
    from gputui.remote.target import Target

    plan = plan_attach(Target(LocalTransport()), Settings(), "job", tmux=["tmux"])
    assert "owner" not in plan.params and "relayed" not in plan.title
    foreign = plan_attach(
        Target(LocalTransport()),
        Settings(),
        "job",
        tmux=["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--", "tmux", "-S", "/x"],
    )
    assert foreign.params["owner"] == "uid 65534" and "relayed" in foreign.title
    assert any("uid 65534's programs never get your terminal" in n for n in foreign.notes)


def test_the_filter_passes_drawing_and_drops_what_a_terminal_answers() -> None:
    from gputui.text.terminal import TerminalFilter

    f = TerminalFilter()
    raw = (
        b"\x1b[H\x1b[2J\x1b[1;31mred\x1b[0m\x1b[?1049h\x1b(0qq\x1b(B\x1b[2 q\xe2\x94\x80"
        b"\x1b]52;c;eA==\x07\x1b]8;;http://x.invalid\x1b\\\x1b[21t\x1b[6n\x1b[>c\x1bP$q\x1b\\"
        b"\x1b[?1$p\x1b_x\x1b\\\x1b^y\x1b\\\xc2\x9d0;t\xc2\x9cend\x07\x1bc\x1b[5"
    )
    out = b"".join(f.feed(raw[i : i + 3]) for i in range(0, len(raw), 3)) + f.feed(b"A")
    assert out == (
        b"\x1b[H\x1b[2J\x1b[1;31mred\x1b[0m\x1b[?1049h\x1b(0qq\x1b(B\x1b[2 q\xe2\x94\x80end\x1b[5A"
    )
    assert f.dropped == 12


@given(
    st.binary(max_size=300)
    | st.text(alphabet="\x1b[]P\\;?0123456789 mHqtn\x07\x9b\x9cab").map(str.encode)
)
def test_no_string_or_report_sequence_survives_the_filter(raw: bytes) -> None:
    from gputui.text.terminal import DRAWING, TerminalFilter

    f = TerminalFilter()
    text = b"".join(f.feed(raw[i : i + 7]) for i in range(0, len(raw), 7)).decode()
    assert TerminalFilter().feed(raw).decode() == text  # however the reads cut it
    assert not any(0x80 <= ord(c) <= 0x9F for c in text)
    assert not set("\x07\x00\x7f") & set(text)
    i = text.find("\x1b")
    while i != -1:
        nxt = text[i + 1 : i + 2]
        if nxt == "[":
            m = re.match(r"\x1b\[([0-?]*)([ -/]*)([@-~])", text[i:])
            assert m is not None, repr(text[i : i + 20])
            assert m.group(3) in DRAWING or (m.group(2) == " " and m.group(3) == "q")
        else:
            assert nxt in "78=>MDEH()*+", repr(text[i : i + 5])
        i = text.find("\x1b", i + 1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["ct", "docker", "podman", "pod"])
def test_attach_in_a_container_to_another_users_session_keeps_roots_terminal(
    kind: str, testbed: Any, testbed_commands: None, request: pytest.FixtureRequest
) -> None:
    """The attacker's server inside a container (the stand-ins enter with
    nsenter and hand the caller's terminal on, where `pct exec` hands
    lxc-attach's own pty and `docker|podman|kubectl exec -t` the runtime's:
    bytes go back raw either way); reached over real ssh, `pct exec` or
    `… exec -it`, the owner's tmux client: relayed, root's terminal gets no
    report or clipboard sequence and root's shell no key."""
    from gputui.containers import Container, Docker, KubePod, Podman

    name = f"af{os.getpid() % 10000}-{kind}"
    container: Container | int
    if kind == "ct":
        number = request.getfixturevalue("ct")
        container = number

        def run_in(argv: list[str], input: str | None = None) -> Any:
            return testbed.ct_exec(number, argv, input=input)

    else:
        if kind == "pod":
            testbed.container_create("kubectl", f"ml/{name}/main")
            tool, where, container = "kubectl", f"ml/{name}", KubePod(name, "ml", "main")
        else:
            testbed.container_create(kind, name)
            tool, where = kind, name
            container = Docker(name) if kind == "docker" else Podman(name)

        def run_in(argv: list[str], input: str | None = None) -> Any:
            return testbed.container_exec(tool, where, argv, input=input)

    d = "/tmp/x"
    drop = ["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", "--"]
    sock = f"{d}/tmux-{UID}/default"
    try:
        setup = f"mkdir -m 777 {d} && cat > {d}/evil.sh && chmod 755 {d}/evil.sh"
        assert run_in(["sh", "-c", setup], input=EVIL.format(d=d))
        env = ["env", f"TMUX_TMPDIR={d}", "HOME=/tmp", "SHELL=/bin/sh"]
        start = [*env, *drop, "tmux", "new-session", "-d", "-s", "job", "sleep 600"]
        assert run_in(start).returncode == 0
        hook = [*drop, "tmux", "-S", sock, "set-hook", "-g", "client-attached"]
        hook.append(f"detach-client -E {d}/evil.sh")
        assert run_in(hook).returncode == 0
        tmux = ["/usr/bin/setpriv", f"--reuid={UID}", f"--regid={UID}", "--init-groups", "--"]
        tmux += ["tmux", "-S", sock]
        kwargs = testbed.transport_kwargs()
        spec = repr(container if isinstance(container, int) else container.spec)
        target = (
            "from gputui.remote.ssh import SshTransport\n"
            "from gputui.containers import parse_container\n"
            f"c = {spec}\n"
            "c = c if isinstance(c, int) else parse_container(c)\n"
            f"target = Target(SshTransport(**{kwargs!r}), c)"
        )
        host = Path(tempfile.mkdtemp(prefix="gaf-"))
        out = host / "root-side.json"
        code = ROOT_SIDE.format(target=target, tmux=tmux, out=str(out))
        run_env = {**testbed.env(), "HOME": str(testbed.home), "TERM": "xterm-256color"}
        run_env.pop("TMUX", None)
        run_env["PYTHONPATH"] = os.pathsep.join(sys.path)
        screen = root_terminal(code, run_env)
        assert out.exists(), screen[-2000:]
        said = json.loads(out.read_text())
        held = run_in(["cat", f"{d}/evil-tty"]).stdout.strip()
        assert held, f"the hook did not run: {screen[-800:]!r}"
        assert held != said["tty"]
        assert said["typed"] == "", f"root's shell received keys from uid {UID}: {said['typed']!r}"
        for seq in (b"\x1b]52", b"\x1b]2;", b"\x1b[21t", b"\x1b[6n", b"\x1bP"):
            assert seq not in screen, f"{seq!r} from uid {UID}'s program reached root's terminal"
        assert b"evil-was-here" in screen and "relayed" in said["said"]
    finally:
        run_in([*drop, "tmux", "-S", sock, "kill-server"])
        if kind != "ct":
            testbed.container_stop(tool, where)


@pytest.mark.timeout(60)
def test_ctrl_bracket_leaves_a_relayed_client_that_never_ends(other_server: Path) -> None:  # noqa: F811
    """The owner's hook replaces the client with a program that never ends
    (it would keep the admin's keyboard): Ctrl-] leaves the relay at once,
    the client is hung up on, and root's shell reads nothing after it."""
    from gputui.remote.agent import tmux_server_argv

    sock = str(other_server / f"tmux-{UID}" / "default")
    stuck = other_server / "stuck.sh"
    stuck.write_text("#!/bin/sh\necho stuck-for-good\nexec sleep 600\n")
    stuck.chmod(0o755)
    as_user(sock, "set-hook", "-g", "client-attached", f"detach-client -E {stuck}")
    out = other_server / "root-side.json"
    code = ROOT_SIDE.format(target=LOCAL_TARGET, tmux=tmux_server_argv(sock), out=str(out))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("TMUX", None)
    t0 = time.monotonic()
    screen = root_terminal(code, env, answer=(b"stuck-for-good", b"\x1d"))
    assert time.monotonic() - t0 < 30, "the relay did not end on Ctrl-]"
    said = json.loads(out.read_text())
    assert "left uid 65534's session with Ctrl-]" in said["said"], said
    assert said["typed"] == ""
    assert b"stuck-for-good" in screen
