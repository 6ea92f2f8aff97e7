"""``Operator``: a controller and its reconcile function, as one value a module can export
for ``watchkeeper run module:attr``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchkeeper.controller.controller import Controller, ErrorPolicy, Reconcile


@dataclass
class Operator:
    controller: Controller
    reconcile: Reconcile
    error_policy: ErrorPolicy | None = None
    context: Any = None
