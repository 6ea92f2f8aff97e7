"""Conversions between the versions of one resource, written in Python.

``@wk.conversion(WebsiteV1alpha1, WebsiteV1)`` registers a function from one version's class
to another's; ``wk.convert(obj, WebsiteV1)`` converts, directly or through a chain of
registered steps (through the storage version, hub and spoke, when each spoke converts to
and from it). The function converts spec and status; metadata is copied by ``convert``.

Nothing is lost on a round trip: after a step A -> B, the step back B -> A (which must be
registered) is run on the result, and whatever of A's spec and status it does not give
back (a field B has no place for) is kept in the annotation
``conversion.watchkeeper.io/<A's version>`` of the B object, as Kubernetes' own
conversions keep fields in annotations. Converting B back to A restores those fields and
drops the annotation. ``WebhookServer.conversion`` (``watchkeeper.webhooks``) serves these
functions as the CRD's conversion webhook; without one, the API server converts by
rewriting ``apiVersion`` only (CRD strategy ``None``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from watchkeeper.client.models import ObjectMeta, from_dict, to_dict
from watchkeeper.typed.errors import SchemaError
from watchkeeper.typed.models import CustomResource

__all__ = ["CONVERSION_ANNOTATION", "conversion", "convert"]

CONVERSION_ANNOTATION = "conversion.watchkeeper.io/"
"""+ the version whose fields the annotation keeps."""

A = TypeVar("A", bound=CustomResource)
B = TypeVar("B", bound=CustomResource)
T = TypeVar("T", bound=CustomResource)
JSON = dict[str, Any]
Step = Callable[[Any], Any]

_STEPS: dict[tuple[type[CustomResource], type[CustomResource]], Step] = {}
_PARTS = ("spec", "status")  # what a conversion function converts; metadata is copied


def conversion(source: type[A], target: type[B]) -> Callable[[Callable[[A], B]], Callable[[A], B]]:
    """Register ``fn(obj: source) -> target``: two versions of one resource (same group and
    kind, other versions). Register both directions: the way back is what tells which
    fields the target cannot hold."""
    s, t = source.identity(), target.identity()
    if (s.group, s.kind) != (t.group, t.kind) or s.version == t.version:
        raise SchemaError(f"@conversion({source.__qualname__}, {target.__qualname__}): not two "
                          f"versions of one resource ({s.api_version} {s.kind} -> "
                          f"{t.api_version} {t.kind})")

    def register(fn: Callable[[A], B]) -> Callable[[A], B]:
        _STEPS[(source, target)] = fn
        return fn

    return register


def _path(source: type[CustomResource], target: type[CustomResource]
          ) -> list[type[CustomResource]]:
    """The shortest chain of registered steps from ``source`` to ``target``."""
    frontier: list[list[type[CustomResource]]] = [[source]]
    seen = {source}
    while frontier:
        nxt: list[list[type[CustomResource]]] = []
        for chain in frontier:
            for (a, b) in _STEPS:
                if a is chain[-1] and b not in seen:
                    if b is target:
                        return [*chain, b]
                    seen.add(b)
                    nxt.append([*chain, b])
        frontier = nxt
    raise SchemaError(f"no conversion registered from {source.__qualname__} to "
                      f"{target.__qualname__} (@wk.conversion)")


def _version_class(obj: JSON, among: type[CustomResource]) -> type[CustomResource]:
    """The registered class of ``obj``'s apiVersion, a version of ``among``'s resource."""
    wanted = among.identity()
    for pair in _STEPS:
        for cls in pair:
            i = cls.identity()
            if (i.api_version, i.kind) == (obj.get("apiVersion"), obj.get("kind")) and \
                    (i.group, i.kind) == (wanted.group, wanted.kind):
                return cls
    if (wanted.api_version, wanted.kind) == (obj.get("apiVersion"), obj.get("kind")):
        return among
    raise SchemaError(f"no registered version of {wanted.group} {wanted.kind} is "
                      f"{obj.get('apiVersion')}")


def convert(obj: CustomResource | JSON, target: type[T]) -> T:
    """``obj`` (a typed object, or a dict as the API server sends it) as a ``target``."""
    if isinstance(obj, dict):
        obj = from_dict(_version_class(obj, target), obj)
    current: CustomResource = obj
    for b in _path(type(obj), target)[1:] if type(obj) is not target else []:
        current = _step(current, b)
    assert isinstance(current, target)
    return current


def _step(a: CustomResource, target: type[CustomResource]) -> CustomResource:
    source = type(a)
    out = _STEPS[(source, target)](a)
    if not isinstance(out, target):
        raise TypeError(f"the conversion {source.__qualname__} -> {target.__qualname__} "
                        f"returned a {type(out).__qualname__}")
    meta = msgspec.convert(msgspec.to_builtins(a.metadata), ObjectMeta)  # a copy
    annotations = dict(meta.annotations)
    # What the target's version kept for it on the way here comes back now.
    kept = annotations.pop(CONVERSION_ANNOTATION + target.identity().version, None)
    if kept is not None:
        out = _restore(out, json.loads(kept))
    # What of the source the target cannot hold: the way back does not give it.
    back = _STEPS.get((target, source))
    if back is None:
        raise SchemaError(f"register the way back too: @wk.conversion({target.__qualname__}, "
                          f"{source.__qualname__})")
    lost = _lost(_parts(a), _parts(back(out)))
    if lost["set"] or lost["unset"]:
        annotations[CONVERSION_ANNOTATION + source.identity().version] = json.dumps(
            lost, sort_keys=True, separators=(",", ":"))
    meta.annotations = annotations
    out.metadata = meta
    return out


def _parts(obj: CustomResource) -> JSON:
    d = to_dict(obj)
    return {k: d[k] for k in _PARTS if k in d}


def _lost(want: JSON, got: JSON, at: tuple[str, ...] = ()) -> dict[str, list[Any]]:
    """The paths where ``got`` differs from ``want``: the values to set, the keys to drop."""
    out: dict[str, list[Any]] = {"set": [], "unset": []}
    for key, value in want.items():
        if key not in got:
            out["set"].append([[*at, key], value])
        elif isinstance(value, dict) and isinstance(got[key], dict):
            inner = _lost(value, got[key], (*at, key))
            out["set"] += inner["set"]
            out["unset"] += inner["unset"]
        elif got[key] != value:
            out["set"].append([[*at, key], value])
    out["unset"] += [[*at, key] for key in got if key not in want]
    return out


def _restore(obj: CustomResource, lost: JSON) -> CustomResource:
    d = to_dict(obj)
    for path, value in lost.get("set", []):
        node = d
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    for path in lost.get("unset", []):
        node = d
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    return from_dict(type(obj), d)
