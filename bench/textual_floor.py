"""The Textual floor: a bare Textual app that follows a file into a `Log`
filling the screen, polled at 4 Hz (gputui's log redraw rate). Stands for
what Textual itself costs to show a streaming log, with nothing else on screen.

    python3 bench/textual_floor.py FILE
"""

import sys

from textual.app import App, ComposeResult
from textual.widgets import Log


class Floor(App[None]):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.f = open(path, errors="replace")  # noqa: SIM115
        self.f.seek(0, 2)
        self.rest = ""

    def compose(self) -> ComposeResult:
        yield Log(max_lines=5000)

    def on_mount(self) -> None:
        self.set_interval(0.25, self.poll)

    def poll(self) -> None:
        data = self.rest + self.f.read()
        *lines, self.rest = data.split("\n")
        if lines:
            self.query_one(Log).write_lines(lines)


if __name__ == "__main__":
    Floor(sys.argv[1]).run()
