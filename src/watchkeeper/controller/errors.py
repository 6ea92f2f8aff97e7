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


class PermanentError(WatchkeeperError):
    """Raise it from a reconcile when retrying cannot help until the object itself changes
    (an invalid spec, a reference to something that must be created by hand): no retry is
    scheduled, the next change to the object (or to anything mapped to it) reconciles it
    again. Recorded as ``ReconcileFailedPermanently``."""
