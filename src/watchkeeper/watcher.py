"""The list/watch state machine: kind to the server, honest with its user.

``watcher(api, config)`` yields a stream of events that does not end on an error someone
else can fix: such a failure is yielded as ``WatchError`` and retried after
``max(backoff, Retry-After)`` (Retry-After capped at 60 s). An error only the caller can fix
(``error.retriable`` False: a malformed selector, 400; options the server rejects, 422) is
raised at once. It resumes from the last resourceVersion without a relist when it can,
relists on 410, drops silent connections, and raises ``WatcherUnhealthy`` once it has not
worked for ``max_unhealthy`` seconds, a deadline that also cuts off a hung request, so a
broken watch reaches someone who can fix it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from watchkeeper.backoff import Backoff, DefaultBackoff
from watchkeeper.client import (
    Api,
    ApiError,
    BadRequest,
    ConnectionFailed,
    Forbidden,
    Gone,
    Invalid,
    Timeout,
    WatchStream,
)
from watchkeeper.client.circuit import is_reachability_error
from watchkeeper.client.errors import MAX_RETRY_AFTER
from watchkeeper.client.objects import INITIAL_EVENTS_END as INITIAL_EVENTS_END
from watchkeeper.client.objects import (
    Bookmark,
    LazyList,
    ObjectEvent,
    ObjectList,
    last_version,
    strip_managed_fields,
)
from watchkeeper.errors import WatchkeeperError

__all__ = [
    "Apply",
    "Delete",
    "Event",
    "HasHealth",
    "InitApply",
    "InitDone",
    "InitStart",
    "WatchConfig",
    "WatchError",
    "WatchGaveUp",
    "WatchHealth",
    "WatchPhase",
    "WatchState",
    "Watcher",
    "WatcherUnhealthy",
    "watcher",
]

log = logging.getLogger("watchkeeper.watcher")

JSON = dict[str, Any]
STABLE_AFTER = 10.0  # seconds a watch must stay open to count as progress by itself
# Seconds a resumed watch must stay open (no error) to count as working again: a server
# refusing the resume (410 as an ERROR line) does so at once, so no "recovered" 2 ms before
# "degraded"; a quiet resource need not wait STABLE_AFTER to be reported healthy.
OPEN_GRACE = 1.0
# While the client's circuit is open a watcher retries when the circuit lets it, but never
# sooner than this after its own failure (and never sooner than Retry-After).
CIRCUIT_MIN_SPACING = 0.5
THRESHOLD_SLACK = 0.01  # seconds: this close to max_unhealthy counts as reached
# Seconds a watch request may take to answer with its status and headers. kube-apiserver
# answers at once (a streaming list too: its events follow the headers), so a request with
# no answer is hung, like a LIST past the client's 60 s request timeout; without this bound
# only the idle timeout (the server timeout + 10 s: 5-10 min) would end it.
OPEN_TIMEOUT = 60.0
# The last attempt before max_unhealthy starts this long (at most a tenth of the threshold)
# before it, so it has time to succeed and the threshold still fires on time if it does not.
FINAL_ATTEMPT = 5.0
WATCH_VERBS = ("list", "watch")  # what a watcher needs; a 403 hint names them all at once


# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitStart:
    """A (re)list begins: the objects that follow replace everything known so far."""


class InitApply(ObjectEvent):
    """One object of the current (re)list.

    ``obj`` is a plain dict. A lazy watcher (``WatchConfig(lazy_decode=True)``) decodes it
    on first read; ``name``, ``namespace`` and ``resource_version`` never need that.
    Compared by value, matched positionally as ``case InitApply(obj)``."""


@dataclass(frozen=True, slots=True)
class InitDone:
    """The (re)list is complete: a cache may now swap in what it collected."""


class Apply(ObjectEvent):
    """An object was added or modified (``obj``; lazy as ``InitApply``)."""


class Delete(ObjectEvent):
    """An object was deleted (its last known state; lazy as ``InitApply``)."""


# What the stream builds of each object line (client/stream.py ``batches``); a type the
# apiserver does not send is taken as a change, as before.
_CLASSES: dict[str, type[ObjectEvent]] = {"ADDED": Apply, "MODIFIED": Apply, "DELETED": Delete}


def _other(kind: str) -> type[ObjectEvent]:
    return Apply


@dataclass(frozen=True, slots=True)
class WatchError:
    """A failure the watcher is already retrying; ``error`` is a typed ``ApiError`` and
    ``retry_in`` the seconds until the next attempt (0: at once)."""

    error: ApiError
    retry_in: float = 0.0


Event = InitStart | InitApply | InitDone | Apply | Delete | WatchError


class WatchGaveUp(WatchkeeperError):
    """The backoff returned None: the watcher stopped retrying (chained to the last error)."""


class WatcherUnhealthy(WatchkeeperError):
    """The watcher has not worked for longer than ``max_unhealthy`` (chained to the last error)."""


# -- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchConfig:
    """What to watch and how patiently. Immutable; every field has a sensible default.

    ``server_timeout=None`` picks a random 300-600 s per watch request (client-go's spread,
    so many clients do not reconnect in step); ``idle_timeout=None`` means that watch's
    server timeout + 10 s: silence longer than that means the connection is dead.
    """

    label_selector: str | None = None
    field_selector: str | None = None
    page_size: int = 500
    list_semantic: Literal["latest", "any"] = "latest"
    initial_list: Literal["paginated", "streaming"] = "paginated"
    bookmarks: bool = True
    server_timeout: float | None = None
    idle_timeout: float | None = None
    max_unhealthy: float | None = 300.0
    metadata_only: bool = False  # PartialObjectMetadata only: for big kinds (Secrets, Pods)
    strip_managed_fields: bool = False  # drop metadata.managedFields: about half of a cache
    # A cache (the Store of a shared watch or a Controller) drops metadata.managedFields
    # unless this is set; the watcher's own events keep them unless strip_managed_fields.
    keep_managed_fields: bool = False
    # Decode each watched object only when ``event.obj`` is first read: for consumers that
    # skip most events or need only ``event.name``/``namespace``/``resource_version``.
    # Lines are still fully validated as they arrive; reading every ``obj`` costs ~1 us
    # more per event than the eager default (docs/benchmarks.md). A lazy LIST keeps each
    # item's bytes, which a Store compresses as they are (no dict built).
    lazy_decode: bool = False

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {self.page_size}")
        if self.list_semantic not in ("latest", "any"):
            raise ValueError(f"list_semantic must be 'latest' or 'any', not {self.list_semantic!r}")
        if self.initial_list not in ("paginated", "streaming"):
            raise ValueError(
                f"initial_list must be 'paginated' or 'streaming', not {self.initial_list!r}"
            )
        for name in ("server_timeout", "idle_timeout", "max_unhealthy"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0 seconds or None, got {value}")

    def watch_timeout(self, rng: random.Random) -> int:
        """timeoutSeconds for the next watch request."""
        if self.server_timeout is not None:
            return max(1, round(self.server_timeout))
        return rng.randint(300, 600)

    def idle_for(self, timeout_seconds: int) -> float:
        return self.idle_timeout if self.idle_timeout is not None else timeout_seconds + 10.0


# -- health -------------------------------------------------------------------------------


class WatchState(enum.Enum):
    STARTING = "starting"
    HEALTHY = "healthy"
    DEGRADED = "degraded"


_HEALTHY = WatchState.HEALTHY


class WatchPhase(enum.Enum):
    """Where a watcher is in its cycle (``WatchHealth.phase``). ``state`` says whether it
    works; ``phase`` says what it is doing: listing, watching, or waiting to retry."""

    STARTING = "starting"
    INITIAL_LIST = "initial-list"  # a paginated LIST (the first one, or a relist)
    STREAMING_LIST = "streaming-list"  # a watch with sendInitialEvents, before its end
    WATCHING = "watching"
    BACKING_OFF = "backing-off"  # waiting its own delay (backoff, Retry-After) to retry
    WAITING_ON_CIRCUIT = "waiting-on-circuit"  # the client's circuit is open: its turn
    STOPPED = "stopped"  # it raised (not retriable, unhealthy, the backoff gave up)


@dataclass
class WatchHealth:
    """Live health of one watcher, safe to read from other tasks.

    ``since`` is when the current state began (event-loop clock); ``since_wall`` the same
    as a Unix time for display. ``consecutive_failures`` counts failures since last progress.
    ``phase`` is what the watcher is doing now (``WatchPhase``).
    """

    resource: str = ""
    state: WatchState = WatchState.STARTING
    phase: WatchPhase = WatchPhase.STARTING
    since: float = 0.0
    since_wall: float = field(default_factory=time.time)
    last_error: ApiError | None = None
    consecutive_failures: int = 0
    last_event_at: float | None = None
    next_retry_at: float | None = None
    relists: int = 0
    restarts: int = 0
    functioning_since: float | None = None  # last time it was known to work (or started)
    last_backoff: float = 0.0  # the last delay chosen before a retry, seconds
    events: dict[str, int] = field(default_factory=dict)  # ADDED/MODIFIED/DELETED/BOOKMARK
    errors: dict[str, int] = field(default_factory=dict)  # by error class name
    listeners: list[Callable[[], None]] = field(default_factory=list, repr=False, compare=False)

    def _changed(self) -> None:
        """Tell listeners (a Store's readiness) that ``state`` changed."""
        for listener in self.listeners:
            listener()

    def non_functioning_for(self, now: float) -> float:
        """Seconds since the watcher last worked (0 while healthy)."""
        if self.state is WatchState.HEALTHY or self.functioning_since is None:
            return 0.0
        return max(0.0, now - self.functioning_since)

    def summary(self) -> str:
        err = f": {self.last_error}" if self.last_error is not None else ""
        return f"{self.resource} {self.state.value}{err}"


@runtime_checkable
class HasHealth(Protocol):
    """A source of events that reports its health (``Watcher`` does): a reflector's store
    is ready only while it is not degraded."""

    @property
    def health(self) -> WatchHealth: ...


# -- the state machine --------------------------------------------------------------------


class _Progress:
    """Tracks health transitions and one-line-per-change logging for one watcher.

    Two steps out of a failure, so a cycle such as "list allowed, watch forbidden" neither
    reports itself recovered nor resets the backoff: ``established`` (a watch request was
    accepted right after a successful list: health is HEALTHY again) and ``progressed``
    (the watch delivered something or stayed open: the backoff starts over too).
    """

    def __init__(self, health: WatchHealth, backoff: Backoff, clock: Callable[[], float]) -> None:
        self.health, self.backoff, self.clock = health, backoff, clock
        self._repeats = 0
        # False from a failure until the next real progress: the backoff is due a reset.
        self.settled = True

    def _fields(self, state: str, error: ApiError | None = None, **more: Any) -> dict[str, Any]:
        """Structured fields for JSON logs (never credentials: errors carry none)."""
        fields: dict[str, Any] = {"resource": self.health.resource, "state": state, **more}
        if error is not None:
            fields["error_class"] = type(error).__name__
            fields["error_code"] = error.code
        return fields

    def established(self) -> None:
        """The watch works again: health is HEALTHY; the backoff keeps its place."""
        h = self.health
        if h.state is WatchState.HEALTHY and h.consecutive_failures == 0:
            return
        now = self.clock()
        if h.state is WatchState.DEGRADED:
            outage = now - h.functioning_since if h.functioning_since is not None else 0.0
            log.info(
                "watch %s recovered after %.1f s (%d failed attempts%s)",
                h.resource, outage, h.consecutive_failures,
                f", last error repeated {self._repeats} times" if self._repeats > 1 else "",
                extra=self._fields("healthy", outage_seconds=round(outage, 1)),
            )
        elif h.state is WatchState.STARTING:
            log.info("watch %s healthy", h.resource, extra=self._fields("healthy"))
        h.state, h.since, h.since_wall = WatchState.HEALTHY, now, time.time()
        h._changed()
        h.consecutive_failures, h.next_retry_at, self._repeats = 0, None, 0
        h.functioning_since = now

    def progressed(self) -> None:
        """Real progress (an event, a completed streaming list, a watch that stayed open):
        healthy, and the backoff starts over."""
        if self.settled and self.health.state is WatchState.HEALTHY:
            return
        self.established()
        if not self.settled:
            self.backoff.reset()
            self.settled = True

    def failed(self, error: ApiError) -> None:
        h = self.health
        now = self.clock()
        self.settled = False
        same = h.last_error is not None and _same_error(h.last_error, error)
        h.consecutive_failures += 1
        h.last_error = error
        name = type(error).__name__
        h.errors[name] = h.errors.get(name, 0) + 1
        if h.state is WatchState.HEALTHY:
            h.functioning_since = now  # it worked until just now
        if h.state is not WatchState.DEGRADED:
            h.state, h.since, h.since_wall = WatchState.DEGRADED, now, time.time()
            h._changed()
            log.warning("watch %s degraded: %s", h.resource, error,
                        extra=self._fields("degraded", error))
            self._repeats = 1
        elif same:
            self._repeats += 1
            if self._repeats in (10, 100) or self._repeats % 1000 == 0:
                log.warning(
                    "watch %s still failing (%d times in a row): %s",
                    h.resource, self._repeats, error,
                    extra=self._fields("degraded", error, repeats=self._repeats),
                )
        else:
            log.warning(
                "watch %s now failing with a different error: %s (previous one repeated %d times)",
                h.resource, error, self._repeats, extra=self._fields("degraded", error),
            )
            self._repeats = 1


def _same_error(a: ApiError, b: ApiError) -> bool:
    return type(a) is type(b) and a.code == b.code and a.message == b.message


_strip = strip_managed_fields


def _list_events(page: ObjectList | LazyList, strip: bool) -> list[InitApply]:
    """A LIST page's ``InitApply`` events; a lazy page's decode their object on first read
    (``ListItem``), so a Store can take the item's bytes as they are."""
    if isinstance(page, LazyList):
        return [InitApply(None, item.key, item, strip) for item in page.items]
    if strip:
        for obj in page.items:
            _strip(obj)
    return [InitApply(obj) for obj in page.items]


def _unusable_rv(error: ApiError) -> bool:
    """A request refused because of its resourceVersion or continue token (the watcher's
    own bookkeeping, not the caller's options): only a fresh list can fix it."""
    refused = isinstance(error, Invalid | BadRequest) or error.code == 500
    return refused and ("resourceVersion" in error.message or "continue" in error.message)


class _ClosedEarly(ConnectionFailed):
    pass


# -- the retry decision -------------------------------------------------------------------


class RetryAction(enum.Enum):
    RETRY = "retry"  # wait ``delay`` (or the circuit), then try again
    FALL_BACK = "fall-back"  # the server has no streaming lists: a paginated LIST, at once
    RAISE = "raise"  # the caller's own mistake: the error is raised, no retry can fix it
    GIVE_UP = "give-up"  # the backoff returned None: ``WatchGaveUp``
    UNHEALTHY = "unhealthy"  # max_unhealthy is reached: ``WatcherUnhealthy``


@dataclass(frozen=True)
class Decision:
    """What a watcher does after a failed attempt (``decide``).

    ``relist``: the next attempt lists again (the resume version is dropped). ``delay``:
    seconds until the next attempt; for ``UNHEALTHY`` with ``at`` set, seconds until
    ``WatcherUnhealthy`` is raised at ``at`` (no attempt fits before the threshold; None:
    at once). ``circuit``: the wait is the client's circuit's, never shorter than
    ``floor`` s and never past ``latest``. ``final``: this is the last attempt before
    max_unhealthy (the watcher remembers it for this outage)."""

    action: RetryAction
    relist: bool = False
    delay: float = 0.0
    at: float | None = None
    circuit: bool = False
    floor: float = 0.0
    latest: float | None = None
    final: bool = False


def decide(
    error: ApiError,
    phase: WatchPhase,
    health: WatchHealth,
    now: float,
    *,
    max_unhealthy: float | None,
    backoff: Callable[[], float | None],
    previous_gone: bool = False,
    final_for: float | None = None,
    circuit: Callable[[float, float], float] | None = None,
) -> Decision:
    """The retry decision after ``error``, a function of its inputs: the error, the phase
    the watcher was in, its health as it was before this failure, and the time.

    Two inputs are asked only when the answer needs them: ``backoff()`` (the backoff's
    next step; None: give up) when a delay is due, and ``circuit(delay, floor)`` when the
    error says the server is unreachable and the client has a circuit (it records the
    failure with our delay and returns the seconds until our turn, at least ``floor``).
    ``previous_gone``: the last failure was a 410 too; ``final_for``: the outage (its
    ``functioning_since``) whose last attempt was already made.
    """
    if phase is WatchPhase.STREAMING_LIST and _streaming_unsupported(error):
        return Decision(RetryAction.FALL_BACK)
    relist = isinstance(error, Gone) or _unusable_rv(error)
    if not error.retriable and not relist:
        return Decision(RetryAction.RAISE)
    # The outage this failure belongs to began at ``start`` (now, if it was healthy).
    start = health.functioning_since
    if health.state is _HEALTHY or start is None:
        start = now
    down = max(0.0, now - start)
    # Within a few ms of the threshold counts as reached: capping the delay to a
    # near-zero remainder would retry in a tight loop (measured: a hot loop of
    # 166,000 attempts when the remainder fell below the clock's resolution).
    if max_unhealthy is not None and down >= max_unhealthy - THRESHOLD_SLACK:
        return Decision(RetryAction.UNHEALTHY, relist)
    # The first 410 relists at once; a repeated one backs off like any failure.
    immediate = isinstance(error, Gone) and not previous_gone
    after = error.retry_after
    if after is None or not after >= 0.0:  # None, nan or negative: no wish
        after = 0.0
    after = min(after, MAX_RETRY_AFTER)  # no server can park a watcher
    if immediate:
        delay = 0.0
    else:
        step = backoff()
        if step is None:
            return Decision(RetryAction.GIVE_UP, relist)
        delay = max(step, after)
    # Server unreachable: not our own backoff step but the circuit's (one probe for the
    # whole client; everyone back ~1 s after any success). Never sooner than our minimal
    # spacing or Retry-After (``floor``).
    floor = delay
    shared = circuit is not None and is_reachability_error(error)
    if shared and circuit is not None:
        floor = max(CIRCUIT_MIN_SPACING, after)
        # At least ``floor``: the circuit computes its wait as (now + floor) - now, which
        # float rounding can put a hair under Retry-After (2.9999999999999996 for 3).
        delay = max(circuit(delay, floor), floor)
    latest: float | None = None  # set when the max_unhealthy deadline bounds the wait
    final = False
    if max_unhealthy is not None:
        deadline = now + max_unhealthy - down
        last_at = deadline - min(FINAL_ATTEMPT, max_unhealthy / 10)
        if now + delay >= deadline - THRESHOLD_SLACK:
            first = delay if immediate else after
            if final_for != start and now + first < deadline - THRESHOLD_SLACK:
                # One last attempt, early enough to succeed before the threshold (never
                # sooner than Retry-After), bounded by it like any other.
                final = True
                delay = max(last_at - now, first, 0.0)
                latest = now + delay  # the last attempt goes, circuit or not
            else:
                # No attempt fits before the threshold (a long Retry-After, or the last
                # one failed): no sleep runs past it; give up on time.
                return Decision(RetryAction.UNHEALTHY, relist, max(0.0, deadline - now),
                                at=deadline)
        elif shared:
            # Waiting on the circuit may not outlast the threshold: the last attempt goes
            # at its time (the threshold, once that one was made).
            latest = deadline if final_for == start else last_at
    return Decision(RetryAction.RETRY, relist, delay, circuit=shared, floor=floor,
                    latest=latest, final=final)


class Watcher:
    """An async-iterable watch. Iterate it once; ``health`` is live while it runs.

    Made by ``watcher(...)``, the one documented constructor; this class is public as the
    type it returns (annotations, ``isinstance``). ``Watcher(...)`` is deprecated."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            "Watcher(...) is deprecated: use watcher(...) (wk.watcher), which takes the "
            "same arguments", DeprecationWarning, stacklevel=2,
        )
        self._setup(*args, **kwargs)

    def _setup(
        self,
        api: Api,
        config: WatchConfig | None = None,
        *,
        backoff: Backoff | None = None,
        health: WatchHealth | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        resource_version: str | None = None,
    ) -> None:
        self.api = api
        self.config = config or WatchConfig()
        self._backoff = backoff
        self.health = health or WatchHealth()
        if not self.health.resource:
            self.health.resource = f"{api.resource_name}" + (
                f" in {api.namespace}" if api.namespace else ""
            )
        self._clock = clock
        self._rng = rng or random.Random()
        self.resource_version: str | None = resource_version

    def __repr__(self) -> str:
        return f"Watcher({self.api!r}, {self.config!r})"

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._run()

    async def _run(self) -> AsyncIterator[Event]:
        loop = asyncio.get_running_loop()
        clock = self._clock or loop.time
        backoff = self._backoff or DefaultBackoff(rng=self._rng, clock=clock)
        cfg, health = self.config, self.health
        progress = _Progress(health, backoff, clock)
        health.state, health.since, health.functioning_since = WatchState.STARTING, clock(), clock()
        need_list = self.resource_version is None  # given a version: watch from it, no list
        streaming = cfg.initial_list == "streaming"
        previous_gone = False
        final_for: float | None = None  # the outage (functioning_since) of the last try
        while True:
            try:
                listed = False
                held: list[Event] = []  # a list's last page and InitDone, until its watch opens
                if need_list and not streaming:
                    health.relists += 1
                    self._enter(WatchPhase.INITIAL_LIST)
                    async for ev in self._paginated_list(progress, held):
                        yield ev
                    need_list, listed = False, True
                # Closed on the way out (an error, the consumer stopping): its connection
                # with it, at once, not when the garbage collector finalizes it.
                async with contextlib.aclosing(self._watch_once(
                    progress, need_list and streaming, held if listed else None
                )) as parts:
                    async for part in parts:
                        # The live stream is iterated here, not re-yielded by _watch_once:
                        # one generator between the protocol and the consumer, not three.
                        live: _Live | None = None
                        if isinstance(part, _Live):
                            live, source = part, part.batches
                        else:
                            source = _once(part)
                        async with contextlib.aclosing(source):
                            async for batch in source:
                                if live is not None:
                                    batch = self._took(live, progress, batch)
                                    if not batch:
                                        continue
                                elif batch and batch[-1].__class__ is InitDone:
                                    # InitDone only ever ends a batch: the list is done once
                                    # the batch is (a consumer that stops before it ends
                                    # the watcher anyway).
                                    need_list = False
                                # Popped, not iterated: an event the consumer has dropped is
                                # freed at once, so a piece's decoded dicts are not all
                                # alive for each garbage collection (measured: 6.2 -> 4.4 µs
                                # per event reading every lazy obj).
                                batch.reverse()
                                pop = batch.pop
                                item = None
                                try:
                                    while batch:
                                        item = pop()
                                        yield item
                                except GeneratorExit:
                                    self._stopped_at(item)
                                    raise
                previous_gone = False
                continue  # a normal end: re-watch at once from the last resourceVersion
            except ApiError as error:
                if held:
                    # The list worked and the watch after it did not: the cache still gets
                    # the whole list, before the error, as it would have without the watch.
                    for ev in held:
                        yield ev
                    held.clear()
                if isinstance(error, Forbidden):
                    error.needed_verbs = WATCH_VERBS  # name them all, not one per grant
                # The Client's circuit: an answer about this resource (4xx, or a 5xx/429 that
                # is no gateway's) proves the server answers and closes it, and stays ours;
                # a reachability error is reported by ``decide``, with the delay it chose.
                circuit = getattr(self.api.client, "circuit", None)
                now = clock()
                turn: Callable[[float, float], float] | None = None
                if circuit is not None:
                    turn = _circuit_turn(circuit, error, clock)
                decision = decide(
                    error, health.phase, health, now, max_unhealthy=cfg.max_unhealthy,
                    backoff=backoff.next, previous_gone=previous_gone, final_for=final_for,
                    circuit=turn,
                )
                action = decision.action
                if action is RetryAction.FALL_BACK:
                    log.info(
                        "watch %s: server does not support streaming lists (%s); "
                        "using paginated LIST", health.resource, error.message,
                    )
                    streaming = False
                    continue
                progress.failed(error)
                if circuit is not None and not is_reachability_error(error):
                    circuit.record_failure(error)
                if action is RetryAction.RAISE:
                    # The caller's own mistake (a malformed selector, options the server
                    # rejects): no retry and no administrator can fix it, so end at once.
                    health.next_retry_at = None
                    self._enter(WatchPhase.STOPPED)
                    log.error("watch %s stopped: retrying cannot fix this: %s",
                              health.resource, error,
                              extra=progress._fields("stopped", error))
                    raise error
                if decision.relist:
                    need_list = True
                    self.resource_version = None
                if action is RetryAction.UNHEALTHY:
                    if decision.at is None:
                        health.next_retry_at = None
                        self._enter(WatchPhase.STOPPED)
                        yield WatchError(error, 0.0)
                        raise self._unhealthy(error) from error
                    health.next_retry_at = decision.at
                    health.last_backoff = decision.delay
                    self._enter(WatchPhase.BACKING_OFF)
                    yield WatchError(error, decision.delay)
                    left = decision.at - clock()  # the consumer may have taken its time
                    if left > 0:
                        await asyncio.sleep(left)
                    health.next_retry_at = None
                    self._enter(WatchPhase.STOPPED)
                    raise self._unhealthy(error) from error
                if action is RetryAction.GIVE_UP:
                    self._enter(WatchPhase.STOPPED)
                    raise WatchGaveUp(
                        f"watch {health.resource}: backoff gave up after "
                        f"{health.consecutive_failures} failures; last error: {error}"
                    ) from error
                previous_gone = isinstance(error, Gone)
                if decision.final:
                    final_for = health.functioning_since
                delay, latest = decision.delay, decision.latest
                health.next_retry_at = clock() + delay
                health.last_backoff = delay
                self._enter(WatchPhase.WAITING_ON_CIRCUIT if decision.circuit
                            else WatchPhase.BACKING_OFF)
                yield WatchError(error, delay)
                if decision.circuit and circuit is not None:
                    # Our turn: as the probe, or released (staggered) when the circuit closes.
                    turn_at = clock()
                    await circuit.wait_turn(turn_at + min(decision.floor, delay), latest)
                    if latest is not None and clock() >= latest - THRESHOLD_SLACK:
                        final_for = health.functioning_since  # this is the last attempt
                elif delay > 0:
                    await asyncio.sleep(delay)
                health.restarts += 1

    def _unhealthy(self, error: ApiError) -> WatcherUnhealthy:
        health, limit = self.health, self.config.max_unhealthy
        return WatcherUnhealthy(
            f"watch {health.resource} has not worked for {limit:g} s "
            f"({health.consecutive_failures} failed attempts); last error: {error}"
        )

    def _enter(self, phase: WatchPhase) -> None:
        """The one place the watcher's phase advances (``WatchHealth.phase``)."""
        self.health.phase = phase

    @contextlib.asynccontextmanager
    async def _deadline(
        self, progress: _Progress, method: str, cap: float | None = None
    ) -> AsyncIterator[None]:
        """Bound a request by the ``max_unhealthy`` deadline while the watcher is not healthy,
        and by ``cap`` seconds in any case.

        The threshold is a deadline on the whole attempt: a LIST, a watch request or a
        credential refresh that hangs fails with ``Timeout`` when it is reached (and the
        watcher then raises ``WatcherUnhealthy``), not at the request timeout. Nothing may be
        yielded to the consumer inside: the timeout cancels the current task.
        """
        limit, health = self.config.max_unhealthy, self.health
        remaining: float | None = None
        if limit is not None and health.state is not _HEALTHY:
            remaining = max(0.0, limit - health.non_functioning_for(progress.clock()))
        if remaining is None and cap is None:
            yield
            return
        capped = remaining is None or (cap is not None and cap < remaining)
        seconds = cap if capped else remaining
        try:
            async with asyncio.timeout(seconds) as scope:
                yield
        except TimeoutError:
            if not scope.expired():
                raise
            if capped:
                message = f"the server sent no answer to the watch request in {cap:g} s"
            else:
                message = (f"no answer before the max_unhealthy deadline (the watch has not "
                           f"worked for {limit:g} s)")
            raise Timeout(message, reason="Timeout", method=method,
                          path=self.api.resource_name) from None

    async def _paginated_list(
        self, progress: _Progress, held: list[Event]
    ) -> AsyncIterator[Event]:
        """One paginated LIST. Not progress by itself: a list may be allowed while the watch
        is forbidden, so health recovers only once the watch that follows is accepted.

        The last page's ``InitApply`` events and ``InitDone`` go into ``held``, not out:
        ``_watch_once`` hands them out once that watch is accepted (``_run`` if it fails),
        so a cache is ready no sooner than its watcher is healthy (``/readyz`` would answer
        503 in between: the open takes a round trip on a new connection), and nothing is
        awaited between the last page and ``InitDone`` (a controller that reconciles an
        ``InitApply`` from the store finds the object there)."""
        cfg = self.config
        yield InitStart()
        token: str | None = None
        rv = "0" if cfg.list_semantic == "any" else None
        list_rv = ""
        strip = cfg.strip_managed_fields
        lister = self.api.list_lazy if cfg.lazy_decode else self.api.list
        while True:
            async with self._deadline(progress, "LIST"):
                page = await lister(
                    label_selector=cfg.label_selector,
                    field_selector=cfg.field_selector,
                    limit=cfg.page_size,
                    continue_token=token,
                    resource_version=None if token else rv,
                    metadata_only=cfg.metadata_only,
                )
            if not token:
                list_rv = page.resource_version
            token = page.continue_token
            if not token:
                break
            for ev in _list_events(page, strip):
                yield ev
        self.resource_version = list_rv
        held.extend(_list_events(page, strip))
        held.append(InitDone())

    def _stopped_at(self, ev: Event | None) -> None:
        """The consumer stopped inside a batch: resume from the last event it was given,
        not from the end of the piece (which it never saw). Only a watch event counts: the
        version of a streaming list's ``InitApply`` is no place to resume from."""
        if ev.__class__ is Apply or ev.__class__ is Delete:
            assert isinstance(ev, ObjectEvent)
            if ev.resource_version:
                self.resource_version = ev.resource_version

    def _took(self, live: _Live, progress: _Progress, batch: list[Event]) -> list[Event]:
        """The bookkeeping of one batch of the live stream, once per piece, not per event
        (the stream counted its events by type): the resume version, health. Returns the
        batch without its bookmarks (a piece of ADDED/MODIFIED/DELETED as it is)."""
        live.delivered = True
        decoder = live.decoder
        if decoder.resource_version:
            self.resource_version = decoder.resource_version
        health = self.health
        receiver = live.receiver
        health.last_event_at = receiver.last_rx if receiver is not None else live.clock()
        if not progress.settled or health.state is not _HEALTHY:
            progress.progressed()
        if decoder.plain:
            return batch
        return [ev for ev in batch if ev.__class__ is not Bookmark]  # type: ignore[comparison-overlap]

    async def _watch_once(
        self, progress: _Progress, initial: bool, held: list[Event] | None = None
    ) -> AsyncGenerator[list[Event] | _Live, None]:
        """One watch request; with ``initial`` it is a streaming list (sendInitialEvents);
        ``held``: a paginated list just succeeded (its last page and ``InitDone``, handed
        out once this watch is accepted), so an accepted watch is health again.

        Yields lists of events (the list's, a streaming list's), then the live stream as a
        ``_Live``, which ``_run`` iterates itself (one generator layer fewer per read) with
        ``_took`` doing the bookkeeping once per piece; resumed after it, this ends the
        request (a clean end too early is ``_ClosedEarly``)."""
        cfg, clock = self.config, progress.clock
        timeout = cfg.watch_timeout(self._rng)
        rv = self.resource_version
        if initial:
            rv = "0" if cfg.list_semantic == "any" else ""
        opened = clock()
        strip, lazy = cfg.strip_managed_fields, cfg.lazy_decode
        health = self.health
        counts = health.events
        delivered = False
        stable: asyncio.TimerHandle | None = None
        grace: asyncio.TimerHandle | None = None
        self._enter(WatchPhase.STREAMING_LIST if initial else WatchPhase.WATCHING)
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with self._deadline(progress, "WATCH", OPEN_TIMEOUT):
                    stream = await stack.enter_async_context(self.api.watch(
                        resource_version=rv,
                        label_selector=cfg.label_selector,
                        field_selector=cfg.field_selector,
                        timeout_seconds=timeout,
                        allow_bookmarks=cfg.bookmarks or initial,
                        send_initial_events=initial,
                        read_timeout=cfg.idle_for(timeout),
                        metadata_only=cfg.metadata_only,
                        lazy=lazy,
                    ))
                batches = stream.batches(_CLASSES, _other, counts=counts, strip=strip)
                if initial:
                    # Announced only once the server accepted the streaming list: a server
                    # without WatchList refuses it (422) and the paginated fallback then
                    # starts the one list there is, so it is counted and announced once.
                    health.relists += 1
                    yield [InitStart()]
                    async with self._deadline(progress, "WATCH"):
                        survivors, rest = await self._initial_events(batches, clock)
                    delivered = True
                    if survivors:
                        yield survivors
                    del survivors
                    progress.progressed()
                    self._enter(WatchPhase.WATCHING)
                    yield [InitDone()]
                    if rest:
                        # The batch that held the initial-events-end bookmark goes on with
                        # live events: they are ordinary watch events.
                        rv = last_version(rest)
                        if rv:
                            self.resource_version = rv
                        rest = [ev for ev in rest if ev.__class__ is not Bookmark]
                        if rest:
                            yield rest  # type: ignore[misc]  # Apply/Delete, built by the stream
                        del rest
                else:
                    loop = asyncio.get_running_loop()
                    if held is not None:
                        progress.established()  # the list worked and the watch is accepted
                    elif health.state is not _HEALTHY:
                        # A resumed watch that stays open works: health says so after a
                        # moment even on a quiet resource (the backoff waits for `stable`).
                        grace = loop.call_later(OPEN_GRACE, progress.established)
                    # A watch that stays open is progress even on a quiet resource: without
                    # this, the backoff would keep growing after an outage until an event came.
                    stable = loop.call_later(min(STABLE_AFTER, timeout / 2), progress.progressed)
                    if held is not None:
                        yield held  # emptied by the consumer: popped in _run
                # Apply/Delete, built by the stream:
                live = _Live(batches, stream, clock,  # type: ignore[arg-type]
                             self._clock is None)
                yield live  # iterated by _run (see ``_took``), then back here at its end
                delivered = delivered or live.delivered
        finally:
            if stable is not None:
                stable.cancel()
            if grace is not None:
                grace.cancel()
        lasted = clock() - opened
        if not delivered and lasted < min(timeout / 2, 5.0):
            # A clean close right after opening is no normal timeout: back off, don't spin.
            raise _ClosedEarly(
                f"the server closed the watch after {lasted:.1f} s without sending anything",
                reason="ClosedEarly", method="WATCH", path=self.api.resource_name,
            )
        progress.progressed()  # a watch that stayed open to its timeout is health

    async def _initial_events(
        self, batches: AsyncIterator[list[ObjectEvent]], clock: Callable[[], float],
    ) -> tuple[list[Event], list[ObjectEvent]]:
        """A streaming list's events up to the ``k8s.io/initial-events-end`` bookmark, applied
        in order to a set keyed by namespace/name, as client-go's temporary store does.

        The server may send live ADDED/MODIFIED/DELETED before that bookmark (a real
        apiserver does, on its ~1 s bookmark tick); an object created and deleted in that
        window must not come out as present, so only the survivors are returned (as
        ``InitApply``), in first-seen order, with the rest of the bookmark's batch (live
        watch events). Yields nothing, so a deadline can wrap it.
        """
        health = self.health
        known: dict[tuple[str, str], InitApply] = {}
        async for batch in batches:
            health.last_event_at = clock()
            for i, ev in enumerate(batch):
                if ev.resource_version:
                    self.resource_version = ev.resource_version
                cls = ev.__class__
                if cls is Bookmark:
                    assert isinstance(ev, Bookmark)
                    if ev.initial_events_end:
                        return list(known.values()), batch[i + 1:]
                    continue
                where = (ev.namespace, ev.name)
                if cls is Delete:
                    known.pop(where, None)
                else:
                    known[where] = ev._copy_as(InitApply)
        raise _ClosedEarly(
            "streaming list ended before the initial-events-end bookmark",
            reason="ClosedEarly", method="WATCH", path=self.api.resource_name,
        )


class _Live:
    """The live part of one watch, handed by ``_watch_once`` to ``_run``: the stream's
    batches, its decoder (resume version, whether a piece was plain), whether any came."""

    __slots__ = ("batches", "clock", "decoder", "delivered", "receiver")

    def __init__(self, batches: AsyncGenerator[list[Event], None], stream: WatchStream,
                 clock: Callable[[], float], loop_clock: bool) -> None:
        self.batches, self.decoder, self.clock = batches, stream.decoder, clock
        self.delivered = False
        # On the loop's clock, when the last bytes arrived is known (no clock call per read).
        self.receiver = stream.receiver if loop_clock else None


async def _once(batch: list[Event]) -> AsyncGenerator[list[Event], None]:
    """One batch as a stream of batches (the list's, a streaming list's)."""
    yield batch


def _circuit_turn(
    circuit: Any, error: ApiError, clock: Callable[[], float]
) -> Callable[[float, float], float]:
    """``decide``'s view of the client's circuit: report the failure with our delay (it
    schedules the next probe when ours opens the circuit), then the seconds until our turn,
    never sooner than ``floor``."""

    def turn(delay: float, floor: float) -> float:
        circuit.record_failure(error, delay)
        wait: float = circuit.expected_wait(clock() + floor)
        return wait

    return turn


def _streaming_unsupported(error: ApiError) -> bool:
    return isinstance(error, Invalid | BadRequest) and "sendInitialEvents" in error.message


def watcher(
    api: Api,
    config: WatchConfig | None = None,
    *,
    backoff: Backoff | None = None,
    health: WatchHealth | None = None,
    clock: Callable[[], float] | None = None,
    rng: random.Random | None = None,
    resource_version: str | None = None,
) -> Watcher:
    """Watch ``api`` forever: ``async for event in watcher(api, WatchConfig(...)): ...``.
    The one way to make a ``Watcher`` (its class is public as a type only).

    ``backoff`` defaults to a fresh ``DefaultBackoff`` on the event loop's clock; pass a
    ``WatchHealth`` to share it with probes, or read ``.health`` on the returned object.
    ``resource_version`` starts from a version you already have (no initial list: only
    changes after it); if the server no longer has it (410), the watcher lists as usual.
    """
    w = Watcher.__new__(Watcher)
    w._setup(api, config, backoff=backoff, health=health, clock=clock, rng=rng,
             resource_version=resource_version)
    return w
