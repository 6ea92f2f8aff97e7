"""Shared watches: one watcher and one Store per (resource, namespace, selectors, shape) in
a process, however many consumers want them (controller-runtime's shared informer cache,
kube-rs's shared streams).

Two controllers on ConfigMaps used to open two watches and keep two copies of every
object. ``SharedWatches.of(client)`` is the registry of one ``Client``; ``acquire`` returns
a handle on the shared watch for a key, starting it for the first consumer and stopping it
(its task cancelled, the watch request closed, the store no longer ready) when the last
handle is released::

    shared = wk.SharedWatches.of(client)
    async with shared.acquire(api, wk.WatchConfig(label_selector="app=x")) as handle:
        await handle.store.wait_until_ready()      # the one Store, ready after InitDone
        async with handle.subscribe() as events:   # this consumer's own event stream
            async for event in events: ...          # the same events a watcher yields

**The key** is the resource (group, version, plural), the namespace, the label and field
selectors, ``metadata_only``, ``strip_managed_fields`` and ``keep_managed_fields`` (they
change what is cached),
and what decides when the watch gives up, so no consumer gets an error it did not ask for:
``max_unhealthy``, and a backoff the consumer brought itself (by identity: two consumers
with backoffs of their own never share; the default one, ``None``, does). The rest of the
``WatchConfig`` (page size, timeouts, list strategy...) comes from the consumer that
started the watch. A ``Client`` is the unit of sharing: two Clients never share a watch.

**Events.** Each subscription gets every event after it subscribed. One that joins once
the store has listed first gets the store's current contents as ``InitStart``,
``InitApply``... ``InitDone`` (one that joins during a relist gets ``InitStart`` and what
that relist collected so far, then the rest of it), so nothing is lost: a late joiner sees
the same stream as if it had started the watch itself. ``WatchError`` events reach every
subscription; an error that ends the watcher (``WatcherUnhealthy``, ``WatchGaveUp``, an
``ApiError`` only the caller can fix) is raised to every subscription, after the events
before it (the next ``acquire`` starts the watch afresh).

``shared.watch(api, config)`` gives the key's ``SharedWatch`` without holding it, so a
Controller can hand out ``controller.store`` before it runs; ``watch.acquire()`` holds it
later. An idle watch (its last handle released, its stop complete) leaves the registry and
its task's status the supervisor, so nothing of it stays per key ever watched; it keeps
its store's last contents (not ready) for whoever still holds the ``SharedWatch``; the next
``acquire`` of it starts it again and relists into that store (reporting what vanished
meanwhile as ``Delete``).

**Stopping.** A stop takes a few loop ticks (the task is cancelled, then its request
closes), and ``acquire`` is synchronous, so a watch can be acquired while it stops. So a
watch in a stop is *stopping* (``SharedWatch.stopping``, not ``running``) and stays in the
registry until its task has ended: every ``acquire`` of the key meanwhile gets this watch
(never a second one beside it), counts in ``refs``, and starts nothing. When the task
ends, a done callback (it runs even if the releaser was cancelled) decides: ``refs > 0``
(acquired during the stop) starts the watch again, which relists into the store; else the
watch leaves the registry. The stop itself, synchronously when ``refs`` reaches 0, closes
the subscriptions of that moment (all of released handles) and unreadies the store, so a
subscription taken during the stop is never closed by it and gets the restarted watch's
relist and events. A second release to 0 during the same stop only waits for it. Hence:
a watch held (``refs > 0``) always runs, or starts within the ticks its stop takes; a
Controller's health reports a held watch that does not run (``WatchHandle.running``).

**A slow consumer** never holds up the watcher or the others: each subscription has a
bounded queue (``max_queue`` events). When it is full the queue is emptied and the
subscription is marked for a resync: its next read gets, from the store, a relist
(``InitStart``, every current object as ``InitApply``, ``InitDone``), then the events from
that moment on. Exactly what a consumer gets after a 410 from the server: its own cache
would report whatever vanished meanwhile; a consumer without one misses those deletions.
``subscription.resyncs`` counts them, and each is logged once at WARNING.

**Supervision.** The one task per shared watch runs under the registry's ``Supervisor``
("shared watches"): an unexpected crash (a bug, or an index function of the store that
raises) is logged, shown as a degraded task in ``handle.task`` (a Controller's health
reports it, and past ``max_unhealthy`` its run ends naming it) and restarted with backoff;
the restarted watch lists again, which subscribers see as a relist.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from types import TracebackType

from watchkeeper.backoff import Backoff, DefaultBackoff
from watchkeeper.cache.store import Store
from watchkeeper.client import Api, ApiError
from watchkeeper.client.api import ApiClient
from watchkeeper.client.resource import find_builtin, parse_spec
from watchkeeper.supervisor import Supervisor, TaskHandle, TaskStatus
from watchkeeper.watcher import (
    Event,
    InitApply,
    InitDone,
    InitStart,
    WatchConfig,
    WatcherUnhealthy,
    WatchGaveUp,
    WatchHealth,
    watcher,
)

__all__ = ["SharedWatch", "SharedWatches", "Subscription", "WatchHandle", "WatchKey"]

log = logging.getLogger("watchkeeper.cache.shared")

DEFAULT_MAX_QUEUE = 65536  # events per subscription before it is resynced from the store


@dataclass(frozen=True)
class WatchKey:
    """What makes two watches the same watch (see the module docstring)."""

    group: str
    version: str
    resource: str
    namespace: str | None
    label_selector: str | None
    field_selector: str | None
    metadata_only: bool
    strip_managed_fields: bool
    keep_managed_fields: bool
    max_unhealthy: float | None
    backoff: int | None  # id() of a consumer's own backoff; None: the default one

    @staticmethod
    def of(api: Api, config: WatchConfig, backoff: Backoff | None = None) -> WatchKey:
        """The key for ``api`` watched with ``config``, without any request: a built-in or an
        already resolved resource by group/version/plural, a CRD not yet looked up by the
        name it was given (so spell it the same way in every consumer to share it)."""
        given = api.resource_name  # "plural.group" once resolved, else the name it was given
        res = find_builtin(parse_spec(given))
        namespace = api.namespace or None
        if res is not None:
            group, version, plural = res.group, res.version, res.plural
            if not res.namespaced:
                namespace = None
        else:
            group, version, plural = "", "", given.strip()
        return WatchKey(group, version, plural, namespace, config.label_selector or None,
                        config.field_selector or None, config.metadata_only,
                        config.strip_managed_fields, config.keep_managed_fields,
                        config.max_unhealthy,
                        None if backoff is None else id(backoff))

    def __str__(self) -> str:
        name = f"{self.resource}.{self.group}" if self.group else self.resource
        parts = [name]
        if self.namespace:
            parts.append(f"in {self.namespace}")
        if self.label_selector:
            parts.append(f"labels {self.label_selector}")
        if self.field_selector:
            parts.append(f"fields {self.field_selector}")
        if self.metadata_only:
            parts.append("metadata only")
        if self.strip_managed_fields:
            parts.append("managedFields stripped")
        if self.keep_managed_fields:
            parts.append("managedFields cached")
        return " ".join(parts)


class Subscription:
    """One consumer's events of a shared watch: ``async for event in subscription``.

    Close it (``async with`` or ``close()``) when done, so the watch stops queueing for it.
    Raises the error that ended the shared watch, once the events before it are read."""

    def __init__(self, watch: SharedWatch, max_queue: int) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self._watch = watch
        self.max_queue = max_queue
        self._queue: deque[Event] = deque()
        self._pending: deque[Event] = deque(watch._snapshot())  # the late joiner's sync
        self._wake = asyncio.Event()
        self._resync = False
        self._error: BaseException | None = watch.error
        self.closed = False
        self.resyncs = 0  # times this subscription fell max_queue behind and was resynced

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        while True:
            if self._pending:
                return self._pending.popleft()
            if self._resync:
                self._resync = False
                self._pending.extend(self._watch._snapshot(resync=True))
                continue
            if self._queue:
                return self._queue.popleft()
            if self._error is not None:
                raise self._error
            if self.closed:
                raise StopAsyncIteration
            self._wake.clear()
            await self._wake.wait()

    def _push(self, event: Event) -> None:
        if self._resync or self.closed:
            return  # the resync reads the store, which already has this event applied
        if len(self._queue) >= self.max_queue:
            self._queue.clear()
            self._resync = True
            self.resyncs += 1
            log.warning(
                "a consumer of the shared watch %s fell %d events behind: it will be resynced "
                "from the store (%d resyncs so far)", self._watch.key, self.max_queue,
                self.resyncs, extra={"watch": str(self._watch.key)},
            )
        else:
            self._queue.append(event)
        self._wake.set()

    def _fail(self, error: BaseException) -> None:
        self._error = error
        self._wake.set()

    def close(self) -> None:
        """Stop receiving events: the iteration ends at once (queued events are dropped)."""
        if not self.closed:
            self.closed = True
            self._queue.clear()
            self._pending.clear()
            self._watch._subscribers.discard(self)
            self._wake.set()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SharedWatch:
    """One running watch and its Store, shared by every handle on its key."""

    def __init__(
        self, registry: SharedWatches, key: WatchKey, api: Api, config: WatchConfig,
        backoff: Backoff | None,
    ) -> None:
        self.registry = registry
        self.key = key
        self.api = api
        self.config = config
        self.store, self._writer = Store.new(managed_fields=config.keep_managed_fields)
        # Named as a Controller names its triggers' watches (metrics and probes label by it).
        self.health = WatchHealth(resource=api.resource_name)
        self._writer.bind_health(self.health)  # once: the store is ready only while healthy
        self.refs = 0
        self.error: BaseException | None = None  # what ended it, if anything did
        self._backoff = backoff
        self._subscribers: set[Subscription] = set()
        self.name = f"watch {key}"
        self.task: TaskHandle | None = None  # the live task (None once a stop completed)
        self.starts = 0  # times the watch was started (by a first acquire)
        # Set while a stop is in progress (the task cancelled, not yet ended); done with it.
        self._stopping: asyncio.Future[None] | None = None

    @property
    def running(self) -> bool:
        """Its task is alive and not being stopped. One acquired while it stops is not
        running yet: it starts again the moment the stop completes."""
        return self._alive() and self._stopping is None

    @property
    def stopping(self) -> bool:
        """Its last handle went and its task is being cancelled."""
        return self._stopping is not None

    def _alive(self) -> bool:
        return self.task is not None and not self.task.done()

    def acquire(self) -> WatchHandle:
        """A handle on the watch of this key, started if nobody held it (or it ended). That
        is this watch unless it went idle and another consumer has started the key anew
        since (then the handle's ``store`` is that one's: read it from the handle)."""
        return self.registry._acquire(self)

    def _acquire(self) -> WatchHandle:
        if self._stopping is None and not self._alive():
            self._start()  # (while it stops, ``_stopped`` starts it again: refs > 0 then)
        self.refs += 1
        return WatchHandle(self)

    def _start(self) -> None:
        self.error = None
        self.starts += 1
        sup = self.registry._supervisor_now()
        loop = asyncio.get_running_loop()
        self.task = sup.spawn(self.name, self._run, restart="backoff",
                              backoff=DefaultBackoff(clock=loop.time), critical=False,
                              forever=False)
        log.debug("shared watch %s started", self.key)

    async def _stop(self) -> None:
        """The last handle went: stop the watch. The store keeps its last contents for whoever
        still reads them (a draining controller) but is no longer ready; a new start relists
        into it and reports what vanished meanwhile, as after any relist. Waits until the
        task has ended (see "Stopping" in the module docstring)."""
        for sub in list(self._subscribers):
            sub.close()  # every one belongs to a released handle: refs is 0
        stopping = self._stopping
        if stopping is None:  # not already stopping (a second stop only waits for the first)
            self._writer._buffer = None
            self.store._synced = False
            self.store._notify()
            task = self.task
            if task is None or task.done():
                self._stopped()
                return
            stopping = self._stopping = asyncio.get_running_loop().create_future()
            # A done callback, not code after an await: it runs even if the releaser is
            # cancelled while it waits, so a restart or the forgetting is never skipped.
            task.task.add_done_callback(lambda _t: self._stopped())
            task.task.cancel()
        await asyncio.shield(stopping)

    def _stopped(self) -> None:
        """The task ended after a stop: start again if it was acquired meanwhile, else
        leave the registry and the supervisor's table (nothing of it is kept there)."""
        stopping, self._stopping = self._stopping, None
        self.task = None  # the ended task, and what its frames hold, can go
        try:
            if self.refs > 0:
                log.debug("shared watch %s acquired while it stopped: starting again", self.key)
                self._start()
            else:
                self.registry._forget(self)
                log.debug("shared watch %s stopped", self.key)
        finally:
            if stopping is not None and not stopping.done():
                stopping.set_result(None)

    def __repr__(self) -> str:
        return f"SharedWatch({self.key}, refs={self.refs}, subscribers={len(self._subscribers)})"

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def _snapshot(self, resync: bool = False) -> list[Event]:
        """What a subscription joining now has missed, as a relist (see the module doc)."""
        listing = self._writer.listing()  # the objects of a relist in progress, if one is
        if listing is not None:
            return [InitStart(), *(InitApply(obj) for obj in listing)]
        if self.store._synced:
            return [InitStart(), *(InitApply(obj) for obj in self.store.list()), InitDone()]
        if resync:
            # Fell behind before the first list completed: start over with the next one.
            return [InitStart()]
        return []

    async def _run(self) -> None:
        """The supervised task: one watcher, its events applied to the store then fanned out.
        After a crash it lists again: the event it crashed on may not be in the store, so
        resuming from the watcher's resourceVersion could lose it."""
        w = watcher(self.api, self.config, backoff=self._backoff or DefaultBackoff(),
                    health=self.health)
        try:
            async for raw in w:  # reflector(), with the health bound once in __init__
                for event in self._writer.apply(raw):
                    for sub in list(self._subscribers):
                        sub._push(event)
            raise RuntimeError(f"the watcher of {self.key} ended, which it never should")
        except (WatcherUnhealthy, WatchGaveUp) as exc:
            self._end(exc)
        except ApiError as exc:
            if exc.retriable:
                raise  # not raised by a watcher today: the supervisor restarts the task
            self._end(exc)  # the caller's mistake (a malformed selector): ends the watch

    def _end(self, error: BaseException) -> None:
        """The watcher gave up: every subscriber gets ``error``; the next acquire restarts."""
        self.error = error
        for sub in list(self._subscribers):
            sub._fail(error)


