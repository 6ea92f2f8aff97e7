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
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from watchkeeper import meta
from watchkeeper.backoff import Backoff, DefaultBackoff, ExponentialBackoff
from watchkeeper.cache import SharedWatches, Store, Subscription, WatchHandle
from watchkeeper.cache.shared import SharedWatch
from watchkeeper.client import Api, ApiError, Resource
from watchkeeper.controller.action import Action, ObjectRef
from watchkeeper.controller.scheduler import Scheduler
from watchkeeper.controller.sharded import Drain, ShardScope
from watchkeeper.controller.stats import ErrorLog, ObjectFailure, ReconcileStats
from watchkeeper.errors import WatchkeeperError
from watchkeeper.supervisor import Supervisor, TaskState, TaskStatus
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
)

log = logging.getLogger("watchkeeper.controller")

JSON = dict[str, Any]
Reconcile = Callable[[JSON, Any], Awaitable[Action] | Action]
ErrorPolicy = Callable[[JSON, BaseException, Any], Action]
Mapper = Callable[[JSON], Iterable[ObjectRef]]
WatchErrorHook = Callable[[str, ApiError], Any]


class ControllerUnhealthy(WatchkeeperError):
    """The controller has not worked for ``max_unhealthy``; names the failing part."""

    def __init__(self, message: str, trigger: str) -> None:
        super().__init__(message)
        self.trigger = trigger


class LeadershipLost(WatchkeeperError):
    """This replica stopped leading: its reconciles were stopped at once."""


class Elector(Protocol):
    """What ``run(elector=...)`` needs (``watchkeeper.leader.LeaderElector`` is one)."""

    leading: asyncio.Event
    lost: asyncio.Event

    async def run(self) -> None: ...

    def reset(self) -> None: ...


class ElectorHealthView(Protocol):
    """What the health rules read of an elector's ``health`` (``watchkeeper.leader.
    ElectorHealth`` is one; duck-typed because the leader module sits above this one)."""

    @property
    def lease(self) -> str: ...

    @property
    def state(self) -> Any: ...  # an enum whose value is "degraded" while attempts fail

    @property
    def last_error(self) -> str | None: ...

    @property
    def consecutive_failures(self) -> int: ...

    def non_functioning_for(self, now: float) -> float: ...


def elector_health(elector: object) -> ElectorHealthView | None:
    """The elector's ``health`` if it has one (the Elector protocol does not require it)."""
    health = getattr(elector, "health", None)
    return health if callable(getattr(health, "non_functioning_for", None)) else None


def elector_problems(
    health: ElectorHealthView, now: float, unready_after: float | None,
    max_unhealthy: float | None,
) -> tuple[str | None, str | None]:
    """(why not ready, why fatal) for an elector, or None for each that does not apply.

    The rule: an elector whose attempts to reach its lease have failed without a success
    for longer than ``unready_after`` is not ready; longer than ``max_unhealthy``, fatal.
    A blip shorter than that (one 503, a reset) is retried and only shows as ``degraded``."""
    if getattr(health.state, "value", health.state) != "degraded":
        return None, None
    down = health.non_functioning_for(now)
    what = (f"lease {health.lease}: the leader elector has not reached its lease for "
            f"{down:.0f} s ({health.consecutive_failures} failed attempts in a row")
    unready = fatal = None
    if unready_after is not None and down > unready_after:
        unready = f"{what}, elector_unready_after {unready_after:g} s): {health.last_error}"
    if max_unhealthy is not None and down >= max_unhealthy:
        fatal = f"{what}, max_unhealthy {max_unhealthy:g} s): {health.last_error}"
    return unready, fatal


