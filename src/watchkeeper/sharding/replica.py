"""``ShardReplica``: everything one replica runs for one sharded controller, built from the
controller and its ``Sharding``: its membership elector (the controller's elector), its
view of the ring, and its sharder (active on one replica at a time)."""

from __future__ import annotations

import os

from watchkeeper.client import Api
from watchkeeper.controller import Controller
from watchkeeper.leader import LeaderElector
from watchkeeper.sharding.config import Sharding
from watchkeeper.sharding.membership import RingView, ShardStatus, membership_elector
from watchkeeper.sharding.sharder import Sharder


class ShardReplica:
    """Built by ``watchkeeper.run`` for each controller made with ``sharding=``."""

    def __init__(self, controller: Controller) -> None:
        sharding = controller.sharding
        if not isinstance(sharding, Sharding):
            raise TypeError(
                f"Controller(sharding=...) takes a watchkeeper.Sharding, not "
                f"{type(sharding).__name__}")
        self.controller, self.sharding = controller, sharding
        primary = controller.triggers[0].api
        namespace = (sharding.lease_namespace or primary.namespace
                     or os.environ.get("POD_NAMESPACE") or "default")
        self.leases = Api(primary.client, "leases.coordination.k8s.io", namespace)
        self.view = RingView(sharding, self.leases)
        self.elector: LeaderElector = membership_elector(sharding, self.leases)
        self.sharder = Sharder(sharding, self.view, primary, controller.owned_apis, self.leases,
                               scopes=controller.shard_scopes)

    def __repr__(self) -> str:
        return f"ShardReplica(ring={self.sharding.ring!r}, replica={self.sharding.replica_id!r})"

    def status(self) -> ShardStatus:
        """The ring and this replica's share, for metrics and /readyz?verbose."""
        return ShardStatus(
            ring=self.sharding.ring, replica_id=self.sharding.replica_id,
            live=list(self.view.live), dead=list(self.view.dead),
            sharder=self.sharder.is_sharder, owned=len(self.controller.store),
            draining=self.controller.draining, ready=self.view.ready.is_set(),
            last_error=self.view.last_error,
        )
