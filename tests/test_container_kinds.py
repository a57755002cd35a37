"""A new container kind is one place to edit: a module in gputui/containers/
with its class, plus its line in `KINDS`. Everything that chooses between
kinds (the spec grammar, `parse_container`, `cgroup_owner`) reads `KINDS`."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import gputui.containers as containers
from gputui.config import Settings, settings_container, settings_naming
from gputui.containers import (
    CONTAINER_GRAMMAR,
    KINDS,
    Container,
    Docker,
    Host,
    KubePod,
    Podman,
    ProxmoxLXC,
    parse_container,
)

PACKAGE = Path(containers.__file__).parent
KIND_MODULES = [m.name for m in pkgutil.iter_modules([str(PACKAGE)]) if m.name != "base"]


def test_every_kind_class_is_registered() -> None:
    defined = {
        cls
        for name in KIND_MODULES
        for _, cls in inspect.getmembers(importlib.import_module(f"gputui.containers.{name}"))
        if inspect.isclass(cls)
        and issubclass(cls, Container)
        and cls.__module__ == f"gputui.containers.{name}"
    }
    assert defined == set(KINDS)
    assert Host not in KINDS  # the host is no container: specs never name it


def test_a_kind_module_needs_only_the_base() -> None:
    """No kind reaches into another's module (Podman builds on Docker in one)."""
    for name in KIND_MODULES:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gputui.")
        }
        assert imported <= {"gputui.containers.base", "gputui.errors"}, name


def test_each_kind_is_read_back_from_its_spec_and_named_in_the_grammar() -> None:
    samples = [ProxmoxLXC(200), Docker("trainer"), Podman("trainer"), KubePod("p", "ns", "c")]
    assert {type(c) for c in samples} == set(KINDS)
    for c in samples:
        assert parse_container(c.spec) == c
        assert type(c).GRAMMAR and type(c).GRAMMAR in CONTAINER_GRAMMAR
    assert CONTAINER_GRAMMAR == (
        "N (a Proxmox CT), docker:NAME, podman:NAME or pod:[NAMESPACE/]POD[/CONTAINER]"
    )
    for prefix in ("k8s", "kube"):  # the pod's other spellings
        assert parse_container(f"{prefix}:ns/p/c") == KubePod("p", "ns", "c")


def test_a_nested_container_is_the_outer_ones() -> None:
    """The kinds answer a cgroup path in CGROUP_ORDER: a Docker container in
    a CT is the CT's; a kubepods path no pod pattern reads is no one's."""
    did = "3f2a" + "0" * 56 + "beef"
    owner = containers.cgroup_owner(f"/lxc/200/ns/system.slice/docker-{did}.scope")
    assert owner is not None and (owner.kind, owner.ident) == ("lxc", "200")
    assert containers.cgroup_owner(f"/kubepods/odd/docker-{did}.scope") is None


@pytest.mark.parametrize(
    "where",
    [
        ProxmoxLXC(200),
        Docker("trainer"),
        Podman("trainer"),
        KubePod("p", "ns", "c", "prod"),
        Host(),
    ],
    ids=repr,
)
def test_settings_name_each_kind_through_its_own_field(where: Container) -> None:
    """settings_naming is settings_container's inverse; the other kinds'
    fields are cleared (a host's config `ct` does not follow a Docker run)."""
    named = settings_naming(Settings(ct_id=201, docker="other"), where)
    assert settings_container(named) == where
    set_fields = {k.SETTING for k in KINDS if getattr(named, k.FIELD) is not None}
    assert set_fields == ({type(where).SETTING} if where != Host() else set())


def test_two_kinds_named_is_one_line_naming_both() -> None:
    with pytest.raises(ValueError) as err:
        settings_container(Settings(ct_id=200, podman="trainer"))
    assert str(err.value) == "--ct 200 and --podman trainer both say where the run is: give one"


def test_a_kinds_spec_prefix_is_its_setting() -> None:
    """`host/docker:NAME` becomes --docker NAME by the prefix alone
    (cli/targets.py, host/targets.py, cli/watch.py): a kind named in a
    spec is named by the same word in the flags and the config."""
    for kind in KINDS:
        assert kind.SETTING
        if kind.SPEC_PREFIXES:
            assert kind.SPEC_PREFIXES[0] == kind.SETTING == kind.kind, kind


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.SETTING)
def test_a_kinds_flag_and_config_key_come_from_its_declaration(kind: type[Container]) -> None:
    """--SETTING and the config key SETTING exist because the kind is in
    KINDS: its help, metavar and value type are the kind's own."""
    from gputui.cli.main import build_parser
    from gputui.config import KEYS, load_config

    value = "200" if kind.SETTING_TYPE is int else "trainer"
    args, _ = build_parser().parse_known_args([f"--{kind.SETTING}", value])
    assert getattr(args, kind.SETTING) == kind.read_setting(value)
    helptext = build_parser().format_help()
    assert f"--{kind.SETTING} {kind.FLAG_METAVAR}" in helptext and kind.FLAG_HELP[:20] in helptext
    assert KEYS[("", kind.SETTING)][0] == kind.FIELD  # ct -> Settings.ct_id, docker -> docker
    assert KEYS[("", kind.SETTING)][1][0] == (kind.SETTING_TYPE,)
    assert load_config  # the config reads KEYS (test_bad_values checks each key's type)


def test_no_kind_is_written_by_hand_in_the_flags_or_the_config_keys() -> None:
    """cli/main.py and config.py name no kind's flag or key themselves: a
    new kind needs no line there (its Settings field aside)."""
    src = Path(containers.__file__).parent.parent
    for rel in ("cli/main.py", "config.py"):
        tree = ast.parse((src / rel).read_text())
        texts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
        for kind in KINDS:
            if rel == "cli/main.py":  # config.py's error lines may name the flags
                assert f"--{kind.SETTING}" not in texts, (rel, kind.SETTING)
            if rel == "config.py":
                assert not any(
                    isinstance(n, ast.Tuple)
                    and [getattr(e, "value", None) for e in n.elts] == ["", kind.SETTING]
                    for n in ast.walk(tree)
                ), (rel, kind.SETTING)
