"""The banner: the most important finding, its evidence and the key that fixes it.

Hidden (CSS `display: none`) until the `-shown` class is set.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from gputui.model import Finding, Severity
from gputui.untrusted import safe_text, visible
from gputui.verbs import keyed

_ICON = {Severity.ERROR: "✖", Severity.WARNING: "⚠", Severity.INFO: "ℹ"}


def top_finding(findings: list[Finding]) -> Finding | None:
    """The most severe warning or error; ties keep the diagnosis order. Info
    findings (a missing optional tool) never raise the banner: see `?`."""
    serious = [f for f in findings if f.severity != Severity.INFO]
    if not serious:
        return None
    return sorted(serious, key=lambda f: f.severity.rank)[0]


def squeeze_evidence(lines: list[str]) -> list[str]:
    """One line per GPU is too much for a banner: keep the first, count the rest."""
    out: list[str] = []
    gpu_run = 0
    for line in lines:
        if line.startswith("GPU "):
            gpu_run += 1
            if gpu_run > 1:
                continue
        elif gpu_run > 1:
            out[-1] += f"  (+{gpu_run - 1} GPUs alike)"
            gpu_run = 0
        else:
            gpu_run = 0
        out.append(line)
    if gpu_run > 1:
        out[-1] += f"  (+{gpu_run - 1} GPUs alike)"
    return out


def banner_text(
    f: Finding,
    hints: list[str],
    more: int,
    evidence_lines: int = 3,
    keys: dict[str, str] | None = None,
) -> Text:
    """Title, then the keys (so a clipped banner never loses them), then evidence.
    `keys`: the user's keymap (verb id -> key), shown instead of the defaults."""
    t = Text()
    t.append(f"{_ICON.get(f.severity, '!')} {f.title}", style="bold")
    labels = [keyed(f.action, f.action_label, keys), keyed(f.alt_action, f.alt_action_label, keys)]
    keys_shown = [h for h in [*labels, *hints] if h]
    tail = "   ".join(dict.fromkeys(keys_shown))
    if f.fix and not f.action_label:
        tail = f"fix: {f.fix}" + (f"   {tail}" if tail else "")
    if more:
        tail += f"   (+{more} more: ? help)"
    if tail:
        t.append(f"\n  {tail}", style="bold reverse")
    for line in squeeze_evidence(f.evidence)[:evidence_lines]:
        t.append(f"\n  · {visible(line)}")  # one line each, whatever it quotes
    return safe_text(t, keep="\n")  # evidence quotes commands, paths, session names


class Banner(Static):
    """Shows `top_finding`; `show(None)` hides it."""

    def __init__(self, **kw: object) -> None:
        super().__init__("", **kw)  # type: ignore[arg-type]
        self.finding: Finding | None = None
        self._shown_key: tuple[object, ...] | None = None
        self.compact = False  # short terminals: one evidence line
        self.keys: dict[str, str] = {}  # the user's keymap: verb id -> key

    def show(
        self, findings: list[Finding], hints: list[str] | None = None, *, force: bool = False
    ) -> None:
        f = top_finding(findings)
        self.finding = f
        key = (
            None
            if f is None
            else (f.kind, f.title, tuple(f.evidence), len(findings), tuple(hints or []))
        )
        if key == self._shown_key and not force:
            return  # nothing changed: no repaint (force: the layout changed, e.g. compact)
        self._shown_key = key
        self.set_class(f is not None, "-shown")
        for sev in Severity:
            self.set_class(f is not None and f.severity == sev, f"-{sev.value}")
        if f is not None:
            lines = 1 if self.compact else 3
            text = banner_text(f, hints or [], len(findings) - 1, lines, self.keys)
            self.update(text, layout=False)
            if self._height_changes(text):
                self.refresh(layout=True)

    def _height_changes(self, text: Text) -> bool:
        """Would the new text take another number of rows? The evidence's ages
        move every second; a re-layout of the whole screen for each is wasted
        when the banner keeps its height (`Static.update` lays out by default)."""
        region = self.content_region
        if not self.is_mounted or not region.width:
            return True
        rows = text.plain.split("\n")
        if all(cell_len(row) <= region.width for row in rows):
            want = len(rows)  # nothing wraps: a row a line, no need to lay the text out
        else:
            want = self.get_content_height(self.app.size, self.app.size, region.width)
        cap = self.styles.max_height
        if cap is not None and cap.is_cells:
            want = min(want, int(cap.value) - self.styles.gutter.height)
        return want != region.height
