"""``Controller``: reconcile every object of a resource when it, or something tied to it,
changes; keep working through failures, and say so when it cannot.

Each trigger (the main resource, ``owns`` children, ``watches`` relations) has its own
supervised watcher, backoff, store and health, so one broken trigger never pauses the
others. An object is never reconciled twice at once; requests are deduplicated with the
earliest time winning; failures back off per object.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from watchkeeper import meta
from watchkeeper.backoff import Backoff, DefaultBackoff, ExponentialBackoff
from watchkeeper.cache import Store, Writer, reflector
from watchkeeper.client import Api, ApiError, Resource
from watchkeeper.controller.action import Action, ObjectRef
from watchkeeper.controller.scheduler import Scheduler
from watchkeeper.watcher import (
    Apply,
    Delete,
    InitApply,
    WatchConfig,
    WatchError,
    WatcherUnhealthy,
    WatchGaveUp,
    WatchHealth,
    WatchState,
    watcher,
)

log = logging.getLogger("watchkeeper.controller")

JSON = dict[str, Any]
Reconcile = Callable[[JSON, Any], Awaitable[Action] | Action]
ErrorPolicy = Callable[[JSON, BaseException, Any], Action]
Mapper = Callable[[JSON], Iterable[ObjectRef]]
WatchErrorHook = Callable[[str, ApiError], Any]


class ControllerUnhealthy(Exception):
    """The controller has not worked for ``max_unhealthy``; names the failing part."""

    def __init__(self, message: str, trigger: str) -> None:
        super().__init__(message)
        self.trigger = trigger


class LeadershipLost(Exception):
    """This replica stopped leading: its reconciles were stopped at once."""


class Elector(Protocol):
    """What ``run(elector=...)`` needs (``watchkeeper.leader.LeaderElector`` is one)."""

    leading: asyncio.Event
    lost: asyncio.Event

    async def run(self) -> None: ...

    def reset(self) -> None: ...


@dataclass(frozen=True)
class ControllerConfig:
    """``concurrency``: reconciles at once (each object at most one); ``debounce``: delay
    after a change so bursts merge; ``reconcile_timeout``: a reconcile running longer counts
    as stuck (unhealthy); ``rate_limit``: reconciles per second at most (None = no bound)."""

    concurrency: int = 4
    debounce: float = 0.0
    max_unhealthy: float | None = 300.0
    reconcile_timeout: float | None = None
    shutdown_timeout: float = 30.0
    rate_limit: float | None = None
    handle_signals: bool = True
    on_leadership_lost: Literal["exit", "reacquire"] = "exit"

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        for name in ("debounce", "shutdown_timeout"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 seconds")
        for name in ("max_unhealthy", "reconcile_timeout", "rate_limit"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0 or None, got {value}")


@dataclass
class Trigger:
    """One watched source of reconcile requests."""

    name: str
    api: Api
    config: WatchConfig
    mapper: Mapper | None  # None: the main resource (maps to itself)
    store: Store
    writer: Writer
    health: WatchHealth
    backoff: Backoff | None = None


@dataclass
class ControllerHealth:
    state: WatchState
    problems: dict[str, str] = field(default_factory=dict)  # part -> what is wrong


class _TokenBucket:
    def __init__(self, rate: float, clock: Callable[[], float]) -> None:
        self.rate, self.clock = rate, clock
        self.tokens, self.last = 1.0, clock()

    async def acquire(self) -> None:
        while True:
            now = self.clock()
            self.tokens = min(max(1.0, self.rate), self.tokens + (now - self.last) * self.rate)
            self.last = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep(max(0.001, (1 - self.tokens) / self.rate))  # never a 0-sleep spin


class DurationHistogram:
    """Cumulative-bucket histogram of reconcile durations, read by the metrics layer."""

    BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

    def __init__(self) -> None:
        self.counts = [0] * (len(self.BUCKETS) + 1)  # the last one is +Inf
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.total += seconds
        for i, bound in enumerate(self.BUCKETS):
            if seconds <= bound:
                self.counts[i] += 1
                return
        self.counts[-1] += 1


def owner_mapper(owner: Resource) -> Mapper:
    """Children to owners through ``ownerReferences`` of the owner's kind and group."""

    def mapper(child: JSON) -> list[ObjectRef]:
        refs = (child.get("metadata") or {}).get("ownerReferences") or []
        ns = meta.namespace(child) if owner.namespaced else None
        return [
            ObjectRef(r["name"], ns)
            for r in refs
            if r.get("kind") == owner.kind
            and str(r.get("apiVersion", "")).rpartition("/")[0] == owner.group
        ]

    return mapper


