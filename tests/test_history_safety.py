"""The history file and its CSV against what others put in the way: a path
in a shared directory does not lock that directory, a symlink planted at
the path is refused, and the CSV carries no raw control character and no
formula from a name or title the run chose."""

from __future__ import annotations

import csv
import io
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputui.errors import GputuiError
from gputui.record.history import EventRow, HistoryWriter

HOSTILE = [
    "=SUM(1+1)",
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1)",
    "\t=1+1",
    "\r=1+1",
    "\n=1+1",
    "ok\x1b]0;owned\x07\rsplit\nrow\x85",
]


def mode_of(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_a_history_path_in_a_shared_directory_leaves_its_mode_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    w = HistoryWriter(shared / "x.sqlite")
    w.target_id("t").result()
    w.close()
    assert mode_of(shared) == 0o1777
    assert mode_of(shared / "x.sqlite") == 0o600
    # a directory gputui makes for the file is its own: private
    w = HistoryWriter(tmp_path / "made" / "here" / "h.sqlite")
    w.close()
    assert mode_of(tmp_path / "made" / "here") == 0o700


@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_a_symlink_at_the_history_path_is_refused(tmp_path: Path, suffix: str) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    victim.chmod(0o644)
    (shared / f"x.sqlite{suffix}").symlink_to(victim)
    with pytest.raises(GputuiError) as err:
        HistoryWriter(shared / "x.sqlite").close()
    assert "symbolic link" in str(err.value) and "\n" not in err.value.problem
    assert victim.read_bytes() == b"" and mode_of(victim) == 0o644


def test_a_fifo_at_the_history_path_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "x.sqlite")
    with pytest.raises(GputuiError, match="not a regular file"):
        HistoryWriter(tmp_path / "x.sqlite").close()


def test_history_csv_has_no_control_characters_and_no_formulas(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    w = HistoryWriter(db)
    tid = w.target_id("root@h ct 200").result()
    now = time.time()
    for i, text in enumerate(HOSTILE):
        w.add_event(tid, EventRow(now - 60 + i, "exit", text, "exit status 1", "", text)).result()
    w.close()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[history]\npath = "{db}"\n')
    res = subprocess.run(
        [sys.executable, "-m", "gputui", "--config", str(cfg), "history", "--csv", "--since", "1h"],
        capture_output=True,
        timeout=60,
        env=dict(os.environ, NO_COLOR="1"),
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout.decode().replace("\r\n", "\n")  # CSV's own row ends
    assert not any(c in out for c in "\x1b\x07\r\x85\t"), repr(out)
    rows = [r for r in csv.reader(io.StringIO(out)) if r and r[0] == "event"]
    assert len(rows) == len(HOSTILE)  # no row split by a raw line break
    for row in rows:
        for cell in row[2:]:
            assert cell[:1] not in ("=", "+", "-", "@"), row
            assert cell.isprintable(), row
    names = [r[3] for r in rows]
    assert names[0] == "'=SUM(1+1)" and names[4].startswith("'")


def test_history_names_its_columns_and_cuts_no_title(tmp_path: Path) -> None:
    """`history --csv`'s header said `record,time,gpu_or_run,a,b,c,d`, and the
    text form cut each event's title at 120 characters (issue 46): each
    column now says what it holds for each kind of row, and a title is whole."""
    from gputui.record.query import HistoryReader, render

    db = tmp_path / "h.sqlite"
    w = HistoryWriter(db)
    tid = w.target_id("root@h ct 200").result()
    now = time.time()
    title = "GPUs busy, log silent 4 min: stdout is block-buffered — " + "x" * 150 + " END"
    w.add_event(tid, EventRow(now - 5, "finding", "busy_but_silent", "appear", "warning", title))
    w.close()
    r = HistoryReader(db)
    try:
        head, row = list(csv.reader(io.StringIO(render(r, "root@h ct 200", now - 60, now, "csv"))))
        text = render(r, "root@h ct 200", now - 60, now, "text")
    finally:
        r.close()
    assert not {"a", "b", "c", "d"} & set(head), head
    assert dict(zip(head, row, strict=True))["-|lr|title"] == title
    assert dict(zip(head, row, strict=True))["util_pct|step|name"] == "busy_but_silent"
    assert title in text
