"""Turning raw output into model objects: pure parsers (gpu, tmux, logtail,
metrics, procs) plus the local NVML reader (nvml). Nothing here talks to a
remote machine; callers run the argv these modules build and feed them the
output."""