class Controller:
    """``Controller(api).owns(child_api).watches(api, mapper).run(reconcile)``."""

    def __init__(
        self,
        api: Api,
        config: ControllerConfig | None = None,
        *,
        watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.config = config or ControllerConfig()
        self.triggers: list[Trigger] = []
        self._add(api.resource_name, api, watch_config, None, backoff)
        self._owned: list[Trigger] = []
        self._inflight: dict[ObjectRef, float] = {}
        self._object_backoff: dict[ObjectRef, ExponentialBackoff] = {}
        self._scheduler: Scheduler | None = None
        self.results: dict[str, int] = {"success": 0, "error": 0, "requeue": 0}
        self.durations = DurationHistogram()

    def _add(
        self,
        name: str,
        api: Api,
        watch_config: WatchConfig | None,
        mapper: Mapper | None,
        backoff: Backoff | None,
    ) -> Trigger:
        # Reconciles rarely read managedFields and they are half of each cached object.
        cfg = watch_config or WatchConfig(
            max_unhealthy=self.config.max_unhealthy, strip_managed_fields=True
        )
        names = {t.name for t in self.triggers}
        base, n = name, 2
        while name in names:
            name, n = f"{base}#{n}", n + 1
        store, writer = Store.new()
        trig = Trigger(name, api, cfg, mapper, store, writer, WatchHealth(resource=name), backoff)
        self.triggers.append(trig)
        return trig

    def owns(
        self, child_api: Api, *, watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
    ) -> Controller:
        """Reconcile the owner whenever a child it owns (ownerReferences) changes."""
        trig = self._add(f"owns {child_api.resource_name}", child_api, watch_config,
                         None, backoff)
        self._owned.append(trig)
        return self

    def watches(
        self, api: Api, mapper: Mapper, *, watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
    ) -> Controller:
        """Reconcile whatever ``mapper(obj)`` names whenever an object of ``api`` changes."""
        self._add(f"watches {api.resource_name}", api, watch_config, mapper, backoff)
        return self

    @property
    def store(self) -> Store:
        """The cache of the main resource."""
        return self.triggers[0].store

    @property
    def queue_depth(self) -> int:
        return len(self._scheduler) if self._scheduler is not None else 0

    def health(self, now: float | None = None) -> ControllerHealth:
        """The worst of the triggers' health and of the reconcile loop."""
        problems: dict[str, str] = {}
        state = WatchState.HEALTHY
        for t in self.triggers:
            if t.health.state is WatchState.DEGRADED:
                problems[t.name] = str(t.health.last_error)
                state = WatchState.DEGRADED
            elif t.health.state is WatchState.STARTING and state is WatchState.HEALTHY:
                state = WatchState.STARTING
        stuck = self._stuck(now)
        if stuck:
            ref, age = stuck
            problems["reconcile"] = f"reconcile of {ref} has been running for {age:.0f} s"
            state = WatchState.DEGRADED
        return ControllerHealth(state, problems)

    def _stuck(self, now: float | None) -> tuple[ObjectRef, float] | None:
        limit = self.config.reconcile_timeout
        if limit is None or not self._inflight:
            return None
        now = asyncio.get_running_loop().time() if now is None else now
        ref, started = min(self._inflight.items(), key=lambda kv: kv[1])
        age = now - started
        return (ref, age) if age > limit else None

    # -- running -------------------------------------------------------------------------

    async def run(
        self,
        reconcile: Reconcile,
        error_policy: ErrorPolicy | None = None,
        context: Any = None,
        *,
        on_watch_error: WatchErrorHook | None = None,
        stop: asyncio.Event | None = None,
        elector: Elector | None = None,
    ) -> None:
        """Run until ``stop`` is set or SIGTERM/SIGINT (drains in-flight reconciles), or raise
        ``ControllerUnhealthy`` once any part has not worked for ``max_unhealthy``.

        With an ``elector``, caches stay warm on every replica but only the leader reconciles;
        losing the lease cancels in-flight reconciles at once, then raises ``LeadershipLost``
        or waits to lead again (``ControllerConfig.on_leadership_lost``)."""
        loop = asyncio.get_running_loop()
        main = self.triggers[0]
        owner = await main.api.resource()
        for t in self._owned:
            t.mapper = owner_mapper(owner)
        scheduler = self._scheduler = Scheduler(loop.time)
        stop = stop or asyncio.Event()
        force = asyncio.Event()
        restore = self._install_signals(loop, stop, force)
        failure: asyncio.Future[BaseException] = loop.create_future()
        feeders = [
            asyncio.create_task(self._feed(t, scheduler, on_watch_error, failure),
                                name=f"watch {t.name}")
            for t in self.triggers
        ]
        rate = self.config.rate_limit
        limiter = _TokenBucket(rate, loop.time) if rate else None

        def start_workers() -> list[asyncio.Task[None]]:
            return [
                asyncio.create_task(
                    self._work(scheduler, reconcile, error_policy, context, limiter, elector)
                )
                for _ in range(self.config.concurrency)
            ]

        workers = start_workers()
        elector_task = asyncio.create_task(elector.run()) if elector else None
        watchdog = asyncio.create_task(self._watchdog(failure))
        stopper = asyncio.create_task(stop.wait())
        try:
            while True:
                lost = asyncio.create_task(elector.lost.wait()) if elector else None
                waits: list[asyncio.Future[Any]] = [stopper, failure, *([lost] if lost else [])]
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if lost is None or not lost.done() or stopper.done() or failure.done():
                    if lost is not None:
                        lost.cancel()
                    break
                assert elector is not None
                await self._stop_now(workers)
                if self.config.on_leadership_lost == "exit":
                    raise LeadershipLost("lost leadership: reconciles stopped")
                log.warning("lost leadership: reconciles stopped; waiting to lead again")
                if elector_task is not None:
                    await asyncio.gather(elector_task, return_exceptions=True)
                elector.reset()
                for obj in self.store.list():  # whatever was in flight runs again
                    scheduler.schedule(ObjectRef(meta.name(obj), meta.namespace(obj)))
                workers = start_workers()
                elector_task = asyncio.create_task(elector.run())
        finally:
            restore()
            for task in (*feeders, watchdog, stopper):
                task.cancel()
            scheduler.close()
            await self._drain(workers, force)
            if elector_task is not None:
                elector_task.cancel()
            await asyncio.gather(
                *feeders, watchdog, stopper, *([elector_task] if elector_task else []),
                return_exceptions=True,
            )
        if failure.done() and not stop.is_set():
            raise failure.result()

    async def _stop_now(self, workers: list[asyncio.Task[None]]) -> None:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    async def _drain(self, workers: list[asyncio.Task[None]], force: asyncio.Event) -> None:
        """Let in-flight reconciles finish (up to shutdown_timeout, or until forced); idle
        workers are cancelled at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.shutdown_timeout
        if self._inflight:
            log.info("stopping: waiting for %d reconciles to finish", len(self._inflight))
        while self._inflight and not force.is_set() and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
        if self._inflight:
            log.warning("stopping: cancelling %d unfinished reconciles", len(self._inflight))
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    def _install_signals(
        self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event, force: asyncio.Event
    ) -> Callable[[], None]:
        in_main = threading.current_thread() is threading.main_thread()
        if not self.config.handle_signals or not in_main:
            return lambda: None

        def on_signal() -> None:
            if stop.is_set():
                log.warning("second signal: stopping at once")
                force.set()
            else:
                log.info("signal received: draining (a second signal forces)")
                stop.set()

        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, on_signal)
                installed.append(sig)

        def restore() -> None:
            for sig in installed:
                loop.remove_signal_handler(sig)

        return restore

    async def _feed(
        self,
        trig: Trigger,
        scheduler: Scheduler,
        on_watch_error: WatchErrorHook | None,
        failure: asyncio.Future[BaseException],
    ) -> None:
        """One trigger: watch, keep its store, turn events into reconcile requests."""
        w = watcher(trig.api, trig.config, backoff=trig.backoff or DefaultBackoff(),
                    health=trig.health)
        debounce = self.config.debounce
        try:
            async for event in reflector(trig.writer, w):
                if isinstance(event, Apply | InitApply):
                    for ref in self._refs(trig, event.obj):
                        scheduler.schedule(ref, debounce)
                elif isinstance(event, Delete):
                    if trig.mapper is None:
                        ref = ObjectRef(meta.name(event.obj), meta.namespace(event.obj))
                        scheduler.cancel(ref)
                        self._object_backoff.pop(ref, None)
                    else:
                        for ref in self._refs(trig, event.obj):
                            scheduler.schedule(ref, debounce)
                elif isinstance(event, WatchError) and on_watch_error is not None:
                    result = on_watch_error(trig.name, event.error)
                    if inspect.isawaitable(result):
                        await result
        except (WatcherUnhealthy, WatchGaveUp) as exc:
            err = ControllerUnhealthy(f"controller trigger {trig.name!r} failed: {exc}", trig.name)
            err.__cause__ = exc
            if not failure.done():
                failure.set_result(err)

    def _refs(self, trig: Trigger, obj: JSON) -> Iterable[ObjectRef]:
        if trig.mapper is None:
            return (ObjectRef(meta.name(obj), meta.namespace(obj)),)
        return trig.mapper(obj)

    async def _work(
        self,
        scheduler: Scheduler,
        reconcile: Reconcile,
        error_policy: ErrorPolicy | None,
        context: Any,
        limiter: _TokenBucket | None,
        elector: Elector | None,
    ) -> None:
        await asyncio.gather(*(t.store.wait_until_ready() for t in self.triggers))
        if elector is not None:
            await elector.leading.wait()
        loop = asyncio.get_running_loop()
        while (ref := await scheduler.next()) is not None:
            try:
                obj = self.store.get(ref.name, ref.namespace)
                if obj is None:
                    continue  # deleted meanwhile: nothing to reconcile
                if limiter is not None:
                    await limiter.acquire()
                self._inflight[ref] = loop.time()
                action = await self._reconcile_one(ref, obj, reconcile, error_policy, context)
                if action.requeue_after is not None:
                    scheduler.schedule(ref, action.requeue_after)
            finally:
                self._inflight.pop(ref, None)
                scheduler.done(ref)
            # A reconcile that never awaits would otherwise hold the loop for the whole queue
            # (measured: a 2 s stall, no watch events or signals handled meanwhile).
            await asyncio.sleep(0)

    async def _reconcile_one(
        self,
        ref: ObjectRef,
        obj: JSON,
        reconcile: Reconcile,
        error_policy: ErrorPolicy | None,
        context: Any,
    ) -> Action:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            result = reconcile(obj, context)
            action = await result if inspect.isawaitable(result) else result
            if not isinstance(action, Action):
                raise TypeError(
                    f"reconcile must return an Action (Action.requeue / Action.await_change), "
                    f"not {type(action).__name__}"
                )
            self._object_backoff.pop(ref, None)
            outcome = "success" if action.requeue_after is None else "requeue"
        except Exception as exc:
            outcome = "error"
            if error_policy is not None:
                action = error_policy(obj, exc, context)
            else:
                action = self._default_error_policy(ref, exc)
        finally:
            self.durations.observe(loop.time() - started)
        self.results[outcome] += 1
        return action

    def _default_error_policy(self, ref: ObjectRef, exc: Exception) -> Action:
        """Per-object jittered backoff, 1 s doubling to 5 min, reset on success."""
        backoff = self._object_backoff.setdefault(ref, ExponentialBackoff(1.0, 300.0, 2.0, 0.1))
        delay = backoff.next() or 300.0
        log.warning(
            "reconcile of %s failed (retry in %.1f s): %s", ref, delay, exc,
            extra={"object_namespace": ref.namespace, "object_name": ref.name,
                   "retry_in": round(delay, 2),
                   "error_class": type(exc).__name__},
        )
        return Action.requeue(delay)

    async def _watchdog(self, failure: asyncio.Future[BaseException]) -> None:
        """Raise once a reconcile has been stuck past reconcile_timeout + max_unhealthy."""
        limit, timeout = self.config.max_unhealthy, self.config.reconcile_timeout
        if limit is None or timeout is None:
            return
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(timeout, limit) / 2)
            stuck = self._stuck(loop.time())
            if stuck and stuck[1] > timeout + limit and not failure.done():
                ref, age = stuck
                failure.set_result(ControllerUnhealthy(
                    f"reconcile of {ref} has been running for {age:.0f} s "
                    f"(reconcile_timeout {timeout:g} s + max_unhealthy {limit:g} s)",
                    "reconcile",
                ))
