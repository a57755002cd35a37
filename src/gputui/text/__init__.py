"""Text in and out: remote strings as data (`untrusted.py`) and whole numbers
from other tools' output (`numbers.py`). Pure."""
