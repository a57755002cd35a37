"""Errors a user can cause. Each carries one line naming the problem and the fix."""

from __future__ import annotations


class GputuiError(Exception):
    """A problem the user can fix. `str(err)` is the one line shown to them:
    what is wrong, then what to do about it."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} — {fix}" if fix else problem)


class ConfigError(GputuiError):
    """The config file or a flag is invalid."""


class ConnectError(GputuiError):
    """The host could not be reached or logged into."""


class ContainerError(GputuiError):
    """The container does not exist, is stopped, or the host lacks its tool."""


class CommandTimeout(GputuiError):
    """A remote command did not finish in time."""
