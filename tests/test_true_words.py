"""Small untruths a newcomer met (issue 36), each said truly now: where a
missing tool goes when there is no container, what `watch --help` offers,
what `serve` advises and prints for an address that is not loopback.
(The demo's relaunch result: tests/test_ui_demo.py; `h` with no points yet:
tests/test_ui_history.py.)"""

from __future__ import annotations

import asyncio

import pytest

from gputui.actions.dump import install_where, require_tool
from gputui.actions.plan import ActionError
from gputui.cli.main import build_parser, main
from gputui.cli.serve import parse_bind, url_host
from gputui.config import Settings
from gputui.errors import GputuiError
from gputui.remote.target import make_target


def test_a_missing_tool_on_a_machine_with_no_container_is_not_sent_into_one() -> None:
    """The demo's `d` said "py-spy is not installed on local (vm) — install it
    inside the container": there is no container."""
    target = make_target(Settings(local=True))

    async def ask() -> str:
        await target.transport.connect()
        try:
            return await require_tool(
                target, ["gputui-no-such-tool"], "py-spy", "pip install py-spy"
            )
        finally:
            await target.transport.close()

    with pytest.raises(ActionError) as err:
        asyncio.run(ask())
    said = str(err.value)
    assert "container" not in said, said
    assert f"install it on {target.label}: pip install py-spy" in said, said
    ct = make_target(Settings(host="gpu1.invalid", ct_id=200))
    assert install_where(ct) == "inside CT 200"
    docker = make_target(Settings(host="gpu1.invalid", docker="trainer"))
    assert install_where(docker) == "inside docker container trainer"


def test_watch_help_does_not_offer_demo(capsys: pytest.CaptureFixture[str]) -> None:
    watch = build_parser()._subparsers._group_actions[0].choices["watch"]  # type: ignore[union-attr]
    assert "--demo" not in watch.format_help()
    assert main(["watch", "--demo"]) == 2  # still refused in its own words
    assert "watch takes no --demo" in capsys.readouterr().err


def test_serve_advises_the_port_it_was_given() -> None:
    with pytest.raises(GputuiError) as err:
        parse_bind("0.0.0.0:8001", public=False)
    said = str(err.value)
    assert "ssh -L 8001:127.0.0.1:8001" in said and "8000" not in said, said


@pytest.mark.parametrize(
    ("fqdn", "hostname", "shown"),
    [
        ("gpu1.lab.example", "gpu1", "gpu1.lab.example"),
        ("localhost", "gpu1", "gpu1"),  # no domain set up: the host name
        ("localhost.localdomain", "localhost", "THIS-MACHINE"),  # nothing but loopback
        ("127.0.1.1", "", "THIS-MACHINE"),
    ],
)
def test_serve_public_url_never_says_localhost(fqdn: str, hostname: str, shown: str) -> None:
    """`serve --bind 0.0.0.0:8001 --public` printed http://localhost:8001/…:
    another machine's browser would open itself."""
    assert url_host("0.0.0.0", (lambda: fqdn, lambda: hostname)) == shown
    assert url_host("::", (lambda: fqdn, lambda: hostname)) == shown
    assert url_host("127.0.0.1") == "127.0.0.1" and url_host("::1") == "[::1]"