class WatchHandle:
    """One consumer's hold on a shared watch: ``store``, ``health``, ``subscribe()``.

    ``release()`` (or leaving ``async with``) gives it back; the last release stops the
    watch. Releasing twice is harmless."""

    def __init__(self, watch: SharedWatch) -> None:
        self._watch = watch
        self.released = False

    def __repr__(self) -> str:
        return f"WatchHandle({self._watch.key})"

    @property
    def key(self) -> WatchKey:
        return self._watch.key

    @property
    def store(self) -> Store:
        """The shared Store (``ready`` after the first ``InitDone``); read it, never write."""
        return self._watch.store

    @property
    def health(self) -> WatchHealth:
        """The shared watcher's live health."""
        return self._watch.health

    @property
    def error(self) -> BaseException | None:
        """What ended the shared watch (then subscribe again after a new ``acquire``)."""
        return self._watch.error

    @property
    def task(self) -> TaskStatus | None:
        """The supervised task's status (degraded while it is restarted after a crash)."""
        task = self._watch.task
        return task.status if task is not None else None

    @property
    def running(self) -> bool:
        """The shared watch's task runs (False while it stops: for a handle taken then, it
        starts again once the stop completes; False once it ended with ``error``)."""
        return self._watch.running

    @property
    def stopping(self) -> bool:
        """A stop of the shared watch is in progress (this handle came during it)."""
        return self._watch.stopping

    def subscribe(self, max_queue: int | None = None) -> Subscription:
        """A new event stream for this consumer (see the module docstring)."""
        if self.released:
            raise RuntimeError(f"the handle on the shared watch {self.key} was released")
        sub = Subscription(self._watch, max_queue or self._watch.registry.max_queue)
        if self._watch.error is None:
            self._watch._subscribers.add(sub)
        return sub

    async def release(self) -> None:
        if not self.released:
            self.released = True
            watch = self._watch
            watch.refs -= 1
            if watch.refs == 0:
                await watch._stop()

    async def __aenter__(self) -> WatchHandle:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


