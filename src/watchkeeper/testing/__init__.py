"""Testing helpers: ``ApiServer``, an embedded kube-apiserver 1.28 simulator with faults."""

from watchkeeper.testing._reqlog import RequestRecord
from watchkeeper.testing._store import ResourceType, StoreError
from watchkeeper.testing.apiserver import ApiServer, run_simulator
from watchkeeper.testing.faults import Fault, Faults
from watchkeeper.testing.manifests import crd_manifest

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
