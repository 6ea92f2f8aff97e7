"""The library's base exception, in the lowest layer so every other layer may use it.

``except wk.WatchkeeperError`` catches every error the library raises: failed requests
(``wk.ApiError`` and its subclasses), configuration errors (``ConfigError``), and what ends
a watcher or a run (``WatcherUnhealthy``, ``WatchGaveUp``, ``TaskDied``,
``ControllerUnhealthy``, ``LeadershipLost``).
"""

from __future__ import annotations

__all__ = ["WatchkeeperError"]


class WatchkeeperError(Exception):
    """Base of every exception watchkeeper raises."""
