"""What goes wrong when a class becomes a CRD, or a CRD is installed."""

from __future__ import annotations

from watchkeeper.errors import WatchkeeperError

__all__ = ["CRDNotEstablished", "SchemaError"]


class SchemaError(WatchkeeperError, TypeError):
    """A class cannot become a structural Kubernetes schema (an unsupported type, a marker
    on the wrong type, a list-map key that is not a field): the message names the field.

    Raised while the CRD is generated, so the mistake shows at ``watchkeeper crd`` time, not
    as a 422 from the API server. A ``TypeError`` too: it is a mistake in the code."""


class CRDNotEstablished(WatchkeeperError):
    """``install_crds`` applied a CRD but the API server does not serve it: its names
    conflict with another CRD's (``NamesAccepted`` False), or it did not become
    ``Established`` within the timeout. ``name`` is the CRD, ``reason`` and ``message``
    the server's condition (or the timeout)."""

    def __init__(self, name: str, reason: str, message: str) -> None:
        hint = ("; another CRD of the same group holds that name (kubectl get crd)"
                if reason.endswith("Conflict") else "")
        super().__init__(f"CustomResourceDefinition {name} is not established: {reason}: "
                         f"{message}{hint}")
        self.name, self.reason, self.message = name, reason, message
