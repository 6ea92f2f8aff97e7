"""An in-memory cache of one resource type, kept in step by a ``Writer``.

Each object is kept compact (``cache/_entry.py``): its JSON compressed with a dictionary
trained on the store's own objects (``cache/_codec.py``), ``metadata.managedFields``
dropped (``Store.new(managed_fields=True)`` keeps them), and the few fields the runtime
reads without decoding (resourceVersion, labels, owner references, generation,
deletionTimestamp, index values) decoded and shared between objects. A read decodes: every
``get``/``list``/``by_index`` result is a new dict, so a caller that changes one changes
nothing cached. The newest few objects written are held as the dicts they came as and
handed out once, to the first reader (the reconcile their event triggered), for free. An
event not decoded yet (a lazy watcher's LIST item) is stored from its JSON bytes with no
dict built (``cache/_raw.py``); its dict is built by whoever reads it first.

A relist is collected aside and swapped in whole at ``InitDone``, so readers never see a
half-listed cache, and whatever vanished meanwhile is reported rather than silently
dropped; an object relisted at the resourceVersion it is cached at keeps its entry, so a
relist does not hold two copies of what did not change. ``ready`` goes false again while
the source watcher is degraded (client-go's HasSynced never does).
"""

from __future__ import annotations

import asyncio
import builtins
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any

import msgspec

from watchkeeper import meta
from watchkeeper.cache._codec import Codec
from watchkeeper.cache._entry import Entry, Head, Heads, Interner, Owner
from watchkeeper.cache._raw import cut_managed_fields, object_head, object_json
from watchkeeper.client import _json
from watchkeeper.client.objects import ObjectEvent
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

Fresh = JSON | ObjectEvent  # a fresh object, or the undecoded event it came in: read once
__all__ = ["Head", "Owner", "Store", "Writer"]

FRESH = 128  # objects held decoded, each handed out once: enough for the reconciles in flight
_new_ref = tuple.__new__
_intern = sys.intern
_encode_json = msgspec.json.Encoder().encode
_decode_json = msgspec.json.Decoder(dict[str, Any]).decode


def _tag(md: Any) -> bytes:
    """The resourceVersion a blob carries (b"": none, or longer than a tag holds; never so
    from kube-apiserver, whose versions are decimal revisions: such an entry is not reused)."""
    rv = md.get("resourceVersion") if isinstance(md, dict) else None
    if not isinstance(rv, str):
        return b""
    tag = rv.encode()
    return tag if len(tag) <= 255 else b""


