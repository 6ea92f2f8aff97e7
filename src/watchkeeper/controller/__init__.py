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
from watchkeeper.controller.finalizer import finalizer
from watchkeeper.controller.operator import Operator
from watchkeeper.controller.recorder import Recorder
from watchkeeper.controller.sharded import ShardScope

__all__ = [
    "Action",
    "Controller",
    "ControllerConfig",
    "ControllerHealth",
    "ControllerUnhealthy",
    "Elector",
    "LeadershipLost",
    "ObjectRef",
    "Operator",
    "Recorder",
    "ShardScope",
    "finalizer",
    "owner_mapper",
]
