"""bench/run.py rewrites only its own blocks of bench/RESULTS.md: the notes
written between the blocks (each round's measurements, by hand) stay."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import run as bench_run
from results_md import write_block

FILE = f"""{bench_run.RUN_START} -->
# gputui benchmark results
old figures
{bench_run.RUN_END}

## Issue 37, a round's notes (by hand)

{bench_run.STREAM_START} (bench/run.py --stream) -->
old stream table
{bench_run.STREAM_END}

### and more notes below the stream table
"""


def test_a_run_and_a_stream_run_keep_the_notes_between_their_blocks(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text(FILE)
    bench_run.write_run_block("# gputui benchmark results\nnew figures", out)
    write_block(
        f"{bench_run.STREAM_START} -->\nnew stream table\n{bench_run.STREAM_END}\n",
        bench_run.STREAM_START,
        bench_run.STREAM_END,
        out,
    )
    text = out.read_text()
    assert "new figures" in text and "old figures" not in text
    assert "new stream table" in text and "old stream table" not in text
    assert "## Issue 37, a round's notes (by hand)" in text
    assert "### and more notes below the stream table" in text
    assert text.index("new figures") < text.index("a round's notes") < text.index("new stream")


def test_the_results_file_has_each_block_once() -> None:
    text = (Path(__file__).resolve().parent.parent / "bench" / "RESULTS.md").read_text()
    for marker in (bench_run.RUN_START, bench_run.RUN_END, bench_run.STREAM_START):
        assert text.count(marker) == 1, marker
    assert text.count(bench_run.STREAM_END) == 1
