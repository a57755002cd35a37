"""A whole host at a glance: which hosts to watch (`targets.py`), every GPU and
container on one (`view.py`, pure) and the watch that gathers it (`hostwatch.py`)."""
