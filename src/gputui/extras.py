"""The optional parts of gputui and the extra that installs each.

The core install (`pipx install gputui`) is the dashboard, `doctor`, the
actions, `watch` and `history`. Alerts to notification URLs need apprise
(`gputui[alerts]`), `watch --prometheus` needs prometheus-client
(`gputui[prometheus]`), `gputui serve` needs textual-serve (`gputui[web]`).
Code that needs one imports it through `require`, so a missing one is one
line naming the extra, never a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gputui.errors import GputuiError

# module -> (extra, the distribution it comes from)
EXTRAS = {
    "apprise": ("alerts", "apprise"),
    "prometheus_client": ("prometheus", "prometheus-client"),
    "textual_serve": ("web", "textual-serve"),
}


def missing_extra(module: str, what: str) -> GputuiError:
    extra, dist = EXTRAS[module]
    return GputuiError(
        f"{what} needs {dist}, which is not installed",
        f"pip install 'gputui[{extra}]' (pipx: pipx inject gputui {dist})",
    )


def require(module: str, what: str) -> ModuleType:
    """Import `module` (one of EXTRAS), or raise the one line naming its extra."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise missing_extra(module, what) from None
