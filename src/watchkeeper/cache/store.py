"""An in-memory cache of one resource type, kept in step by a ``Writer``.

Objects are stored once; indexes hold keys, not copies. A relist is collected aside and
swapped in whole at ``InitDone``, so readers never see a half-listed cache, and whatever
vanished meanwhile is reported rather than silently dropped. ``ready`` goes false again
while the source watcher is degraded (client-go's HasSynced never does).
"""

from __future__ import annotations

import asyncio
import builtins
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from watchkeeper import meta
from watchkeeper.watcher import (
    Apply,
    Delete,
    Event,
    InitApply,
    InitDone,
    InitStart,
    WatchError,
    WatchHealth,
    WatchState,
)

JSON = dict[str, Any]
Key = tuple[str | None, str]
KeyFn = Callable[[JSON], Key]
IndexFn = Callable[[JSON], Iterable[str]]

__all__ = ["Store", "Writer"]


class Store:
    """Read side. Create with ``store, writer = Store.new()``, which also returns the only
    ``Writer``; ``Store()`` alone is deprecated (nothing would ever fill it)."""

    def __init__(self, key: KeyFn = meta.key) -> None:
        warnings.warn(
            "Store() is deprecated: use `store, writer = Store.new()`, which also returns "
            "the Writer that fills the store",
            DeprecationWarning, stacklevel=2,
        )
        self._setup(key)

    def _setup(self, key: KeyFn) -> None:
        self._key = key
        self._named = key is meta.key  # keyed by name: a nameless object is refused
        self._objects: dict[Key, JSON] = {}
        self._index_fns: dict[str, IndexFn] = {}
        self._indexes: dict[str, dict[str, set[Key]]] = {}
        self._synced = False
        self._health: WatchHealth | None = None
        self._changed = asyncio.Event()

    @staticmethod
    def new(key: KeyFn = meta.key) -> tuple[Store, Writer]:
        """The one way to make a store: ``store, writer = Store.new()``. ``key(obj)`` names
        an object (default ``meta.key``: its ``ObjectRef(namespace, name)``)."""
        store = Store.__new__(Store)
        store._setup(key)
        return store, Writer(store)

    # -- reading -------------------------------------------------------------------------

    def get(self, name: str, *, namespace: str | None = None) -> JSON | None:
        """The object named ``name`` in ``namespace`` (None: cluster-scoped). The namespace
        is a keyword, as in ``Api.get``, so the two can never be passed swapped."""
        return self._objects.get((namespace, name))

    def list(self) -> builtins.list[JSON]:
        """A snapshot: safe to keep and iterate while the store changes."""
        return list(self._objects.values())

    def __iter__(self) -> Iterator[JSON]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def keys(self) -> builtins.list[Key]:
        return list(self._objects)

    @property
    def ready(self) -> bool:
        """Listed at least once and the source watcher is not degraded right now."""
        healthy = self._health is None or self._health.state is not WatchState.DEGRADED
        return self._synced and healthy

    async def wait_until_ready(self, timeout: float | None = None) -> None:
        """Wait for ``ready``; raises TimeoutError after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            while not self.ready:
                self._changed.clear()
                await self._changed.wait()  # set by the writer and by health changes

    # -- indexes -------------------------------------------------------------------------

    def index_by(self, name: str, fn: IndexFn) -> None:
        """Add an index: ``fn(obj)`` gives the values an object is found under."""
        if name in self._index_fns:
            raise ValueError(f"index {name!r} exists already")
        self._index_fns[name] = fn
        index: dict[str, set[Key]] = {}
        for key, obj in self._objects.items():
            for value in fn(obj):
                index.setdefault(value, set()).add(key)
        self._indexes[name] = index

    def by_index(self, name: str, value: str) -> builtins.list[JSON]:
        try:
            keys = self._indexes[name].get(value, ())
        except KeyError:
            raise KeyError(f"no index named {name!r}; add it with index_by()") from None
        return [self._objects[k] for k in keys if k in self._objects]

    # -- private mutation (the Writer's) -------------------------------------------------

    def _keyed(self, obj: JSON) -> Key:
        """``obj``'s key; with ``meta.key``, an object without a name is refused rather
        than stored (or deleted) under ``(namespace, "")``. The watch stream and the LIST
        decoding refuse such objects as InvalidResponse, so only a caller's own event
        (``writer.apply(wk.Apply({...}))``) can come here without one."""
        key = self._key(obj)
        if self._named and not key[1]:
            raise ValueError(
                "an object without metadata.name cannot be stored: every object would "
                f"share the key {tuple(key)!r}"
            )
        return key

    def _put(self, obj: JSON) -> None:
        key = self._keyed(obj)
        old = self._objects.get(key)
        if old is not None and self._index_fns:
            self._unindex(key, old)
        self._objects[key] = obj
        for name, fn in self._index_fns.items():
            for value in fn(obj):
                self._indexes[name].setdefault(value, set()).add(key)

    def _remove(self, obj: JSON) -> None:
        key = self._keyed(obj)
        old = self._objects.pop(key, None)
        if old is not None and self._index_fns:
            self._unindex(key, old)

    def _unindex(self, key: Key, obj: JSON) -> None:
        for name, fn in self._index_fns.items():
            index = self._indexes[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _swap(self, objects: dict[Key, JSON]) -> builtins.list[JSON]:
        """Replace everything at once; returns the objects that vanished."""
        vanished = [obj for key, obj in self._objects.items() if key not in objects]
        self._objects = objects
        for name, fn in self._index_fns.items():
            index: dict[str, set[Key]] = {}
            for key, obj in objects.items():
                for value in fn(obj):
                    index.setdefault(value, set()).add(key)
            self._indexes[name] = index
        self._synced = True
        self._notify()
        return vanished

    def _notify(self) -> None:
        self._changed.set()


class Writer:
    """Write side: applies watcher events to its store, returns what to pass on."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._buffer: dict[Key, JSON] | None = None

    def bind_health(self, health: WatchHealth) -> None:
        """Make ``store.ready`` follow this watcher's health."""
        self.store._health = health
        health.listeners.append(self.store._notify)  # ready changes with health, event or not

    def apply(self, event: Event) -> list[Event]:
        store = self.store
        match event:
            case Apply(obj):
                store._put(obj)
                if not store.ready:
                    store._notify()
            case Delete(obj):
                store._remove(obj)
            case InitStart():
                self._buffer = {}
            case InitApply(obj):
                if self._buffer is None:
                    self._buffer = {}
                self._buffer[store._keyed(obj)] = obj
            case InitDone():
                vanished = store._swap(self._buffer if self._buffer is not None else {})
                self._buffer = None
                return [*(Delete(obj) for obj in vanished), event]
            case WatchError():
                store._notify()
        return [event]
