"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Expiry is judged on our own clock from when we last *saw* the lease change (never by
comparing the holder's timestamps with ours), so clock skew between replicas cannot cause
two leaders. A leader that cannot renew within ``renew_deadline`` (shorter than the lease)
steps down before anyone else may take over: no split brain.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import random
import socket
import uuid
from collections.abc import Callable
from typing import Any

from watchkeeper.client import AlreadyExists, Api, ApiError, Conflict, NotFound
from watchkeeper.controller import LeadershipLost

log = logging.getLogger("watchkeeper.leader")

JSON = dict[str, Any]

__all__ = ["LeaderElector", "LeadershipLost", "default_identity"]


def default_identity() -> str:
    """POD_NAME (from the downward API) or the hostname, plus a random suffix."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4().hex[:8]}"


def _micro_time(now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Acquire and hold one Lease. Run ``await elector.run()`` in a task; read ``is_leader``
    or await ``leading.wait()``; ``lost`` is set when leadership ends."""

    def __init__(
        self,
        api: Api,
        name: str,
        *,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_stop: bool = True,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError(
                "need retry_period < renew_deadline < lease_duration, got "
                f"{retry_period} / {renew_deadline} / {lease_duration}"
            )
        self.api, self.name = api, name
        self.identity = identity or default_identity()
        self.lease_duration, self.renew_deadline = lease_duration, renew_deadline
        self.retry_period, self.release_on_stop = retry_period, release_on_stop
        self._clock = clock
        self._rng = rng or random.Random()
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._observed: JSON | None = None  # last lease record we saw
        self._observed_at = 0.0  # our clock when the record last changed
        self.transitions = 0

    def reset(self) -> None:
        """Fresh events for another term (after ``run`` returned)."""
        self.leading, self.lost = asyncio.Event(), asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set() and not self.lost.is_set()

    def __repr__(self) -> str:
        return f"LeaderElector(lease={self.name!r}, identity={self.identity!r})"

    def _now(self) -> float:
        return (self._clock or asyncio.get_running_loop().time)()

    async def run(self) -> None:
        """Acquire, then renew until renewal fails or the task is cancelled.

        Returns when leadership is lost (``lost`` is set); cancelling releases the lease."""
        try:
            while True:
                if await self._try_acquire_or_renew():
                    break
                await asyncio.sleep(self.retry_period * (1 + self._rng.random()))  # jittered
            log.info("became leader of lease %s as %s", self.name, self.identity)
            self.leading.set()
            await self._renew_loop()
        except asyncio.CancelledError:
            if self.is_leader and self.release_on_stop:
                with contextlib.suppress(ApiError, asyncio.CancelledError):
                    await asyncio.shield(self.release())
            raise
        finally:
            if self.leading.is_set():
                self.lost.set()

    async def _renew_loop(self) -> None:
        last_renew = self._now()
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                async with asyncio.timeout(self.renew_deadline - (self._now() - last_renew)):
                    ok = await self._try_acquire_or_renew()
            except (TimeoutError, ApiError) as exc:
                ok = False
                log.warning("lease %s renewal failed: %s", self.name, exc)
            if ok:
                last_renew = self._now()
            elif self._now() - last_renew >= self.renew_deadline:
                log.warning(
                    "lost leadership of lease %s: not renewed within %g s",
                    self.name, self.renew_deadline,
                )
                return
            elif self._observed and self._holder(self._observed) != self.identity:
                log.warning("lost leadership of lease %s to %s", self.name,
                            self._holder(self._observed))
                return

    @staticmethod
    def _holder(lease: JSON) -> str:
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def _record(self, lease: JSON) -> None:
        if self._observed is None or self._observed.get("spec") != lease.get("spec"):
            self._observed_at = self._now()
        self._observed = lease

    async def _try_acquire_or_renew(self) -> bool:
        now_wall = _micro_time()
        try:
            lease = await self.api.get(self.name)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.api.namespace},
                "spec": self._spec(now_wall, now_wall, 0),
            }
            try:
                self._record(await self.api.create(body))
            except (AlreadyExists, Conflict):
                return False
            return True
        self._record(lease)
        spec = lease.get("spec") or {}
        holder = self._holder(lease)
        expired = self._now() - self._observed_at > float(
            spec.get("leaseDurationSeconds") or self.lease_duration
        )
        if holder and holder != self.identity and not expired:
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire = spec.get("acquireTime") or now_wall
        if holder != self.identity:
            transitions, acquire = transitions + 1, now_wall
        updated = dict(lease)
        updated["spec"] = self._spec(acquire, now_wall, transitions)
        try:
            self._record(await self.api.replace(self.name, updated))
        except Conflict:
            return False  # someone else wrote first; look again next round
        return True

    def _spec(self, acquire: str, renew: str, transitions: int) -> JSON:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": round(self.lease_duration),
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseTransitions": transitions,
        }

    async def release(self) -> None:
        """Give the lease up at once so another replica need not wait for it to expire."""
        if self._observed is None or self._holder(self._observed) != self.identity:
            return
        updated = dict(self._observed)
        spec = dict(updated.get("spec") or {})
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=_micro_time())
        updated["spec"] = spec
        with contextlib.suppress(Conflict, NotFound):
            await self.api.replace(self.name, updated)
            log.info("released lease %s", self.name)
        self.lost.set()