@dataclass(frozen=True)
class ControllerConfig:
    """``concurrency``: reconciles at once (each object at most one); ``debounce``: delay
    after a change so bursts merge; ``reconcile_timeout``: a reconcile running longer counts
    as stuck (unhealthy); ``rate_limit``: reconciles per second at most (None = no bound).

    Readiness fails by the reconcile rule once no reconcile succeeded for
    ``failure_window`` seconds while at least ``failure_min_attempts`` failed since, on at
    least two objects (None: never); the first success makes it ready again.

    With an elector (``run(elector=...)``), readiness fails once the elector's attempts to
    reach its lease have failed for longer than ``elector_unready_after`` seconds (None:
    never); past ``max_unhealthy``, ``run()`` raises ``ControllerUnhealthy`` naming
    "leader election"."""

    concurrency: int = 4
    debounce: float = 0.0
    max_unhealthy: float | None = 300.0
    reconcile_timeout: float | None = None
    shutdown_timeout: float = 30.0
    rate_limit: float | None = None
    handle_signals: bool = True
    on_leadership_lost: Literal["exit", "reacquire"] = "exit"
    failure_window: float | None = 300.0
    failure_min_attempts: int = 5
    elector_unready_after: float | None = 30.0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.failure_min_attempts < 1:
            raise ValueError(
                f"failure_min_attempts must be >= 1, got {self.failure_min_attempts}"
            )
        for name in ("debounce", "shutdown_timeout"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 seconds")
        for name in ("max_unhealthy", "reconcile_timeout", "rate_limit", "failure_window",
                     "elector_unready_after"):
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
    watch: SharedWatch  # shared with every consumer of the same key on the same Client
    health: WatchHealth
    backoff: Backoff | None = None
    mapper_errors: ErrorLog = field(default_factory=lambda: ErrorLog("mapper"))
    hook_errors: ErrorLog = field(default_factory=lambda: ErrorLog("on_watch_error hook"))
    shared: WatchHandle | None = None  # the shared watch while ``run`` holds it


@dataclass
class ControllerHealth:
    """``problems``: part -> what is wrong (readiness fails on any); ``fatal``: the parts
    past ``max_unhealthy`` (liveness fails, ``run()`` raises). The rest is for people:
    reconcile counts, the last error, objects failing longest, reconciles running past
    ``reconcile_timeout`` (ref, seconds), and the supervised tasks. Times are loop time."""

    state: WatchState
    problems: dict[str, str] = field(default_factory=dict)
    fatal: dict[str, str] = field(default_factory=dict)
    reconciles: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    last_error_object: ObjectRef | None = None
    last_error_at: float | None = None
    failing: list[ObjectFailure] = field(default_factory=list)
    stuck: list[tuple[ObjectRef, float]] = field(default_factory=list)
    tasks: list[TaskStatus] = field(default_factory=list)


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


# -- signals ---------------------------------------------------------------------------------

signals_handled_by_caller: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "watchkeeper_signals_handled_by_caller", default=False
)
"""True inside ``watchkeeper.run``: the runtime owns SIGTERM/SIGINT, controllers install
nothing (a ContextVar, so that only the runtime's own tasks see it)."""


class _SignalFanout:
    """One SIGTERM/SIGINT handler per event loop, shared by everything that stops on a
    signal: the first signal sets every registered ``stop`` (drain), a signal arriving
    once a ``stop`` is set sets its ``force``. Without it, the last ``add_signal_handler``
    wins and the other controllers of the loop never see the signal."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pairs: list[tuple[asyncio.Event, asyncio.Event]] = []
        self.installed: list[signal.Signals] = []

    def on_signal(self) -> None:
        draining = [stop for stop, _ in self.pairs if not stop.is_set()]
        if draining:
            log.info("signal received: draining (a second signal forces)")
        if len(draining) < len(self.pairs):
            log.warning("second signal: stopping at once")
        for stop, force in self.pairs:
            if stop.is_set():
                force.set()
            else:
                stop.set()


_fanouts: dict[asyncio.AbstractEventLoop, _SignalFanout] = {}


def _nothing() -> None:
    return None


def install_signal_handlers(
    loop: asyncio.AbstractEventLoop, stop: asyncio.Event, force: asyncio.Event
) -> Callable[[], None]:
    """Register ``stop``/``force`` with the loop's shared SIGTERM/SIGINT handler (installed
    by the first registration, removed after the last); return the unregister function.
    Outside the main thread (where signals cannot be handled) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return _nothing
    fan = _fanouts.get(loop)
    if fan is None:
        fan = _fanouts[loop] = _SignalFanout(loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, fan.on_signal)
                fan.installed.append(sig)
    pair = (stop, force)
    fan.pairs.append(pair)

    def restore() -> None:
        assert fan is not None
        with contextlib.suppress(ValueError):
            fan.pairs.remove(pair)
        if fan.pairs or _fanouts.get(loop) is not fan:
            return
        del _fanouts[loop]
        while fan.installed:
            sig = fan.installed.pop()
            with contextlib.suppress(Exception):  # a loop already closed: nothing to undo
                loop.remove_signal_handler(sig)

    return restore


