"""One cached object in compact form: its compressed JSON and the fields the runtime reads
without decoding it (``Head``), the repeated ones shared between objects.

Per object a Store keeps an ``Entry`` (4 fields, 48 bytes), its blob (which holds the
resourceVersion too) and its key; the ``Head`` (labels, owner references, generation,
deletionTimestamp) and the index values are interned by value, so the Pods of one
ReplicaSet, or ConfigMaps labelled alike, share one of each instead of a dict apiece.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, NamedTuple

import msgspec

__all__ = ["Entry", "Head", "Heads", "Interner", "Owner", "head_of"]

JSON = dict[str, Any]


class Owner(NamedTuple):
    """One owner reference, as the runtime maps it."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


class Head(NamedTuple):
    """The decoded fields of a cached object (its metadata the runtime reads often)."""

    labels: tuple[str, ...]  # key, value, key, value... in the object's order
    owners: tuple[Owner, ...]
    generation: int | None
    deletion_timestamp: str | None

    def label_map(self) -> dict[str, str]:
        it = iter(self.labels)
        return dict(zip(it, it, strict=True))


class Entry(msgspec.Struct, gc=False, eq=False):
    """What a Store keeps per object: its key (the very tuple its store is keyed by, so a
    relist files the entry under it again instead of under a new copy), its blob
    (``cache/_codec.py``: the resourceVersion is the blob's tag), its ``Head``, and per
    index the values it is found under.

    A msgspec Struct: built in C (~0.1 against ~0.4 us for a Python ``__init__``, once per
    object stored) and, with ``gc=False``, untracked by the cycle collector (it holds only
    tuples and bytes, so it is never part of a cycle) and 48 bytes instead of 64."""

    key: Any
    blob: bytes
    head: Head
    values: tuple[tuple[str, ...], ...] | None


def _s(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _owner(ref: Any) -> Owner:
    if not isinstance(ref, dict):
        return Owner("", "", "", "", False)
    return Owner(_s(ref.get("apiVersion")), _s(ref.get("kind")), _s(ref.get("name")),
                 _s(ref.get("uid")), ref.get("controller") is True)


_NO_HEAD = Head((), (), None, None)
_STR = {str}
_chain = chain.from_iterable


def head_of(meta: Any) -> Head:
    """The ``Head`` of an object's metadata (whatever a hostile server put there: only
    strings, ints and booleans are kept, so the result is always hashable)."""
    if not isinstance(meta, dict):
        return _NO_HEAD
    labels = meta.get("labels")
    flat: tuple[str, ...] = ()
    if labels.__class__ is dict and labels:
        flat = tuple(_chain(labels.items()))  # in C: called for every object stored
        if set(map(type, flat)) != _STR:
            flat = tuple(map(_s, flat))
    refs = meta.get("ownerReferences")
    owners = tuple(map(_owner, refs)) if isinstance(refs, list) and refs else ()
    gen = meta.get("generation")
    deleting = meta.get("deletionTimestamp")
    if not flat and not owners and gen is None and deleting is None:
        return _NO_HEAD
    return Head(flat, owners, gen if type(gen) is int else None,
                deleting if isinstance(deleting, str) else None)


class Interner:
    """One shared instance per distinct value (heads, index values, namespaces). The table
    is rebuilt from what is still in use when it has doubled (``rebuild``), so values of
    objects long gone do not pile up."""

    def __init__(self) -> None:
        self._table: dict[Any, Any] = {}
        self._limit = 1024

    def __call__(self, value: Any) -> Any:
        table = self._table
        got = table.get(value)
        if got is None:
            table[value] = got = value
        return got

    def full(self) -> bool:
        return len(self._table) > self._limit

    def rebuild(self, live: Any) -> None:
        """Keep only ``live`` values (an iterable of what is still referenced)."""
        self._table = {v: v for v in live}
        self._limit = max(1024, 2 * len(self._table))


class Heads:
    """``head_of``, interned, remembering the last metadata it was given: consecutive objects
    (a LIST page of one Deployment's Pods, ConfigMaps labelled alike) mostly have the same
    labels and owners, and comparing them costs a fraction of building and interning a
    ``Head`` (about 1 us of the ~8 a stored object costs)."""

    def __init__(self, interned: Interner) -> None:
        self._interned = interned
        self._last: tuple[Any, Any, Any, Any] = (None, None, None, None)  # copies of inputs
        self._head = _NO_HEAD

    def __call__(self, meta: Any) -> Head:
        if meta.__class__ is not dict:
            return _NO_HEAD
        labels, refs = meta.get("labels"), meta.get("ownerReferences")
        gen, deleting = meta.get("generation"), meta.get("deletionTimestamp")
        last = self._last
        if labels == last[0] and refs == last[1] and gen == last[2] \
                and gen.__class__ is last[2].__class__ and deleting == last[3]:
            return self._head
        head: Head = self._interned(head_of(meta))
        # Copies: the object's own dicts are the caller's to change once it is stored.
        self._last = (dict(labels) if labels.__class__ is dict else None,
                      [dict(r) if r.__class__ is dict else r for r in refs]
                      if refs.__class__ is list else None,
                      gen, deleting)
        self._head = head
        return head
