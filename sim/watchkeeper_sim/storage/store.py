"""The simulator's object store: etcd + watch-cache semantics without HTTP.

CONTRACT (the registry and the HTTP layer code against this):
- One global resourceVersion counter (like etcd's revision): every write bumps it by one and
  the written object carries it as a decimal string in metadata.resourceVersion.
- Errors are raised as ``StoreError(status)`` where ``status`` is the full Kubernetes ``Status``
  dict with the real apiserver's wording (see tests/fixtures/apiserver-1.28/*.json).
- A bounded history of changes (by count and by age, on the injectable ``clock``) serves
  watches from an old resourceVersion, Exact lists and continue tokens; anything older than
  the history is Gone (410). ``compact()`` drops the whole history at once.
- All methods except ``wait_for_rv`` are synchronous, so under asyncio each one is atomic:
  a watch registered by ``subscribe`` can never miss or duplicate a change.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import bisect
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from watchkeeper_sim import status as _status
from watchkeeper_sim.model import JSON, Key, ResourceType
from watchkeeper_sim.storage.clone import clone
from watchkeeper_sim.storage.selectors import match_all

ObjKey = tuple[str, str]  # (namespace or "", name)


class StoreError(Exception):
    """A request the store refuses; ``status`` is the Status body the server sends."""

    def __init__(self, status: JSON, headers: dict[str, str] | None = None) -> None:
        super().__init__(status.get("message", ""))
        self.status = status
        self.headers = headers or {}

    @property
    def code(self) -> int:
        return int(self.status.get("code", 500))


class RVTooLarge(StoreError):
    """The requested resourceVersion is in the future; the server waits, then answers 504."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(_status.too_large_rv(requested, current), {"Retry-After": "1"})
        self.requested = requested


@dataclass
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JSON
    resource_version: int


@dataclass
class ListResult:
    items: list[JSON]
    resource_version: str
    continue_token: str | None = None
    remaining_item_count: int | None = None


@dataclass
class Change:
    """One write in the history; ``prev`` is the state before it (None for a create)."""

    rv: int
    time: float
    key: Key
    type: str  # ADDED, MODIFIED, DELETED
    obj: JSON
    prev: JSON | None
    namespace: str = ""  # of ``obj``, kept so each watch need not look it up again


