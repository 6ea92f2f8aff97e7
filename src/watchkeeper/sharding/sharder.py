"""The sharder: one replica at a time labels each object with the shard that owns it.

It holds Lease ``<ring>-sharder`` (a ``LeaderElector``: client-go timings, steps down
before another may take over) and, while it leads, watches the primary resource (and each
owned child resource) metadata-only, with the controller's own selectors: objects the
controller does not watch are never labelled. For each object, against the ring of live
shards:

- no shard label: label it with its shard on the ring;
- labelled with a dead shard (its lease expired as observed here, or released): label it
  with its shard at once (the dead replica stopped reconciling at its renew deadline,
  before we could see its lease expire);
- labelled with a live shard that is no longer its shard (a replica joined): set the drain
  label and nothing else; the owner stops reconciling it, waits for a running reconcile
  to end, then removes both labels; then it is unlabelled, and labelled as above. So no
  object is ever reconciled by two replicas at once.
- a child labelled differently from its controller owner: given the owner's label.

Every label write is a merge patch carrying the resourceVersion we decided on, so a
decision made on a stale view fails with 409 instead of overriding a newer state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from watchkeeper.backoff import DefaultBackoff
from watchkeeper.client import Api, ApiError, Conflict, NotFound
from watchkeeper.leader import LeaderElector, describe_error
from watchkeeper.sharding.config import Sharding
from watchkeeper.sharding.membership import RingView
from watchkeeper.sharding.ring import HashRing
from watchkeeper.supervisor import start_task
from watchkeeper.watcher import (
    Apply,
    Delete,
    InitApply,
    InitDone,
    InitStart,
    WatchConfig,
    watcher,
)

log = logging.getLogger("watchkeeper.sharding")

JSON = dict[str, Any]
_IDLE = 0.05  # seconds between looks when nothing is to do
_RETRY = 1.0  # seconds before a failed label write is tried again (doubling per failure)
_RETRY_MAX = 60.0  # seconds: the longest wait before a failed label write is tried again
_SAY_EVERY = 60.0  # seconds: how often one kind of label-write failure is logged


@dataclass
class _Meta:
    """What the sharder keeps of one object: enough to decide and to write."""

    namespace: str | None
    name: str
    rv: str
    uid: str
    shard: str | None
    drain: str | None
    owner_uid: str | None = None  # children: the controller owner's uid


@dataclass
class SharderStats:
    """Label writes by kind (assign, drain, reassign, child), conflicts, errors, and the
    watch events the sharder received (it watches every object, metadata only)."""

    writes: dict[str, int] = field(default_factory=dict)
    events: int = 0
    conflicts: int = 0
    errors: int = 0
    leases_deleted: int = 0  # dead shards forgotten once no object was labelled with them


def _kid_key(index: int, key: str) -> str:
    """A child object's key in ``_later`` and ``_failures`` (a primary's is its own key)."""
    return f"#{index}:{key}"


def _key(ns: str | None, name: str) -> str:
    return f"{ns}/{name}" if ns else name


class Sharder:
    """Run ``await sharder.run()`` on every replica (supervised); it acts only while it
    holds the sharder lease."""

    def __init__(
        self, sharding: Sharding, view: RingView, primary: Api, children: Sequence[Api],
        leases: Api, *, clock: Callable[[], float] | None = None,
        scopes: Sequence[tuple[str | None, str | None]] = (),
    ) -> None:
        self.sharding, self.view = sharding, view
        self.primary, self.children, self.leases = primary, list(children), leases
        # (label, field) selectors of the primary, then of each child resource: the
        # controller's own, so objects it does not watch are never labelled.
        self._scopes = list(scopes) or [(None, None)] * (1 + len(self.children))
        if len(self._scopes) != 1 + len(self.children):
            raise ValueError(f"scopes: one per resource (primary first), got "
                             f"{len(self._scopes)} for {1 + len(self.children)}")
        self._clock = clock
        self.elector: LeaderElector | None = None
        self.stats = SharderStats()
        self._objects: dict[str, _Meta] = {}
        self._uids: dict[str, str] = {}  # primary uid -> key
        self._kids: list[dict[str, _Meta]] = [{} for _ in self.children]
        self._by_owner: dict[str, set[tuple[int, str]]] = {}
        self._dirty: set[str] = set()
        self._dirty_kids: set[tuple[int, str]] = set()
        self._later: dict[str, float] = {}
        self._ring: HashRing | None = None
        self._next_forget = 0.0
        self._forget_failed: dict[str, tuple[str, float]] = {}  # lease -> (error, retry at)
        self._failures: dict[str, int] = {}  # key -> failed writes in a row
        self._said: dict[str, tuple[float, int]] = {}  # error kind -> (said when, since)

    @property
    def is_sharder(self) -> bool:
        return self.elector is not None and self.elector.is_leader

    def _now(self) -> float:
        return (self._clock or asyncio.get_running_loop().time)()

    # -- leadership ------------------------------------------------------------------------

    async def run(self) -> None:
        """Lead, shard while leading, try again after losing the lease; never returns."""
        s = self.sharding
        while True:
            elector = self.elector = LeaderElector(
                self.leases, s.sharder_lease, identity=s.replica_id,
                lease_duration=s.lease_duration, renew_deadline=s.renew_deadline,
                retry_period=s.retry_period,
            )
            term = start_task(elector.run(), name=f"sharder {s.ring}: election", awaited=True)
            lead = start_task(elector.leading.wait(), name=f"sharder {s.ring}: lead",
                              awaited=True)
            try:
                await asyncio.wait({term, lead}, return_when=asyncio.FIRST_COMPLETED)
                if elector.is_leader:
                    log.info("ring %s: %s is the sharder", s.ring, s.replica_id)
                    work = start_task(self._serve(), name=f"sharder {s.ring}: work",
                                      awaited=True)
                    try:
                        await asyncio.wait({term, work}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        await _cancel(work)
                    if work.done() and not work.cancelled() and work.exception() is not None:
                        raise work.exception()  # type: ignore[misc]
            finally:
                await _cancel(lead)
                await _cancel(term)  # releases the lease if we still hold it

    # -- following the objects -------------------------------------------------------------

    async def _follow(self, api: Api, index: int | None, synced: asyncio.Event) -> None:
        """Keep ``_objects`` (index None) or ``_kids[index]`` in step with a metadata-only
        watch, marking what changed as dirty."""
        table = self._objects if index is None else self._kids[index]
        seen: set[str] = set()
        labels, fields = self._scopes[0 if index is None else index + 1]
        config = WatchConfig(metadata_only=True, max_unhealthy=None, label_selector=labels,
                             field_selector=fields)
        async for ev in watcher(api, config, backoff=DefaultBackoff()):
            self.stats.events += 1
            if isinstance(ev, InitStart):
                seen = set()
            elif isinstance(ev, InitApply | Apply):
                key = self._put(table, index, ev.obj)
                seen.add(key)
            elif isinstance(ev, Delete):
                self._drop(table, index, ev.obj)
            elif isinstance(ev, InitDone):
                for key in [k for k in table if k not in seen]:
                    self._drop_key(table, index, key)
                synced.set()

    def _put(self, table: dict[str, _Meta], index: int | None, obj: JSON) -> str:
        md = obj.get("metadata") or {}
        labels = md.get("labels") or {}
        ns, name = md.get("namespace"), str(md.get("name"))
        key = _key(ns, name)
        owner = None
        if index is not None:
            for ref in md.get("ownerReferences") or []:
                if ref.get("controller"):
                    owner = str(ref.get("uid") or "")
        m = _Meta(ns, name, str(md.get("resourceVersion") or ""), str(md.get("uid") or ""),
                  labels.get(self.sharding.label_key) or None,
                  labels.get(self.sharding.drain_key) or None, owner)
        old = table.get(key)
        table[key] = m
        if index is None:
            self._uids[m.uid] = key
            self._dirty.add(key)
            if old is None or old.shard != m.shard:
                self._dirty_kids.update(self._by_owner.get(m.uid, ()))
        else:
            if old is not None and old.owner_uid and old.owner_uid != owner:
                self._by_owner.get(old.owner_uid, set()).discard((index, key))
            if owner:
                self._by_owner.setdefault(owner, set()).add((index, key))
            self._dirty_kids.add((index, key))
        return key

    def _drop(self, table: dict[str, _Meta], index: int | None, obj: JSON) -> None:
        md = obj.get("metadata") or {}
        self._drop_key(table, index, _key(md.get("namespace"), str(md.get("name"))))

    def _drop_key(self, table: dict[str, _Meta], index: int | None, key: str) -> None:
        m = table.pop(key, None)
        if m is None:
            return
        self._failures.pop(key if index is None else _kid_key(index, key), None)  # (gone)
        if index is None:
            self._uids.pop(m.uid, None)
        elif m.owner_uid:
            self._by_owner.get(m.owner_uid, set()).discard((index, key))

    # -- deciding and writing --------------------------------------------------------------

    def _decide(self, m: _Meta, ring: HashRing) -> tuple[str, JSON] | None:
        """The label write ``m`` needs (kind, merge patch), or None."""
        s = self.sharding
        desired = ring.owner(_key(m.namespace, m.name))
        if desired is None:
            return None  # no live shard: nothing to assign to
        if not m.shard:
            labels: JSON = {s.label_key: desired}
            if m.drain:
                labels[s.drain_key] = None
            return "assign", labels
        if m.shard == desired or (m.drain and self.view.is_live(m.shard)):
            return None  # ours to keep, or its owner is letting it go
        if self.view.dead_for_sure(m.shard):
            return "reassign", {s.label_key: desired, s.drain_key: None}
        if not self.view.is_live(m.shard):
            # Not seen live, not yet sure it is dead (no lease seen yet): look again soon.
            self._later[_key(m.namespace, m.name)] = self._now() + self.sharding.retry_period
            return None
        return "drain", {s.drain_key: m.shard}

    def _decide_child(self, c: _Meta) -> tuple[str, JSON] | None:
        key = self._uids.get(c.owner_uid or "")
        owner = self._objects.get(key) if key is not None else None
        if owner is None or not owner.shard or owner.shard == c.shard:
            return None
        return "child", {self.sharding.label_key: owner.shard}

    async def _write(self, api: Api, m: _Meta, kind: str, labels: JSON) -> bool:
        """One conditional label write; False when it must be tried again later."""
        patch = {"metadata": {"resourceVersion": m.rv, "labels": labels}}
        try:
            await api.patch(m.name, patch, namespace=m.namespace)
        except NotFound:
            return True
        except Conflict:
            self.stats.conflicts += 1  # changed meanwhile: the watch brings the new state
            return False
        except ApiError as exc:
            self.stats.errors += 1
            self._said_failure(exc, _key(m.namespace, m.name))
            return False
        self.stats.writes[kind] = self.stats.writes.get(kind, 0) + 1
        return True

    def _said_failure(self, exc: ApiError, key: str) -> None:
        """Say a failed label write once per kind of error a minute, with how many more
        failed meanwhile: without "patch" in its RBAC every object fails the same way, and
        30,000 lines saying so would bury the one that matters."""
        kind, now = type(exc).__name__, self._now()
        said = self._said.get(kind)
        if said is not None and now - said[0] < _SAY_EVERY:
            self._said[kind] = (said[0], said[1] + 1)
            return
        more = f" ({said[1]} more failed like this in the last {_SAY_EVERY:g} s)" if said and \
            said[1] else ""
        log.warning("ring %s: labelling %s failed (retrying with backoff): %s%s",
                    self.sharding.ring, key, describe_error(exc), more)
        self._said[kind] = (now, 0)

    def _retry_at(self, key: str) -> float:
        """When a failed write of ``key`` is tried again: 1 s, doubling per failure up to a
        minute, so refused writes are no hot loop against the API server."""
        n = self._failures[key] = self._failures.get(key, 0) + 1
        return self._now() + min(_RETRY * 2.0 ** (n - 1), _RETRY_MAX)

    async def _serve(self) -> None:
        """While leading: follow the objects, keep every label as the ring says."""
        self._objects.clear()
        self._uids.clear()
        self._by_owner.clear()
        for kids in self._kids:
            kids.clear()
        self._ring = None
        synced = [asyncio.Event() for _ in range(1 + len(self.children))]
        follows = [start_task(self._follow(self.primary, None, synced[0]),
                              name=f"sharder {self.sharding.ring}: watch primary", awaited=True)]
        follows += [start_task(self._follow(api, i, synced[i + 1]),
                               name=f"sharder {self.sharding.ring}: watch children {i}",
                               awaited=True)
                    for i, api in enumerate(self.children)]
        try:
            # Each object is decided on its own, so objects are labelled while the initial
            # list still arrives (after a sharder fail-over, listing 30,000 objects took
            # seconds); only the ring must be known first.
            while not self.view.ready.is_set():
                _check(follows)
                await asyncio.sleep(_IDLE)
            while True:
                _check(follows)
                live = self.view.live
                if self._ring is None or self._ring.shards != live or self.view.changed.is_set():
                    self.view.changed.clear()
                    self._ring = HashRing(live, self.sharding.virtual_nodes)
                    self._dirty.update(self._objects)
                now = self._now()
                for key in [k for k, t in self._later.items() if t <= now]:
                    del self._later[key]
                    if key.startswith("#"):
                        index, _, k = key[1:].partition(":")
                        self._dirty_kids.add((int(index), k))
                    else:
                        self._dirty.add(key)
                if now >= self._next_forget and all(e.is_set() for e in synced):
                    self._next_forget = now + self.sharding.retry_period
                    await self._forget_dead_shards()
                if not self._dirty and not self._dirty_kids:
                    await asyncio.sleep(_IDLE)
                    continue
                await self._pass(self._ring)
                await asyncio.sleep(0)
        finally:
            for t in follows:
                await _cancel(t)

    async def _forget_dead_shards(self) -> None:
        """Delete the Lease of each dead shard that no object is labelled with any more
        (all moved): replicas come and go with new names (a rolling update), and their
        leases would pile up in the ring forever. The delete is conditional on the
        resourceVersion we listed: a replica that came back meanwhile keeps its lease (and
        one that comes back later creates it again)."""
        dead = self.view.dead_leases()
        if not dead:
            return
        in_use = {m.shard for m in self._objects.values()}
        in_use.update(m.drain for m in self._objects.values())
        for kids in self._kids:
            in_use.update(m.shard for m in kids.values())
        now = self._now()
        for replica, lease, rv in dead:
            if replica in in_use or self._forget_failed.get(lease, ("", 0.0))[1] > now:
                continue
            try:
                await self.leases.delete(lease, preconditions={"resourceVersion": rv})
            except (NotFound, Conflict):
                continue  # gone already, or renewed meanwhile: the view sees it next list
            except ApiError as exc:
                # (e.g. RBAC without "delete" on leases: said once, tried again rarely)
                text, again = describe_error(exc), 4 * self.sharding.lease_duration
                if self._forget_failed.get(lease, ("", 0.0))[0] != text:
                    log.warning("ring %s: deleting lease %s of dead shard %s failed (trying "
                                "again every %g s): %s", self.sharding.ring, lease, replica,
                                again, text)
                self._forget_failed[lease] = (text, now + again)
                continue
            self._forget_failed.pop(lease, None)
            self.stats.leases_deleted += 1
            log.info("ring %s: deleted lease %s of dead shard %s (no object is labelled with "
                     "it any more)", self.sharding.ring, lease, replica)

    async def _pass(self, ring: HashRing) -> None:
        """Decide for every dirty object, then write with bounded concurrency."""
        jobs: list[tuple[Api, _Meta, str, JSON, str]] = []
        dirty, self._dirty = self._dirty, set()
        for key in dirty:
            m = self._objects.get(key)
            if m is not None and (d := self._decide(m, ring)) is not None:
                jobs.append((self.primary, m, d[0], d[1], key))
        kids, self._dirty_kids = self._dirty_kids, set()
        for index, key in kids:
            c = self._kids[index].get(key)
            if c is not None and (d := self._decide_child(c)) is not None:
                jobs.append((self.children[index], c, d[0], d[1], _kid_key(index, key)))
        if not jobs:
            return
        pending = iter(jobs)

        async def writer() -> None:
            for api, m, kind, labels, key in pending:
                if await self._write(api, m, kind, labels):
                    self._failures.pop(key, None)
                else:
                    self._later[key] = self._retry_at(key)

        n = min(self.sharding.sharder_concurrency, len(jobs))
        tasks = [start_task(writer(), name=f"sharder {self.sharding.ring}: write",
                            awaited=True) for _ in range(n)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                await _cancel(t)


def _check(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Raise what a follower task raised (a watch only ends by an error)."""
    for t in tasks:
        if t.done():
            t.result()
            raise RuntimeError(f"{t.get_name()} ended")


async def _cancel(task: asyncio.Task[Any]) -> None:
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
