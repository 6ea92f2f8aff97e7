"""The controller's health rules, computed in one place: from its triggers (their watch's
health, and that the shared watch a trigger holds runs at all), its reconciles (stuck, all
failing), its supervised tasks and its elector, what is wrong (readiness) and what has been
wrong too long (liveness, the end of ``run``). ``ops`` reads the result."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from watchkeeper.cache import WatchHandle
from watchkeeper.controller.action import ObjectRef
from watchkeeper.controller.config import ControllerConfig
from watchkeeper.controller.leadership import elector_health, elector_problems
from watchkeeper.controller.stats import ObjectFailure, ReconcileStats
from watchkeeper.controller.triggers import Trigger
from watchkeeper.supervisor import TaskState, TaskStatus
from watchkeeper.watcher import WatchState


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


def loop_time() -> float:
    """The event loop's clock (what every recorded time uses); monotonic without a loop."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


def stuck_reconciles(
    inflight: Mapping[ObjectRef, float], now: float, timeout: float | None
) -> list[tuple[ObjectRef, float]]:
    """Reconciles running longer than ``timeout`` (None: none is ever stuck), longest
    first, as (ref, seconds running); ``inflight`` maps each to when it started."""
    if timeout is None or not inflight:
        return []
    ages = ((ref, now - started) for ref, started in inflight.items())
    return sorted((ra for ra in ages if ra[1] > timeout), key=lambda ra: -ra[1])


def stuck_problems(
    stuck: list[tuple[ObjectRef, float]], timeout: float | None, max_unhealthy: float | None
) -> tuple[str | None, str | None]:
    """(why not ready, why fatal) by the stuck rule: not ready while any reconcile runs
    past ``reconcile_timeout``; fatal once one runs past ``reconcile_timeout +
    max_unhealthy``. Judged on the longest-running one (``stuck`` is longest first)."""
    if not stuck:
        return None, None
    ref, age = stuck[0]
    unready = f"reconcile of {ref} has been running for {age:.0f} s"
    fatal = None
    if max_unhealthy is not None and timeout is not None and age > timeout + max_unhealthy:
        fatal = (f"reconcile of {ref} has been running for {age:.0f} s "
                 f"(reconcile_timeout {timeout:g} s + max_unhealthy {max_unhealthy:g} s)")
    return unready, fatal


def watch_not_running(held: WatchHandle) -> str:
    """Why a trigger's shared watch, held, feeds nothing: its store would never sync."""
    if held.stopping:
        return (f"the shared watch {held.key} is being stopped by another consumer; it "
                "starts again when the stop completes")
    if held.error is not None:
        return f"the shared watch {held.key} ended: {type(held.error).__name__}: {held.error}"
    return f"the shared watch {held.key} is held but not running"


def assess(
    now: float,
    config: ControllerConfig,
    triggers: Iterable[Trigger],
    inflight: Mapping[ObjectRef, float],
    stats: ReconcileStats,
    objects: int,
    tasks: list[TaskStatus],
    elector: object,
) -> ControllerHealth:
    """The worst of the triggers, the supervised tasks (``tasks``: the controller's own;
    the shared watches' are added here), the reconcile loop and the elector."""
    limit = config.max_unhealthy
    problems: dict[str, str] = {}
    fatal: dict[str, str] = {}
    state = WatchState.HEALTHY
    triggers = list(triggers)
    for t in triggers:
        if t.health.state is WatchState.DEGRADED:
            problems[t.name] = str(t.health.last_error)
            state = WatchState.DEGRADED
        elif t.health.state is WatchState.STARTING and state is WatchState.HEALTHY:
            state = WatchState.STARTING
    stuck = stuck_reconciles(inflight, now, config.reconcile_timeout)
    unready, dead = stuck_problems(stuck, config.reconcile_timeout, limit)
    if unready is not None:
        problems["reconcile"] = unready
    if dead is not None:
        fatal["reconcile"] = dead
    failing = stats.all_failing(now, objects)
    if failing:
        problems["reconciles failing"] = failing
    tasks = list(tasks)
    for t in triggers:  # the shared watches' tasks: a crash-looping one shows here
        held = t.shared if t.shared is not None and not t.shared.released else None
        if held is None:
            continue
        status = held.task
        if status is not None:
            tasks.append(status)
        if not held.running and (
            status is None or status.state not in (TaskState.DEGRADED, TaskState.FAILED)
        ):  # (a crashed task is reported below, by its own status)
            problems[t.name] = watch_not_running(held)
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
    eh = elector_health(elector)
    if eh is not None:
        unready, dead = elector_problems(eh, now, config.elector_unready_after, limit)
        if unready is not None:
            problems["leader election"] = unready
        if dead is not None:
            fatal["leader election"] = dead
    if problems:
        state = WatchState.DEGRADED
    return ControllerHealth(
        state, problems, fatal,
        reconciles=dict(stats.results),
        last_error=stats.last_error,
        last_error_object=stats.last_error_ref,
        last_error_at=stats.last_error_at,
        failing=stats.worst(),
        stuck=stuck,
        tasks=tasks,
    )
