"""Settings: the TOML config file, then command-line flags on top.

The file is optional (default `$XDG_CONFIG_HOME/gputui/config.toml`, else
`~/.config/gputui/config.toml`, or `--config
FILE`). Every mistake in it is a `ConfigError` naming the file, the line and
the key: a TOML syntax error, an unknown key, a value of the wrong type.
`config.example.toml` (beside this module, shipped in the package; `gputui
config --example` prints it) documents every key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re
import shlex
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from gputui.collect.metrics import compile_user_regex
from gputui.containers import FLAG_KINDS, Container, ProxmoxLXC, container_for
from gputui.diagnose import DIAGNOSIS_KEYS, PERCENT_THRESHOLDS, Thresholds
from gputui.errors import ConfigError
from gputui.verbs import FIXED_KEYS, SCREEN_KEYS, VERB_BY_ID, key_clash

DEFAULT_CONFIG = Path("~/.config/gputui/config.toml")  # without $XDG_CONFIG_HOME


def default_config_path() -> Path:
    """$XDG_CONFIG_HOME/gputui/config.toml, else ~/.config/gputui/config.toml
    (a relative $XDG_CONFIG_HOME is ignored, as the XDG spec says)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if base and os.path.isabs(base):
        return Path(base) / "gputui" / "config.toml"
    return DEFAULT_CONFIG.expanduser()


def example_config() -> str:
    """The example config shipped in the package (every key, its default)."""
    from importlib.resources import files

    return files("gputui").joinpath("config.example.toml").read_text(encoding="utf-8")


GPU_SOURCES = ("auto", "host", "ct", "nvml")
CONFIG_MAX_BYTES = 1024 * 1024  # a config is a few hundred bytes; /dev/zero is endless
# Each poll runs commands on the target (agent requests, a process listing):
# below 0.2 s a poll would start before the last one's answers are back on a
# real link, and the target pays for it; above an hour nothing is "live".
MIN_INTERVAL_S = 0.2
MAX_INTERVAL_S = 3600.0
MAX_CONNECT_TIMEOUT_S = 600.0  # a hung host must still end in a message
DAY_S = 86400.0
MAX_HISTORY_MB = 1024.0 * 1024  # 1 TiB: more is a typo, and MiB -> bytes must fit
MAX_VMID = 999_999_999  # Proxmox's own limit
# [history]/[alerts] numbers: (section, key, attribute, above, at most, e.g.)
POSITIVE_RANGES = (
    ("history", "max_mb", "history_max_mb", 0.0, MAX_HISTORY_MB, "256"),
    ("history", "log_every", "history_log_every", 0.0, DAY_S, "60"),
    ("alerts", "quiet_period", "alert_quiet_period", 0.0, 7 * DAY_S, "600"),
)


@dataclass
class RunConfig:
    """How to (re)launch the run: `[run]` in the config file."""

    command: str | None = None  # e.g. "bash /root/start_training.sh"
    cwd: str | None = None
    session: str | None = None  # tmux session name for a launch
    log: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class HostTarget:
    """One host of `[[targets]]`: where to ssh (the rest comes from the
    top-level settings and ~/.ssh/config)."""

    host: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None


@dataclass
class Settings:
    """Everything gputui needs to know about what to watch and how."""

    host: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    ct_id: int | None = None  # a Proxmox CT's number: --ct N, the config's `ct`
    # other kinds of container (gputui/containers/): a name, or [NS/]POD[/C]
    docker: str | None = None
    podman: str | None = None
    pod: str | None = None
    kube_context: str | None = None  # kubectl --context (default: the kubeconfig's)
    session: str | None = None
    log: str | None = None
    interval: float = 1.0
    read_only: bool = False
    local: bool = False
    demo: bool = False
    connect_timeout: float = 10.0
    gpu_source: str = "auto"
    metric_regexes: list[str] = field(default_factory=list)
    run: RunConfig = field(default_factory=RunConfig)
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    ssh_config: str | None = None  # an ssh_config file instead of ~/.ssh/config
    jump: str | None = None  # ProxyJump: [user@]host[:port][,...], as ssh -J
    keepalive: float = 15.0
    config_path: str | None = None  # the gputui config file that was read, if any
    # one line when that file holds secrets and others may read it (exposed_secrets)
    config_exposed: str = ""
    # [history] and [alerts] (gputui.record.history, gputui.record.alerts)
    history: bool = True
    history_path: str | None = None  # default $XDG_STATE_HOME/gputui/history.sqlite
    history_max_mb: float = 256.0
    history_log_every: float = 60.0
    alert_urls: list[str] = field(default_factory=list)
    alert_quiet_period: float = 600.0
    alert_connection_down_after: float = 60.0
    alert_terminal: bool = True
    # [diagnosis], and [ui] stale_after / --stale-after as its stale_after
    diagnosis: Thresholds = field(default_factory=Thresholds)
    keys: dict[str, str] = field(default_factory=dict)  # [keys]: verb id -> key, e.g. kill = "x"
    targets: list[HostTarget] = field(default_factory=list)  # [[targets]]: hosts to watch together