_ATTRIBUTE = "_watchkeeper_shared_watches"  # the registry lives on its Client, and dies with it


class SharedWatches:
    """The shared watches of one ``Client``: ``SharedWatches.of(client).acquire(api, cfg)``.

    ``max_queue``: the default bound of each subscription's queue (see the module doc)."""

    def __init__(self, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.max_queue = max_queue
        self._watches: dict[WatchKey, SharedWatch] = {}
        self._supervisor: Supervisor | None = None

    @staticmethod
    def of(client: ApiClient) -> SharedWatches:
        """The registry of ``client`` (a ``Client``, or what an ``Api`` holds as its client;
        created on first use, gone with the client)."""
        registry = client.__dict__.get(_ATTRIBUTE)
        if not isinstance(registry, SharedWatches):
            registry = SharedWatches()
            setattr(client, _ATTRIBUTE, registry)
        return registry

    def __repr__(self) -> str:
        return f"SharedWatches({len(self._watches)} watches)"

    @property
    def supervisor(self) -> Supervisor | None:
        """The supervisor of the watch tasks (None before the first acquire)."""
        return self._supervisor

    def _supervisor_now(self) -> Supervisor:
        if self._supervisor is None:
            self._supervisor = Supervisor("shared watches")
        return self._supervisor

    def watches(self) -> list[SharedWatch]:
        """The shared watches that run now (held by at least one handle)."""
        return [w for w in self._watches.values() if w.running]

    def watch(
        self, api: Api, config: WatchConfig | None = None, *, backoff: Backoff | None = None
    ) -> SharedWatch:
        """The shared watch of ``api`` with ``config``, created (not started) if need be;
        ``config``'s fields outside the key count only when created here."""
        config = config or WatchConfig()
        key = WatchKey.of(api, config, backoff)
        watch = self._watches.get(key)
        if watch is None:
            watch = self._watches[key] = SharedWatch(self, key, api, config, backoff)
        return watch

    def acquire(
        self, api: Api, config: WatchConfig | None = None, *, backoff: Backoff | None = None
    ) -> WatchHandle:
        """A handle on the shared watch of ``api`` with ``config``, started if nobody held it
        (``config``'s fields outside the key count only when created here).
        Call it inside the event loop; ``await handle.release()`` when done."""
        return self.watch(api, config, backoff=backoff).acquire()

    def _acquire(self, watch: SharedWatch) -> WatchHandle:
        current = self._watches.setdefault(watch.key, watch)
        return current._acquire()

    def _forget(self, watch: SharedWatch) -> None:
        """An idle watch (stopped, nobody holds it) leaves the registry and its ended task's
        status the supervisor, so memory does not grow with every key ever watched."""
        if self._watches.get(watch.key) is watch:
            del self._watches[watch.key]
            if self._supervisor is not None:
                self._supervisor.forget(watch.name)
