"""The Textual dashboard. The only package in gputui that imports Textual."""
