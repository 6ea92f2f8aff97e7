"""watchkeeper-sim: ``ApiServer``, an embedded kube-apiserver 1.28 simulator with faults.

A distribution of its own (``pip install watchkeeper-sim``) so the runtime carries no
test-only dependency. Layers, highest first: cli, demo, server, api | auth, wire, storage,
documents, then model | status | faults | manifests (import-linter holds them).
"""

from watchkeeper_sim.faults import Fault, Faults
from watchkeeper_sim.manifests import crd_manifest
from watchkeeper_sim.model import ResourceType
from watchkeeper_sim.server import ApiServer, run_simulator
from watchkeeper_sim.storage.store import StoreError
from watchkeeper_sim.wire.reqlog import RequestRecord

__all__ = [
    "ApiServer",
    "Fault",
    "Faults",
    "RequestRecord",
    "ResourceType",
    "StoreError",
    "crd_manifest",
    "run_simulator",
]
