"""`gputui doctor`: the facts of a target (`facts.py`), one run end to end
(`run.py`), a whole host (`host.py`, `hostreport.py`), several hosts
(`several.py`), and the text/JSON report (`report.py`)."""
