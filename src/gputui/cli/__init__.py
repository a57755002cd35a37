"""The `gputui` command line: flags and config -> Settings -> the dashboard,
doctor, an action verb, watch, history or serve (`main.py` dispatches; one
module per family of subcommands; `targets.py` is the one target grammar)."""
