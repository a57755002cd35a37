"""`gputui --demo`: a real local run (tmux + a buffered training script) with
simulated GPUs, and fixed scenes for screenshots and UI tests."""