def _rv_of(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def obj_key(obj: JSON) -> ObjKey:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


Matcher = Callable[[JSON], bool]


@dataclass(eq=False)
class Subscription:
    """A live watch: queued events, then ``None`` when the store ends the watch.

    The HTTP layer drains ``initial`` first, then awaits ``queue.get()``. ``close()`` must be
    called when the client goes away.
    """

    store: ObjectStore
    rt: ResourceType
    namespace: str | None
    match: Matcher
    initial: list[WatchEvent] = field(default_factory=list)
    queue: asyncio.Queue[WatchEvent | None] = field(default_factory=asyncio.Queue)
    start_rv: int = 0  # the RV the initial state / replay reaches
    closed: bool = False
    rt_key: Key = field(init=False)

    def __post_init__(self) -> None:
        self.rt_key = self.rt.key

    def translate(self, ch: Change) -> WatchEvent | None:
        """What this watcher sees of a change: selector transitions become ADDED/DELETED."""
        if ch.key != self.rt_key:
            return None
        if self.namespace is not None and ch.namespace != self.namespace:
            return None
        if self.match is match_all:  # no selectors: every change is seen as it is
            return WatchEvent(ch.type, ch.obj, ch.rv)
        if ch.type == "ADDED":
            return WatchEvent("ADDED", ch.obj, ch.rv) if self.match(ch.obj) else None
        if ch.type == "DELETED":
            return WatchEvent("DELETED", ch.obj, ch.rv) if self.match(ch.obj) else None
        now = self.match(ch.obj)
        before = ch.prev is not None and self.match(ch.prev)
        if now and before:
            return WatchEvent("MODIFIED", ch.obj, ch.rv)
        if now:
            return WatchEvent("ADDED", ch.obj, ch.rv)
        if before and ch.prev is not None:
            # like the watch cache: the old object, stamped with the new resourceVersion
            gone = clone(ch.prev)
            gone.setdefault("metadata", {})["resourceVersion"] = str(ch.rv)
            return WatchEvent("DELETED", gone, ch.rv)
        return None

    def end(self) -> None:
        """End the watch cleanly from the server side."""
        if not self.closed:
            self.queue.put_nowait(None)
        self.close()

    def close(self) -> None:
        self.closed = True
        self.store._subs.discard(self)


def _end_all(subs: list[Subscription]) -> None:
    for sub in subs:
        sub.end()


def encode_continue(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    """(rv, start key) from a continue token; 400 with apimachinery's wording when invalid."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for i, c in enumerate(token):
        if c not in alphabet:
            raise StoreError(_status.bad_request(
                f"invalid continue token: continue key is not valid: illegal base64 data at "
                f"input byte {i}"))
    if len(token) % 4 == 1:
        raise StoreError(_status.bad_request(
            f"invalid continue token: continue key is not valid: illegal base64 data at input "
            f"byte {len(token) - 1}"))
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        rv = int(data["rv"])
        start = str(data["start"])
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("unsupported version")
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError,
            binascii.Error) as exc:  # rv 1e999: OverflowError; [[[[...: RecursionError
        raise StoreError(_status.bad_request(
            f"invalid continue token: continue key is not valid: {exc}")) from None
    return rv, start


def parse_rv(value: str) -> int:
    """A resourceVersion query parameter as an int; 500 like the apiserver (file 060)."""
    try:
        rv = int(value)
        if rv < 0:
            raise ValueError
        return rv
    except ValueError:
        raise StoreError(_status.internal(
            f'resourceVersion: Invalid value: "{value}": strconv.ParseUint: parsing '
            f'"{value}": invalid syntax')) from None


class ObjectStore:
    """Objects by (group, plural, namespace, name); see the module docstring for the contract."""

    def __init__(
        self,
        history_size: int = 10_000,
        history_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.history_size = history_size
        self.history_age = history_age  # seconds of change history kept for watches
        self.clock = clock
        self.types: dict[tuple[str, str, str], ResourceType] = {}  # (group, version, plural)
        self.rv = 0
        self.history_start = 0  # every change with rv > history_start is in the history
        self._objects: dict[Key, dict[ObjKey, JSON]] = {}
        # the resourceVersion of the last write to each resource, so readers that derive
        # state from one resource (the RBAC authorizer) can tell it is unchanged cheaply
        self.changed_at: dict[Key, int] = {}
        self.clears = 0  # how often clear() emptied everything
        self._history: deque[Change] = deque()
        self._sorted_keys: dict[tuple[Key, str | None, int], list[tuple[str, ObjKey]]] = {}
        self._subs: set[Subscription] = set()
        self._changed: asyncio.Event | None = None

    # ---- types -----------------------------------------------------------------------------

    def register(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt
        self._objects.setdefault(rt.key, {})

    def unregister(self, group: str, plural: str) -> None:
        """Forget every version of a resource (its objects must be gone already)."""
        for k in [k for k in self.types if (k[0], k[2]) == (group, plural)]:
            del self.types[k]
        self._objects.pop((group, plural), None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def groups(self) -> set[str]:
        return {g for g, _, _ in self.types}

    # ---- reads -----------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> JSON:
        obj = self._objects.get(rt.key, {}).get((namespace, name))
        if obj is None:
            raise StoreError(_status.not_found(rt.plural, rt.group, name))
        return clone(obj)

    def peek(self, rt: ResourceType, namespace: str, name: str) -> JSON | None:
        """The stored object itself (no copy) or None; callers must not mutate it."""
        return self._objects.get(rt.key, {}).get((namespace, name))

    def objects(self, rt: ResourceType, namespace: str | None = None) -> list[JSON]:
        """Deep copies of every object of a type (optionally in one namespace), key order."""
        objs = self._objects.get(rt.key, {})
        keys = sorted(k for k in objs if namespace is None or k[0] == namespace)
        return [clone(objs[k]) for k in keys]

    def every(self) -> list[tuple[Key, JSON]]:
        """Every stored object itself (no copies; callers must not mutate them)."""
        return [(key, obj) for key, objs in self._objects.items() for obj in objs.values()]

    def _snapshot(self, key: Key, rv: int) -> dict[ObjKey, JSON]:
        """The objects of one resource as they were at ``rv``, rebuilt by undoing history."""
        if rv < self.history_start:
            raise StoreError(
                _status.expired("The resourceVersion for the provided list is too old.")
            )
        state = dict(self._objects.get(key, {}))
        for ch in reversed(self._history):
            if ch.rv <= rv:
                break
            if ch.key != key:
                continue
            k = obj_key(ch.obj)
            if ch.prev is None:
                state.pop(k, None)
            else:
                state[k] = ch.prev
        return state

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Matcher,
        *,
        resource_version: str = "",
        rv_match: str = "",
        limit: int = 0,
        continue_token: str = "",
        filtered: bool = False,
    ) -> ListResult:
        """A LIST with apiserver 1.28 resourceVersion / paging semantics.

        ``filtered`` says a selector is in use (then remainingItemCount is left out, as the
        apiserver does). Raises RVTooLarge for a future RV (the caller waits and retries).
        The items are the stored objects: read them, never modify them.
        """
        self._trim()
        start = ""
        at: int | None = None  # None = latest
        if continue_token:
            if resource_version:
                raise StoreError(_status.bad_request(
                    "specifying resource version is not allowed when using continue"))
            tok_rv, start = decode_continue(continue_token)
            if tok_rv != -1:
                if tok_rv < self.history_start:
                    fresh = encode_continue(-1, start)
                    raise StoreError(_status.expired(_EXPIRED_CONTINUE, fresh))
                at = min(tok_rv, self.rv)
        elif resource_version not in ("", "0"):
            n = parse_rv(resource_version)
            if n > self.rv:
                raise RVTooLarge(n, self.rv)
            if rv_match == "Exact" or (rv_match == "" and limit > 0):
                at = n
        elif resource_version == "0":
            limit = 0  # served from the watch cache, which ignores limit in 1.28 (file 036)
        snap_rv = self.rv if at is None else at
        state = self._objects.get(rt.key, {}) if at is None else self._snapshot(rt.key, at)
        all_ns = rt.namespaced and namespace is None

        def sort_key(k: ObjKey) -> str:
            return f"{k[0]}/{k[1]}" if all_ns else k[1]

        # The sorted keys of one (type, namespace, version) serve every page of a paginated
        # LIST: sorting all keys again per page was most of its cost.
        memo_key = (rt.key, namespace, snap_rv)
        ordered = self._sorted_keys.get(memo_key)
        if ordered is None:
            ordered = sorted(
                (sort_key(k), k) for k in state if namespace is None or k[0] == namespace
            )
            self._sorted_keys = {memo_key: ordered}  # keep one: the LIST being paged now
        first = bisect.bisect_left(ordered, (start,)) if start else 0
        selected = [(sk, state[k]) for sk, k in itertools.islice(ordered, first, None)
                    if match(state[k])]
        page = selected[:limit] if limit > 0 else selected
        # The stored objects themselves, not copies: a write replaces an object, never edits
        # it, and the HTTP layer only reads them (copying every item was most of a LIST).
        result = ListResult(items=[obj for _, obj in page], resource_version=str(snap_rv))
        if limit > 0 and len(selected) > limit:
            result.continue_token = encode_continue(snap_rv, page[-1][0] + "\x00")
            if not filtered:
                result.remaining_item_count = len(selected) - limit
        return result

    # ---- writes ----------------------------------------------------------------------------

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _record(self, key: Key, type_: str, obj: JSON, prev: JSON | None) -> None:
        self.changed_at[key] = self.rv
        ch = Change(self.rv, self.clock(), key, type_, obj, prev, obj_key(obj)[0])
        self._history.append(ch)
        self._trim()
        for sub in list(self._subs):
            ev = sub.translate(ch)
            if ev is not None:
                sub.queue.put_nowait(ev)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def insert(self, rt: ResourceType, obj: JSON) -> JSON:
        """Store a new object (metadata complete except resourceVersion); ADDED."""
        k = obj_key(obj)
        objs = self._objects.setdefault(rt.key, {})
        if k in objs:
            raise StoreError(_status.already_exists(rt.plural, rt.group, k[1]))
        stored = clone(obj)
        stored["metadata"]["resourceVersion"] = str(self._next_rv())
        objs[k] = stored
        self._record(rt.key, "ADDED", stored, None)
        return clone(stored)

    def replace(self, rt: ResourceType, obj: JSON, expected_rv: str = "") -> JSON:
        """Overwrite an existing object; 409 Conflict when ``expected_rv`` is stale; MODIFIED."""
        k = obj_key(obj)
        objs = self._objects.get(rt.key, {})
        prev = objs.get(k)
        if prev is None:
            raise StoreError(_status.not_found(rt.plural, rt.group, k[1]))
        if expected_rv and expected_rv != _rv_of(prev):
            raise StoreError(_status.conflict(rt.plural, rt.group, k[1], _status.STALE))
        stored = clone(obj)
        stored["metadata"]["resourceVersion"] = str(self._next_rv())
        objs[k] = stored
        self._record(rt.key, "MODIFIED", stored, prev)
        return clone(stored)

    def remove(self, rt: ResourceType, namespace: str, name: str, last: JSON | None = None) -> JSON:
        """Delete; watchers get DELETED with ``last`` (default: the stored object), new RV."""
        objs = self._objects.get(rt.key, {})
        prev = objs.pop((namespace, name), None)
        if prev is None:
            raise StoreError(_status.not_found(rt.plural, rt.group, name))
        gone = clone(last if last is not None else prev)
        gone["metadata"]["resourceVersion"] = str(self._next_rv())
        self._record(rt.key, "DELETED", gone, prev)
        return clone(gone)

    # ---- history ---------------------------------------------------------------------------

    def _trim(self) -> None:
        now = self.clock()
        h = self._history
        while h and (len(h) > self.history_size or now - h[0].time > self.history_age):
            self.history_start = max(self.history_start, h.popleft().rv)

    def compact(self) -> None:
        """Drop all history now: every older resourceVersion becomes Gone."""
        self._history.clear()
        self.history_start = max(self.history_start, self.rv)  # never below a clear()'s

    async def wait_for_rv(self, rv: int, timeout: float) -> bool:
        """Wait until the store reaches ``rv``; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.rv < rv:
            left = deadline - loop.time()
            if left <= 0:
                return False
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return False
        return True

    # ---- watches ---------------------------------------------------------------------------

    def subscribe(
        self,
        rt: ResourceType,
        namespace: str | None,
        match: Matcher,
        *,
        since: int | None,
    ) -> Subscription:
        """Register a watch.

        ``since=None``: ``initial`` holds ADDED for every matching object, then live changes.
        ``since=n``: ``initial`` replays the history after n; 410 Expired (as a StoreError
        with the watch wording) when n is older than the history; RVTooLarge if in the future.
        """
        self._trim()
        sub = Subscription(self, rt, namespace, match, start_rv=self.rv)
        if since is None:
            for obj in self.objects(rt, namespace):
                if match(obj):
                    sub.initial.append(WatchEvent("ADDED", obj, int(_rv_of(obj) or 0)))
        else:
            if since > self.rv:
                raise RVTooLarge(since, self.rv)
            if since < self.history_start:
                raise StoreError(_status.expired(
                    f"too old resource version: {since} ({self.history_start})"))
            history = self._history
            newer = 0  # how many changes at the end are after ``since``
            for ch in reversed(history):
                if ch.rv <= since:
                    break
                newer += 1
            first = len(history) - newer
            translate, initial = sub.translate, sub.initial
            for ch in itertools.islice(history, first, None):
                ev = translate(ch)
                if ev is not None:
                    initial.append(ev)
        self._subs.add(sub)
        return sub

    def end_watches(self, key: Key | None = None, delay: float = 0.0) -> None:
        """End open watches (of one resource, or all) cleanly; after ``delay`` seconds, if
        given and a loop runs (only the watches open now: later ones are not affected)."""
        subs = [sub for sub in self._subs if key is None or sub.rt.key == key]
        try:
            loop = asyncio.get_running_loop() if delay > 0 else None
        except RuntimeError:
            loop = None
        if loop is not None:
            loop.call_later(delay, _end_all, subs)
            return
        _end_all(subs)

    def clear(self) -> None:
        """Forget every object and the history (for a restart without data); keeps the RV.

        No resourceVersion issued before this point names a state this store can serve any
        more: a watch resuming from one (even the latest, from a caught-up client) must get
        410 Expired and relist, as from a new apiserver whose watch cache starts after it
        (062); without that, a client would keep every wiped object in its cache forever.
        """
        for objs in self._objects.values():
            objs.clear()
        self.clears += 1
        self.compact()
        self.history_start = self.rv + 1


_EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)