class Controller:
    """``Controller(api).owns(child_api).watches(api, mapper).run(reconcile)``."""

    def __init__(
        self,
        api: Api,
        config: ControllerConfig | None = None,
        *,
        watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
        sharding: ShardScope | None = None,
    ) -> None:
        self.config = config or ControllerConfig()
        self.triggers: list[Trigger] = []
        # Sharded (wk.Sharding, run by wk.run): the main and owned watches see only this
        # replica's objects; the drain hands an object over (controller/sharded.py).
        self.sharding = sharding
        self._handover = Drain(sharding) if sharding is not None else None
        self._add(api.resource_name, api, watch_config, None, backoff, sharded=True)
        self._owned: list[Trigger] = []
        self._inflight: dict[ObjectRef, float] = {}
        self._object_backoff: dict[ObjectRef, ExponentialBackoff] = {}
        self._scheduler: Scheduler | None = None
        self.stats = ReconcileStats(self.config.failure_window, self.config.failure_min_attempts)
        self.results: dict[str, int] = self.stats.results
        self.durations = DurationHistogram()
        self._supervisor: Supervisor | None = None
        self._elector: Elector | None = None

    def _add(
        self,
        name: str,
        api: Api,
        watch_config: WatchConfig | None,
        mapper: Mapper | None,
        backoff: Backoff | None,
        sharded: bool = False,
    ) -> Trigger:
        # Reconciles rarely read managedFields and they are half of each cached object.
        cfg = watch_config or WatchConfig(
            max_unhealthy=self.config.max_unhealthy, strip_managed_fields=True
        )
        if sharded and self.sharding is not None:
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
                       ErrorLog(f"on_watch_error hook of trigger {name!r}"))
        self.triggers.append(trig)
        return trig

    def owns(
        self, child_api: Api, *, watch_config: WatchConfig | None = None,
        backoff: Backoff | None = None,
    ) -> Controller:
        """Reconcile the owner whenever a child it owns (ownerReferences) changes."""
        trig = self._add(f"owns {child_api.resource_name}", child_api, watch_config,
                         None, backoff, sharded=True)
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
    def owned_apis(self) -> list[Api]:
        """The child resources of ``owns`` (the sharder labels them as their owners)."""
        return [t.api for t in self._owned]

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
        """The worst of the triggers, the supervised tasks and the reconcile loop; the one
        place the stuck, failing and max_unhealthy rules are computed."""
        now = _loop_time() if now is None else now
        limit = self.config.max_unhealthy
        problems: dict[str, str] = {}
        fatal: dict[str, str] = {}
        state = WatchState.HEALTHY
        for t in self.triggers:
            if t.health.state is WatchState.DEGRADED:
                problems[t.name] = str(t.health.last_error)
                state = WatchState.DEGRADED
            elif t.health.state is WatchState.STARTING and state is WatchState.HEALTHY:
                state = WatchState.STARTING
        stuck = self.stuck(now)
        if stuck:
            ref, age = stuck[0]
            problems["reconcile"] = f"reconcile of {ref} has been running for {age:.0f} s"
            timeout = self.config.reconcile_timeout
            if limit is not None and timeout is not None and age > timeout + limit:
                fatal["reconcile"] = (
                    f"reconcile of {ref} has been running for {age:.0f} s "
                    f"(reconcile_timeout {timeout:g} s + max_unhealthy {limit:g} s)"
                )
        failing = self.stats.all_failing(now, len(self.store))
        if failing:
            problems["reconciles failing"] = failing
        tasks = self._supervisor.statuses() if self._supervisor is not None else []
        for t in self.triggers:  # the shared watches' tasks: a crash-looping one shows here
            status = t.shared.task if t.shared is not None and not t.shared.released else None
            if status is not None:
                tasks.append(status)
        for task in tasks:
            if task.state not in (TaskState.DEGRADED, TaskState.FAILED):
                continue
            problems[task.name] = task.describe()
            down = now - task.since
            if limit is not None and down >= limit:
                fatal[task.name] = (
                    f"{task.describe()} (not working for {down:.0f} s, "
                    f"max_unhealthy {limit:g} s)"
                )
        eh = elector_health(self._elector)
        if eh is not None:
            unready, dead = elector_problems(eh, now, self.config.elector_unready_after, limit)
            if unready is not None:
                problems["leader election"] = unready
            if dead is not None:
                fatal["leader election"] = dead
        if problems:
            state = WatchState.DEGRADED
        return ControllerHealth(
            state, problems, fatal,
            reconciles=dict(self.stats.results),
            last_error=self.stats.last_error,
            last_error_object=self.stats.last_error_ref,
            last_error_at=self.stats.last_error_at,
            failing=self.stats.worst(),
            stuck=stuck,
            tasks=tasks,
        )

    def stuck(self, now: float | None = None) -> list[tuple[ObjectRef, float]]:
        """Reconciles running longer than ``reconcile_timeout``, longest first."""
        limit = self.config.reconcile_timeout
        if limit is None or not self._inflight:
            return []
        now = _loop_time() if now is None else now
        ages = ((ref, now - started) for ref, started in self._inflight.items())
        return sorted((ra for ra in ages if ra[1] > limit), key=lambda ra: -ra[1])

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
        for t in self._owned:
            t.mapper = owner_mapper(owner)
        scheduler = self._scheduler = Scheduler(loop.time)
        stop = stop or asyncio.Event()
        force = force or asyncio.Event()
        rate = self.config.rate_limit
        limiter = _TokenBucket(rate, loop.time) if rate else None
        sup = self._supervisor = Supervisor(f"controller {main.name}")
        self._elector = elector
        feeders = [f"trigger {t.name}" for t in self.triggers]
        workers = [f"worker {i + 1}" for i in range(self.config.concurrency)]
        work = functools.partial(
            self._work, scheduler, reconcile, error_policy, context, limiter, elector
        )

        def start_workers() -> None:
            for name in workers:
                sup.spawn(name, work, restart="backoff", backoff=DefaultBackoff(clock=loop.time))

        restore = (install_signal_handlers(loop, stop, force)
                   if self.config.handle_signals and not signals_handled_by_caller.get()
                   else _nothing)
        try:
            for t in self.triggers:
                t.shared = t.watch.acquire()  # starts the watch unless another consumer did
                t.store, t.health = t.shared.store, t.shared.health
            async with sup:
                for t, name in zip(self.triggers, feeders, strict=True):
                    sup.spawn(name, functools.partial(self._feed, t, scheduler, on_watch_error),
                              restart="backoff", backoff=DefaultBackoff(clock=loop.time))
                start_workers()
                if self._handover is not None:
                    for i in range(self._handover.scope.drain_concurrency):
                        sup.spawn(f"shard drain {i + 1}",
                                  functools.partial(self._handover.run, main.api, self._inflight),
                                  restart="backoff", backoff=DefaultBackoff(clock=loop.time))
                elector_task = (sup.spawn("leader elector", elector.run, forever=False)
                                if elector else None)
                if self.config.max_unhealthy is not None:
                    sup.spawn("watchdog", self._watchdog)
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
                        for obj in self.store.list():  # whatever was in flight runs again
                            scheduler.schedule(ObjectRef(meta.name(obj), meta.namespace(obj)))
                        start_workers()
                        elector_task = sup.spawn("leader elector", elector.run, forever=False)
                finally:
                    sup.begin_close()
                    await sup.cancel(*feeders, "watchdog", "stop signal", "leadership watch")
                    await self._release()  # the watches close now; the stores stay readable
                    scheduler.close()
                    await self._drain(sup, workers, force)
                failure = sup.failure
                if failure is not None:
                    raise failure
        finally:
            await self._release()
            restore()  # after the drain, so that a second signal can force it


    async def _release(self) -> None:
        """Give back the shared watches (the last consumer's release stops a watch)."""
        for t in self.triggers:
            if t.shared is not None:
                await t.shared.release()

    async def _drain(self, sup: Supervisor, workers: list[str], force: asyncio.Event) -> None:
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
        await sup.cancel(*workers)

    async def _feed(
        self,
        trig: Trigger,
        scheduler: Scheduler,
        on_watch_error: WatchErrorHook | None,
    ) -> None:
        """One trigger: follow its shared watch, turn events into reconcile requests (a
        restarted feeder resubscribes: it gets the store's contents as a relist)."""
        assert trig.shared is not None
        debounce = self.config.debounce
        events: Subscription | None = None
        try:
            events = trig.shared.subscribe()
            async for event in events:
                if (self._handover is not None and trig.mapper is None
                        and isinstance(event, Apply | InitApply)
                        and self._handover.scope.draining(event.obj)):
                    ref = ObjectRef(meta.name(event.obj), meta.namespace(event.obj))
                    self._handover.hold(ref)  # handed over: never reconciled here again
                    scheduler.cancel(ref)
                elif isinstance(event, Apply | InitApply):
                    for ref in self._refs(trig, event.obj):
                        scheduler.schedule(ref, debounce)
                elif isinstance(event, Delete):
                    if trig.mapper is None:
                        ref = ObjectRef(meta.name(event.obj), meta.namespace(event.obj))
                        scheduler.cancel(ref)
                        self._object_backoff.pop(ref, None)
                        self.stats.forget(ref)
                        if self._handover is not None:
                            self._handover.forget(ref)
                    else:
                        for ref in self._refs(trig, event.obj):
                            scheduler.schedule(ref, debounce)
                elif isinstance(event, WatchError) and on_watch_error is not None:
                    try:
                        result = on_watch_error(trig.name, event.error)
                        if inspect.isawaitable(result):
                            await result
                    except Exception as exc:  # the user's hook: its error must not end the trigger
                        trig.hook_errors.record(exc, f"{trig.name}: {type(event.error).__name__}")
        except (WatcherUnhealthy, WatchGaveUp) as exc:
            self._trigger_failed(trig, exc)
        except ApiError as exc:
            if exc.retriable:
                raise  # not raised by a watcher today; the supervisor restarts the trigger
            # The server rejected the watch as the caller's mistake (a malformed selector):
            # no retry or administrator can fix it, so the run ends now, not at max_unhealthy.
            self._trigger_failed(trig, exc)
        finally:
            if events is not None:
                events.close()

    def _trigger_failed(self, trig: Trigger, exc: BaseException) -> None:
        err = ControllerUnhealthy(f"controller trigger {trig.name!r} failed: {exc}", trig.name)
        err.__cause__ = exc
        assert self._supervisor is not None
        self._supervisor.fail(err)

    def _refs(self, trig: Trigger, obj: JSON) -> list[ObjectRef]:
        """What to reconcile for ``obj``; a mapper's error is logged and counted, never
        allowed to end the trigger (later changes must still be seen)."""
        if trig.mapper is None:
            return [ObjectRef(meta.name(obj), meta.namespace(obj))]
        try:
            refs = list(trig.mapper(obj))
            for ref in refs:
                if not isinstance(ref, ObjectRef):
                    raise TypeError(
                        f"a mapper must return ObjectRefs, not {type(ref).__name__}"
                    )
        except Exception as exc:
            trig.mapper_errors.record(exc, _describe(obj))
            return []
        return refs

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
                if self._handover is not None and ref in self._handover.held:
                    continue  # being handed over (checked with no await before in-flight)
                self._inflight[ref] = loop.time()
                action = await self._reconcile_one(ref, obj, reconcile, error_policy, context)
                if action.requeue_after is not None:
                    scheduler.schedule(ref, action.requeue_after)
            except Exception:
                # A crash here (not a reconcile error: those became an Action) must not lose
                # the request: it runs again after the object's backoff; the supervisor
                # restarts this worker.
                delay = self._object_backoff.setdefault(
                    ref, ExponentialBackoff(1.0, 300.0, 2.0, 0.1)
                ).next()
                scheduler.schedule(ref, delay or 300.0)
                raise
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
            now = loop.time()
            self.durations.observe(now - started)
            self.stats.failure(ref, now, exc)
            return self._on_error(ref, obj, exc, error_policy, context)
        except BaseException:
            self.durations.observe(loop.time() - started)
            raise
        now = loop.time()
        self.durations.observe(now - started)
        self.stats.success(ref, now, outcome)
        return action

    def _on_error(
        self, ref: ObjectRef, obj: JSON, exc: Exception, error_policy: ErrorPolicy | None,
        context: Any,
    ) -> Action:
        """The user's error policy, or the default one if there is none or it fails (an
        error policy that raises must not take the worker down)."""
        if error_policy is None:
            return self._default_error_policy(ref, exc)
        try:
            action = error_policy(obj, exc, context)
            if not isinstance(action, Action):
                raise TypeError(f"error_policy must return an Action, not {type(action).__name__}")
        except Exception as policy_exc:
            log.error("error_policy failed for %s (using the default backoff): %s: %s",
                      ref, type(policy_exc).__name__, policy_exc,
                      exc_info=(type(policy_exc), policy_exc, policy_exc.__traceback__))
            return self._default_error_policy(ref, exc)
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


def _loop_time() -> float:
    """The event loop's clock (what every recorded time uses); monotonic without a loop."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def _describe(obj: JSON) -> str:
    try:
        ns, name = meta.namespace(obj), meta.name(obj)
    except Exception:  # a broken object is exactly what a failing mapper may be given
        return "an object without a name"
    return f"{ns}/{name}" if ns else str(name)
