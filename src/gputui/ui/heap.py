"""The dashboard's garbage collector: what startup built is set aside.

A py-spy profile of `gputui --local` following a run that logs 20 lines a
second (issue 24) spent about a fifth of the main process's samples inside
Python's cyclic garbage collector — shown as the line that happened to
allocate (`FIFOCache.__init__`, `Widget.max_scroll_y`), ~60–170 ms a full
collection. A full collection walks every tracked object: Textual's, Rich's,
asyncssh's and pynvml's modules, classes and caches, ~80,000 objects built at
import and start-up that live as long as the dashboard. `gc.freeze()` moves
them to the permanent generation, so a collection walks only what was made
since (log strips, history points): the same garbage is found, in a fraction
of the time. Objects frozen are still freed by reference counting; only a
reference cycle among them would stay — start-up objects, kept anyway.
"""

from __future__ import annotations

import gc

# A young-generation collection every 700 new container objects (Python's
# default) is ~30 a second under a stream; 5,000 keeps the pauses as short
# (what they walk is small) and makes them rarer.
YOUNG_THRESHOLD = 5000


def set_aside_startup() -> None:
    """Freeze what exists now (call once the dashboard is built, and again
    when it has connected and drawn its first screen)."""
    gc.collect()  # what start-up already let go is not kept forever
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, young), older, oldest)
