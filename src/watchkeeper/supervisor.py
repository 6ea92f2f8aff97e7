"""``Supervisor``: the one place watchkeeper creates background tasks, so none dies silently.

A bare task that raises is noticed by nobody: the exception waits in the task until it
is garbage-collected, while every probe stays green. A supervised task that
raises is either restarted after a backoff delay (its status says ``degraded`` meanwhile,
so health checks can show it), or it fails the supervisor: ``await sup.failed()`` returns a
``TaskDied`` naming the task, chained to its cause, and leaving ``async with`` raises it.
A task meant to run until stopped (``forever=True``, the default) that returns is a failure
too. Each state change is logged once; a crash loop with the same error is summarised.

A finished task leaves the supervisor's table: what stays is its ``TaskStatus``, a summary
(name, state, counts, the error's type and text) for ``statuses()`` and the probes, never
the asyncio Task or the exception, whose traceback would keep every frame of the task (and
what their locals hold: a watch stream's 2 MiB buffer, a cache) alive. The owner of a task
started under ever new names (one per shared watch key) drops even that with ``forget``.

This module sits in the lowest layer (it imports only ``watchkeeper.errors``) because the
client's exec-plugin refresher and the simulator create tasks as well. For a one-shot
task that its creator awaits or keeps to cancel, ``start_task`` is the same guarantee
without a supervisor: its exception reaches the awaiters, or else is logged at ERROR.

    async with Supervisor("my controller") as sup:
        sup.spawn("watch pods", lambda: follow(pods), restart="backoff")
        sup.spawn("janitor", janitor)  # restart="never": a crash ends the run
        failure = await sup.failed()   # the first TaskDied (or whatever sup.fail() got)
        raise failure
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar

from watchkeeper.errors import WatchkeeperError

__all__ = [
    "RestartBackoff",
    "Supervisor",
    "TaskDied",
    "TaskHandle",
    "TaskState",
    "TaskStatus",
    "start_task",
]

log = logging.getLogger("watchkeeper.supervisor")

T = TypeVar("T")
Factory = Callable[[], Coroutine[Any, Any, Any]]
Restart = Literal["never", "backoff"]

# Reminders while one task keeps crashing with the same error (then every 1,000th).
_REMINDERS = (10, 100)


class TaskDied(WatchkeeperError):
    """A supervised task died for good: it raised with ``restart="never"``, its backoff gave
    up, or it returned although it should run until stopped. ``task`` and ``supervisor``
    name it; ``__cause__`` is its exception (``None`` when it returned)."""

    def __init__(self, message: str, task: str, supervisor: str) -> None:
        super().__init__(message)
        self.task = task
        self.supervisor = supervisor


class TaskState(enum.Enum):
    RUNNING = "running"
    DEGRADED = "degraded"  # crashed: waiting to restart, or restarted and not yet stable
    DONE = "done"  # returned when allowed to, or stopped by its owner
    FAILED = "failed"  # died for good (see TaskDied)


class RestartBackoff(Protocol):
    """``watchkeeper.backoff.Backoff`` fits: ``next()`` seconds or None to give up."""

    def next(self) -> float | None: ...

    def reset(self) -> None: ...


class _DoublingBackoff:
    """The built-in default: 1 s doubling to 30 s, never gives up (no jitter: one process)."""

    def __init__(self) -> None:
        self._n = 0

    def next(self) -> float | None:
        delay = min(1.0 * 2.0 ** min(self._n, 16), 30.0)
        self._n += 1
        return delay

    def reset(self) -> None:
        self._n = 0


@dataclass
class TaskStatus:
    """What a supervised task is doing; ``since`` is event-loop time of the last change.

    ``last_error`` is the last crash as text ("Type: message", or that it returned when it
    should not have) and ``error_type`` its class name (None when it returned): a summary,
    not the exception, so a status kept after the task ended holds none of its frames."""

    name: str
    state: TaskState
    since: float
    restarts: int = 0
    last_error: str | None = None
    restart: Restart = "never"
    critical: bool = True
    error_type: str | None = None

    def describe(self) -> str:
        """One line for a person: what is wrong with the task (empty when nothing)."""
        error = self.last_error or _describe_error(None)
        if self.state is TaskState.DEGRADED:
            return f"task {self.name!r} crashed ({self.restarts} restarts so far): {error}"
        if self.state is TaskState.FAILED:
            return f"task {self.name!r} died: {error}"
        return ""

    def _crashed(self, error: BaseException | None) -> None:
        self.last_error = _describe_error(error)
        self.error_type = type(error).__name__ if error is not None else None


def _describe_error(error: BaseException | None) -> str:
    if error is None:
        return "returned, but it should run until stopped"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


@dataclass(eq=False)
class TaskHandle:
    """A spawned task: ``status`` (live), ``task`` (the asyncio task running it and its
    restarts), ``await handle.cancel()``."""

    status: TaskStatus
    factory: Factory
    backoff: RestartBackoff
    forever: bool
    task: asyncio.Task[None] = field(init=False)
    _repeats: int = 0
    _stable: asyncio.TimerHandle | None = None

    @property
    def name(self) -> str:
        return self.status.name

    def done(self) -> bool:
        return self.task.done()

    async def cancel(self) -> None:
        """Stop the task (not a failure) and wait until it has ended."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


