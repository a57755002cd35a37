"""Which hosts to watch: `--host a --host b`, else `[[targets]]` in the config,
else the one host of the settings — each as its own Settings.

    gputui --host H            no --ct: the host view (every GPU, every container)
    gputui --host a --host b   the host view of both, one row per host
    gputui --host H --ct N     the run view of one run, as before
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gputui.config import HostTarget, Settings
from gputui.containers import FLAG_KINDS
from gputui.errors import ConfigError, GputuiError
from gputui.remote.target import TARGET_GRAMMAR, parse_target


def host_settings(settings: Settings, flag_hosts: list[str] | None = None) -> list[Settings]:
    """One Settings per host, the rest shared. Hosts given as flags win over
    the config's `[[targets]]`; a target's port/user/key/known_hosts win
    over the top-level ones."""
    if flag_hosts and len(flag_hosts) > 1:
        if len(set(flag_hosts)) != len(flag_hosts):
            raise GputuiError("the same --host is given twice", "name each host once")
        return [_for_host(settings, HostTarget(h), "--host") for h in flag_hosts]
    if flag_hosts or not settings.targets:
        return [settings]
    return [_for_host(settings, t, "[[targets]] host") for t in settings.targets]


def _for_host(settings: Settings, t: HostTarget, where: str) -> Settings:
    """The settings for one host: `[user@]host[:port][/ct]`, the grammar of
    --host and every command's TARGET (a CT there is that host's run, for
    `watch`; the host view shows every CT whatever it names)."""
    try:
        spec = parse_target(t.host)
    except ValueError as err:
        raise ConfigError(f"{where}: {err}", f"use {TARGET_GRAMMAR}, e.g. root@10.1.2.6") from None
    port = t.port if t.port is not None else spec.port
    s = dataclasses.replace(
        settings,
        host=spec.host,
        port=port if port is not None else settings.port,
        user=t.user or spec.user or settings.user,
        identity_file=t.identity_file or settings.identity_file,
        known_hosts=t.known_hosts or settings.known_hosts,
        targets=[],
    )
    if spec.ct_id is not None:
        s.ct_id = spec.ct_id
    if spec.place is not None:  # host/docker:NAME (podman:, pod:)
        kind, _, name = spec.place.partition(":")
        setattr(s, kind, name)
    return s


def wants_host_view(hosts: list[Settings]) -> bool:
    """The host view, not one run's: several hosts, or one ssh host with no
    container, session or log named (those name a run)."""
    if len(hosts) > 1:
        return True
    s = hosts[0]
    if s.local or s.demo or not s.host:
        return False
    run_log = getattr(s.run, "log", None)
    named = [getattr(s, kind.FIELD) for kind in FLAG_KINDS]  # --ct, --docker, ...
    return all(c is None for c in named) and not s.session and not s.log and not run_log


def several_with_run_flags(hosts: list[Settings], args: Any) -> None:
    """--ct/--session/--log name one run: refuse them with several hosts."""
    if len(hosts) > 1:
        for flag in (*(kind.SETTING for kind in FLAG_KINDS), "session", "log"):
            if getattr(args, flag, None) is not None:
                raise GputuiError(
                    f"--{flag} names one run, but {len(hosts)} hosts are given",
                    f"give one --host with --{flag}, or drop --{flag} to see every host",
                )
