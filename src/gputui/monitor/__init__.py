"""The run engine: one target's run kept current in a Snapshot (`engine.py`),
fed by the GPU readings (`gpufeed.py`), the followed log (`logfollow.py`,
`logchoice.py`) and the in-container agent (`supervisor.py`)."""