def _add_fresh(fresh: dict[Key, Fresh], key: Key, obj: Fresh) -> None:
    fresh.pop(key, None)  # to the end: the oldest goes first
    fresh[key] = obj
    if len(fresh) > FRESH:
        del fresh[next(iter(fresh))]


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

    def _setup(self, key: KeyFn, managed_fields: bool = False) -> None:
        self._key = key
        self._named = key is meta.key  # keyed by name: a nameless object is refused
        self._managed_fields = managed_fields
        self._objects: dict[Key, Entry] = {}
        self._fresh: dict[Key, Fresh] = {}  # newest dicts written, each handed out once
        self._listing: dict[Key, Entry] | None = None  # a relist in progress (the Writer's)
        self._codec = Codec()
        self._interned = Interner()
        self._heads = Heads(self._interned)
        self._index_fns: dict[str, IndexFn] = {}
        self._indexes: dict[str, dict[str, set[Key]]] = {}
        self._synced = False
        self._health: WatchHealth | None = None
        self._changed = asyncio.Event()

    @staticmethod
    def new(key: KeyFn = meta.key, *, managed_fields: bool = False) -> tuple[Store, Writer]:
        """The one way to make a store: ``store, writer = Store.new()``. ``key(obj)`` names
        an object (default ``meta.key``: its ``ObjectRef(namespace, name)``).
        ``managed_fields=True`` keeps ``metadata.managedFields``, which the store otherwise
        drops from every object it is given (about half of a typical object, and read by
        nothing but server-side apply)."""
        store = Store.__new__(Store)
        store._setup(key, managed_fields)
        return store, Writer(store)

    # -- reading -------------------------------------------------------------------------

    def _decode(self, entry: Entry) -> JSON:
        raw = self._codec.decode(entry.blob)
        try:
            obj: JSON = _decode_json(raw)
        except RecursionError:  # deeper than msgspec nests: the iterative decoder
            obj = _json.decode_deep(raw)
        return obj

    def _read(self, key: Key, entry: Entry) -> JSON:
        obj = self._fresh.pop(key, None)
        if obj is None:
            return self._decode(entry)
        return obj if obj.__class__ is dict else obj.obj  # type: ignore[union-attr]

    def get(self, name: str, *, namespace: str | None = None) -> JSON | None:
        """The object named ``name`` in ``namespace`` (None: cluster-scoped), a dict of the
        caller's own. The namespace is a keyword, as in ``Api.get``, so the two can never be
        passed swapped."""
        key = (namespace, name)
        entry = self._objects.get(key)
        if entry is None:
            return None
        obj = self._fresh.pop(key, None)  # _read written out: a reconcile's every read
        if obj is None:
            return self._decode(entry)
        return obj if obj.__class__ is dict else obj.obj  # type: ignore[union-attr]

    def head(self, name: str, *, namespace: str | None = None) -> Head | None:
        """The object's labels, owner references, generation and deletionTimestamp, read
        without decoding it (shared: do not keep it for long)."""
        entry = self._objects.get((namespace, name))
        return None if entry is None else entry.head

    def resource_version(self, name: str, *, namespace: str | None = None) -> str | None:
        """The cached object's resourceVersion, without decoding it."""
        entry = self._objects.get((namespace, name))
        return None if entry is None else self._codec.tag(entry.blob).decode()

    def list(self) -> builtins.list[JSON]:
        """A snapshot of new dicts: safe to keep, change and iterate while the store
        changes. Decodes every object: prefer ``keys()`` and ``get`` for a few."""
        read = self._read
        return [read(k, e) for k, e in self._objects.items()]

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
        """Add an index: ``fn(obj)`` gives the values an object is found under. Each entry
        keeps its values, so an update or delete never calls ``fn`` on the old object."""
        if name in self._index_fns:
            raise ValueError(f"index {name!r} exists already")
        entries = {id(e): e for e in self._entries()}  # a relist shares unchanged entries
        values = {i: self._interned(tuple(fn(self._decode(e)))) for i, e in entries.items()}
        self._index_fns[name] = fn
        for i, entry in entries.items():
            entry.values = (*(entry.values or ()), values[i])
        self._indexes[name] = self._index_of(len(self._index_fns) - 1, self._objects)

    def by_index(self, name: str, value: str) -> builtins.list[JSON]:
        try:
            keys = self._indexes[name].get(value, ())
        except KeyError:
            raise KeyError(f"no index named {name!r}; add it with index_by()") from None
        objects, read = self._objects, self._read
        return [read(k, objects[k]) for k in keys if k in objects]

    @staticmethod
    def _index_of(i: int, objects: dict[Key, Entry]) -> dict[str, set[Key]]:
        index: dict[str, set[Key]] = {}
        for key, entry in objects.items():
            assert entry.values is not None
            for value in entry.values[i]:
                index.setdefault(value, set()).add(key)
        return index

    # -- private mutation (the Writer's) -------------------------------------------------

    def _keyed(self, obj: JSON) -> Key:
        """``obj``'s key; with ``meta.key``, an object without a name is refused rather
        than stored (or deleted) under ``(namespace, "")``. The watch stream and the LIST
        decoding refuse such objects as InvalidResponse, so only a caller's own event
        (``writer.apply(wk.Apply({...}))``) can come here without one."""
        if self._named:  # meta.key, written out: called for every object stored
            md = obj.get("metadata")
            if md.__class__ is dict:
                name, ns = md.get("name"), md.get("namespace")
                if name.__class__ is str and name and (ns is None or ns.__class__ is str):
                    return _new_ref(meta.ObjectRef, (_intern(ns) if ns else None, name))
        key = self._key(obj)
        if self._named:
            if not key[1]:
                raise ValueError(
                    "an object without metadata.name cannot be stored: every object would "
                    f"share the key {tuple(key)!r}"
                )
            if key[0]:  # one namespace string for all its objects, not one per object
                key = _new_ref(type(key), (_intern(key[0]), key[1]))
        return key

    def _entries(self) -> Iterator[Entry]:
        """Every entry held: the store's and a relist's in progress (they share some)."""
        listing = self._listing
        return chain(self._objects.values(), listing.values() if listing else ())

    def _make(self, obj: JSON, key: Key, old: Entry | None = None) -> Entry:
        """``obj`` as an entry; ``old`` itself when it is the same resourceVersion (a
        relisted object that did not change keeps the entry it had)."""
        md = obj.get("metadata")
        if isinstance(md, dict) and not self._managed_fields:
            md.pop("managedFields", None)
        tag = _tag(md)
        if old is not None and tag and self._codec.tag(old.blob) == tag:
            return old
        values = None
        if self._index_fns:
            interned = self._interned
            values = tuple(interned(tuple(fn(obj))) for fn in self._index_fns.values())
        try:
            raw = _encode_json(obj)
        except RecursionError:  # deeper than msgspec nests: the iterative encoder
            raw = _json.encode(obj)
        return self._entry(raw, tag, key, md, values)

    def _entry(self, raw: bytes, tag: bytes, key: Key, md: Any,
               values: tuple[tuple[str, ...], ...] | None) -> Entry:
        """The entry of an object's JSON: compressed (``_retrained`` is the rare path where
        this object completed the samples of a dictionary), its head fields interned."""
        codec = self._codec
        trainings = codec.trainings
        blob = codec.encode(raw, tag)
        if codec.trainings != trainings:
            blob = self._retrained(raw, tag)
        entry = Entry(key, blob, self._heads(md), values)
        interned = self._interned
        if interned.full():
            interned.rebuild(chain.from_iterable(
                (e.head, *(e.values or ())) for e in chain(self._entries(), (entry,))))
        return entry

    def _undecoded(self, event: ObjectEvent) -> tuple[Key, bytes, JSON] | None:
        """An undecoded event's key, its object's JSON as the store keeps it and the head
        fields of its metadata, without building the object's dict; None when it must be
        decoded (indexes or a key function to call, a live watch piece, bytes the cut
        below cannot be sure of: ``_raw.cut_managed_fields``)."""
        keys = event._key
        if not self._named or self._index_fns or keys is None:
            return None
        raw = object_json(event._line)
        if raw is None:
            return None
        metadata = object_head(raw)
        if metadata is None:
            return None
        managed = metadata.pop("managedFields", None)
        if managed is not None and (event._strip or not self._managed_fields):
            raw = cut_managed_fields(raw, managed)
            if raw is None:
                return None
            event._strip = True  # its dict, once read, as the eager path leaves it
        ns = keys.namespace
        return _new_ref(meta.ObjectRef, (_intern(ns) if ns else None, keys.name)), raw, metadata

    def _make_raw(self, raw: bytes, md: JSON, key: Key, old: Entry | None = None) -> Entry:
        """``_make`` for an object's JSON (``_undecoded``): compressed as it is."""
        tag = _tag(md)
        if old is not None and tag and self._codec.tag(old.blob) == tag:
            return old
        return self._entry(raw, tag, key, md, None)

    def _put_raw(self, key: Key, raw: bytes, md: JSON, event: ObjectEvent) -> None:
        old = self._objects.get(key)
        self._objects[key] = self._make_raw(raw, md, key if old is None else old.key)
        _add_fresh(self._fresh, key, event)

    def _retrained(self, raw: bytes, tag: bytes) -> bytes:
        """A dictionary was just trained: re-encode what was made without one, and
        ``raw`` (the object being stored) with it."""
        codec = self._codec
        for entry in self._entries():
            if entry.blob[0] == 0:
                entry.blob = codec.recode(entry.blob)
        codec.prune({e.blob[0] for e in self._entries()})
        return codec.encode(raw, tag)

    def _put(self, obj: JSON) -> None:
        key = self._keyed(obj)
        old = self._objects.get(key)
        entry = self._make(obj, key if old is None else old.key)
        if old is not None and self._index_fns:
            self._unindex(key, old)
        self._objects[key] = entry
        if entry.values is not None:
            for index, values in zip(self._indexes.values(), entry.values, strict=True):
                for value in values:
                    index.setdefault(value, set()).add(key)
        _add_fresh(self._fresh, key, obj)

    def _remove(self, obj: JSON) -> None:
        key = self._keyed(obj)
        old = self._objects.pop(key, None)
        self._fresh.pop(key, None)
        if old is not None and self._index_fns:
            self._unindex(key, old)

    def _unindex(self, key: Key, entry: Entry) -> None:
        if entry.values is None:
            return
        for index, values in zip(self._indexes.values(), entry.values, strict=True):
            for value in values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]

    def _swap(self, objects: dict[Key, Entry], fresh: dict[Key, Fresh]) -> builtins.list[JSON]:
        """Replace everything at once; returns the objects that vanished."""
        old = self._objects
        vanished = [self._read(key, e) for key, e in old.items() if key not in objects]
        self._objects = objects
        self._fresh = fresh
        for i, name in enumerate(self._index_fns):
            self._indexes[name] = self._index_of(i, objects)
        self._synced = True
        self._notify()
        return vanished

    def _notify(self) -> None:
        self._changed.set()


