"""Predicates: which changes of an object are worth a reconcile.

A predicate maps an object to a value; a trigger with a predicate drops a modification
whose value equals the one it saw last for that object (kube-rs ``predicate_filter``,
controller-runtime's ``GenerationChangedPredicate``). A value of None always passes, and
so do a new object, a deletion and every object of a (re)list: a predicate only thins out
modifications, it never hides an object.

``Controller(api, predicate=wk.predicates.generation_changed)``: the controller's own
status write (which changes neither spec nor generation) no longer reconciles it again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

JSON = dict[str, Any]
Predicate = Callable[[JSON], Hashable | None]


def _metadata(obj: JSON) -> JSON:
    md = obj.get("metadata")
    return md if isinstance(md, dict) else {}


def generation_changed(obj: JSON) -> Hashable | None:
    """``metadata.generation``, which the API server bumps on spec changes only (not on
    status subresource or metadata writes); None (always passes) for objects without one,
    such as ConfigMaps. The start of a deletion (``deletionTimestamp`` set) passes too,
    so that finalizers run whether or not the server bumped the generation for it.

    A metadata-only change (labels, annotations, finalizers: ``wk.finalizer`` adding its
    own) is dropped; combine with ``finalizers_changed`` etc. through ``any_changed``
    where the next reconcile must follow such a write."""
    md = _metadata(obj)
    generation = md.get("generation")
    if generation is None:
        return None
    return (generation, bool(md.get("deletionTimestamp")))


def labels_changed(obj: JSON) -> Hashable | None:
    """``metadata.labels``: passes when a label is added, removed or changed."""
    return tuple(sorted((_metadata(obj).get("labels") or {}).items()))


def annotations_changed(obj: JSON) -> Hashable | None:
    """``metadata.annotations``: passes when an annotation is added, removed or changed."""
    return tuple(sorted((_metadata(obj).get("annotations") or {}).items()))


def finalizers_changed(obj: JSON) -> Hashable | None:
    """``metadata.finalizers``: with ``generation_changed`` in ``any_changed``, the write
    of ``wk.finalizer`` adding its finalizer triggers the reconcile that applies."""
    return tuple(_metadata(obj).get("finalizers") or ())


def any_changed(*predicates: Predicate) -> Predicate:
    """Passes when any of ``predicates`` would (and always when one of them says None)."""

    def predicate(obj: JSON) -> Hashable | None:
        values = tuple(p(obj) for p in predicates)
        return None if any(v is None for v in values) else values

    return predicate


class PredicateFilter:
    """One trigger's memory of the last value per object (its uid, else namespace/name)."""

    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate
        self._last: dict[Hashable, Hashable] = {}
        self.dropped = 0  # modifications filtered out, for tests and debugging

    @staticmethod
    def _key(obj: JSON) -> Hashable:
        md = _metadata(obj)
        return md.get("uid") or (md.get("namespace"), md.get("name"))

    def reset(self) -> None:
        """A (re)list begins: whatever follows is seen afresh."""
        self._last.clear()

    def seen(self, obj: JSON) -> None:
        """An object that passes whatever its value (a new one, or one of a relist)."""
        value = self.predicate(obj)
        if value is None:
            self._last.pop(self._key(obj), None)
        else:
            self._last[self._key(obj)] = value

    def changed(self, obj: JSON) -> bool:
        """Whether a modification of ``obj`` passes; remembers its value either way."""
        key, value = self._key(obj), self.predicate(obj)
        if value is None:
            self._last.pop(key, None)
            return True
        last = self._last.get(key, _UNSEEN)
        self._last[key] = value
        if last == value:
            self.dropped += 1
            return False
        return True

    def forget(self, obj: JSON) -> None:
        """The object was deleted."""
        self._last.pop(self._key(obj), None)


_UNSEEN = object()
