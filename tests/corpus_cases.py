"""The corpus of real training logs (tests/corpus/*.log): loading a case,
replaying it as a process, and scoring what gputui said about it.

Each case is a file: a header of `key: value` lines (`source` the public
issue thread it comes from, `framework`, `expect` the finding kind that
names it or `healthy`, `end` how its process ends: `exit N`, `kill` (a
SIGKILL of its own), `prompt` (waits for a key on its terminal), `alive`;
optional `title_has` / `title_lacks`: words the finding's title must or
must not hold; `known_miss`: why nothing in the text can name it — scored
missed all the same), a line `---`, then the log's text exactly as the issue
showed it (a last line without a newline is a progress bar cut by the
kill). Shared by bench/corpus.py (each case replayed in tmux behind tee and
asked with `gputui doctor --local --json`) and tests/test_corpus.py (the
same texts diagnosed purely, and a few replayed)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
HEALTHY = "healthy"
# the words that only say the run ended and quote its last line: a failure
# named only so is missed (it has a word of its own)
GENERIC = frozenset({"run_exited", "session_dead", "run_ended", "session_missing"})
# findings about this machine, not the run (no GPU here, no py-spy): not scored
NOT_THE_RUN = frozenset({"gpu_unreadable", "tools_missing", "gpu_lost", "connection"})

RIGHT, WRONG, MISSED, FALSE_ALARM, QUIET = "right", "wrong word", "missed", "false alarm", "quiet"


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    framework: str
    expect: str  # a finding kind, or HEALTHY
    end: str  # "exit N" | "kill" | "prompt" | "alive"
    text: bytes  # the log's bytes, as replayed
    title_has: tuple[str, ...] = ()
    title_lacks: tuple[str, ...] = ()
    known_miss: str = ""

    @property
    def healthy(self) -> bool:
        return self.expect == HEALTHY

    @property
    def lines(self) -> list[str]:
        """The log's lines as gputui's tail keeps them (a carriage return
        ends a progress bar's update)."""
        text = self.text.decode("utf-8", "replace").replace("\r", "\n")
        return [ln for ln in text.split("\n") if ln.strip()]

    @property
    def exit_code(self) -> int | None:
        parts = self.end.split()
        return int(parts[1]) if parts[0] == "exit" and len(parts) > 1 else None


def load(path: Path) -> Case:
    raw = path.read_bytes()
    head, sep, body = raw.partition(b"\n---\n")
    if not sep:
        raise ValueError(f"{path.name}: no '---' line between the header and the log")
    meta: dict[str, list[str]] = {}
    for line in head.decode().splitlines():
        key, _, value = line.partition(":")
        meta.setdefault(key.strip(), []).append(value.strip())

    def one(key: str, default: str | None = None) -> str:
        if key in meta:
            return meta[key][0]
        if default is None:
            raise ValueError(f"{path.name}: no {key!r} in its header")
        return default

    return Case(
        name=path.stem,
        source=one("source"),
        framework=one("framework", ""),
        expect=one("expect"),
        end=one("end", "alive"),
        text=body,
        title_has=tuple(meta.get("title_has", ())),
        title_lacks=tuple(meta.get("title_lacks", ())),
        known_miss=one("known_miss", ""),
    )


def cases(names: Iterable[str] = ()) -> list[Case]:
    wanted = set(names)
    out = [load(p) for p in sorted(CORPUS.glob("*.log"))]
    return [c for c in out if not wanted or c.name in wanted]


@dataclass
class Said:
    """What gputui said at one moment: the run's findings (kind, severity,
    title), most severe first, without those about this machine."""

    findings: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def word(self) -> tuple[str, str, str] | None:
        """The banner's word: the first WARNING or ERROR (INFO is a note)."""
        return next((f for f in self.findings if f[1] in ("warning", "error")), None)


def said(findings: Iterable[tuple[str, str, str]]) -> Said:
    return Said([f for f in findings if f[0] not in NOT_THE_RUN])


def verdict(case: Case, during: Said, after: Said) -> tuple[str, str]:
    """(verdict, the word it rests on). A healthy case: a false alarm when
    any WARNING/ERROR was said, during the run or after; else quiet. A
    failure: right when the word after is the expected kind (its title
    holding `title_has`, not `title_lacks`); missed when nothing or only
    a generic "run ended" word; else a wrong word."""
    if case.healthy:
        for s in (during, after):
            if s.word is not None:
                return FALSE_ALARM, f"{s.word[0]}: {s.word[2]}"
        return QUIET, ""
    word = after.word
    if word is None:
        return MISSED, ""
    kind, _, title = word
    shown = f"{kind}: {title}"
    if kind == case.expect:
        if all(w in title for w in case.title_has) and not any(
            w in title for w in case.title_lacks
        ):
            return RIGHT, shown
        return WRONG, shown
    if kind in GENERIC:
        return MISSED, shown
    return WRONG, shown


def summary(results: list[tuple[Case, str, str]]) -> dict[str, float | int]:
    failures = [r for r in results if not r[0].healthy]
    healthy = [r for r in results if r[0].healthy]
    right = sum(1 for r in failures if r[1] == RIGHT)
    return {
        "cases": len(results),
        "failures": len(failures),
        "healthy": len(healthy),
        "right": right,
        "wrong": sum(1 for r in failures if r[1] == WRONG),
        "missed": sum(1 for r in failures if r[1] == MISSED),
        "false_alarms": sum(1 for r in healthy if r[1] == FALSE_ALARM),
        "recall": right / len(failures) if failures else 1.0,
    }
