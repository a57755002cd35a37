"""`python -m gputui`: the same as the `gputui` command."""

import sys

from gputui.cli.main import main

sys.exit(main())
