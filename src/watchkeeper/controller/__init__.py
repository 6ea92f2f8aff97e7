"""Reconcile loops: Controller, Action, ObjectRef."""

from watchkeeper.controller.action import Action, ObjectRef
from watchkeeper.controller.controller import (
    Controller,
    ControllerConfig,
    ControllerHealth,
    ControllerUnhealthy,
    Elector,
    LeadershipLost,
    owner_mapper,
)

__all__ = [
    "Action",
    "Controller",
    "ControllerConfig",
    "ControllerHealth",
    "ControllerUnhealthy",
    "Elector",
    "LeadershipLost",
    "ObjectRef",
    "owner_mapper",
]
