"""The banner: the most important finding, its evidence and the key that fixes it.

Hidden (CSS `display: none`) until the `-shown` class is set.

Drawn through Textual's line API: the evidence quotes ages that move every
second, and a `Static` re-wrapped and re-rendered all of its rows (~3 ms)
each time. Here each line of the text is wrapped once (kept until it
changes) and a new age repaints only the rows it is on.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip

from gputui.model import Finding, Severity
from gputui.text.untrusted import safe_text, visible
from gputui.ui.widgets.lines import KeptStyle, row_strip
from gputui.ui.widgets.pane import Placed
from gputui.verbs import VERB_BY_ID, keyed

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
    read_only: bool = False,
    can_launch: bool = True,
) -> Text:
    """Title, then the keys (so a clipped banner never loses them), then evidence.
    `keys`: the user's keymap (verb id -> key), shown instead of the defaults.
    `read_only`: no key for a verb that changes the run is offered (the
    read-only web page's banner offered [r] and [f]); it says they are off."""
    t = Text()
    t.append(f"{_ICON.get(f.severity, '!')} {f.title}", style="bold")
    pairs = [(f.action, f.action_label), (f.alt_action, f.alt_action_label)]
    off = [label for verb, label in pairs if label and read_only and changes(verb)]
    # no [run] in the config: l does nothing, so it is not offered (its fix is)
    unset = [label for verb, label in pairs if label and verb == "launch" and not can_launch]
    gone = off + unset
    labels = [keyed(v, label, keys) for v, label in pairs if label not in gone or not label]
    keys_shown = [h for h in [*labels, *hints] if h]
    tail = "   ".join(dict.fromkeys(keys_shown))
    if f.fix and (not f.action_label or f.action_label in unset):
        fix = f.fix.removeprefix("or ") if f.action_label in unset else f.fix
        tail = f"fix: {fix}" + (f"   {tail}" if tail else "")
    if unset:
        tail += ("   " if tail else "") + "l launch: no [run] command in the config"
    if off:
        tail += ("   " if tail else "") + f"read-only here: {', '.join(off)} off"
    if more:
        tail += f"   (+{more} more: ? help)"
    if tail:
        t.append(f"\n  {tail}", style="bold reverse")
    for line in squeeze_evidence(f.evidence)[:evidence_lines]:
        t.append(f"\n  · {visible(line)}")  # one line each, whatever it quotes
    return safe_text(t, keep="\n")  # evidence quotes commands, paths, session names


def changes(verb: str) -> bool:
    """The verb changes the run (off in --read-only)."""
    v = VERB_BY_ID.get(verb)
    return v is None or v.changes


class Banner(Placed, KeptStyle):
    """Shows `top_finding`; `show(None)` hides it. Placed by the dashboard's
    LAYOUT, drawn by the app itself (its findings and key hints)."""

    ID = "banner"

    DEFAULT_CSS = "Banner { height: auto; }"

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.finding: Finding | None = None
        self._shown_key: tuple[object, ...] | None = None
        self.compact = False  # short terminals: one evidence line
        self.keys: dict[str, str] = {}  # the user's keymap: verb id -> key
        self.read_only = False  # --read-only: keys that change the run are not offered
        self.can_launch = True  # False: no [run] in the config, l is not offered
        self._text = Text()
        self._wrapped: dict[tuple[object, ...], list[Text]] = {}  # a line -> its rows
        self._rows: list[Text] = []
        self._rows_for: tuple[int, bool] | None = None  # (width, nowrap) of _rows
        self._strips: dict[int, Strip] = {}

    def render(self) -> Text:
        """The whole text (what tests and screen readers see)."""
        return self._text

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
        if f is None:
            return
        lines = 1 if self.compact else 3
        before = list(self._rows) if self._rows_for is not None else None
        self._text = banner_text(
            f,
            hints or [],
            len(findings) - 1,
            lines,
            self.keys,
            read_only=self.read_only,
            can_launch=self.can_launch,
        )
        width = self.content_region.width
        if before is None or not self.is_mounted or width <= 0:
            self._rows_for = None
            self._strips.clear()
            self.refresh(layout=True)
            return
        rows = self._wrap(width)
        if len(rows) != len(before):  # another height: lay the screen out
            self._strips.clear()
            self.refresh(layout=True)
            return
        changed = [
            y
            for y, (old, new) in enumerate(zip(before, rows, strict=True))
            if old.plain != new.plain or old.spans != new.spans
        ]
        for y in changed:
            self._strips.pop(y, None)
        # a moving age: during the dashboard's tick its row is painted at the
        # tick's end past the compositor, as the panes' rows are (ui/directpaint.py)
        painter = getattr(self.app, "row_painter", None)
        if changed and (painter is None or not painter.changed(self, changed)):
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    # ------------------------------------------------------------ drawing

    def _nowrap(self) -> bool:
        return self.styles.text_wrap == "nowrap"

    def _wrap(self, width: int) -> list[Text]:
        """The text's rows at `width`: each line wrapped on its own (or cut
        with an ellipsis when the CSS says nowrap), kept until it changes.
        No room at all (a terminal a few cells wide, a web tab closing): no
        rows — Rich's fold divides by the width."""
        nowrap = self._nowrap()
        if width <= 0:
            self._rows, self._rows_for = [], (width, nowrap)
            return self._rows
        wrapped: dict[tuple[object, ...], list[Text]] = {}
        rows: list[Text] = []
        for line in self._text.split("\n"):
            key = (line.plain, tuple(line.spans), width, nowrap)
            got = self._wrapped.get(key)
            if got is None:
                if nowrap:
                    one = line.copy()
                    one.truncate(width, overflow="ellipsis")
                    got = [one]
                else:
                    got = list(line.wrap(self.app.console, width, overflow="fold"))
            wrapped[key] = got
            rows.extend(got)
        self._wrapped = wrapped
        self._rows, self._rows_for = rows, (width, nowrap)
        return rows

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._wrap(width)) if self._text else 0

    def styles_changed(self) -> None:
        self._strips.clear()
        self._rows_for = None

    def on_resize(self) -> None:
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        width = self.content_size.width
        style = self.rich_style
        if self._rows_for != (width, self._nowrap()):
            self._wrap(width)
            self._strips.clear()
        if y >= len(self._rows) or width <= 0:
            return Strip.blank(width, style)
        strip = self._strips.get(y)
        if strip is None:
            pad = Style(bgcolor=style.bgcolor)  # as `Static` pads: the background only
            strip = self._strips[y] = row_strip(self._rows[y], width, style, self.app.console, pad)
        return strip
