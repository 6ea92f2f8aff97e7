"""Triggers: the watched sources of reconcile requests and how their events become them.

A controller has one ``primary`` trigger (its own resource: an object maps to itself),
``owned`` ones (children: mapped to their owner through ``ownerReferences``) and
``watched`` ones (any resource, mapped by the user's ``Mapper``). Each follows its shared
watch in its own supervised feeder (``feed``), so one broken trigger never pauses the
others; a trigger's ``predicate`` drops modifications that do not matter to it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from watchkeeper import meta
from watchkeeper.backoff import Backoff
from watchkeeper.cache import Store, Subscription, WatchHandle
from watchkeeper.cache.shared import SharedWatch
from watchkeeper.client import Api, ApiError, Resource
from watchkeeper.controller.action import ObjectRef
from watchkeeper.controller.predicates import Predicate, PredicateFilter
from watchkeeper.controller.scheduler import Scheduler
from watchkeeper.controller.stats import ErrorLog
from watchkeeper.watcher import (
    Apply,
    Delete,
    InitApply,
    InitDone,
    InitStart,
    WatchConfig,
    WatchError,
    WatcherUnhealthy,
    WatchGaveUp,
    WatchHealth,
)

log = logging.getLogger("watchkeeper.controller")

JSON = dict[str, Any]
Mapper = Callable[[JSON], Iterable[ObjectRef]]
WatchErrorHook = Callable[[str, ApiError], Any]
Relation = Literal["primary", "owned", "watched"]


def owner_mapper(owner: Resource) -> Mapper:
    """Children to owners through ``ownerReferences`` of the owner's kind and group."""

    def mapper(child: JSON) -> list[ObjectRef]:
        refs = (child.get("metadata") or {}).get("ownerReferences") or []
        ns = meta.namespace(child) if owner.namespaced else None
        return [
            ObjectRef(namespace=ns, name=r["name"])
            for r in refs
            if r.get("kind") == owner.kind
            and str(r.get("apiVersion", "")).rpartition("/")[0] == owner.group
        ]

    return mapper


@dataclass
class Trigger:
    """One watched source of reconcile requests."""

    name: str
    api: Api
    config: WatchConfig
    mapper: Mapper | None  # None: the main resource (maps to itself)
    store: Store
    watch: SharedWatch  # shared with every consumer of the same key on the same Client
    health: WatchHealth
    backoff: Backoff | None = None
    mapper_errors: ErrorLog = field(default_factory=lambda: ErrorLog("mapper"))
    hook_errors: ErrorLog = field(default_factory=lambda: ErrorLog("on_watch_error hook"))
    shared: WatchHandle | None = None  # the shared watch while ``run`` holds it
    relation: Relation = "primary"
    filter: PredicateFilter | None = None  # the trigger's predicate, with its memory
    # The caller's own (label, field) selectors, without a shard's label: what a sharder
    # must label is what the controller watches on all its replicas together.
    scope: tuple[str | None, str | None] = (None, None)

    @property
    def predicate(self) -> Predicate | None:
        return self.filter.predicate if self.filter is not None else None

    def refs(self, obj: JSON) -> list[ObjectRef]:
        """What to reconcile for ``obj``; a mapper's error is logged and counted, never
        allowed to end the trigger (later changes must still be seen)."""
        if self.mapper is None:
            return [meta.key(obj)]
        try:
            refs = list(self.mapper(obj))
            for ref in refs:
                if not isinstance(ref, ObjectRef):
                    raise TypeError(
                        f"a mapper must return ObjectRefs, not {type(ref).__name__}"
                    )
        except Exception as exc:
            self.mapper_errors.record(exc, describe(obj))
            return []
        return refs


_OBJECT_EVENTS = (Apply, InitApply)  # a tuple: `Apply | InitApply` is a new union per event


async def feed(
    trig: Trigger,
    scheduler: Scheduler,
    *,
    debounce: float,
    on_watch_error: WatchErrorHook | None,
    forget: Callable[[ObjectRef], None],
    failed: Callable[[Trigger, BaseException], None],
    hold: Callable[[JSON], bool] | None = None,
    own_write: Callable[[JSON], bool] | None = None,
) -> None:
    """One trigger: follow its shared watch, turn events into reconcile requests (a
    restarted feeder resubscribes: it gets the store's contents as a relist).

    A deleted primary object is forgotten (``forget``: its pending request, backoff and
    failure record); a trigger whose watch gave up, or that the server rejected as the
    caller's mistake, is reported to ``failed``, which ends the run. ``hold`` (a sharded
    controller's primary trigger): True when it took the object to hand it over; such an
    object is not scheduled (and its pending request is dropped). ``own_write`` (the
    primary trigger with a Ready condition): True for the event of the controller's own
    status write, which is not scheduled."""
    assert trig.shared is not None
    filt = trig.filter
    events: Subscription | None = None
    # The refs of a relist in progress: scheduled at its InitDone, once the store holds the
    # new list. Scheduled at once, a worker would read the old cache (a stale object, or
    # none for a new one, and drop the request) with nothing to re-trigger it after the swap.
    listing: dict[ObjectRef, None] | None = None
    try:
        events = trig.shared.subscribe()
        async for event in events:
            if isinstance(event, _OBJECT_EVENTS):
                if hold is not None and hold(event.obj):
                    scheduler.cancel(meta.key(event.obj))
                    if listing is not None:
                        listing.pop(meta.key(event.obj), None)
                    continue
                if filt is not None:
                    if isinstance(event, InitApply):
                        filt.seen(event.obj)
                    elif not filt.changed(event.obj):
                        continue
                if own_write is not None and isinstance(event, Apply) and own_write(event.obj):
                    continue
                if listing is not None and isinstance(event, InitApply):
                    for ref in trig.refs(event.obj):
                        listing[ref] = None
                    continue
                for ref in trig.refs(event.obj):
                    scheduler.schedule(ref, debounce, changed=True)
            elif isinstance(event, InitDone):
                if listing is not None:
                    for ref in listing:
                        scheduler.schedule(ref, debounce, changed=True)
                    listing = None
            elif isinstance(event, Delete):
                if filt is not None:
                    filt.forget(event.obj)
                if trig.mapper is None:
                    ref = meta.key(event.obj)
                    scheduler.cancel(ref)
                    forget(ref)
                else:
                    for ref in trig.refs(event.obj):
                        scheduler.schedule(ref, debounce, changed=True)
            elif isinstance(event, InitStart):
                listing = {}  # a relist that ends without InitDone is replaced by the next
                if filt is not None:
                    filt.reset()
            elif isinstance(event, WatchError) and on_watch_error is not None:
                try:
                    result = on_watch_error(trig.name, event.error)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:  # the user's hook: its error must not end the trigger
                    trig.hook_errors.record(exc, f"{trig.name}: {type(event.error).__name__}")
    except (WatcherUnhealthy, WatchGaveUp) as exc:
        failed(trig, exc)
    except ApiError as exc:
        if exc.retriable:
            raise  # not raised by a watcher today; the supervisor restarts the trigger
        # The server rejected the watch as the caller's mistake (a malformed selector):
        # no retry or administrator can fix it, so the run ends now, not at max_unhealthy.
        failed(trig, exc)
    finally:
        if events is not None:
            events.close()


def describe(obj: JSON) -> str:
    """``namespace/name`` of an object for a log line, even of a broken one."""
    try:
        ns, name = meta.namespace(obj), meta.name(obj)
    except Exception:  # a broken object is exactly what a failing mapper may be given
        return "an object without a name"
    return f"{ns}/{name}" if ns else str(name)
