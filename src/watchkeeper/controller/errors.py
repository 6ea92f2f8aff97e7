"""The controller's own errors: a part that stopped working, and a lost lease."""

from __future__ import annotations

from watchkeeper.errors import WatchkeeperError


class ControllerUnhealthy(WatchkeeperError):
    """The controller has not worked for ``max_unhealthy``; names the failing part."""

    def __init__(self, message: str, trigger: str) -> None:
        super().__init__(message)
        self.trigger = trigger


class LeadershipLost(WatchkeeperError):
    """This replica stopped leading: its reconciles were stopped at once."""
