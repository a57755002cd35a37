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
    named = settings_naming(Settings(ct=201, docker="other"), where)
    assert settings_container(named) == where
    set_fields = {k.SETTING for k in KINDS if getattr(named, k.SETTING) is not None}
    assert set_fields == ({type(where).SETTING} if where != Host() else set())


def test_two_kinds_named_is_one_line_naming_both() -> None:
    with pytest.raises(ValueError) as err:
        settings_container(Settings(ct=200, podman="trainer"))
    assert str(err.value) == "--ct 200 and --podman trainer both say where the run is: give one"


def test_a_kinds_spec_prefix_is_its_setting() -> None:
    """`host/docker:NAME` becomes --docker NAME by the prefix alone
    (cli/targets.py, host/targets.py, record/watch.py): a kind named in a
    spec is named by the same word in the flags and the config."""
    for kind in KINDS:
        assert kind.SETTING
        if kind.SPEC_PREFIXES:
            assert kind.SPEC_PREFIXES[0] == kind.SETTING == kind.kind, kind
