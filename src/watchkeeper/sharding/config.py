"""``Sharding``: how one controller's objects are split across its replicas.

Names (all derived from ``ring``, so replicas of one controller agree without talking):

- ``shard.watchkeeper.io/<ring>=<replica>`` on each object (and its owned children): the
  replica that owns it; each replica watches with that label selector.
- ``drain.watchkeeper.io/<ring>=<replica>``: set by the sharder when the object must move;
  the owner stops reconciling it, then removes both labels in one PATCH.
- Lease ``<ring>-shard-<replica>`` (labelled ``shard.watchkeeper.io/ring=<ring>``): one per
  replica, its membership; Lease ``<ring>-sharder``: which replica labels objects.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.sharding.ring import DEFAULT_VIRTUAL_NODES

SHARD_PREFIX = "shard.watchkeeper.io"
DRAIN_PREFIX = "drain.watchkeeper.io"
RING_LABEL = f"{SHARD_PREFIX}/ring"

_RING = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")
_REPLICA = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")

JSON = dict[str, Any]


def default_replica_id() -> str:
    """POD_NAME (downward API) or the hostname, plus a random suffix, usable as a label
    value and in a Lease name: a restarted process is a new shard (its predecessor's
    objects move only after the predecessor's lease expired)."""
    base = (os.environ.get("POD_NAME") or socket.gethostname() or "replica").lower()
    base = re.sub(r"[^-a-z0-9.]", "-", base).strip("-.")[:54] or "replica"
    return f"{base}-{uuid.uuid4().hex[:8]}"


def _pointer(key: str) -> str:
    """A label key as a JSON pointer segment (RFC 6901)."""
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Sharding:
    """Run a controller as N active replicas, each owning a part of the objects.

    ``ring``: the name shared by the replicas of one controller (a DNS label, <= 40
    characters). ``replica_id``: this replica (default: POD_NAME or hostname plus a random
    suffix). ``lease_namespace``: where the Leases live (default: the controller's
    namespace, else POD_NAMESPACE, else "default"). Lease timings as client-go's
    (``lease_duration`` > ``renew_deadline`` > ``retry_period``): a replica that cannot
    renew its lease within ``renew_deadline`` stops reconciling, before the sharder may
    consider it dead (``lease_duration`` after it last saw the lease change).
    ``virtual_nodes``: points per shard on the hash ring. ``sharder_concurrency``: label
    PATCHes the sharder keeps in flight. ``drain_concurrency``: release PATCHes a replica
    keeps in flight."""

    ring: str
    replica_id: str = field(default_factory=default_replica_id)
    lease_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES
    sharder_concurrency: int = 16
    drain_concurrency: int = 4

    def __post_init__(self) -> None:
        if not _RING.match(self.ring):
            raise ValueError(
                f"ring must be a DNS label of at most 40 characters, got {self.ring!r}")
        if not _REPLICA.match(self.replica_id):
            raise ValueError(
                "replica_id must be a label value usable in a Lease name (lowercase "
                f"letters, digits, '-' and '.', at most 63), got {self.replica_id!r}")
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "need 0 < retry_period < renew_deadline < lease_duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}")
        for name in ("virtual_nodes", "sharder_concurrency", "drain_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    # -- names -----------------------------------------------------------------------------

    @property
    def label_key(self) -> str:
        """``shard.watchkeeper.io/<ring>``: the owning replica, on objects and children."""
        return f"{SHARD_PREFIX}/{self.ring}"

    @property
    def drain_key(self) -> str:
        """``drain.watchkeeper.io/<ring>``: the owner must let the object go."""
        return f"{DRAIN_PREFIX}/{self.ring}"

    @property
    def selector(self) -> str:
        """The label selector of this replica's watches."""
        return f"{self.label_key}={self.replica_id}"

    @property
    def lease_name(self) -> str:
        """This replica's membership Lease."""
        return self.shard_lease(self.replica_id)

    def shard_lease(self, replica: str) -> str:
        return f"{self.ring}-shard-{replica}"

    @property
    def sharder_lease(self) -> str:
        return f"{self.ring}-sharder"

    # -- what the controller asks (watchkeeper.controller.ShardScope) ----------------------

    def draining(self, obj: JSON) -> bool:
        """True when the sharder asked this replica to let ``obj`` go."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return bool(labels.get(self.drain_key))

    def release_patch(self) -> list[JSON]:
        """The JSON patch a draining owner sends: only if the object is still ours, remove
        our shard label and the drain label together (one write: the object leaves our
        watch as the sharder sees it unassigned)."""
        return [
            {"op": "test", "path": _pointer(self.label_key), "value": self.replica_id},
            {"op": "remove", "path": _pointer(self.label_key)},
            {"op": "remove", "path": _pointer(self.drain_key)},
        ]
