"""The record of runs over time: the SQLite history (`history.py`, `query.py`),
the recorder beside a monitor (`recorder.py`), incidents and alerts
(`incidents.py`, `alerts.py`) and Prometheus (`prometheus.py`). Headless
`gputui watch`, the process that runs them, is `cli/watch.py`."""
