"""The target of every command, from its flags: one grammar everywhere.

`gputui [COMMAND] [user@]host[:port][/ct]`, `--host [user@]host[:port][/ct]`
and `--host H --port P --user U --ct N` all name the same target, on the
dashboard, `doctor`, the action verbs, `watch` and `history`
(`remote.target.parse_target` is the one parser). OpenSSH's `-o Key=Value`
sets the ssh options gputui honours (the same fields as its own flags).

Pure: reads and sets attributes of the argparse Namespace; no I/O.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from gputui.containers import FLAG_KINDS
from gputui.errors import ConfigError, GputuiError
from gputui.remote.target import TARGET_EXAMPLE, TARGET_GRAMMAR, TargetSpec, parse_target


def _port(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= value <= 65535:
        raise ValueError("a port number 1-65535")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError("a number of seconds > 0")
    return value


def _keepalive(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError("a number of seconds, 0 for none")
    return value


def _text(text: str) -> str:
    if not text:
        raise ValueError("a value")
    return text


def _strict(text: str) -> bool:
    """StrictHostKeyChecking: yes (the default) or accept-new; gputui never
    connects to a host whose key it cannot check."""
    word = text.lower()
    if word in ("yes", "true"):
        return False
    if word == "accept-new":
        return True
    raise ValueError("yes or accept-new (gputui always checks host keys)")


# ssh_config key (lower case) -> (Namespace attribute, its flag, parser)
SSH_OPTIONS: dict[str, tuple[str, str, Callable[[str], Any]]] = {
    "port": ("port", "-p", _port),
    "user": ("user", "-l", _text),
    "identityfile": ("identity_file", "-i", _text),
    "proxyjump": ("jump", "-J", _text),
    "userknownhostsfile": ("known_hosts", "--known-hosts", _text),
    "connecttimeout": ("connect_timeout", "--connect-timeout", _seconds),
    "stricthostkeychecking": ("accept_new_host_key", "--accept-new-host-key", _strict),
    "serveraliveinterval": ("keepalive", "", _keepalive),
}
SSH_OPTION_NAMES = (
    "Port",
    "User",
    "IdentityFile",
    "ProxyJump",
    "UserKnownHostsFile",
    "ConnectTimeout",
    "StrictHostKeyChecking",
    "ServerAliveInterval",
)


def apply_ssh_options(args: argparse.Namespace) -> None:
    """`-o Key=Value` (or `-o "Key Value"`) onto the fields its flag sets; a
    key gputui does not honour, or one given twice differently, is one line."""
    for given in getattr(args, "ssh_options", None) or []:
        key, sep, value = given.partition("=")
        if not sep:
            key, _, value = given.strip().partition(" ")
        key, value = key.strip(), value.strip()
        known = SSH_OPTIONS.get(key.lower())
        if known is None:
            raise GputuiError(
                f"-o {given}: gputui does not take the ssh option {key!r}",
                f"it takes {', '.join(SSH_OPTION_NAMES)} (others: put them in the ssh config, -F FILE)",
            )
        attr, flag, read = known
        try:
            parsed = read(value)
        except ValueError as err:
            raise GputuiError(f"-o {given}: {key} must be {err}", f"e.g. -o {key}=...") from None
        before = getattr(args, attr, None)
        if attr == "accept_new_host_key":
            if parsed:
                args.accept_new_host_key = True
            continue
        if before is not None and before != parsed:
            also = f"{flag} {before}" if flag else f"-o {key}={before}"
            raise GputuiError(
                f"-o {given} and {also} disagree", "give the value once, with the flag or -o"
            )
        setattr(args, attr, parsed)


def _spec(text: str, where: str) -> TargetSpec:
    try:
        return parse_target(text)
    except ValueError as err:
        raise ConfigError(f"{where}: {err}", f"use {TARGET_GRAMMAR}, {TARGET_EXAMPLE}") from None


def _take_place(args: argparse.Namespace, spec: TargetSpec, given: str) -> None:
    """host/docker:NAME (podman:, pod:) -> args.docker (podman, pod)."""
    if spec.place is None:
        return
    kind, _, name = spec.place.partition(":")
    before = getattr(args, kind, None)
    if before is not None and before != name:
        raise GputuiError(
            f"{given} names {kind} {name}, but --{kind} {before} is given too",
            f"give the container once: host/{kind}:NAME, or --{kind} NAME",
        )
    setattr(args, kind, name)


def _take_ct(args: argparse.Namespace, spec: TargetSpec, given: str) -> None:
    _take_place(args, spec, given)
    if spec.ct_id is None:
        return
    ct_id = getattr(args, "ct", None)  # --ct N
    if ct_id is not None and ct_id != spec.ct_id:
        raise GputuiError(
            f"{given} names CT {spec.ct_id}, but --ct {ct_id} is given too",
            "give the CT once: host/CT, or --ct N",
        )
    args.ct = spec.ct_id


def _parses(text: str) -> bool:
    try:
        parse_target(text)
    except ValueError:
        return False
    return True


def settle_target(args: argparse.Namespace) -> None:
    """The positional TARGET and each --host, as the one grammar: user, host
    and port left as `[user@]host[:port]` in args.host (config.py splits it
    against --user/--port), the CT moved to args.ct."""
    apply_ssh_options(args)
    hosts: list[str] = list(getattr(args, "hosts", None) or [])
    target = getattr(args, "target", None)
    if target is not None:
        if hosts:
            raise GputuiError(
                f"the target is given twice: {target} and --host {hosts[0]}",
                f"give one: {TARGET_GRAMMAR}, or --host",
            )
        if getattr(args, "command", None) == "history" and not _parses(target):
            return  # a name as recorded ("root@10.1.2.6 ct 200"), looked up as it is
        spec = _spec(target, "target")
        _take_ct(args, spec, target)
        hosts = [spec.destination]
        args.hosts = hosts
        args.host = spec.destination
        return
    if not hosts:
        return
    specs = [_spec(h, f"--host {h}") for h in hosts]
    if len(specs) > 1:
        for h, spec in zip(hosts, specs, strict=True):
            if spec.ct_id is not None or spec.place is not None:
                raise GputuiError(
                    f"--host {h} names a CT, but {len(hosts)} hosts are given",
                    "give one --host with its CT, or drop the CT to see every host",
                )
    else:
        _take_ct(args, specs[0], f"--host {hosts[0]}")
    args.hosts = [s.destination for s in specs]
    args.host = args.hosts[0] if len(specs) == 1 else None


def target_query(args: argparse.Namespace) -> str | None:
    """What `history` looks for: the TARGET or --host/--ct, as the user wrote it."""
    host = getattr(args, "host", None)
    ct_id = getattr(args, "ct", None)  # --ct N
    target = getattr(args, "target", None)
    if target is not None and not _parses(target):
        return str(target)
    if not host:
        if ct_id is not None:
            raise GputuiError(f"--ct {ct_id} without a host", "name it: gputui history HOST/CT")
        return None
    spec = parse_target(host)
    user, port = getattr(args, "user", None), getattr(args, "port", None)
    place = next(
        (  # --docker NAME: "docker:NAME" (a CT is `ct_id` above)
            f"{k.SPEC_PREFIXES[0]}:{getattr(args, k.SETTING)}"
            for k in FLAG_KINDS
            if k.SPEC_PREFIXES and getattr(args, k.SETTING, None)
        ),
        None,
    )
    spec = TargetSpec(spec.host, spec.user or user, spec.port or port, ct_id, place)
    return str(spec)
