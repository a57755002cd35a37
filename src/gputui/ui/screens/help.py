"""`?`: the keys and what the banner findings mean."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from gputui.model import Finding
from gputui.text.untrusted import markdown_text, visible
from gputui.verbs import VERBS, key_of, keyed

HELP_HEAD = """\
# gputui keys

| key | what it does |
| --- | --- |
| `?` | this help |
| `q` | quit (stops every stream gputui opened) |
| `/` | filter the log (regex); `esc` closes the filter |
| `p` | pause / resume the log view |
| `h` | whole run: loss, throughput and GPUs from the history (`1`/`2`/`3`: 1 h, 24 h, run) |
| `g` | GPU graphs: every GPU's utilization, memory and power over the kept history, a row per GPU (`esc` back) |
| `n` | notifications: every one open now (the header's right end shows the worst, newest) |
| `tab` | move between panels; `enter` on a session watches it |
| `ctrl+p` | command palette (every action, with why it is unavailable) |
"""

HELP_TAIL = """
Every action opens a confirm box that names the exact target and command;
nothing runs until you press `y` with the plan on screen (a `y` pressed while
it still says "reading…" runs nothing, and the box says so). In `--read-only` mode every action that
changes something is off, and `attach` opens tmux's read-only client
(`tmux attach -r`).

## The banner

The top finding from the diagnosis, its evidence, and the key that fixes it.
It disappears by itself when the cause goes away. The most common one:
**GPUs busy but the log is silent** — Python block-buffers stdout when it is
a file or a pipe (`| tee`), so prints arrive in 8 KiB chunks. `r` relaunches
with `PYTHONUNBUFFERED=1`; `f` flushes the running process without a restart.
"""


def code_span(text: str) -> str:
    """`text` as Markdown code. A fix that marks its own code ("add `-u` to
    …") is left as it is: wrapped again, its backticks closed the span early
    and Markdown trimmed the spaces of the spans between ("add -uto …")."""
    return text if "`" in text else f"`{text}`"


def findings_markdown(findings: list[Finding], keys: dict[str, str] | None = None) -> str:
    if not findings:
        return "\n## Findings now\n\nNothing wrong found.\n"
    out = ["\n## Findings now\n"]
    for f in findings:  # evidence quotes remote text: one visible line each, no Markdown
        out.append(f"- **{f.severity.value}: {markdown_text(f.title)}**")
        out += [f"  - {markdown_text(line)}" for line in f.evidence[:6]]
        if f.action_label:
            out.append(f"  - key: `{visible(keyed(f.action, f.action_label, keys))}`")
        if f.fix:
            out.append(f"  - fix: {code_span(visible(f.fix))}")
    return "\n".join(out) + "\n"


def help_markdown(
    unavailable: dict[str, str | None],
    findings: list[Finding] | None = None,
    keys: dict[str, str] | None = None,
    read_only: bool = False,
) -> str:
    rows = []
    for v in VERBS:
        why = unavailable.get(v.id)
        note = f" — *off: {visible(why)}*" if why else ""
        rows.append(f"| `{key_of(v.id, keys)}` | {v.help_in(read_only)}{note} |")
    return HELP_HEAD + "\n".join(rows) + "\n" + findings_markdown(findings or [], keys) + HELP_TAIL


class HelpScreen(ModalScreen[None]):
    BINDINGS = [  # noqa: RUF012
        Binding("escape", "close", "close"),
        Binding("question_mark", "close", "close", show=False),
        Binding("q", "close", "close", show=False),
    ]

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "help"
            box.border_subtitle = "esc closes"
            yield Markdown(self.markdown)

    def action_close(self) -> None:
        self.dismiss(None)
