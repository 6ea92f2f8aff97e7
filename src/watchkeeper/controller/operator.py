"""``Operator``: a controller and its reconcile function, as one value that
``watchkeeper.run(*operators)`` runs and a module can export for
``watchkeeper run module:attr``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchkeeper.controller.controller import (
    Controller,
    ErrorPolicy,
    Reconcile,
    WatchErrorHook,
)


@dataclass
class Operator:
    """What ``controller.run(...)`` needs besides the controller: its reconcile function,
    error policy, context and ``on_watch_error`` hook, so a runtime can run it."""

    controller: Controller
    reconcile: Reconcile
    error_policy: ErrorPolicy | None = None
    context: Any = None
    on_watch_error: WatchErrorHook | None = None
