"""One benchmark's section of bench/RESULTS.md, rewritten in place.

Each benchmark owns a block between two HTML comment markers; a new run
replaces that block (markers included) and leaves the rest of the file as
it is, or appends the block when the file does not have it yet."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_block(block: str, start: str, end: str, path: Path = RESULTS) -> None:
    """`block` runs from a line starting with `start` to `end`, both in it."""
    block = block.rstrip("\n")
    old = path.read_text() if path.exists() else ""
    if start in old and end in old:
        new = old[: old.index(start)] + block + old[old.index(end) + len(end) :]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(new)
