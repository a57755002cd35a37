"""Shell completion: the bash script runs in a real bash and completes
subcommands, their own flags, choices and ~/.ssh/config hosts; the fish and
zsh scripts are written from the same parser."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gputui.cli.completion import read_parser, script
from gputui.cli.main import build_parser, main


def complete(tmp_path: Path, *words: str) -> list[str]:
    """What bash offers for `gputui WORDS…` (the last word is the one typed)."""
    f = tmp_path / "gputui.bash"
    f.write_text(script("bash", build_parser()))
    quoted = " ".join(f"'{w}'" for w in ("gputui", *words))
    r = subprocess.run(
        [
            "bash",
            "--norc",
            "-c",
            f"source {f}; COMP_WORDS=({quoted}); COMP_CWORD={len(words)}; _gputui; "
            'printf "%s\\n" "${COMPREPLY[@]}"',
        ],
        capture_output=True,
        text=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=20,
    )
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_bash_completes_subcommands_flags_choices_and_hosts(tmp_path: Path) -> None:
    assert complete(tmp_path, "ki") == ["kill"]
    assert complete(tmp_path, "kill", "--fo") == ["--force"]
    assert complete(tmp_path, "--fo") == []  # --force is kill's, not gputui's
    assert "--native" in complete(tmp_path, "dump", "--n")
    assert complete(tmp_path, "completion", "f") == ["fish"]
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text(
        "Host gpu1 gpu2\n    HostName 10.1.2.6\nHost *.lab\n    User x\nhost bastion\n"
    )
    assert complete(tmp_path, "--host", "gpu") == ["gpu1", "gpu2"]
    assert complete(tmp_path, "kill", "-J", "") == ["gpu1", "gpu2", "bastion"]
    assert complete(tmp_path, "--session", "") == []  # a value: nothing to offer


def test_every_flag_of_every_subcommand_is_in_each_script() -> None:
    parser = build_parser()
    fish, zsh, bash = script("fish", parser), script("zsh", parser), script("bash", parser)
    for cmd in read_parser(parser).subcommands:
        line = next(x for x in bash.splitlines() if x.strip().startswith(f"{cmd.name})"))
        for opt in cmd.options:
            for flag in opt.flags:
                assert f" {flag} " in line.replace('"', " "), (cmd.name, flag)
                if flag.startswith("--"):
                    cond = f"__fish_seen_subcommand_from {cmd.name}"
                    assert f"-n '{cond}'" in fish and f"-l {flag[2:]}" in fish
    assert zsh.startswith("#compdef gputui") and "complete -F _gputui gputui" in zsh
    assert "-n '__fish_seen_subcommand_from kill' -l force" in fish
    assert "-n '__fish_use_subcommand' -l host -r -a '(__fish_print_hostnames)'" in fish
    assert "-l config -r -F" in fish
    assert "-d 'py-spy dump of the run\\'s Python processes'" in fish  # quotes escaped


def test_completion_subcommand_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out.startswith("# gputui bash completion")


def test_hosts_come_from_ssh_config_includes_too(tmp_path: Path) -> None:
    """Issue 36: the host list ignored `Include` (a common layout:
    `Include config.d/*` in ~/.ssh/config, one file per lab)."""
    ssh = tmp_path / ".ssh"
    (ssh / "config.d").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (ssh / "config").write_text(
        "Include config.d/*\n"
        "Include=~/elsewhere/lab.conf\n"
        "Host gpu1\n    HostName 10.1.2.6\n"
        "Include config\n"  # itself: followed only to ssh's depth, then it ends
    )
    (ssh / "config.d" / "a.conf").write_text("Host gpu-a1 gpu-a2\n  Include nested.conf\n")
    (ssh / "config.d" / "b.conf").write_text("  host=gpu-b *.wild !gpu-not\n")
    (ssh / "nested.conf").write_text("Host gpu-nested\n")
    (tmp_path / "elsewhere" / "lab.conf").write_text("Host gpu-lab\n")
    offered = complete(tmp_path, "--host", "gpu")
    assert sorted(offered) == ["gpu-a1", "gpu-a2", "gpu-b", "gpu-lab", "gpu-nested", "gpu1"]