# The defaults table: each setting's one default, for every reader that needs
# one without a Settings at hand (the history's size bound, the alert gate's
# quiet period, the recorder's log reads ...). Read it, never change it;
# config.example.toml shows the same values (tests/test_defaults.py).
DEFAULTS = Settings()

# (section, key) -> (Settings attribute, accepted types, description of the type)
_STR = ((str,), "a string")
_INT = ((int,), "an integer")
_NUM = ((int, float), "a number")
_BOOL = ((bool,), "true or false")
_STRLIST = ((list,), "a list of strings")
_TABLE = ((dict,), "a table of strings")
# [[targets]] key -> accepted types
TARGET_KEYS = {"host": _STR, "port": _INT, "user": _STR, "identity_file": _STR, "known_hosts": _STR}

KEYS: dict[tuple[str, str], tuple[str, tuple[tuple[type, ...], str]]] = {
    ("", "host"): ("host", _STR),
    ("", "port"): ("port", _INT),
    ("", "user"): ("user", _STR),
    ("", "identity_file"): ("identity_file", _STR),
    # each container kind's key, as it declares it: ct, docker, podman, pod
    **{("", k.SETTING): (k.FIELD, _INT if k.SETTING_TYPE is int else _STR) for k in FLAG_KINDS},
    ("", "kube_context"): ("kube_context", _STR),
    ("", "session"): ("session", _STR),
    ("", "log"): ("log", _STR),
    ("ssh", "known_hosts"): ("known_hosts", _STR),
    ("ssh", "config"): ("ssh_config", _STR),
    ("ssh", "jump"): ("jump", _STR),
    ("ssh", "connect_timeout"): ("connect_timeout", _NUM),
    ("ssh", "keepalive"): ("keepalive", _NUM),
    ("ssh", "accept_new_host_key"): ("accept_new_host_key", _BOOL),
    ("ui", "interval"): ("interval", _NUM),
    ("ui", "stale_after"): ("diagnosis.stale_after", _NUM),
    ("ui", "read_only"): ("read_only", _BOOL),
    ("gpu", "source"): ("gpu_source", _STR),
    ("metrics", "regexes"): ("metric_regexes", _STRLIST),
    ("run", "command"): ("run.command", _STR),
    ("run", "cwd"): ("run.cwd", _STR),
    ("run", "session"): ("run.session", _STR),
    ("run", "log"): ("run.log", _STR),
    ("run", "env"): ("run.env", _TABLE),
    ("history", "enabled"): ("history", _BOOL),
    ("history", "path"): ("history_path", _STR),
    ("history", "max_mb"): ("history_max_mb", _NUM),
    ("history", "log_every"): ("history_log_every", _NUM),
    ("alerts", "urls"): ("alert_urls", _STRLIST),
    ("alerts", "quiet_period"): ("alert_quiet_period", _NUM),
    ("alerts", "connection_down_after"): ("alert_connection_down_after", _NUM),
    ("alerts", "terminal"): ("alert_terminal", _BOOL),
    **{("diagnosis", name): (f"diagnosis.{name}", _NUM) for name in DIAGNOSIS_KEYS},
    **{("keys", b): (f"keys.{b}", _STR) for b in (*VERB_BY_ID, *SCREEN_KEYS)},
}
SECTIONS = {s for s, _ in KEYS if s}


