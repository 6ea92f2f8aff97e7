"""Testing an operator against the simulator: what the pytest plugin's fixtures are made of,
for use without pytest too.

``ServerThread`` runs an ``ApiServer`` on a thread of its own; ``Simulator`` is one test's
view of it (a namespace of its own, clients, faults by name); ``install_crds``,
``start_operator`` and ``wait_for`` install CRDs, run the operator under test and wait for
its effects. Layers, highest first: simulator | crds, wait, operators | thread.
"""

from watchkeeper_sim.testing.crds import established, install_crds, load_crds
from watchkeeper_sim.testing.operators import OperatorFailed, RunningOperator, start_operator
from watchkeeper_sim.testing.simulator import Injected, Simulator, namespace_name
from watchkeeper_sim.testing.thread import ServerThread
from watchkeeper_sim.testing.wait import WaitTimeout, wait_for, wait_for_deletion

__all__ = [
    "Injected",
    "OperatorFailed",
    "RunningOperator",
    "ServerThread",
    "Simulator",
    "WaitTimeout",
    "established",
    "install_crds",
    "load_crds",
    "namespace_name",
    "start_operator",
    "wait_for",
    "wait_for_deletion",
]
