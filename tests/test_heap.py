"""The dashboard's garbage collector walks only what it made since start-up
(issue 24: full collections of Textual's and the modules' ~80,000 objects
were a fifth of the main process's samples while a log streamed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_start_up_objects_are_set_aside_and_young_collections_are_rarer() -> None:
    # in a child: freezing the test process's heap would outlive the test
    code = textwrap.dedent(
        """
        import gc
        kept = [[i] for i in range(100_000)]  # tracked: lists
        before = len(gc.get_objects())
        from gputui.ui.heap import YOUNG_THRESHOLD, set_aside_startup
        set_aside_startup()
        walked = len(gc.get_objects())
        assert gc.get_freeze_count() >= 100_000, gc.get_freeze_count()
        assert walked < before - 100_000, (before, walked)
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        junk = [[] for _ in range(10)]
        junk[0].append(junk)  # a cycle made after start-up is still collected
        del junk
        assert gc.collect() >= 1
        print("ok", len(kept))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr


def test_the_dashboard_sets_its_start_up_aside() -> None:
    """run_app freezes before the app runs and again once connected."""
    import inspect

    from gputui.ui import app

    src = inspect.getsource(app.run_app)
    assert src.count("set_aside_startup()") == 2
