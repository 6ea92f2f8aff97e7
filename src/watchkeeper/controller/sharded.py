"""A sharded controller's side of a hand-over: let an object go without ever reconciling
it at the same time as its next owner.

The sharder marks an object that must move with the drain label. On seeing it, the owner
*holds* the object (no reconcile of it starts any more: the worker checks, synchronously
before marking a reconcile in flight), waits until a reconcile already running ends, then
removes its shard label and the drain label in one JSON patch (conditional on the shard
label still naming this replica). The object then leaves this replica's watch, and only
then can the sharder give it to another replica.

``ShardScope`` is what the controller needs of ``watchkeeper.Sharding`` (which sits in a
layer above the controller)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from watchkeeper.client import Api, ApiError, Invalid, NotFound
from watchkeeper.controller.action import ObjectRef

log = logging.getLogger("watchkeeper.controller")

JSON = dict[str, Any]
_POLL = 0.01  # seconds between looks at a running reconcile of a held object
_RETRY = 1.0  # seconds before a failed release is tried again


class ShardScope(Protocol):
    """What ``Controller(sharding=...)`` needs (``watchkeeper.Sharding`` is one)."""

    @property
    def selector(self) -> str: ...  # "shard.watchkeeper.io/<ring>=<this replica>"

    @property
    def drain_concurrency(self) -> int: ...

    def draining(self, obj: JSON) -> bool: ...

    def release_patch(self) -> list[JSON]: ...


class Drain:
    """Objects this replica is handing over (``held``) and the releases still to send."""

    def __init__(self, scope: ShardScope) -> None:
        self.scope = scope
        self.held: set[ObjectRef] = set()
        self.released = 0
        self._queue: asyncio.Queue[ObjectRef] = asyncio.Queue()

    def hold(self, ref: ObjectRef) -> None:
        """Stop reconciling ``ref`` and queue its release (once)."""
        if ref not in self.held:
            self.held.add(ref)
            self._queue.put_nowait(ref)

    def forget(self, ref: ObjectRef) -> None:
        """``ref`` left our watch (released, moved or deleted)."""
        self.held.discard(ref)

    async def run(self, api: Api, inflight: Mapping[ObjectRef, float]) -> None:
        """Release held objects one by one (a supervised task; several run at once)."""
        while True:
            ref = await self._queue.get()
            if ref not in self.held:
                continue
            while ref in inflight:  # noqa: ASYNC110 (a reconcile has no event to await)
                await asyncio.sleep(_POLL)
            try:
                await api.patch(ref.name, self.scope.release_patch(), type="json",
                                namespace=ref.namespace)
            except NotFound:
                self.held.discard(ref)
            except Invalid:
                pass  # the test failed: no longer ours; its watch event will come
            except ApiError as exc:
                log.warning("releasing %s to another shard failed (retrying): %s: %s",
                            ref, type(exc).__name__, exc)
                await asyncio.sleep(_RETRY)
                self._queue.put_nowait(ref)
            else:
                self.released += 1