class Supervisor:
    """Creates, watches, restarts and stops background tasks. See the module docstring.

    ``stable_after``: seconds a restarted task must run without crashing before it counts
    as recovered (its backoff is then reset and its state goes back to running)."""

    def __init__(self, name: str, *, stable_after: float = 10.0) -> None:
        if stable_after < 0:
            raise ValueError(f"stable_after must be >= 0, got {stable_after}")
        self.name = name
        self.stable_after = stable_after
        self._tasks: dict[str, TaskHandle] = {}  # the live ones: gone once the task ended
        self._statuses: dict[str, TaskStatus] = {}  # every task's, live or ended, spawn order
        self._failure: asyncio.Future[BaseException] | None = None
        self._closing = False

    def __repr__(self) -> str:
        return f"Supervisor({self.name!r}, tasks={len(self._tasks)})"

    async def __aenter__(self) -> Supervisor:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop every task; raise the failure if the body ended without an exception of its
        own (so a failure nobody awaited is never lost)."""
        await self.aclose()
        failure = self.failure
        if exc is None and failure is not None:
            raise failure

    # -- spawning ------------------------------------------------------------------------

    def spawn(
        self,
        name: str,
        factory: Factory,
        *,
        restart: Restart = "never",
        backoff: RestartBackoff | None = None,
        critical: bool = True,
        forever: bool = True,
    ) -> TaskHandle:
        """Run ``factory()`` (a fresh coroutine each call) in a supervised task.

        ``restart="backoff"``: a crash restarts it after ``backoff.next()`` seconds (default:
        1 s doubling to 30 s, never giving up) while its state is ``degraded``; when the
        backoff gives up, or with ``restart="never"``, the task dies. A dead ``critical``
        task fails the supervisor; a dead non-critical one only shows ``failed``.
        ``forever=False``: returning is fine (the state becomes ``done``)."""
        if restart not in ("never", "backoff"):
            raise ValueError(f"restart must be 'never' or 'backoff', got {restart!r}")
        if self._closing:
            raise RuntimeError(f"supervisor {self.name!r} is closing: cannot spawn {name!r}")
        old = self._tasks.get(name)
        if old is not None and not old.done():
            raise ValueError(f"supervisor {self.name!r} already runs a task named {name!r}")
        loop = asyncio.get_running_loop()
        status = TaskStatus(name, TaskState.RUNNING, loop.time(), restart=restart,
                            critical=critical)
        handle = TaskHandle(status, factory, backoff or _DoublingBackoff(), forever)
        handle.task = _create_task(self._run(handle), f"{self.name}: {name}")
        handle.task.add_done_callback(lambda _t: self._ended(handle))
        self._tasks[name] = handle
        self._statuses[name] = status
        return handle

    # -- observing -----------------------------------------------------------------------

    def statuses(self) -> list[TaskStatus]:
        """A snapshot of every task's status (the ended ones too), in spawn order."""
        return [replace(s) for s in self._statuses.values()]

    def problems(self) -> dict[str, str]:
        """Task name -> what is wrong, for every degraded or failed task."""
        return {
            s.name: s.describe()
            for s in self._statuses.values()
            if s.state in (TaskState.DEGRADED, TaskState.FAILED)
        }

    def get(self, name: str) -> TaskHandle | None:
        """The handle of the task ``name`` while it runs (None once it ended)."""
        return self._tasks.get(name)

    def status(self, name: str) -> TaskStatus | None:
        """The live status of the task ``name``, running or ended (None if never spawned
        or forgotten)."""
        return self._statuses.get(name)

    def forget(self, name: str) -> None:
        """Drop the status of the ended task ``name`` (a running one stays): for an owner
        that starts tasks under ever new names, so the table does not grow with them."""
        handle = self._tasks.get(name)
        if handle is None or handle.done():
            self._tasks.pop(name, None)
            self._statuses.pop(name, None)

    @property
    def failure(self) -> BaseException | None:
        """The first failure (a ``TaskDied``, or what ``fail()`` was given), else None."""
        f = self._failure
        return f.result() if f is not None and f.done() else None

    @property
    def failed_future(self) -> asyncio.Future[BaseException]:
        """A future done with the first failure; for ``asyncio.wait`` beside other waits."""
        if self._failure is None:
            self._failure = asyncio.get_running_loop().create_future()
        return self._failure

    async def failed(self) -> BaseException:
        """Wait for the first failure and return it (it is not raised here)."""
        return await asyncio.shield(self.failed_future)

    def fail(self, error: BaseException) -> None:
        """Fail the supervisor with ``error`` (the first failure wins); for a task that
        wants to end the run with its own exception type instead of ``TaskDied``."""
        if not self.failed_future.done():
            self.failed_future.set_result(error)

    # -- stopping ------------------------------------------------------------------------

    def begin_close(self) -> None:
        """From now on tasks that end or crash are not failures (shutdown in progress)."""
        self._closing = True

    async def cancel(self, *names: str) -> None:
        """Stop the named tasks (not a failure) and wait for them."""
        handles = [h for n in names if (h := self._tasks.get(n)) is not None]
        for h in handles:
            h.task.cancel()
        await asyncio.gather(*(h.task for h in handles), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop every task and wait for all of them to end."""
        self._closing = True
        tasks = [h.task for h in self._tasks.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- the supervising loop ------------------------------------------------------------

    async def _run(self, handle: TaskHandle) -> None:
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        assert me is not None
        status = handle.status
        try:
            while True:
                error: BaseException | None
                if status.state is TaskState.DEGRADED:
                    handle._stable = loop.call_later(self.stable_after, self._recovered, handle)
                try:
                    await handle.factory()
                except asyncio.CancelledError as exc:
                    if me.cancelling():
                        raise  # stopped by its owner or by us
                    error = exc  # a cancellation nobody asked for is a crash
                except Exception as exc:
                    error = exc
                else:
                    if not handle.forever or self._closing:
                        self._set(status, TaskState.DONE)
                        return
                    error = None
                finally:
                    if handle._stable is not None:
                        handle._stable.cancel()
                        handle._stable = None
                if self._closing or self.failure is not None:
                    # Shutting down, or failed already (first failure wins): not news.
                    log.debug("%s: task %r ended while closing: %s", self.name, status.name,
                              _describe_error(error))
                    self._set(status, TaskState.DONE)
                    return
                delay = handle.backoff.next() if status.restart == "backoff" else None
                if delay is None:
                    self._die(handle, error)
                    return
                self._degraded(handle, error, delay)
                error = None  # logged and summarised: its traceback's frames may go now
                await asyncio.sleep(delay)
                status.restarts += 1
        except asyncio.CancelledError:
            if status.state is not TaskState.FAILED:
                self._set(status, TaskState.DONE)
            raise

    def _ended(self, handle: TaskHandle) -> None:
        # Also covers a task cancelled before its first step (its coroutine never ran).
        if handle.status.state in (TaskState.RUNNING, TaskState.DEGRADED):
            self._set(handle.status, TaskState.DONE)
        if self._tasks.get(handle.name) is handle:  # not a newer task of the same name
            del self._tasks[handle.name]  # its status stays, the Task and its frames go

    def _set(self, status: TaskStatus, state: TaskState) -> None:
        if status.state is not state:
            status.state, status.since = state, asyncio.get_running_loop().time()

    def _degraded(self, handle: TaskHandle, error: BaseException | None, delay: float) -> None:
        status = handle.status
        same = (
            status.state is TaskState.DEGRADED
            and status.last_error == _describe_error(error)
        )
        first = status.state is not TaskState.DEGRADED
        self._set(status, TaskState.DEGRADED)
        status._crashed(error)
        handle._repeats = handle._repeats + 1 if same else 1
        n = handle._repeats
        what = _describe_error(error)
        if not same:
            log.warning(
                "%s: task %r %s: %s; restarting in %.1f s",
                self.name, status.name, "crashed" if first else "crashed again", what, delay,
                exc_info=_exc_info(error) if first else None,
                extra={"task": status.name, "supervisor": self.name, "retry_in": delay},
            )
        elif n in _REMINDERS or n % 1000 == 0:
            log.warning("%s: task %r still crashing (%d times in a row): %s",
                        self.name, status.name, n, what,
                        extra={"task": status.name, "supervisor": self.name})

    def _recovered(self, handle: TaskHandle) -> None:
        handle._stable = None
        status = handle.status
        if status.state is not TaskState.DEGRADED:
            return
        self._set(status, TaskState.RUNNING)
        handle.backoff.reset()
        handle._repeats = 0
        log.info("%s: task %r recovered after %d restarts", self.name, status.name,
                 status.restarts, extra={"task": status.name, "supervisor": self.name})

    def _die(self, handle: TaskHandle, error: BaseException | None) -> None:
        status = handle.status
        status._crashed(error)
        self._set(status, TaskState.FAILED)
        gave_up = f" (gave up after {status.restarts} restarts)" if status.restarts else ""
        message = f"{self.name}: task {status.name!r} died: {_describe_error(error)}{gave_up}"
        died = TaskDied(message, status.name, self.name)
        died.__cause__ = error
        if status.critical:
            log.error("%s", message, exc_info=_exc_info(error),
                      extra={"task": status.name, "supervisor": self.name})
            self.fail(died)
        else:
            log.error("%s (not critical: the rest goes on)", message, exc_info=_exc_info(error),
                      extra={"task": status.name, "supervisor": self.name})


def _exc_info(
    error: BaseException | None,
) -> tuple[type[BaseException], BaseException, TracebackType | None] | None:
    return (type(error), error, error.__traceback__) if error is not None else None


def start_task(
    coro: Coroutine[Any, Any, T], *, name: str, awaited: bool = False
) -> asyncio.Task[T]:
    """Start a one-shot task outside a ``Supervisor``, without letting its death go unseen.

    ``awaited=True``: the creator awaits it (its awaiters get the exception); the outcome
    is retrieved anyway, so a task whose awaiters were all cancelled is not reported as
    "never retrieved". ``awaited=False`` (fire and forget): an exception is logged at ERROR
    with its traceback. Cancellation is never an error."""
    task = _create_task(coro, name)
    task.add_done_callback(functools.partial(_report, awaited))
    return task


def _report(awaited: bool, task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    error = task.exception()  # retrieved: asyncio will not warn about it
    if error is not None and not awaited:
        log.error("task %r crashed: %s", task.get_name(), _describe_error(error),
                  exc_info=_exc_info(error), extra={"task": task.get_name()})


def _create_task(coro: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
    loop = asyncio.get_running_loop()
    return loop.create_task(coro, name=name)  # supervisor: the one place tasks are created
