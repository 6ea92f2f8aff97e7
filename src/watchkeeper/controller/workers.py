"""Workers: take the next due object from the scheduler, reconcile it, and act on the
result: requeue after ``Action.requeue_after``, or on an error ask the error policy
(by default a per-object jittered backoff, reset by a success).

Every worker of a controller shares one ``Workers``: what is in flight since when (the
stuck rule and the drain read it), and each object's failure backoff.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Container
from typing import Any

from watchkeeper.backoff import ExponentialBackoff
from watchkeeper.cache import Store
from watchkeeper.controller.action import Action, ObjectRef
from watchkeeper.controller.errors import PermanentError
from watchkeeper.controller.reporting import Reporter
from watchkeeper.controller.scheduler import Scheduler
from watchkeeper.controller.stats import DurationHistogram, ReconcileStats

log = logging.getLogger("watchkeeper.controller")

# How long a worker reconciles back to back before it lets the loop run (a watch event, a
# signal, a probe): well under what asyncio calls a slow callback (100 ms).
TURN = 0.002

JSON = dict[str, Any]
Reconcile = Callable[[JSON, Any], Awaitable[Action] | Action]
ErrorPolicy = Callable[[JSON, BaseException, Any], Action]


def object_backoff() -> ExponentialBackoff:
    """The default per-object failure backoff: 1 s doubling to 5 min, 10 % jitter."""
    return ExponentialBackoff(1.0, 300.0, 2.0, 0.1)


class TokenBucket:
    """At most ``rate`` reconciles per second (bursts up to ``max(1, rate)``)."""

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


class Workers:
    """The reconcile loop of one controller; ``work`` is one worker's task."""

    def __init__(
        self, stats: ReconcileStats, durations: DurationHistogram,
        reporter: Reporter | None = None,
    ) -> None:
        self.stats, self.durations = stats, durations
        self.reporter = reporter  # events and the Ready condition, if asked for
        self.inflight: dict[ObjectRef, float] = {}  # ref -> loop time its reconcile started
        self.backoffs: dict[ObjectRef, ExponentialBackoff] = {}
        # Objects a sharded replica is handing over (controller/sharded.py): never started
        # again; checked with no await between the check and marking a reconcile in flight.
        self.held: Container[ObjectRef] = frozenset()

    def forget(self, ref: ObjectRef) -> None:
        """The object is gone: drop its failure backoff and record."""
        self.backoffs.pop(ref, None)
        self.stats.forget(ref)
        if self.reporter is not None:
            self.reporter.forget(ref)

    async def work(
        self,
        scheduler: Scheduler,
        store: Store,
        reconcile: Reconcile,
        error_policy: ErrorPolicy | None,
        context: Any,
        limiter: TokenBucket | None,
        ready: Callable[[], Awaitable[None]],
    ) -> None:
        """One worker: once ``ready`` (caches synced, leading) reconcile whatever the
        scheduler hands out until it closes."""
        await ready()
        loop = asyncio.get_running_loop()
        clock = time.perf_counter  # real time: a stall is real time whatever the loop's clock
        turn_ends = clock() + TURN
        while (ref := await scheduler.next()) is not None:
            try:
                if limiter is not None:
                    await limiter.acquire()
                # Read after the last await before the reconcile: the store may swap in a
                # relist meanwhile, and the reconcile must see what it holds now.
                obj = store.get(ref.name, namespace=ref.namespace)
                if obj is None:
                    continue  # deleted meanwhile: nothing to reconcile
                if ref in self.held:
                    continue  # being handed over to another shard
                self.inflight[ref] = loop.time()
                action = await self.reconcile_one(ref, obj, reconcile, error_policy, context)
                if action.requeue_after is not None:
                    scheduler.schedule(ref, action.requeue_after)
            except Exception:
                # A crash here (not a reconcile error: those became an Action) must not lose
                # the request: it runs again after the object's backoff; the supervisor
                # restarts this worker.
                delay = self.backoffs.setdefault(ref, object_backoff()).next()
                scheduler.schedule(ref, delay or 300.0)
                raise
            finally:
                self.inflight.pop(ref, None)
                scheduler.done(ref)
            # A reconcile that never awaits would otherwise hold the loop for the whole queue
            # (measured: a 2 s stall, no watch events or signals handled meanwhile); a turn
            # of reconciles, not each one, ends with a yield (a loop iteration per object
            # cost more than a quick reconcile).
            if clock() >= turn_ends:
                await asyncio.sleep(0)
                turn_ends = clock() + TURN

    async def reconcile_one(
        self,
        ref: ObjectRef,
        obj: JSON,
        reconcile: Reconcile,
        error_policy: ErrorPolicy | None,
        context: Any,
    ) -> Action:
        """Run one reconcile; count it; an error becomes the error policy's Action; the
        outcome is recorded on the object if the controller was asked to."""
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
            self.backoffs.pop(ref, None)
            outcome = "success" if action.requeue_after is None else "requeue"
        except Exception as exc:
            now = loop.time()
            self.durations.observe(now - started)
            self.stats.failure(ref, now, exc)
            action = self.on_error(ref, obj, exc, error_policy, context)
            if self.reporter is not None:
                await self.report(ref, self.reporter.failed(obj, exc))
            return action
        except BaseException:
            self.durations.observe(loop.time() - started)
            raise
        now = loop.time()
        self.durations.observe(now - started)
        self.stats.success(ref, now, outcome)
        log.debug("reconciled %s in %.3f s (%s)", ref, now - started,
                  "wait for a change" if action.requeue_after is None
                  else f"requeue in {action.requeue_after:g} s")
        if self.reporter is not None:
            await self.report(ref, self.reporter.succeeded(obj))
        return action

    async def report(self, ref: ObjectRef, recording: Awaitable[None]) -> None:
        """Record an outcome; a bug there is logged, never the reconcile's result (the
        Reporter already turns API errors into log lines)."""
        try:
            await recording
        except Exception as exc:
            log.error("could not record the outcome of the reconcile of %s: %s: %s", ref,
                      type(exc).__name__, exc, exc_info=(type(exc), exc, exc.__traceback__))

    def on_error(
        self, ref: ObjectRef, obj: JSON, exc: Exception, error_policy: ErrorPolicy | None,
        context: Any,
    ) -> Action:
        """The user's error policy, or the default one if there is none or it fails (an
        error policy that raises must not take the worker down)."""
        if error_policy is None:
            return self.default_error_policy(ref, exc)
        try:
            action = error_policy(obj, exc, context)
            if not isinstance(action, Action):
                raise TypeError(f"error_policy must return an Action, not {type(action).__name__}")
        except Exception as policy_exc:
            log.error("error_policy failed for %s (using the default backoff): %s: %s",
                      ref, type(policy_exc).__name__, policy_exc,
                      exc_info=(type(policy_exc), policy_exc, policy_exc.__traceback__))
            return self.default_error_policy(ref, exc)
        return action

    def default_error_policy(self, ref: ObjectRef, exc: Exception) -> Action:
        """Per-object jittered backoff, 1 s doubling to 5 min, reset on success; none for a
        ``PermanentError``. A change to the object meanwhile reconciles it at once, as in
        controller-runtime and kube-rs (the change may be the fix), and the log says so."""
        extra = {"object_namespace": ref.namespace, "object_name": ref.name,
                 "error_class": type(exc).__name__}
        if isinstance(exc, PermanentError):
            log.warning("reconcile of %s failed permanently (no retry until it changes): %s",
                        ref, exc, extra={**extra, "retry_in": None})
            return Action.await_change()
        delay = self.backoffs.setdefault(ref, object_backoff()).next() or 300.0
        log.warning(
            "reconcile of %s failed (retry in %.1f s, or at its next change): %s",
            ref, delay, exc,
            extra={**extra, "retry_in": round(delay, 2)},
        )
        return Action.requeue(delay)

    async def drain(self, timeout: float, force: asyncio.Event) -> None:
        """Wait for in-flight reconciles to finish: up to ``timeout`` s, or until forced."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self.inflight:
            log.info("stopping: waiting for %d reconciles to finish", len(self.inflight))
        while self.inflight and not force.is_set() and loop.time() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
        if self.inflight:
            log.warning("stopping: cancelling %d unfinished reconciles", len(self.inflight))
