"""Membership of a ring: each replica holds its own Lease; every replica observes them all.

A replica's own Lease (``<ring>-shard-<replica>``) is held by a ``LeaderElector`` with the
usual client-go timings: it is the controller's elector, so the replica reconciles only
while it holds the lease and stops at its renew deadline, before anyone may judge it dead.

``RingView`` lists the ring's Leases every ``retry_period`` and judges liveness the way a
follower does in leader election: a shard is dead only when a list *sent* more than
``leaseDurationSeconds`` after we last *saw* its lease change still shows it unchanged (or
shows it released or gone). Clock skew between replicas cannot make a live shard look
dead, and neither can a failing API: without a successful list, nobody dies.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.client import Api
from watchkeeper.leader import EXPIRY_MARGIN, LeaderElector, describe_error
from watchkeeper.sharding.config import RING_LABEL, Sharding

log = logging.getLogger("watchkeeper.sharding")

JSON = dict[str, Any]


def membership_elector(sharding: Sharding, leases: Api) -> LeaderElector:
    """The elector of this replica's own Lease (labelled with its ring, so the view and
    the sharder find it)."""
    return LeaderElector(
        leases, sharding.lease_name, identity=sharding.replica_id,
        lease_duration=sharding.lease_duration, renew_deadline=sharding.renew_deadline,
        retry_period=sharding.retry_period, labels={RING_LABEL: sharding.ring},
    )


@dataclass
class _Observed:
    holder: str
    duration: float
    spec: JSON
    seen_at: float  # our clock, when the spec last changed (or when we first saw it)
    rv: str = ""  # the lease's resourceVersion as listed (a delete's precondition)

    @property
    def expires_at(self) -> float:
        """Our clock when this lease may be judged dead if it does not change."""
        return self.seen_at + self.duration


@dataclass
class ShardStatus:
    """What metrics and ``/readyz?verbose`` show of a ring on this replica."""

    ring: str
    replica_id: str
    live: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    sharder: bool = False  # this replica is the ring's sharder now
    owned: int = 0  # objects in this replica's cache (its share)
    draining: int = 0  # objects it is handing over
    ready: bool = False  # the view has listed the leases at least once
    last_error: str | None = None


class RingView:
    """The ring's shards as this replica observes them; ``changed`` is set on every change
    of the live set (the sharder clears it)."""

    def __init__(
        self, sharding: Sharding, leases: Api, *, clock: Callable[[], float] | None = None
    ) -> None:
        self.sharding, self.leases = sharding, leases
        self._clock = clock
        self._observed: dict[str, _Observed] = {}  # lease name -> what we saw
        self._live: tuple[str, ...] = ()
        self._absent: dict[str, float] = {}  # replica -> when we first missed its lease
        self.changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.last_error: str | None = None
        self.consecutive_failures = 0

    def _now(self) -> float:
        return (self._clock or asyncio.get_running_loop().time)()

    @property
    def live(self) -> tuple[str, ...]:
        """Replica ids of the live shards, sorted (as of the last successful list)."""
        return self._live

    @property
    def dead(self) -> tuple[str, ...]:
        return tuple(sorted(replica for replica, _, _ in self.dead_leases()))

    def dead_leases(self) -> list[tuple[str, str, str]]:
        """(replica, lease name, resourceVersion) of every listed shard lease that is not
        live: expired as we observed it, or released."""
        prefix = self.sharding.shard_lease("")
        out = []
        for name, o in self._observed.items():
            replica = name[len(prefix):] if name.startswith(prefix) else (o.holder or name)
            if replica not in self._live and o.holder not in self._live:
                out.append((replica, name, o.rv))
        return sorted(out)

    def is_live(self, replica: str) -> bool:
        return replica in self._live

    def dead_for_sure(self, replica: str) -> bool:
        """Its lease was seen expired or released; or we have not seen it at all for a
        whole lease duration (a deleted lease is recreated by a live owner within its
        retry period, so absence alone is not death)."""
        if self.sharding.shard_lease(replica) in self._observed:
            self._absent.pop(replica, None)
            return replica not in self._live
        first = self._absent.setdefault(replica, self._now())
        return self._now() - first > self.sharding.lease_duration

    def next_expiry(self) -> float:
        """Our clock when the first live shard may be judged dead if its lease does not
        change meanwhile (infinity when none is live)."""
        return min((o.expires_at for o in self._observed.values()
                    if o.holder in self._live), default=math.inf)

    async def run(self) -> None:
        """List the ring's leases every ``retry_period`` and once more just after a live
        shard's lease may have expired: a dead shard is then noticed at its expiry, not up
        to a period later (one extra list per death; a renewed lease moves the moment)."""
        period = self.sharding.retry_period
        while True:
            delay = period
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the view must not die: nobody is judged meanwhile
                text = describe_error(exc)
                self.consecutive_failures += 1
                if text != self.last_error:
                    log.warning("ring %s: listing shard leases failed (retrying): %s",
                                self.sharding.ring, text)
                self.last_error = text
            else:  # (after a failed list, nobody is judged: the period it is)
                until = self.next_expiry() - self._now() + EXPIRY_MARGIN
                delay = max(EXPIRY_MARGIN, min(period, until))
            await asyncio.sleep(delay)

    async def refresh(self) -> None:
        """One list; updates the live set from it."""
        sent = self._now()
        listed = await self.leases.list_all(label_selector=f"{RING_LABEL}={self.sharding.ring}")
        seen = self._now()
        self.consecutive_failures, self.last_error = 0, None
        current: dict[str, _Observed] = {}
        for lease in listed.items:
            name = str(lease["metadata"]["name"])
            spec = dict(lease.get("spec") or {})
            before = self._observed.get(name)
            seen_at = before.seen_at if before is not None and before.spec == spec else seen
            current[name] = _Observed(str(spec.get("holderIdentity") or ""),
                                      float(spec.get("leaseDurationSeconds") or 0), spec,
                                      seen_at, str(lease["metadata"].get("resourceVersion")
                                                   or ""))
        self._observed = current
        live = tuple(sorted(
            o.holder for o in current.values()
            if o.holder and sent <= o.expires_at
        ))
        if live != self._live:
            log.info("ring %s: live shards %s (was %s)", self.sharding.ring,
                     ", ".join(live) or "none", ", ".join(self._live) or "none")
            self._live = live
            self.changed.set()
        self.ready.set()
