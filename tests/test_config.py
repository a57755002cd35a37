"""The config file: every key documented, every mistake named with file:line and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gputui import config
from gputui.config import KEYS, Settings, load_config, parse_config, settings_from
from gputui.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parent.parent / "src" / "gputui" / "config.example.toml"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text)
    return p


def test_example_parses_into_settings() -> None:
    s = load_config(EXAMPLE)
    assert s.gpu_source == "auto" and s.connect_timeout == 10.0 and s.keepalive == 15.0
    assert len(s.metric_regexes) == 1 and "(?P<step>" in s.metric_regexes[0]


def test_example_documents_every_key() -> None:
    text = EXAMPLE.read_text()
    for section, key in KEYS:
        if section:
            assert f"[{section}]" in text, section
        # set or shown commented out, with a comment somewhere above it
        assert re.search(rf"^#? ?{re.escape(key)} =", text, re.M), f"{section}.{key} undocumented"


def test_the_example_copied_as_it_is_names_no_machine_and_no_run() -> None:
    """The README copies the example as the config: its live ct, session and
    log turned `gputui --host H` into the run view of a session that does
    not exist, and its [run] env made every command warn that the file holds
    secrets (issue 46). Every value naming a machine or a run is commented
    out — and each is still there to uncomment, and parses when it is."""
    s = load_config(EXAMPLE)
    assert (s.host, s.user, s.ct_id, s.session, s.log) == (None, None, None, None, None)
    assert not s.run.command and not s.run.env and not s.alert_urls
    text = EXAMPLE.read_text()
    for line in (
        '# host = "10.1.2.6"',
        "# ct = 200",
        '# session = "dflash"',
        '# log = "/workspace/train.log"',
        '# env = { WANDB_MODE = "offline" }',
    ):
        assert line in text.splitlines(), line  # fmt: skip
    head, cut, tail = text.partition("\n[history]")  # [[targets]]' own examples stay
    uncommented = re.sub(r"^# ((?:host|user|ct|session|log|command|cwd|env) = )", r"\1",
                         head, flags=re.M)  # fmt: skip
    full = load_config(write_text_file(uncommented + cut + tail))
    assert (full.host, full.ct_id, full.session, full.log) == (
        "10.1.2.6", 200, "dflash", "/workspace/train.log",
    )  # fmt: skip
    assert full.run.command == "bash /root/start_training.sh"
    assert full.run.env == {"WANDB_MODE": "offline"}


def write_text_file(text: str) -> Path:
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="gputui-example-"))
    return write(d, text)


def test_missing_default_file_is_fine(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(config, "DEFAULT_CONFIG", tmp_path / "nope.toml")
    assert load_config() == Settings()


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('host = "h"\nport = 22\n[ui\n', ":3: invalid TOML"),
        ('host = "h"\nhots = "x"\n', ":2: `hots`: unknown key"),
        ("[gpu]\nsource = 3\n", ":2: `gpu.source`: must be a string, not int 3"),
        ("[ui]\nread_only = 1\n", ":2: `ui.read_only`: must be true or false"),
        ("port = true\n", ":1: `port`: must be an integer"),
        ('[ssh]\nconnect_timeout = "10"\n', ":2: `ssh.connect_timeout`: must be a number"),
        ('[metrics]\nregexes = "step"\n', ":2: `metrics.regexes`: must be a list of strings"),
        ("[metrics]\nregexes = [1]\n", ":2: `metrics.regexes`: must be a list of strings"),
        ("[run]\nenv = { A = 1 }\n", ":2: `run.env`: value of 'A' must be a string"),
        ("\n[colour]\nx = 1\n", ":2: `[colour]`: unknown section"),
        ('[gpu]\nsource = "gpu0"\n', ":2: `gpu.source`: unknown GPU source"),
        ("[metrics]\nregexes = ['step (\\d+']\n", ":2: `metrics.regexes`: invalid regex"),
        ("[metrics]\nregexes = ['step (\\d+)']\n", "has no named group"),
        ("port = 70000\n", ":1: `port`: port 70000 is out of range"),
        ("[ui]\ninterval = 0\n", ":2: `ui.interval`: interval 0 s is out of range — use 0.2"),
    ],
)
def test_mistakes_name_file_line_and_key(tmp_path: Path, text: str, expected: str) -> None:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert expected in msg, msg
    assert str(p) in msg or "has no named group" in expected
    assert "\n" not in msg and " — " in msg  # one line, with a fix


def test_flags_override_the_file(tmp_path: Path) -> None:
    p = write(
        tmp_path, 'host = "a"\nct = 200\nsession = "s"\n[ui]\ninterval = 2.0\nread_only = false\n'
    )
    args = type(
        "A", (), {"config": str(p), "host": "b", "ct": None, "interval": 0.5, "read_only": True}
    )()
    s = settings_from(args)
    assert (s.host, s.ct_id, s.session, s.interval, s.read_only) == ("b", 200, "s", 0.5, True)
    assert s.config_path == str(p)


def test_parse_config_keeps_defaults_for_unset_keys() -> None:
    s = parse_config('host = "h"\n', Path("x.toml"))
    assert s.interval == 1.0 and s.diagnosis.stale_after is None and s.gpu_source == "auto"
    assert s.run.env == {} and s.metric_regexes == []


def test_keys_section_binds_verbs_and_refuses_unknown_ids_and_blank_keys(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[keys]\nkill = "x"\nrelaunch = "ctrl+r"\n')
    assert load_config(str(path)).keys == {"kill": "x", "relaunch": "ctrl+r"}
    path.write_text('[keys]\nexplode = "x"\n')
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(str(path))
    path.write_text('[keys]\nkill = " "\n')
    with pytest.raises(ConfigError, match=r"c\.toml:2: `keys\.kill`: ' ' is not a key name"):
        load_config(str(path))


@pytest.mark.parametrize(
    "text, parts",
    [
        ("gpu1", (None, "gpu1", None)),
        ("root@10.1.2.6", ("root", "10.1.2.6", None)),
        ("root@10.1.2.6:2222", ("root", "10.1.2.6", 2222)),
        ("gpu1:22", (None, "gpu1", 22)),
        ("::1", (None, "::1", None)),
        ("me@[fd00::6]:2200", ("me", "fd00::6", 2200)),
        ("[fd00::6]", (None, "fd00::6", None)),
        ("a@b@host", ("a@b", "host", None)),
    ],
)
def test_split_destination_as_ssh_users_write_it(
    text: str, parts: tuple[str | None, str, int | None]
) -> None:
    assert config.split_destination(text) == parts


@pytest.mark.parametrize("text", ["@h", "h:", "h:x", "root@", "[::1", "[::1]x", "h:２２"])
def test_split_destination_refuses_what_ssh_would_not_take(text: str) -> None:
    with pytest.raises(ValueError):
        config.split_destination(text)


def test_host_flag_carries_user_and_port_and_refuses_two_different_ones(tmp_path: Path) -> None:
    from gputui.cli.main import parse

    empty = tmp_path / "empty.toml"
    empty.write_text("")

    _, s = parse(["--config", str(empty), "--host", "root@10.1.2.6:2222", "--ct", "200"])
    assert (s.user, s.host, s.port, s.ct_id) == ("root", "10.1.2.6", 2222, 200)
    _, s = parse(["--config", str(empty), "--host", "h", "-p", "2200", "-l", "me", "-J", "j@b:22"])
    assert (s.user, s.host, s.port, s.jump) == ("me", "h", 2200, "j@b:22")
    _, s = parse(["--config", str(empty), "--host", "me@h", "-l", "me"])  # the same twice: fine
    assert (s.user, s.host) == ("me", "h")
    with pytest.raises(ConfigError, match=r"--host: user 'root' in the host, but 'me' given too"):
        parse(["--config", str(empty), "--host", "root@h", "-l", "me"])
    with pytest.raises(ConfigError, match="port 22 in the host, but 2200 given too"):
        parse(["--config", str(empty), "--host", "h:22", "--port", "2200"])
    with pytest.raises(ConfigError, match="use \\[user@\\]host\\[:port\\]"):
        parse(["--config", str(empty), "--host", "h:"])


def test_config_host_with_user_and_port(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('host = "root@gpu1:2222"\n')
    s = load_config(str(path))
    assert (s.user, s.host, s.port) == ("root", "gpu1", 2222)


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ('hots = "h"\n', "did you mean `host`? known keys at the top: ct, docker, host"),
        ("interval = 2\n", "`interval` belongs in [ui]: move it there"),
        ('[ui]\nhost = "h"\n', "`host` belongs at the top (before any [section]): move it there"),
        ("[diagnosis]\nstale_afterr = 3\n", "did you mean `stale_after` in [ui]?"),
        ('targets = "gpu1"\n', 'write [[targets]] then host = "..."'),
        ('[[targets]]\nhots = "gpu1"\n', "did you mean `host`?"),
        ("zzz = 1\n", "known keys at the top: ct, docker, host, identity_file"),
    ],
)
def test_an_unknown_key_says_what_was_meant(tmp_path: Path, text: str, fix: str) -> None:
    """A typo or a key in the wrong section: the line says the likely key
    and where it belongs, not only the list of keys of this section."""
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert "unknown key" in str(err.value) and fix in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("keys", "words"),
    [
        (
            'kill = "q"',
            "`keys.kill`: 'q' is already the key of quit — pick another key for kill, or",
        ),
        ('filter = "?"', "'?' is already the key of help"),
        ('relaunch = "g"', "'g' is already the key of graphs — pick another key for relaunch"),
        ('dump = "K"', "'K' is already the key of force_kill"),
        ('kill = "k,p"', "'p' is already the key of pause"),
    ],
)
def test_one_key_for_two_bindings_is_refused(tmp_path: Path, keys: str, words: str) -> None:
    """kill = "q" left no key to quit (q opened the kill box instead)."""
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, f"[keys]\n{keys}\n"))
    assert words in str(err.value), str(err.value)


def test_keys_may_swap_when_both_move(tmp_path: Path) -> None:
    s = load_config(write(tmp_path, '[keys]\nquit = "x"\nkill = "q,k"\nhelp = "?"\n'))
    assert s.keys == {"quit": "x", "kill": "q,k", "help": "?"}
