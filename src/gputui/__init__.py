"""gputui: one terminal screen for a training run on a remote GPU machine."""

from gputui import depwarnings

__version__ = "0.1.0"

# before anything imports asyncssh: its dependencies' warnings stay off the
# user's terminal (gputui.depwarnings says which, and why)
depwarnings.install()
