"""The library's base exception, in the lowest layer so every other layer may use it.

``except wk.WatchkeeperError`` catches what the runtime itself raises to end a run
(``TaskDied``, ``ControllerUnhealthy``, ``LeadershipLost``); API errors have their own base,
``wk.ApiError``.
"""

from __future__ import annotations

__all__ = ["WatchkeeperError"]


class WatchkeeperError(Exception):
    """Base of the exceptions watchkeeper raises to end a run."""
