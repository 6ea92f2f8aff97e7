"""The list/watch state machine: kind to the server, honest with its user.

``watcher(api, config)`` yields a stream of events that never ends on an error: every
failure is yielded as ``WatchError`` and retried after ``max(backoff, Retry-After)``. It
resumes from the last resourceVersion without a relist when it can, relists on 410, drops
silent connections, and raises ``WatcherUnhealthy`` once it has not worked for
``max_unhealthy`` seconds, so a broken watch reaches someone who can fix it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from watchkeeper.backoff import Backoff, DefaultBackoff
from watchkeeper.client import Api, ApiError, BadRequest, ConnectionFailed, Gone, Invalid
from watchkeeper.client._pieces import LazyPiece
from watchkeeper.client.api import _NO_META, KeyFields, decode_line_object, key_fields
from watchkeeper.client.errors import error_from_status

__all__ = [
    "Apply",
    "Delete",
    "Event",
    "InitApply",
    "InitDone",
    "InitStart",
    "WatchConfig",
    "WatchError",
    "WatchGaveUp",
    "WatchHealth",
    "WatchState",
    "Watcher",
    "WatcherUnhealthy",
    "watcher",
]

log = logging.getLogger("watchkeeper.watcher")

JSON = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
STABLE_AFTER = 10.0  # seconds a watch must stay open to count as progress by itself
THRESHOLD_SLACK = 0.01  # seconds: this close to max_unhealthy counts as reached


# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitStart:
    """A (re)list begins: the objects that follow replace everything known so far."""


if TYPE_CHECKING:

    class _EventFields:
        """What type checkers see: ``obj`` is always a dict."""

        __match_args__ = ("obj",)
        _key: KeyFields | None
        _line: bytes | LazyPiece | None
        _strip: bool
        _at: int

        def __init__(self, obj: JSON | None, _key: KeyFields | None = None,
                     _line: bytes | LazyPiece | None = None, _strip: bool = False,
                     _at: int = 0) -> None: ...

        @property
        def obj(self) -> JSON: ...

else:

    class _EventFields(msgspec.Struct):
        """The storage of an object event. A msgspec Struct because it is built in C: 0.08
        against 0.35 µs per event for a Python ``__init__``, a third of the lazy watcher's
        whole cost per event (docs/decisions.md). ``obj`` is None until a lazy event's
        object is read; the ``obj`` property set on ``_ObjectEvent`` below decodes it then."""

        obj: Any
        _key: Any = None
        _line: Any = None  # the event's line, or its piece (``_at`` is its index there)
        _strip: bool = False
        _at: int = 0


_OBJ_SLOT: Any = _EventFields.__dict__["obj"] if not TYPE_CHECKING else None


class _ObjectEvent(_EventFields):
    """An event that carries one object.

    ``obj`` is a plain dict. A lazy watcher (``WatchConfig(lazy_decode=True)``) decodes it
    on first read; ``name``, ``namespace`` and ``resource_version`` never need that.
    Compared by value, matched positionally as ``case Apply(obj)``; not hashable (it holds
    a dict). The private constructor arguments are the watcher's lazy form.
    """

    def _keys(self) -> KeyFields:
        keys = self._key
        if keys is None:
            keys = self._key = key_fields(self.obj)
        return keys

    @property
    def name(self) -> str:
        return self._keys().name

    @property
    def namespace(self) -> str:
        return self._keys().namespace

    @property
    def resource_version(self) -> str:
        return self._keys().resourceVersion

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _ObjectEvent)
        return self.obj == other.obj

    def __repr__(self) -> str:
        if self._line is not None:
            return (f"{type(self).__name__}(<not decoded: {self.namespace}/{self.name} "
                    f"rv={self.resource_version}>)")
        return f"{type(self).__name__}(obj={self.obj!r})"


def _decoded(self: _ObjectEvent) -> JSON:
    """``event.obj``: a lazy event decodes its line on first read."""
    obj: JSON | None = _OBJ_SLOT.__get__(self)
    if obj is None:
        line = self._line
        if line is None:
            raise TypeError(f"{type(self).__name__} has no object")
        obj = decode_line_object(line) if isinstance(line, bytes) else line.obj(self._at)
        if self._strip:
            _strip(obj)
        _OBJ_SLOT.__set__(self, obj)
        self._line = None
    return obj


if not TYPE_CHECKING:
    # Set after the class is made: in the body msgspec would take it for the field's default.
    _ObjectEvent.obj = property(_decoded)


class InitApply(_ObjectEvent):
    """One object of the current (re)list."""


@dataclass(frozen=True, slots=True)
class InitDone:
    """The (re)list is complete: a cache may now swap in what it collected."""


class Apply(_ObjectEvent):
    """An object was added or modified."""


class Delete(_ObjectEvent):
    """An object was deleted (its last known state)."""


@dataclass(frozen=True, slots=True)
class WatchError:
    """A failure the watcher is already retrying; ``error`` is a typed ``ApiError`` and
    ``retry_in`` the seconds until the next attempt (0: at once)."""

    error: ApiError
    retry_in: float = 0.0


Event = InitStart | InitApply | InitDone | Apply | Delete | WatchError


class WatchGaveUp(Exception):
    """The backoff returned None: the watcher stopped retrying (chained to the last error)."""


class WatcherUnhealthy(Exception):
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
    # Decode each watched object only when ``event.obj`` is first read: for consumers that
    # skip most events or need only ``event.name``/``namespace``/``resource_version``.
    # Lines are still fully validated as they arrive; reading every ``obj`` costs ~1 us
    # more per event than the eager default (docs/benchmarks.md).
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


@dataclass
class WatchHealth:
    """Live health of one watcher, safe to read from other tasks.

    ``since`` is when the current state began (event-loop clock); ``since_wall`` the same
    as a Unix time for display. ``consecutive_failures`` counts failures since last progress.
    """

    resource: str = ""
    state: WatchState = WatchState.STARTING
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


# -- the state machine --------------------------------------------------------------------


class _Progress:
    """Tracks health transitions and one-line-per-change logging for one watcher."""

    def __init__(self, health: WatchHealth, backoff: Backoff, clock: Callable[[], float]) -> None:
        self.health, self.backoff, self.clock = health, backoff, clock
        self._repeats = 0

    def _fields(self, state: str, error: ApiError | None = None, **more: Any) -> dict[str, Any]:
        """Structured fields for JSON logs (never credentials: errors carry none)."""
        fields: dict[str, Any] = {"resource": self.health.resource, "state": state, **more}
        if error is not None:
            fields["error_class"] = type(error).__name__
            fields["error_code"] = error.code
        return fields

    def progressed(self) -> None:
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
        self.backoff.reset()
        h.state, h.since, h.since_wall = WatchState.HEALTHY, now, time.time()
        h._changed()
        h.consecutive_failures, h.next_retry_at, self._repeats = 0, None, 0
        h.functioning_since = now

    def failed(self, error: ApiError) -> None:
        h = self.health
        now = self.clock()
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


def _strip(obj: JSON) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


def _unusable_rv(error: ApiError) -> bool:
    """A watch refused because of its resourceVersion: only a fresh list can fix it."""
    refused = isinstance(error, Invalid | BadRequest) or error.code == 500
    return refused and "resourceVersion" in error.message


class _ClosedEarly(ConnectionFailed):
    pass


class Watcher:
    """An async-iterable watch. Iterate it once; ``health`` is live while it runs."""

    def __init__(
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
        while True:
            try:
                if need_list and not streaming:
                    health.relists += 1
                    async for ev in self._paginated_list(progress):
                        yield ev
                    need_list = False
                async for batch in self._watch_once(progress, need_list and streaming):
                    # Popped, not iterated: an event the consumer has dropped is freed at
                    # once, so a piece's decoded dicts are not all alive for each garbage
                    # collection (measured: 6.2 -> 4.4 µs per event reading every lazy obj).
                    batch.reverse()
                    item = None
                    try:
                        while batch:
                            item = batch.pop()
                            if item.__class__ is InitDone:
                                need_list = False
                            yield item
                    except GeneratorExit:
                        self._stopped_at(item)
                        raise
                previous_gone = False
                continue  # a normal end: re-watch at once from the last resourceVersion
            except ApiError as error:
                if streaming and need_list and _streaming_unsupported(error):
                    log.info(
                        "watch %s: server does not support streaming lists (%s); "
                        "using paginated LIST", health.resource, error.message,
                    )
                    streaming = False
                    continue
                progress.failed(error)
                if isinstance(error, Gone) or _unusable_rv(error):
                    need_list = True
                    self.resource_version = None
                limit = cfg.max_unhealthy
                # Within a few ms of the threshold counts as reached: capping the delay to a
                # near-zero remainder would retry in a tight loop (measured: a hot loop of
                # 166,000 attempts when the remainder fell below the clock's resolution).
                if limit is not None and (
                    health.non_functioning_for(clock()) >= limit - THRESHOLD_SLACK
                ):
                    health.next_retry_at = None
                    yield WatchError(error, 0.0)
                    raise WatcherUnhealthy(
                        f"watch {health.resource} has not worked for {limit:g} s "
                        f"({health.consecutive_failures} failed attempts); last error: {error}"
                    ) from error
                # The first 410 relists at once; a repeated one backs off like any failure.
                immediate = isinstance(error, Gone) and not previous_gone
                previous_gone = isinstance(error, Gone)
                delay = 0.0 if immediate else self._next_delay(error, backoff)
                if limit is not None:
                    # Wake at the threshold for one last attempt rather than past it, but
                    # never sooner than the server's Retry-After.
                    remaining = max(0.0, limit - health.non_functioning_for(clock()))
                    delay = max(min(delay, remaining), error.retry_after or 0.0)
                health.next_retry_at = clock() + delay
                health.last_backoff = delay
                yield WatchError(error, delay)
                if delay > 0:
                    await asyncio.sleep(delay)
                health.restarts += 1

    def _next_delay(self, error: ApiError, backoff: Backoff) -> float:
        """max(backoff, Retry-After); WatchGaveUp when the backoff says stop."""
        delay = backoff.next()
        if delay is None:
            raise WatchGaveUp(
                f"watch {self.health.resource}: backoff gave up after "
                f"{self.health.consecutive_failures} failures; last error: {error}"
            ) from error
        return max(delay, error.retry_after or 0.0)

    async def _paginated_list(self, progress: _Progress) -> AsyncIterator[Event]:
        cfg = self.config
        yield InitStart()
        token: str | None = None
        rv = "0" if cfg.list_semantic == "any" else None
        list_rv = ""
        strip = cfg.strip_managed_fields
        while True:
            page = await self.api.list(
                label_selector=cfg.label_selector,
                field_selector=cfg.field_selector,
                limit=cfg.page_size,
                continue_token=token,
                resource_version=None if token else rv,
                metadata_only=cfg.metadata_only,
            )
            if not token:
                list_rv = page.resource_version
            for obj in page.items:
                if strip:
                    _strip(obj)
                yield InitApply(obj)
            token = page.continue_token
            if not token:
                break
        self.resource_version = list_rv
        progress.progressed()
        yield InitDone()

    def _stopped_at(self, ev: Event | None) -> None:
        """The consumer stopped inside a batch: resume from the last event it was given,
        not from the end of the piece (which it never saw)."""
        if isinstance(ev, _ObjectEvent) and ev.resource_version:
            self.resource_version = ev.resource_version

    async def _watch_once(
        self, progress: _Progress, initial: bool
    ) -> AsyncIterator[list[Event]]:
        """One watch request; with ``initial`` it is a streaming list (sendInitialEvents).

        Yields the events of each decoded piece of the stream as one list; the bookkeeping
        (resume version, counters, health) is done per piece, not per event."""
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
        in_initial = initial
        stable: asyncio.TimerHandle | None = None
        try:
            async with self.api.watch(
                resource_version=rv,
                label_selector=cfg.label_selector,
                field_selector=cfg.field_selector,
                timeout_seconds=timeout,
                allow_bookmarks=cfg.bookmarks or initial,
                send_initial_events=initial,
                read_timeout=cfg.idle_for(timeout),
                metadata_only=cfg.metadata_only,
                lazy=lazy,
            ) as stream:
                if initial:
                    # Announced only once the server accepted the streaming list: a server
                    # without WatchList refuses it (422) and the paginated fallback then
                    # starts the one list there is, so it is counted and announced once.
                    health.relists += 1
                    yield [InitStart()]
                else:
                    # A watch that stays open is progress even on a quiet resource: without
                    # this, the backoff would keep growing after an outage until an event came.
                    stable = asyncio.get_running_loop().call_later(
                        min(STABLE_AFTER, timeout / 2), progress.progressed
                    )
                decoder = stream.decoder
                async for envs in stream.pieces():
                    if decoder.plain and not in_initial:
                        # Only ADDED/MODIFIED/DELETED: the bookkeeping once for the piece.
                        if decoder.resource_version:
                            self.resource_version = decoder.resource_version
                        delivered = True
                        decoder.count(envs, counts)
                        health.last_event_at = clock()
                        if health.state is not _HEALTHY or health.consecutive_failures:
                            progress.progressed()
                        if lazy:
                            piece = decoder.piece
                            yield [(Delete if e.type == "DELETED" else Apply)(
                                None, e.object.metadata or _NO_META, piece, strip, i)
                                for i, e in enumerate(envs)]
                        else:
                            if strip:
                                for e in envs:
                                    _strip(e.object)
                            yield [(Delete if e.type == "DELETED" else Apply)(e.object)
                                   for e in envs]
                        continue
                    batch: list[Event] = []
                    lines = decoder.piece.lines if lazy else [b""] * len(envs)
                    for env, line in zip(envs, lines, strict=False):
                        kind = env.type
                        obj: JSON | None = None if lazy else env.object
                        if kind == "ERROR":
                            if batch:
                                yield batch
                            raise error_from_status(
                                obj if obj is not None else decode_line_object(line),
                                method="WATCH", path=self.api.resource_name,
                            )
                        new_rv = decoder.rv_of(env)
                        if new_rv:
                            self.resource_version = new_rv
                        delivered = True
                        counts[kind] = counts.get(kind, 0) + 1
                        health.last_event_at = clock()
                        if kind == "BOOKMARK":
                            if in_initial:
                                if obj is None:
                                    obj = decode_line_object(line)
                                meta = obj.get("metadata") or {}
                                annotations = meta.get("annotations") or {}
                                if annotations.get(INITIAL_EVENTS_END) == "true":
                                    in_initial = False
                                    progress.progressed()
                                    batch.append(InitDone())
                            else:
                                progress.progressed()
                            continue
                        cls: type[_ObjectEvent]
                        if in_initial:
                            cls = InitApply
                        else:
                            if health.state is not _HEALTHY or health.consecutive_failures:
                                progress.progressed()
                            cls = Delete if kind == "DELETED" else Apply
                        if obj is None:
                            batch.append(cls(None, env.object.metadata or _NO_META, line, strip))
                        else:
                            if strip:
                                _strip(obj)
                            batch.append(cls(obj))
                    if batch:
                        yield batch
        finally:
            if stable is not None:
                stable.cancel()
        if in_initial:
            raise _ClosedEarly(
                "streaming list ended before the initial-events-end bookmark",
                reason="ClosedEarly", method="WATCH", path=self.api.resource_name,
            )
        lasted = clock() - opened
        if not delivered and lasted < min(timeout / 2, 5.0):
            # A clean close right after opening is no normal timeout: back off, don't spin.
            raise _ClosedEarly(
                f"the server closed the watch after {lasted:.1f} s without sending anything",
                reason="ClosedEarly", method="WATCH", path=self.api.resource_name,
            )
        progress.progressed()  # a watch that stayed open to its timeout is health


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

    ``backoff`` defaults to a fresh ``DefaultBackoff`` on the event loop's clock; pass a
    ``WatchHealth`` to share it with probes, or read ``.health`` on the returned object.
    ``resource_version`` starts from a version you already have (no initial list: only
    changes after it); if the server no longer has it (410), the watcher lists as usual.
    """
    return Watcher(api, config, backoff=backoff, health=health, clock=clock, rng=rng,
                   resource_version=resource_version)
