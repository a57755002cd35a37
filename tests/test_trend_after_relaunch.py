"""The loss trend after a relaunch is this run's (issue 46: the demo showed
`loss 4.514 ↑10%` while the log's loss fell 4.74 → 4.48 — the trend
compared the new run's first losses with the old run's last, lower ones)."""

from __future__ import annotations

from gputui.model import MetricPoint, Metrics
from gputui.ui.widgets.runinfo import metric_value


def relaunched() -> Metrics:
    m = Metrics()
    t = 0.0
    for step in range(1, 201):  # the old run: 6.0 down to ~4.1
        t += 1.0
        m.add(MetricPoint(t, step=step, loss=6.0 - step * 0.0095, throughput=1000.0))
    for step in range(1, 41):  # relaunched: from 4.74, falling to ~4.48
        t += 1.0
        m.add(MetricPoint(t, step=step, loss=4.74 - step * 0.0065, throughput=900.0 + step))
    return m


def test_the_loss_trend_after_a_relaunch_is_the_new_runs() -> None:
    m = relaunched()
    assert m.restarts == 1 and m.restarted_at is not None
    text = metric_value(m.loss, 3, restarted_at=m.restarted_at).plain
    assert text.startswith("4.480") and "↓" in text and "↑" not in text, text


def test_without_a_relaunch_the_whole_window_counts() -> None:
    m = Metrics()
    for step in range(1, 101):
        m.add(MetricPoint(float(step), step=step, loss=5.0 - step * 0.01))
    assert "↓" in metric_value(m.loss, 3, restarted_at=m.restarted_at).plain
