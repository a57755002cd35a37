"""The record of runs over time: the SQLite history (`history.py`, `query.py`),
the recorder beside a monitor (`recorder.py`), incidents and alerts
(`incidents.py`, `alerts.py`), Prometheus (`prometheus.py`) and headless
`gputui watch` (`watch.py`)."""