def _line_of(text: str, section: str, key: str | None) -> int | None:
    """The line number (1-based) where `key` is set in `[section]`, or where
    the section starts when key is None. A plain scan: good enough to point
    a user at the right line."""
    current = ""
    header = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\"']+)\s*\]\s*(#.*)?$")
    for n, line in enumerate(text.splitlines(), 1):
        m = header.match(line)
        if m:
            current = m.group(1).strip("\"'")
            if key is None and current == section:
                return n
            continue
        if key is not None and current == section:
            km = re.match(r"^\s*[\"']?([A-Za-z0-9_\-]+)[\"']?\s*=", line)
            if km and km.group(1) == key:
                return n
    return None


def _where(path: Path, text: str, section: str, key: str | None) -> str:
    line = _line_of(text, section, key)
    name = f"{section}.{key}" if section and key else (key or f"[{section}]")
    return f"{path}:{line}: `{name}`" if line else f"{path}: `{name}`"


def _check_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _set(settings: Settings, attr: str, value: Any) -> None:
    if attr.startswith("run."):
        setattr(settings.run, attr[4:], value)
    elif attr.startswith("keys."):
        settings.keys[attr[5:]] = value
    elif attr.startswith("diagnosis."):
        settings.diagnosis = dataclasses.replace(settings.diagnosis, **{attr[10:]: value})
    else:
        setattr(settings, attr, value)


def parse_config(text: str, path: Path) -> Settings:
    """Settings from the text of a config file; ConfigError names file:line and key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        msg = str(err)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        where = f"{path}:{m.group(1)}" if m else str(path)
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        raise ConfigError(
            f"{where}: invalid TOML: {reason}",
            "fix that line (`gputui config --example` shows the format)",
        ) from None
    settings = Settings(config_path=str(path))
    for name, value in data.items():
        if name == "targets" and isinstance(value, list):
            settings.targets = _targets(value, text, path)
        elif isinstance(value, dict) and name in SECTIONS:
            for key, v in value.items():
                _apply(settings, text, path, name, key, v)
        elif isinstance(value, dict):
            raise ConfigError(
                f"{_where(path, text, name, None)}: unknown section",
                f"known sections: {', '.join(sorted('[' + s + ']' for s in SECTIONS))}",
            )
        else:
            _apply(settings, text, path, "", name, value)
    _validate(settings, text, path)
    return settings


def _targets(items: list[Any], text: str, path: Path) -> list[HostTarget]:
    """`[[targets]]` tables -> hosts; ConfigError names the table and key."""
    out: list[HostTarget] = []
    for n, item in enumerate(items, 1):
        where = f"{path}: [[targets]] number {n}"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: must be a table", 'write [[targets]] then host = "..."')
        for key, value in item.items():
            spec = TARGET_KEYS.get(key)
            if spec is None:
                raise ConfigError(
                    f"{where}: unknown key `{key}`",
                    _unknown_key_fix("targets", key, list(TARGET_KEYS)),
                )
            if not _check_type(value, spec[0]):
                raise ConfigError(
                    f"{where}: `{key}` must be {spec[1]}, not {type(value).__name__} {value!r}",
                    "fix the value (`gputui config --example` shows each key)",
                )
        host = item.get("host")
        if not host or host.startswith("-") or any(c.isspace() for c in host):
            raise ConfigError(
                f"{where}: `host` must name a host", 'e.g. host = "gpu1" or host = "10.1.2.6"'
            )
        port = item.get("port")
        if port is not None and not 1 <= port <= 65535:
            raise ConfigError(f"{where}: port {port} is out of range 1-65535", "fix the port")
        out.append(HostTarget(**item))
    return out


def _unknown_key_fix(section: str, key: str, known: list[str]) -> str:
    """What the user most likely meant: a key of this section or another
    one spelt alike (or the same key, in the section it belongs in), else
    the keys there are."""
    where = f" in [{section}]" if section else " at the top"
    if section == "" and key == "targets":
        return 'each host is a table: write [[targets]] then host = "..."'
    pairs = [(section, k) for k in known] + [(s, k) for s, k in KEYS if s != section]
    ratio = {p: difflib.SequenceMatcher(None, key, p[1]).ratio() for p in pairs}
    home, best = max(pairs, key=lambda p: ratio[p])  # the first, this section's, on a tie
    place = f"in [{home}]" if home else "at the top (before any [section])"
    if ratio[(home, best)] == 1.0:
        return f"`{key}` belongs {place}: move it there"
    if ratio[(home, best)] >= 0.75:
        there = "" if home == section else f" {place}"
        return f"did you mean `{best}`{there}? known keys{where}: {', '.join(known)}"
    return f"known keys{where}: {', '.join(known)}"


def _apply(settings: Settings, text: str, path: Path, section: str, key: str, value: Any) -> None:
    spec = KEYS.get((section, key))
    if spec is None:
        known = sorted(k for s, k in KEYS if s == section)
        raise ConfigError(
            f"{_where(path, text, section, key)}: unknown key",
            _unknown_key_fix(section, key, known),
        )
    attr, (types, wanted) = spec
    if not _check_type(value, types):
        raise ConfigError(
            f"{_where(path, text, section, key)}: must be {wanted}, not {type(value).__name__} {value!r}",
            "fix the value (`gputui config --example` shows each key)",
        )
    if types == (list,) and not all(isinstance(x, str) for x in value):
        raise ConfigError(
            f"{_where(path, text, section, key)}: must be {wanted}", "quote each item"
        )
    if types == (dict,):
        bad = [k for k, x in value.items() if not isinstance(x, str)]
        if bad:
            raise ConfigError(
                f"{_where(path, text, section, key)}: value of {bad[0]!r} must be a string",
                'quote it, e.g. PYTHONUNBUFFERED = "1"',
            )
        value = dict(value)
    if types == _NUM[0]:
        value = _as_float(value)
    _set(settings, attr, value)


def _as_float(value: float) -> float:
    """A TOML number as a float: an int too big for one is inf (then
    refused by _validate, as nan and inf are), not an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _get(settings: Settings, attr: str) -> Any:
    if attr.startswith("diagnosis."):
        return getattr(settings.diagnosis, attr[10:])
    return getattr(settings, attr, None)


