"""--docker/--podman/--pod beside --ct (issue 26): the flags, the config
keys and the positional target grammar all name one Container."""

from __future__ import annotations

import pytest

from gputui.cli import main as cli
from gputui.config import settings_container
from gputui.containers import Docker, Host, KubePod, Podman, ProxmoxLXC
from gputui.errors import GputuiError
from gputui.remote.target import make_target, parse_target, spec_of


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr("gputui.config.DEFAULT_CONFIG", tmp_path / "none.toml")


@pytest.mark.parametrize(
    ("argv", "container"),
    [
        (["--host", "h", "--ct", "200"], ProxmoxLXC(200)),
        (["--host", "h", "--docker", "trainer"], Docker("trainer")),
        (["--host", "h", "--podman", "job-1"], Podman("job-1")),
        (["--host", "h", "--pod", "ml/trainer-0/main"], KubePod("trainer-0", "ml", "main")),
        (["--host", "h", "--pod", "trainer-0"], KubePod("trainer-0")),
        (["h/docker:trainer"], Docker("trainer")),
        (["doctor", "h/podman:job-1", "--json"], Podman("job-1")),
        (["doctor", "--host", "h/pod:ml/trainer-0"], KubePod("trainer-0", "ml")),
        (["h/200"], ProxmoxLXC(200)),
        (["--host", "h"], Host()),
    ],
)
def test_each_kind_from_flags_and_the_target_grammar(argv, container) -> None:
    _, s = cli.parse(argv)
    assert settings_container(s) == container
    assert make_target(s).container == container
    spec = spec_of(s)
    assert spec is not None and parse_target(str(spec)) == spec  # round trip: h/docker:trainer


def test_kube_context_reaches_kubectl() -> None:
    _, s = cli.parse(["doctor", "--host", "h", "--pod", "ml/p", "--kube-context", "prod"])
    assert make_target(s).wrap(["ls"])[:3] == ["kubectl", "--context", "prod"]


def test_config_file_keys(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('host = "gpu1"\ndocker = "trainer"\n')
    _, s = cli.parse(["--config", str(cfg)])
    assert settings_container(s) == Docker("trainer")
    cfg.write_text('host = "gpu1"\npod = "ml/trainer-0"\nkube_context = "prod"\n')
    _, s = cli.parse(["--config", str(cfg)])
    assert make_target(s).container == KubePod("trainer-0", "ml", context="prod")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--host", "h", "--ct", "200", "--docker", "x"], "--ct 200 and --docker x"),
        (["--host", "h", "--docker", "-rm"], "--docker"),
        (["--host", "h", "--pod", "a/b/c/d"], "--pod"),
        (["h/docker:"], "after '/'"),
        (["h/lxd:x"], "lxd"),
        (["h/docker:a", "--docker", "b"], "--docker b is given too"),
    ],
)
def test_a_bad_container_is_one_line(argv, words, capsys) -> None:
    with pytest.raises((GputuiError, SystemExit)) as err:
        cli.parse(argv)
    text = str(err.value) if isinstance(err.value, GputuiError) else capsys.readouterr().err
    assert words in text and "Traceback" not in text
    assert text.strip().count("\n") <= 1


def test_bad_config_value_names_the_line(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('host = "gpu1"\n\ndocker = "a b"\n')
    with pytest.raises(GputuiError) as err:
        cli.parse(["--config", str(cfg)])
    assert f"{cfg}:3" in str(err.value) and "\n" not in str(err.value)


def test_a_container_names_a_run_not_the_host_view() -> None:
    from gputui.host.targets import wants_host_view

    _, s = cli.parse(["--host", "h", "--docker", "trainer"])
    assert not wants_host_view([s])
    _, s = cli.parse(["--host", "h"])
    assert wants_host_view([s])


def test_watch_and_targets_take_the_other_kinds() -> None:
    """`gputui watch gpu1/docker:trainer gpu2/pod:ml/p` and `[[targets]] host
    = "gpu1/podman:job"` name the container as --docker/--pod do."""
    from gputui.cli.watch import target_settings
    from gputui.config import HostTarget, Settings
    from gputui.host.targets import _for_host

    s = target_settings("gpu1/docker:trainer", Settings())
    assert (s.host, settings_container(s)) == ("gpu1", Docker("trainer"))
    s = target_settings("root@gpu2:2222/pod:ml/p", Settings())
    assert (s.user, s.port, settings_container(s)) == ("root", 2222, KubePod("p", "ml"))
    s = _for_host(Settings(), HostTarget("gpu3/podman:job"), "[[targets]]")
    assert settings_container(s) == Podman("job")
    # the target names the container: a config's `ct` does not make it two
    # (the old code: "--ct 200 and --pod ml/p both say where the run is")
    s = target_settings("gpu2/k8s:ml/p", Settings(ct_id=200))
    assert (s.ct_id, settings_container(s)) == (None, KubePod("p", "ml"))


def test_history_looks_for_the_container_named() -> None:
    import argparse

    from gputui.cli.targets import settle_target, target_query

    args = argparse.Namespace(target="gpu1/docker:trainer", command="history")
    settle_target(args)
    assert target_query(args) == "gpu1/docker:trainer"  # not every run on gpu1
