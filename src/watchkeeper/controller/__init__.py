"""Reconcile loops: Controller, Action, ObjectRef, predicates, owner references.

The package, one job per module: ``triggers`` (watched sources, mappers, predicates'
filter), ``scheduler`` (the queue), ``workers`` (reconcile, error policy, backoff),
``stats`` and ``health`` (counts and the rules), ``leadership`` and ``signals`` (process
concerns the controller is given), ``sharded`` (a sharded replica's drain),
``controller`` (the composition); for reconciles: ``owners``, ``finalizer``,
``recorder``; ``reporting`` (a reconcile's outcome as Events and the Ready condition)."""

from watchkeeper.controller import predicates
from watchkeeper.controller.action import Action, ObjectRef
from watchkeeper.controller.config import ControllerConfig
from watchkeeper.controller.controller import Controller
from watchkeeper.controller.errors import ControllerUnhealthy, LeadershipLost, PermanentError
from watchkeeper.controller.finalizer import finalizer
from watchkeeper.controller.health import ControllerHealth
from watchkeeper.controller.leadership import Elector
from watchkeeper.controller.operator import Operator
from watchkeeper.controller.owners import (
    AlreadyOwned,
    controller_of,
    owner_reference,
    set_controller_reference,
    set_owner_reference,
)
from watchkeeper.controller.recorder import Recorder
from watchkeeper.controller.sharded import ShardScope
from watchkeeper.controller.triggers import owner_mapper
from watchkeeper.controller.typed import TypedController, TypedReconcile

__all__ = [
    "Action",
    "AlreadyOwned",
    "Controller",
    "ControllerConfig",
    "ControllerHealth",
    "ControllerUnhealthy",
    "Elector",
    "LeadershipLost",
    "ObjectRef",
    "Operator",
    "PermanentError",
    "Recorder",
    "ShardScope",
    "TypedController",
    "TypedReconcile",
    "controller_of",
    "finalizer",
    "owner_mapper",
    "owner_reference",
    "predicates",
    "set_controller_reference",
    "set_owner_reference",
]