def _all_finite(s: Settings, where: Callable[[str, str, str], str]) -> None:
    """Every number key finite: `quiet_period = nan` would silence every
    alert, `max_mb = inf` crash the history (the checks above name most)."""
    for (section, key), (attr, (types, _)) in KEYS.items():
        v = _get(s, attr) if types == _NUM[0] else None
        if isinstance(v, float) and not math.isfinite(v):
            name = f"{section}.{key}" if section else key
            raise ConfigError(
                f"{where(section, key, name)}: {v} is not a finite number",
                "write a number (`gputui config --example` shows each key)",
            )


def split_destination(text: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` as ssh users write it -> (user, host, port).
    An IPv6 address takes a port only in brackets (`[::1]:2222`); a bare
    one (`::1`) is all host. ValueError names what is wrong."""
    user, at, rest = text.rpartition("@")
    if at and not user:
        raise ValueError(f"{text!r} has an empty user before @")
    port_text = ""
    if rest.startswith("["):
        host, bracket, after = rest[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ValueError(f"{text!r}: write an IPv6 address as [addr] or [addr]:port")
        port_text = after[1:]
        if after and not port_text:
            raise ValueError(f"{text!r} ends in ':' with no port")
    elif rest.count(":") == 1:
        host, _, port_text = rest.partition(":")
        if not port_text:
            raise ValueError(f"{text!r} ends in ':' with no port")
    else:
        host = rest
    if not host:
        raise ValueError(f"{text!r} has no host name")
    port = None
    if port_text:
        if not (port_text.isascii() and port_text.isdigit()):
            raise ValueError(f"{text!r}: port {port_text!r} is not a number")
        port = int(port_text)
    return (user or None), host, port


def _apply_destination(s: Settings, where: Callable[[str, str, str], str]) -> None:
    """--host user@host:port: the user and port go where --user and --port
    would put them; the same value twice is fine, two different ones are not."""
    if not s.host:
        return
    try:
        user, host, port = split_destination(s.host)
    except ValueError as err:
        raise ConfigError(
            f"{where('', 'host', '--host')}: {err}", "use [user@]host[:port], e.g. root@10.1.2.6"
        ) from None
    if user is not None and s.user is not None and s.user != user:
        raise ConfigError(
            f"{where('', 'host', '--host')}: user {user!r} in the host, but {s.user!r} given too",
            "give the user once: user@host, or --user/-l",
        )
    if port is not None and s.port is not None and s.port != port:
        raise ConfigError(
            f"{where('', 'host', '--host')}: port {port} in the host, but {s.port} given too",
            "give the port once: host:port, or --port/-p",
        )
    s.host = host
    s.user = user if user is not None else s.user
    s.port = port if port is not None else s.port


def _validate(s: Settings, text: str = "", path: Path | None = None) -> None:
    """Value checks shared by the file and the flags."""

    def where(section: str, key: str, flag: str) -> str:
        if path is not None and _line_of(text, section, key):
            return _where(path, text, section, key)
        return flag

    _apply_destination(s, where)

    _validate_keys(s, where)
    if s.port is not None and not 1 <= s.port <= 65535:
        raise ConfigError(
            f"{where('', 'port', '--port')}: port {s.port} is out of range", "use 1-65535"
        )
    if s.ct_id is not None and not 1 <= s.ct_id <= MAX_VMID:
        raise ConfigError(
            f"{where('', 'ct', '--ct')}: CT number {s.ct_id} is invalid",
            f"use the CT id from {ProxmoxLXC.HOW_TO_LIST}, e.g. 200",
        )
    _validate_container(s, where)
    _validate_seconds(s, where)
    if s.gpu_source not in GPU_SOURCES:
        raise ConfigError(
            f"{where('gpu', 'source', 'gpu source')}: unknown GPU source {s.gpu_source!r}",
            f"use one of: {', '.join(GPU_SOURCES)}",
        )
    _all_finite(s, where)
    _validate_ranges(s, where)
    for rx in s.metric_regexes:
        try:
            compile_user_regex(rx)  # the parser's own check, so the two never disagree
        except ConfigError as err:
            where_ = where("metrics", "regexes", "metric regex")
            raise ConfigError(f"{where_}: {err.problem}", err.fix) from None


def _validate_keys(s: Settings, where: Callable[[str, str, str], str]) -> None:
    """[keys]: each a key name, and no key bound to two verbs."""
    for name, key in s.keys.items():
        if not key.strip() or any(c.isspace() for c in key):
            raise ConfigError(
                f"{where('keys', name, '[keys]')}: {key!r} is not a key name",
                'use one key as Textual names it, e.g. "x", "ctrl+k" or "f5"',
            )
    clash = key_clash(s.keys)
    if clash is not None:
        name, key, other = clash
        raise ConfigError(
            f"{where('keys', name, '[keys]')}: {key!r} is already the key of {other}",
            f"pick another key for {name}"
            + ("" if other in FIXED_KEYS else f", or give {other} another one in [keys] too"),
        )


def _validate_seconds(s: Settings, where: Callable[[str, str, str], str]) -> None:
    """The refresh interval, the stale threshold and ssh's timeouts."""
    if not (math.isfinite(s.interval) and MIN_INTERVAL_S <= s.interval <= MAX_INTERVAL_S):
        raise ConfigError(
            f"{where('ui', 'interval', '--interval')}: interval {s.interval:g} s is out of range",
            f"use {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds, e.g. 1.0",
        )
    stale = s.diagnosis.stale_after
    if stale is not None and not (math.isfinite(stale) and stale > 0):
        raise ConfigError(
            f"{where('ui', 'stale_after', '--stale-after')}: must be a finite number of seconds > 0",
            "e.g. 120, or leave it out for adaptive",
        )
    if not (math.isfinite(s.connect_timeout) and 0 < s.connect_timeout <= MAX_CONNECT_TIMEOUT_S):
        raise ConfigError(
            f"{where('ssh', 'connect_timeout', '--connect-timeout')}: "
            f"{s.connect_timeout:g} s is out of range",
            f"use a number of seconds above 0 and at most {MAX_CONNECT_TIMEOUT_S:g}, e.g. 10",
        )
    if not (math.isfinite(s.keepalive) and s.keepalive >= 0):
        raise ConfigError(
            f"{where('ssh', 'keepalive', 'keepalive')}: must be a finite number of seconds",
            "e.g. 15, or 0 to turn keepalives off",
        )


def _validate_ranges(s: Settings, where: Callable[[str, str, str], str]) -> None:
    """The bounded numbers: POSITIVE_RANGES, the alert delay, [diagnosis]."""
    for section, key, attr, low, high, eg in POSITIVE_RANGES:
        v = getattr(s, attr)
        if not (math.isfinite(v) and low < v <= high):  # nan fails every comparison
            raise ConfigError(
                f"{where(section, key, f'{section}.{key}')}: {v:g} is out of range",
                f"use a number above {low:g} and at most {high:g}, e.g. {eg}",
            )
    down = s.alert_connection_down_after
    if not (math.isfinite(down) and 0 <= down <= DAY_S):
        raise ConfigError(
            f"{where('alerts', 'connection_down_after', 'alerts.connection_down_after')}: "
            f"must be 0 to {DAY_S:g} seconds",
            "e.g. 60",
        )
    for name in DIAGNOSIS_KEYS:
        v = getattr(s.diagnosis, name)
        percent = name in PERCENT_THRESHOLDS
        if not math.isfinite(v) or v <= 0 or (percent and v > 100):
            raise ConfigError(
                f"{where('diagnosis', name, 'diagnosis.' + name)}: "
                + ("must be a percentage above 0 and at most 100" if percent else "must be > 0"),
                f"e.g. {getattr(Thresholds(), name):g} (the default; see `gputui config --example`)",
            )


def settings_container(settings: Settings) -> Container:
    """Where the settings' run lives: --ct N, --docker/--podman NAME, --pod
    [NS/]POD[/C] (config keys ct, docker, podman, pod), else the host.
    ValueError: one line, for a bad name or more than one given."""
    given = [
        (kind, value)
        for kind in FLAG_KINDS  # each kind's field: ct, docker, podman, pod
        if (value := getattr(settings, kind.FIELD)) is not None
    ]
    if len(given) > 1:
        both = " and ".join(f"--{k.SETTING} {v}" for k, v in given)
        raise ValueError(f"{both} both say where the run is: give one")
    if not given:
        return container_for(None)
    kind, value = given[0]
    return kind.from_setting(value, context=settings.kube_context or "")


def settings_naming(settings: Settings, container: Container) -> Settings:
    """The settings with the run in `container` (its kind's field set, every
    other kind's cleared): what `settings_container` reads back."""
    fields: dict[str, Any] = {kind.FIELD: None for kind in FLAG_KINDS}
    fields.update(container.settings_fields())
    return dataclasses.replace(settings, **fields)


def _validate_container(s: Settings, where: Callable[[str, str, str], str]) -> None:
    """--docker/--podman/--pod (or the config's keys): a name the kind
    takes, and one place only (with --ct too)."""
    try:
        settings_container(s)
    except ValueError as err:
        named = [k.SETTING for k in FLAG_KINDS if getattr(s, k.FIELD) is not None]
        key = named[-1] if named else "ct"
        raise ConfigError(
            f"{where('', key, f'--{key}')}: {err}",
            "--ct N (Proxmox), --docker NAME, --podman NAME or --pod [NAMESPACE/]POD[/CONTAINER]",
        ) from None


def load_config(path: str | Path | None = None) -> Settings:
    """Settings from the config file (`path`, else the default one if it exists)."""
    explicit = path is not None
    p = Path(path).expanduser() if path is not None else default_config_path()
    if not p.exists():
        if explicit:
            raise ConfigError(
                f"config file {p} does not exist", "check the path given with --config"
            )
        return Settings()
    # stat first, never open blind: opening a FIFO blocks, /dev/zero never ends
    kind = _not_a_file(p)
    if kind:
        raise ConfigError(
            f"config file {p} is {kind}, not a file", "pass a TOML file with --config"
        )
    try:
        if p.stat().st_size > CONFIG_MAX_BYTES:
            raise ConfigError(
                f"config file {p} is over {CONFIG_MAX_BYTES // 1024} KiB",
                "pass the gputui TOML config (a few lines, see `gputui config --example`)",
            )
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"cannot read config file {p}: {err}", "check its permissions and encoding"
        ) from None
    settings = parse_config(text, p)
    with contextlib.suppress(OSError):
        settings.config_exposed = exposed_secrets(settings, p, p.stat().st_mode)
    return settings


def exposed_secrets(settings: Settings, path: Path, mode: int) -> str:
    """The one-line warning for a config file that holds secrets (`[alerts]
    urls` carry tokens, `[run] env` values) while its mode lets group or
    others read it; "" otherwise (issue 34)."""
    held = [name for name, v in (("[alerts] urls", settings.alert_urls), ("[run] env",
            settings.run.env)) if v]  # fmt: skip
    if not held or not mode & 0o044:
        return ""
    return (
        f"config file {path} holds secrets ({' and '.join(held)}) and others may read it "
        f"(mode {stat.S_IMODE(mode):o}) — chmod 600 {shlex.quote(str(path))}"
    )


def _not_a_file(p: Path) -> str:
    """'' for a regular file (after symlinks), else what it is instead."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return ""  # the caller's open names the error
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_local_files(s: Settings) -> None:
    """The ssh files named by flags or the config must be files on this
    machine: asyncssh's own errors for them read like an unreachable host."""
    if s.local or s.demo or not s.host:
        return
    checks = (
        ("identity file", s.identity_file, "-i / identity_file", "pass the private key file"),
        ("known_hosts file", s.known_hosts, "--known-hosts / [ssh] known_hosts", ""),
        ("ssh config file", s.ssh_config, "--ssh-config / [ssh] config", "pass an ssh_config file"),
    )
    for what, value, given, fix in checks:
        if not value:
            continue
        p = Path(value).expanduser()
        if not p.exists():
            if what == "known_hosts file" and s.accept_new_host_key:
                continue  # created when the new key is accepted, as OpenSSH does
            if what == "known_hosts file":
                fix = (
                    "check the path, or create it: `ssh-keyscan HOST >> FILE` after checking "
                    "the fingerprint, or add --accept-new-host-key"
                )
            raise ConfigError(f"{what} {p} does not exist", fix or f"check the path ({given})")
        kind = _not_a_file(p)
        if kind:
            raise ConfigError(
                f"{what} {p} is {kind}, not a file", f"{fix or 'pass a file'} ({given})"
            )


# flag dest -> Settings attribute (`diagnosis.X`: Settings.diagnosis.X)
FLAG_FIELDS = {
    "host": "host",
    "port": "port",
    "user": "user",
    "identity_file": "identity_file",
    **{kind.SETTING: kind.FIELD for kind in FLAG_KINDS},  # --ct, --docker, --podman, --pod
    "kube_context": "kube_context",
    "session": "session",
    "log": "log",
    "interval": "interval",
    "stale_after": "diagnosis.stale_after",
    "known_hosts": "known_hosts",
    "ssh_config": "ssh_config",
    "connect_timeout": "connect_timeout",
    "jump": "jump",
}
FLAG_BOOLS = ("read_only", "local", "demo", "accept_new_host_key")


def settings_from(args: Any, base: Settings | None = None) -> Settings:
    """Flags on top of the config: a flag that was given wins."""
    s = base if base is not None else load_config(getattr(args, "config", None))
    for dest, attr in FLAG_FIELDS.items():
        value = getattr(args, dest, None)
        if value is not None:
            _set(s, attr, value)
    for dest in FLAG_BOOLS:
        if getattr(args, dest, False):
            setattr(s, dest, True)
    if s.local and s.demo:
        raise ConfigError("--local and --demo cannot be combined", "pick one")
    _validate(s)
    remote = not (s.local or s.demo or getattr(args, "command", None) == "watch")  # watch local
    if remote:
        _require_full_log_paths(s, log_flag=getattr(args, "log", None) is not None)
    return s


def _require_full_log_paths(s: Settings, log_flag: bool) -> None:
    """--log, the config's `log` and `[run] log` on a remote target: a
    relative path would be looked for in the ssh user's home (and `[run]`'s
    launch writes it in `[run] cwd`), not where the run writes it."""
    where = settings_container(s).words
    for value, section, flag in ((s.log, "", "--log" if log_flag else ""), (s.run.log, "run", "")):
        if not value or value.startswith("/"):
            continue
        said = f"{flag} {value}" if flag else f"{_config_key(s, section, 'log')}: {value!r}"
        raise ConfigError(
            f"{said} is not a full path: in {where} it would be looked for in the ssh user's home",
            f"give the path the run writes, as {where} sees it, e.g. /workspace/train.log",
        )


def _config_key(s: Settings, section: str, key: str) -> str:
    """`FILE:LINE: `section.key``, naming where the config sets it."""
    if not s.config_path:
        return f"`{section}.{key}`" if section else f"`{key}`"
    path = Path(s.config_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    return _where(path, text, section, key)
