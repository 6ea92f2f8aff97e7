"""Sharding across replicas: each replica of a controller owns a part of the objects.

``config`` (``Sharding``: names, labels, timings), ``ring`` (consistent hash ring),
``membership`` (each replica's Lease, and the ring of live shards as observed locally),
``sharder`` (one replica at a time labels objects with their shard and drains moves).
The runtime (``watchkeeper.run``) composes them; the controller only sees a label
selector and a drain hook (``watchkeeper.controller.ShardScope``)."""

from watchkeeper.sharding.config import Sharding
from watchkeeper.sharding.membership import RingView, ShardStatus
from watchkeeper.sharding.replica import ShardReplica
from watchkeeper.sharding.ring import HashRing
from watchkeeper.sharding.sharder import Sharder

__all__ = ["HashRing", "RingView", "ShardReplica", "ShardStatus", "Sharder", "Sharding"]
