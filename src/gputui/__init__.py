"""gputui: one terminal screen for a training run on a remote GPU machine."""

__version__ = "0.1.0"
