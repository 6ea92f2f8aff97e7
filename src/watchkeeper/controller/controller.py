"""``Controller``: reconcile every object of a resource when it, or something tied to it,
changes; keep working through failures, and say so when it cannot.

Each trigger (the main resource, ``owns`` children, ``watches`` relations) has its own
supervised feeder, store and health, so one broken trigger never pauses the others. The
watch behind a trigger, and its store and health, are shared with every other consumer of
the same resource, namespace and selectors on the same ``Client`` (``SharedWatches``): two
controllers on ConfigMaps, or a controller and an ``owns`` of its own kind, make one watch
and keep one copy of each object; each trigger still sees every event.

An object is never reconciled twice at once; requests are deduplicated with the earliest
time winning; failures back off per object.

Every background task of ``run`` is created by one ``Supervisor``, so none dies silently.
What happens when one crashes unexpectedly (not a reconcile error: those are the error
policy's) depends on its kind:

- trigger feeders (``trigger <name>``) and workers (``worker <n>``): restarted with
  ``DefaultBackoff``; meanwhile ``health()`` and /readyz show the task degraded; degraded
  longer than ``max_unhealthy``, ``run()`` raises ``ControllerUnhealthy`` naming it.
- the watchdog, the leader elector and the stop/leadership waiters: never restarted;
  ``run()`` raises ``TaskDied`` naming the task, chained to its error.

A mapper that raises, or a failing ``on_watch_error`` hook, is not a crash: the error is
logged (without flooding) and counted, and the trigger goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from typing import Any

from watchkeeper import meta
from watchkeeper.backoff import Backoff, DefaultBackoff
from watchkeeper.cache import SharedWatches, Store
from watchkeeper.client import Api
from watchkeeper.controller.action import ObjectRef
from watchkeeper.controller.config import ControllerConfig
from watchkeeper.controller.errors import ControllerUnhealthy, LeadershipLost
from watchkeeper.controller.health import ControllerHealth, assess, loop_time, stuck_reconciles
from watchkeeper.controller.leadership import (
    Elector,
    ElectorHealthView,
    elector_health,
    elector_problems,
)
from watchkeeper.controller.predicates import Predicate, PredicateFilter
from watchkeeper.controller.recorder import Recorder
from watchkeeper.controller.reporting import Reporter
from watchkeeper.controller.scheduler import Scheduler
from watchkeeper.controller.sharded import Drain, ShardScope
from watchkeeper.controller.signals import (
    install_signal_handlers,
    nothing,
    signals_handled_by_caller,
)
from watchkeeper.controller.stats import DurationHistogram, ErrorLog, ReconcileStats
from watchkeeper.controller.triggers import (
    Mapper,
    Relation,
    Trigger,
    WatchErrorHook,
    feed,
    owner_mapper,
)
from watchkeeper.controller.workers import ErrorPolicy, Reconcile, TokenBucket, Workers
from watchkeeper.supervisor import Supervisor
from watchkeeper.watcher import WatchConfig

__all__ = [  # the names other modules import from here (kept where they used to be)
    "Controller",
    "ControllerConfig",
    "ControllerHealth",
    "ControllerUnhealthy",
    "DurationHistogram",
    "Elector",
    "ElectorHealthView",
    "ErrorPolicy",
    "LeadershipLost",
    "Mapper",
    "Reconcile",
    "Trigger",
    "WatchErrorHook",
    "elector_health",
    "elector_problems",
    "install_signal_handlers",
    "owner_mapper",
    "signals_handled_by_caller",
]

log = logging.getLogger("watchkeeper.controller")

JSON = dict[str, Any]


class Controller:
    """``Controller(api).owns(child_api).watches(api, mapper).run(reconcile)``.

    The composition: ``triggers`` feed the ``Scheduler``, ``workers`` reconcile what it
    hands out, ``stats`` and ``durations`` count, ``health()`` judges; ``run`` wires them
    under one ``Supervisor``. A ``predicate`` (``wk.predicates``) on the controller applies
    to its own resource; ``owns``/``watches`` take their own."""

    def __init__(
        self,
        api: Api,
        config: ControllerConfig | None = None,
        *,
        watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
        predicate: Predicate | None = None,
        sharding: ShardScope | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.config = config or ControllerConfig()
        self.triggers: list[Trigger] = []
        # Sharded (wk.Sharding, run by wk.run): the primary and owned watches see only this
        # replica's objects; the drain hands an object over (controller/sharded.py).
        self.sharding = sharding
        self._handover = Drain(sharding) if sharding is not None else None
        self._add(api.resource_name, api, watch_config, None, backoff, "primary", predicate)
        self._scheduler: Scheduler | None = None
        self.stats = ReconcileStats(self.config.failure_window, self.config.failure_min_attempts)
        self.results: dict[str, int] = self.stats.results
        self.durations = DurationHistogram()
        # A failing reconcile is a Warning Event on its object with a recorder; the Ready
        # condition with config.ready_condition (controller/reporting.py).
        reporter = Reporter(api, recorder, self.config.ready_condition)
        self.workers = Workers(self.stats, self.durations,
                               reporter if reporter.active else None)
        if self._handover is not None:
            self.workers.held = self._handover.held
        self._supervisor: Supervisor | None = None
        self._elector: Elector | None = None

    def _add(
        self,
        name: str,
        api: Api,
        watch_config: WatchConfig | None,
        mapper: Mapper | None,
        backoff: Backoff | None,
        relation: Relation,
        predicate: Predicate | None,
    ) -> Trigger:
        # Reconciles rarely read managedFields and they are half of each cached object.
        cfg = watch_config or WatchConfig(
            max_unhealthy=self.config.max_unhealthy, strip_managed_fields=True
        )
        scope = (cfg.label_selector, cfg.field_selector)
        if self.sharding is not None and relation in ("primary", "owned"):
            mine, theirs = self.sharding.selector, cfg.label_selector
            cfg = dataclasses.replace(cfg, label_selector=f"{theirs},{mine}" if theirs else mine)
        names = {t.name for t in self.triggers}
        base, n = name, 2
        while name in names:
            name, n = f"{base}#{n}", n + 1
        # The shared watch's store and health, the same objects before, during and after run.
        shared = SharedWatches.of(api.client).watch(api, cfg, backoff=backoff)
        trig = Trigger(name, api, cfg, mapper, shared.store, shared, shared.health, backoff,
                       ErrorLog(f"mapper of trigger {name!r}"),
                       ErrorLog(f"on_watch_error hook of trigger {name!r}"),
                       relation=relation,
                       filter=PredicateFilter(predicate) if predicate is not None else None,
                       scope=scope)
        self.triggers.append(trig)
        return trig

    def owns(
        self, child_api: Api, *, watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None, predicate: Predicate | None = None,
    ) -> Controller:
        """Reconcile the owner whenever a child it owns (ownerReferences) changes."""
        self._add(f"owns {child_api.resource_name}", child_api, watch_config, None, backoff,
                  "owned", predicate)
        return self

    def watches(
        self, api: Api, mapper: Mapper, *, watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None, predicate: Predicate | None = None,
    ) -> Controller:
        """Reconcile whatever ``mapper(obj)`` names whenever an object of ``api`` changes."""
        self._add(f"watches {api.resource_name}", api, watch_config, mapper, backoff,
                  "watched", predicate)
        return self

    @property
    def owned_apis(self) -> list[Api]:
        """The child resources of ``owns`` (the sharder labels them as their owners)."""
        return [t.api for t in self.triggers if t.relation == "owned"]

    @property
    def shard_scopes(self) -> list[tuple[str | None, str | None]]:
        """The caller's (label, field) selectors of the main resource, then of each ``owns``
        resource in order: a sharder labels only what they select."""
        return [t.scope for t in self.triggers if t.relation in ("primary", "owned")]

    @property
    def draining(self) -> int:
        """Objects this (sharded) replica is handing over to another."""
        return len(self._handover.held) if self._handover is not None else 0

    @property
    def store(self) -> Store:
        """The cache of the main resource."""
        return self.triggers[0].store

    @property
    def name(self) -> str:
        """The main resource's name: how metrics, probes and logs call this controller."""
        return self.triggers[0].name

    @property
    def supervisor(self) -> Supervisor | None:
        """The supervisor of the current (or last) ``run``: its tasks and their states."""
        return self._supervisor

    @property
    def elector(self) -> Elector | None:
        """The elector of the current (or last) ``run``, if any."""
        return self._elector

    @property
    def queue_depth(self) -> int:
        return len(self._scheduler) if self._scheduler is not None else 0

    def health(self, now: float | None = None) -> ControllerHealth:
        """The worst of the triggers, the supervised tasks and the reconcile loop (the
        rules are ``controller.health.assess``, the one place they are computed)."""
        now = loop_time() if now is None else now
        tasks = self._supervisor.statuses() if self._supervisor is not None else []
        return assess(now, self.config, self.triggers, self.workers.inflight, self.stats,
                      len(self.store), tasks, self._elector)

    def stuck(self, now: float | None = None) -> list[tuple[ObjectRef, float]]:
        """Reconciles running longer than ``reconcile_timeout``, longest first."""
        now = loop_time() if now is None else now
        return stuck_reconciles(self.workers.inflight, now, self.config.reconcile_timeout)

    # -- running -------------------------------------------------------------------------

    async def run(
        self,
        reconcile: Reconcile,
        error_policy: ErrorPolicy | None = None,
        context: Any = None,
        *,
        on_watch_error: WatchErrorHook | None = None,
        stop: asyncio.Event | None = None,
        force: asyncio.Event | None = None,
        elector: Elector | None = None,
    ) -> None:
        """Run until ``stop`` is set or SIGTERM/SIGINT (drains in-flight reconciles, each
        within ``shutdown_timeout``; setting ``force`` or a second signal cancels them at
        once), or raise ``ControllerUnhealthy`` once any part has not worked for
        ``max_unhealthy``.

        Signals: run on its own (a script), the controller handles SIGTERM/SIGINT itself
        (unless ``ControllerConfig.handle_signals`` is false or it is not the main thread);
        several controllers run on their own in one loop share one handler, so one signal
        drains all of them. Under ``watchkeeper.run`` the runtime handles signals for every
        controller and the controller installs nothing.

        With an ``elector``, caches stay warm on every replica but only the leader reconciles;
        losing the lease cancels in-flight reconciles at once, then raises ``LeadershipLost``
        or waits to lead again (``ControllerConfig.on_leadership_lost``)."""
        loop = asyncio.get_running_loop()
        main = self.triggers[0]
        owner = await main.api.resource()
        for t in self.triggers:
            if t.relation == "owned":
                t.mapper = owner_mapper(owner)
        scheduler = self._scheduler = Scheduler(loop.time)
        stop = stop or asyncio.Event()
        force = force or asyncio.Event()
        rate = self.config.rate_limit
        limiter = TokenBucket(rate, loop.time) if rate else None
        sup = self._supervisor = Supervisor(f"controller {main.name}")
        self._elector = elector
        feeders = [f"trigger {t.name}" for t in self.triggers]
        workers = [f"worker {i + 1}" for i in range(self.config.concurrency)]

        def start_workers() -> None:
            work = functools.partial(
                self.workers.work, scheduler, self.store, reconcile, error_policy, context,
                limiter, functools.partial(self._ready, elector),
            )
            for name in workers:
                sup.spawn(name, work, restart="backoff", backoff=DefaultBackoff(clock=loop.time))

        restore = (install_signal_handlers(loop, stop, force)
                   if self.config.handle_signals and not signals_handled_by_caller.get()
                   else nothing)
        try:
            for t in self.triggers:
                t.shared = t.watch.acquire()  # starts the watch unless another consumer did
                t.store, t.health = t.shared.store, t.shared.health
            async with sup:
                for t, name in zip(self.triggers, feeders, strict=True):
                    sup.spawn(name, functools.partial(
                        feed, t, scheduler, debounce=self.config.debounce,
                        on_watch_error=on_watch_error, forget=self._forget,
                        failed=self._trigger_failed,
                        hold=self._hold if t.relation == "primary" else None,
                        own_write=(self.workers.reporter.own_write
                                   if t.relation == "primary" and self.workers.reporter
                                   else None),
                    ), restart="backoff", backoff=DefaultBackoff(clock=loop.time))
                start_workers()
                if self._handover is not None:
                    for i in range(self._handover.scope.drain_concurrency):
                        sup.spawn(f"shard drain {i + 1}", functools.partial(
                            self._handover.run, main.api, self.workers.inflight,
                        ), restart="backoff", backoff=DefaultBackoff(clock=loop.time))
                elector_task = (sup.spawn("leader elector", elector.run, forever=False)
                                if elector else None)
                if self.config.max_unhealthy is not None:
                    sup.spawn("watchdog", self._watchdog)
                if self.config.summary_interval is not None:
                    sup.spawn("summary", self._summary)
                stopper = sup.spawn("stop signal", stop.wait, forever=False)
                try:
                    while True:
                        lost = (sup.spawn("leadership watch", elector.lost.wait, forever=False)
                                if elector else None)
                        waits: list[asyncio.Future[Any]] = [
                            stopper.task, sup.failed_future, *([lost.task] if lost else [])
                        ]
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                        if (lost is None or not lost.done() or stopper.done()
                                or sup.failure is not None):
                            break
                        assert elector is not None and elector_task is not None
                        await sup.cancel(*workers)
                        if self.config.on_leadership_lost == "exit":
                            raise LeadershipLost("lost leadership: reconciles stopped")
                        log.warning("lost leadership: reconciles stopped; waiting to lead again")
                        await asyncio.gather(elector_task.task, return_exceptions=True)
                        elector.reset()
                        keys = self.store.keys()  # not list(): no object needs decoding
                        for key in keys:  # whatever was in flight runs again
                            scheduler.schedule(meta.ObjectRef(*key))
                        start_workers()
                        elector_task = sup.spawn("leader elector", elector.run, forever=False)
                finally:
                    sup.begin_close()
                    await sup.cancel(*feeders, "watchdog", "summary", "stop signal",
                                     "leadership watch")
                    await self._release()  # the watches close now; the stores stay readable
                    scheduler.close()
                    await self.workers.drain(self.config.shutdown_timeout, force)
                    await sup.cancel(*workers)  # idle workers at once, unfinished ones now
                failure = sup.failure
                if failure is not None:
                    raise failure
        finally:
            await self._release()
            restore()  # after the drain, so that a second signal can force it

    def _hold(self, obj: JSON) -> bool:
        """A sharded replica's drain hook: True (and the object is held) when the sharder
        asked this replica to let ``obj`` go."""
        if self._handover is None or not self._handover.scope.draining(obj):
            return False
        self._handover.hold(meta.key(obj))
        return True

    def _forget(self, ref: ObjectRef) -> None:
        """The primary object left this replica's watch (deleted, or handed over)."""
        self.workers.forget(ref)
        if self._handover is not None:
            self._handover.forget(ref)

    async def _release(self) -> None:
        """Give back the shared watches (the last consumer's release stops a watch)."""
        for t in self.triggers:
            if t.shared is not None:
                await t.shared.release()

    async def _ready(self, elector: Elector | None) -> None:
        """What a worker waits for before its first reconcile: every trigger's cache
        synced, and the lease if there is an elector."""
        await asyncio.gather(*(t.store.wait_until_ready() for t in self.triggers))
        if elector is not None:
            await elector.leading.wait()

    def _trigger_failed(self, trig: Trigger, exc: BaseException) -> None:
        err = ControllerUnhealthy(f"controller trigger {trig.name!r} failed: {exc}", trig.name)
        err.__cause__ = exc
        assert self._supervisor is not None
        self._supervisor.fail(err)

    async def _summary(self) -> None:
        """One INFO line per ``summary_interval`` that saw reconciles: each success is only
        a DEBUG line, and an operator's log at INFO should still show it is working."""
        interval = self.config.summary_interval
        assert interval is not None
        last = dict(self.stats.results)
        while True:
            await asyncio.sleep(interval)
            now = dict(self.stats.results)
            done = {k: v - last.get(k, 0) for k, v in now.items()}
            last = now
            if any(done.values()):
                log.info("controller %s: %d reconciled, %d requeued, %d failed in the last "
                         "%g s; %d objects failing, %d requests pending", self.name,
                         done["success"], done["requeue"], done["error"], interval,
                         len(self.stats.failing), self.queue_depth)

    async def _watchdog(self) -> None:
        """End the run once a part has not worked for max_unhealthy: a reconcile stuck past
        reconcile_timeout + max_unhealthy, a task crash-looping that long, or an elector
        that has not reached its lease that long."""
        limit = self.config.max_unhealthy
        assert limit is not None
        timeout = self.config.reconcile_timeout
        interval = min(5.0, limit / 4, *((timeout / 2,) if timeout is not None else ()))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            fatal = self.health(loop.time()).fatal
            if fatal:
                part, why = next(iter(fatal.items()))
                assert self._supervisor is not None
                self._supervisor.fail(ControllerUnhealthy(why, part))
                return
