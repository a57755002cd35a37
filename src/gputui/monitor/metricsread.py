"""Steps, loss and throughput read from the followed log's lines as they
come: `Snapshot.metrics` and the `MetricsChanged` it emits (the user's
metric regexes first, then the presets: collect/metrics.py).

A burst parses its newest METRIC_BATCH_MAX lines (they say where the run
is); lines written before gputui started (a backlog) give values but no
step rhythm."""

from __future__ import annotations

from typing import ClassVar

from gputui.collect.metrics import MetricParser
from gputui.config import Settings
from gputui.model import Metrics
from gputui.monitor.door import MetricsChanged, Update

METRIC_BATCH_MAX = 200  # lines of one batch parsed for metrics; a burst parses its newest


class MetricsRead:
    """See the module docstring."""

    emits: ClassVar[type[Update]] = MetricsChanged

    def __init__(self, settings: Settings) -> None:
        self.metric_parser = MetricParser(list(settings.metric_regexes))
        self.metric_lines_skipped = 0

    def read(self, lines: list[str], metrics: Metrics, now: float, backlog: bool) -> bool:
        """Parse a batch of new lines (`now`: when they came) into `metrics`;
        True when any said something."""
        n = len(lines)
        parse = self.metric_parser.parse
        got = False
        if n > METRIC_BATCH_MAX:  # a burst: the newest lines say where the run is
            self.metric_lines_skipped += n - METRIC_BATCH_MAX
            lines = lines[-METRIC_BATCH_MAX:]
        for line in lines:
            p = parse(line, now)
            if p is not None:
                metrics.add(p)
                got = True
        if got:
            if backlog:  # lines written before we started: no step rhythm in them
                metrics.step_intervals.clear()
            metrics.preset = self.metric_parser.preset_name
        return got