class Writer:
    """Write side: applies watcher events to its store, returns what to pass on."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._fresh: dict[Key, Fresh] = {}  # a relist's newest dicts, the store's at InitDone

    @property
    def _buffer(self) -> dict[Key, Entry] | None:
        """The relist in progress (None: none is); setting None abandons it."""
        return self.store._listing

    @_buffer.setter
    def _buffer(self, value: dict[Key, Entry] | None) -> None:
        self.store._listing = value
        self._fresh = {}

    def listing(self) -> builtins.list[JSON] | None:
        """The objects of the relist in progress, decoded (None: no relist is)."""
        listing = self.store._listing
        if listing is None:
            return None
        return [self.store._decode(e) for e in listing.values()]

    def bind_health(self, health: WatchHealth) -> None:
        """Make ``store.ready`` follow this watcher's health."""
        self.store._health = health
        health.listeners.append(self.store._notify)  # ready changes with health, event or not

    def apply(self, event: Event) -> list[Event]:
        store = self.store
        if event.__class__ is InitApply:  # a relist's every object: no match statement
            assert isinstance(event, InitApply)  # (its five class patterns cost ~0.4 us)
            got = store._undecoded(event) if event._line is not None else None
            if got is not None:
                self._init_apply_raw(event, *got)
            else:
                self._init_apply(event.obj)
            return [event]
        if event.__class__ is Apply:
            assert isinstance(event, Apply)
            got = store._undecoded(event) if event._line is not None else None
            if got is not None:
                store._put_raw(*got, event)
                if not store.ready:
                    store._notify()
                return [event]
        match event:
            case Apply(obj):
                store._put(obj)
                if not store.ready:
                    store._notify()
            case Delete(obj):
                store._remove(obj)
            case InitStart():
                self._buffer = {}
            case InitApply(obj):  # a subclass of it
                self._init_apply(obj)
            case InitDone():
                listing, fresh = store._listing, self._fresh
                self._buffer = None
                vanished = store._swap(listing if listing is not None else {}, fresh)
                return [*(Delete(obj) for obj in vanished), event]
            case WatchError():
                store._notify()
        return [event]

    def _init_apply_raw(self, event: InitApply, key: Key, raw: bytes, md: JSON) -> None:
        store = self.store
        listing = store._listing
        if listing is None:
            listing = self._buffer = {}
        old = store._objects.get(key)
        if old is not None:
            key = old.key
        listing[key] = store._make_raw(raw, md, key, old)
        _add_fresh(self._fresh, key, event)

    def _init_apply(self, obj: JSON) -> None:
        store = self.store
        listing = store._listing
        if listing is None:
            listing = self._buffer = {}
        key = store._keyed(obj)
        old = store._objects.get(key)
        if old is not None:
            key = old.key  # one key object for both generations
        listing[key] = store._make(obj, key, old)
        fresh = self._fresh  # _add_fresh written out
        fresh.pop(key, None)
        fresh[key] = obj
        if len(fresh) > FRESH:
            del fresh[next(iter(fresh))]
