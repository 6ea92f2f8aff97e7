"""watchkeeper-sim: ``ApiServer``, an embedded kube-apiserver 1.28 simulator with faults,
and what testing an operator against it takes (``watchkeeper_sim.testing``, and the pytest
plugin built on it: ``watchkeeper_sim.pytest_plugin``).

A distribution of its own (``pip install watchkeeper-sim``) so the runtime carries no
test-only dependency. Layers, highest first: cli | pytest_plugin, demo | testing, server,
api | auth, wire, storage, documents, then model | status | faults | manifests
(import-linter holds them).
"""

from watchkeeper_sim.faults import Fault, Faults
from watchkeeper_sim.manifests import crd_manifest
from watchkeeper_sim.model import ResourceType
from watchkeeper_sim.server import ApiServer, run_simulator
from watchkeeper_sim.storage.store import StoreError
from watchkeeper_sim.testing import (
    Injected,
    OperatorFailed,
    RunningOperator,
    ServerThread,
    Simulator,
    WaitTimeout,
    install_crds,
    start_operator,
    wait_for,
    wait_for_deletion,
)
from watchkeeper_sim.wire.reqlog import RequestRecord

__all__ = [
    "ApiServer",
    "Fault",
    "Faults",
    "Injected",
    "OperatorFailed",
    "RequestRecord",
    "ResourceType",
    "RunningOperator",
    "ServerThread",
    "Simulator",
    "StoreError",
    "WaitTimeout",
    "crd_manifest",
    "install_crds",
    "run_simulator",
    "start_operator",
    "wait_for",
    "wait_for_deletion",
]
